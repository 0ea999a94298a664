"""test_cluster.py's multi-worker scenarios on a Redis Cluster of three
masters (tests/support/redis_cluster.py): ``REDIS_URL=redis+cluster://...``, the
crawl's shards spread over the masters, and a master going away mid-crawl.

The session's ``redis_cluster`` serves the scenarios that leave it as they
found it; the one that stops a master starts a cluster of its own."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from crawler.duplicates.fingerprint import content_hash, fingerprints
from crawler.frontier import Frontier
from crawler.frontier.buckets import SPLIT_AT
from crawler.store import SQLiteStore
from tests.support.mockserver import GRID_HOSTS, grid_paths
from tests.support.redis_cluster import HASH_SLOTS, start_cluster
from tests.support.workers import DELAY, EXPECTED, Worker, fetched, seeds, sigkill_scenario, wait_for_requests

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("_no_worker_outlives_its_test")]

PAGES = len(GRID_HOSTS) * len(grid_paths())


def new_crawl_name(what: str) -> str:
    return f"{what}_{uuid.uuid4().hex[:6]}"


@pytest.fixture
def cluster_crawl(redis_cluster):
    """A crawl name of this test's own on the session cluster; its keys go after."""
    redis_cluster.wait_ok()
    name = new_crawl_name("cluster")
    yield name
    redis_cluster.wait_ok()
    Frontier(redis_cluster.client(), name).views.delete_all()


def stored_pages(crawl_dir: Path, name: str) -> Counter[str]:
    """Stored completed pages per host."""
    with SQLiteStore(crawl_dir / f"{name}.sqlite3") as store:
        return Counter(p["url"].split("/", 3)[2].split(":")[0] for p in store.iter_pages() if p["state"] == "C")


def keys_per_master(cluster, frontier: Frontier) -> dict[int, list[str]]:
    """Master port -> the crawl's keys it masters: as the cluster places them
    (``node_of_key``, asked once per hash tag, for every key of a tag shares
    its slot), checked against what each master itself holds (SCAN there)."""
    by_tag: dict[str, list[str]] = defaultdict(list)
    for key in frontier.views.all_keys():
        by_tag[re.match(r"\{([^}]*)\}", key).group(1)].append(key)  # type: ignore[union-attr]
    placed: dict[int, list[str]] = defaultdict(list)
    for tag, keys in by_tag.items():
        placed[cluster.node_of_key("{" + tag + "}").port] += keys
    for master in cluster.masters():
        client = master.connect()
        try:
            held = sorted(k.decode() for p in frontier.keys.patterns() for k in client.scan_iter(match=p, count=1000))
        finally:
            client.close()
        assert held == sorted(placed.get(master.port, [])), master.address
    return dict(placed)


# -- two workers on the cluster ------------------------------------------------------------

@pytest.fixture(scope="module")
def two_workers_on_cluster(grid_server, redis_cluster, tmp_path_factory):
    """Worker A with the seeds, worker B joining without seeds, as in
    test_cluster's ``two_workers``, on the session's three-master cluster."""
    redis_cluster.wait_ok()
    name = new_crawl_name("two_on_cluster")
    settings = {"REDIS_URL": redis_cluster.url, "CRAWL_NAME": name, "DOWNLOAD_DELAY": DELAY,
                "FRONTIER_DELAY_MARGIN": 0.1, "CONCURRENT_REQUESTS": 8}
    crawl_dir = tmp_path_factory.mktemp("two_on_cluster")
    mark = grid_server.mark()
    a = Worker([seeds(grid_server)], settings, crawl_dir)
    wait_for_requests(grid_server, mark, 4)
    b = Worker([], settings, crawl_dir)
    assert a.wait() == 0, a.log[-3000:]
    assert b.wait() == 0, b.log[-3000:]
    frontier = Frontier(redis_cluster.client(), name, node="reader")
    yield {"a": a, "b": b, "requests": grid_server.requests(mark), "crawl_dir": crawl_dir, "name": name,
           "frontier": frontier, "stats": frontier.views.stats(), "placed": keys_per_master(redis_cluster, frontier)}
    frontier.views.delete_all()


def test_two_workers_on_a_cluster_fetch_every_url_once_and_store_every_page_once(two_workers_on_cluster):
    run = two_workers_on_cluster
    a, b = run["a"], run["b"]
    assert Counter((str(r["host"]), str(r["path"])) for r in run["requests"]) == EXPECTED
    assert "Redis Cluster" in a.log and "No seeds: joining crawl" in b.log
    assert a.stat("response_received_count") + b.stat("response_received_count") == sum(EXPECTED.values())
    assert a.stat("frontier/redis_error") == b.stat("frontier/redis_error") == 0
    stats = run["stats"]
    assert (stats["done"], stats["queued"], stats["leased"], stats.get("delayed", 0)) == (PAGES, 0, 0, 0)
    assert stored_pages(run["crawl_dir"], run["name"]) == {h: len(grid_paths()) for h in GRID_HOSTS}


def test_two_workers_on_a_cluster_keep_the_per_site_gaps(two_workers_on_cluster):
    times = defaultdict(list)
    for r in two_workers_on_cluster["requests"]:
        times[r["host"]].append(float(r["t"]))
    gaps = sorted(b - a for ts in map(sorted, times.values()) for a, b in zip(ts, ts[1:]))
    assert len(gaps) == sum(EXPECTED.values()) - len(GRID_HOSTS)
    assert gaps[0] >= DELAY, gaps[:5]


def test_the_crawls_keys_spread_over_the_three_masters(two_workers_on_cluster, redis_cluster):
    """Every master holds part of the crawl, and shard i's tag lies in the
    i-th sixteenth of the slots, on that range's master (a range split
    between two masters: on either). The keys that grow with a crawl are its
    sites' URL-dedup buckets (``seen:``), in each site's shard: crc32 puts
    the four grid sites in shards 1, 11, 12 and 13 whatever the crawl is
    called, and equal slot ranges put shard 1 on the first master and 11-13
    on the third. So the third master holds about 70 % of this crawl's keys
    (measured: 119-126 of 172-176; the first 43-48, the second 5-10), and
    60 % cannot hold with 16 shards and these four sites: the bound here is
    75 %, what three sites of four and nothing else would give."""
    run = two_workers_on_cluster
    placed, keys = run["placed"], run["frontier"].keys
    counts = {port: len(held) for port, held in placed.items()}
    assert sorted(counts) == sorted(m.port for m in redis_cluster.masters()), counts
    assert max(counts.values()) <= 0.75 * sum(counts.values()), counts
    view = next(iter(redis_cluster.slot_owners().values()))  # (first slot, master port), sorted

    def owner(slot: int) -> int:
        return max((first, port) for first, port in view if first <= slot)[1]

    for sk in keys.site_shards + keys.dup_shards:
        lo, hi = sk.index * HASH_SLOTS // keys.shards, (sk.index + 1) * HASH_SLOTS // keys.shards - 1
        assert redis_cluster.node_of_key(sk.stats).port in {owner(lo), owner(hi)}, sk.prefix


def test_frontier_pipelines_send_each_script_call_to_its_node(redis_cluster, cluster_crawl):
    """redis-py's cluster pipeline asks its default node ``COMMAND GETKEYS``
    for every EVALSHA it is not told the node of: one synchronous round trip
    per script call. The frontier names the node: on every master, no
    COMMAND, and the masters together run exactly the script calls the
    frontier counted (without the node named: 200 COMMAND calls on the
    default master for 200 EVALSHAs in 10 pipelines)."""
    import hashlib

    from crawler.frontier.queues import LinkEntry, fingerprint_slot
    from crawler.redis import scripts

    f = Frontier(redis_cluster.client(), cluster_crawl, node="n1", default_delay=0)
    f.check_layout()
    masters = [m.connect() for m in redis_cluster.masters()]
    try:
        for m in masters:
            m.config_resetstat()
        f.calls.clear()
        sites = [f"site{i}.example" for i in range(40)]
        links = [LinkEntry(*fingerprint_slot(hashlib.sha1(s.encode()).digest(), 1024), s,
                           json.dumps({"u": f"http://{s}/"})) for s in sites]
        assert f.queues.enqueue(links) == (40, 0, 0)
        leased: list = []
        for _ in range(10):
            batch, _ = f.queues.lease(40)
            leased += batch
            if len(leased) == 40:
                break
        assert sorted(lease.site for lease in leased) == sorted(sites)
        done = f.queues.commit(acks=[(lease.id, "C", "") for lease in leased])
        assert done.error is None
        for i, s in enumerate(sites[:8]):
            f.duplicates.check(f"http://{s}/", s, f"{i:040x}")
        # The near-duplicate index and the site templates on the cluster: every
        # script call in one slot, the verdicts as on one Redis.
        text = " ".join(f"w{k}" for k in range(300))
        verdicts = []
        for url, s, t in [("http://site0.example/a", sites[0], text),
                          ("http://site0.example/b", sites[0], text + " one more"),  # own site: undone
                          ("http://site1.example/a", sites[1], text + " another line")]:
            fp, sketch = fingerprints(t)
            d = f.duplicates.check(url, s, content_hash(t), sketch)
            verdicts.append((d.kind, d.first, d.same_site))
        assert verdicts == [("new", None, False), ("near", "http://site0.example/a", True),
                            ("near", "http://site0.example/a", False)]
        assert f.calls["BAND"] >= 3 and f.calls["BAND_UNDO"] >= 1 and f.calls["RECORD"] == 3  # one call a shard
        for s in sites[:4]:
            for _ in range(6):
                f.templates.observe(s, ["nav", "footer"])
        assert f.templates.observe(sites[0], ["nav"]).counts == (7,)
        scripts_run = sum(n for name, n in f.calls.items() if name in scripts.SCRIPTS)
        stats = [m.info("commandstats") for m in masters]
    finally:
        for m in masters:
            m.close()
    assert [s.get("cmdstat_command", {}).get("calls", 0) for s in stats] == [0, 0, 0]
    # A node's first call of a script fails NOSCRIPT and is sent again once
    # loaded: Redis counts it as a failed call.
    ran = sum(s["cmdstat_evalsha"]["calls"] - s["cmdstat_evalsha"]["failed_calls"] for s in stats)
    assert ran == scripts_run > 40


# -- a worker killed ------------------------------------------------------------------------------

def test_the_duplicate_indexs_tables_split_on_a_cluster(redis_cluster, cluster_crawl):
    """Grown bucket tables (crawler/frontier/buckets.py) on a cluster: a
    split builds its coarse and final buckets' names from the declared
    key's prefix, in the same slot, which the masters accept. 1,200 pages
    (about 100 entries in each coarse bucket of 3 shards of 16 buckets)
    split band tables on every shard down to their final buckets, and a
    near copy of a page (checked on another site) is found after, wherever
    its entries went."""
    client = redis_cluster.client()
    f = Frontier(client, cluster_crawl, node="w1", default_delay=0, buckets=16, shards=3)
    f.check_layout()
    texts = [" ".join(f"p{n}w{k}" for k in range(120)) for n in range(1200)]
    for n, t in enumerate(texts):
        assert f.duplicates.check(f"http://a.example/{n}", "a.example", content_hash(t), fingerprints(t)[1]).kind \
            == "new"
    bands = [k for k in f.views.all_keys() if ":lsh:" in k and not k.endswith(":grown")]
    final = {k.split("}")[0] for k in bands if "/" not in k}
    assert final == {"{" + sk.prefix[1:-2] for sk in f.keys.dup_shards}  # splits on every shard
    assert all(client.hlen(k) <= SPLIT_AT for k in bands if "/" in k)
    for n, t in enumerate(texts):
        if n % 3:
            continue
        copy = t + " more"
        d = f.duplicates.check(f"http://b.example/{n}", "b.example", content_hash(copy), fingerprints(copy)[1])
        assert (d.kind, d.first) == ("near", f"http://a.example/{n}"), n


def test_sigkill_a_worker_on_a_cluster_loses_nothing(grid_server, redis_cluster, cluster_crawl, tmp_path):
    frontier, node_a = sigkill_scenario(grid_server, redis_cluster.client(), redis_cluster.url, cluster_crawl,
                                        tmp_path)
    assert frontier.views.held_leases(node_a) == 0
    assert stored_pages(tmp_path, cluster_crawl) == {h: len(grid_paths()) for h in GRID_HOSTS}


# -- a master down, then back -------------------------------------------------------------------------

def test_a_master_stopped_mid_crawl_and_restarted(grid_server, tmp_path):
    """No replicas: while the master is down its slots have no server, and
    once the others mark it failed (cluster-node-timeout, 2 s here) the whole
    cluster answers CLUSTERDOWN. The workers hold their work meanwhile.

    Exactly once: SIGTERM has the master write its append-only file, so no
    write Redis acknowledged is lost; the lease timeout outlasts the outage,
    so no worker's leases are reaped; a LEASE that ran but whose reply was
    lost leaves a lease its worker never saw (given back at its next
    heartbeat, unfetched); a COMMIT sent again is a no-op (its links are
    seen, its acknowledgements stale)."""
    cluster = start_cluster(tmp_path / "cluster", masters=3, replicas=0)
    name = new_crawl_name("master_down")
    # A lease timeout longer than the outage: no worker's heartbeat can
    # reach Redis meanwhile, and none is to be taken for dead.
    # A delay that leaves most of the crawl for after the master goes
    # (about 5 s of it): with 0.05 s a loaded machine's test process once
    # reached the outage after the workers had crawled everything, and they
    # never met it.
    settings = {"REDIS_URL": cluster.url, "CRAWL_NAME": name, "DOWNLOAD_DELAY": 0.25,
                "FRONTIER_DELAY_MARGIN": 0, "FRONTIER_HEARTBEAT_INTERVAL": 0.3,
                "FRONTIER_LEASE_TIMEOUT": 30, "CONCURRENT_REQUESTS": 8,
                "REDIS_PARAMS": json.dumps({"socket_timeout": 2, "socket_connect_timeout": 1})}
    try:
        # The master of the crawl-wide keys (heartbeats), and of some shards.
        victim = cluster.node_of_key(Frontier(cluster.client(), name).keys.hb)
        mark = grid_server.mark()
        a = Worker([seeds(grid_server)], settings, tmp_path)
        wait_for_requests(grid_server, mark, 4)
        b = Worker([], settings, tmp_path)
        reader = Frontier(cluster.client(), name, node="reader")
        deadline = time.monotonic() + 30
        while len(reader.views.nodes()) < 2:  # B is in: it holds work when the master goes
            assert time.monotonic() < deadline and b.proc.poll() is None, "B did not join"
            time.sleep(0.05)
        wait_for_requests(grid_server, mark, 30)
        cluster.stop_node(victim.index)
        down_at = time.monotonic()
        stopped_after = len(grid_server.requests(mark))
        # The outage this test is about began mid-crawl, with both workers in it.
        assert a.proc.poll() is None and b.proc.poll() is None and stopped_after < sum(EXPECTED.values()), \
            (stopped_after, a.log[-2000:], b.log[-2000:])
        states = set()
        witness = next(n for n in cluster.masters() if n is not victim).connect()
        # Until the others mark it failed (cluster-node-timeout, then gossip:
        # about 2-4 s, longer on a loaded machine) and answer CLUSTERDOWN.
        while "fail" not in states and time.monotonic() - down_at < 15.0:
            states.add(str(witness.cluster("INFO").get("cluster_state")))
            time.sleep(0.1)
        witness.close()
        during = len(grid_server.requests(mark))
        cluster.start_node(victim.index)
        cluster.wait_ok()
        outage = time.monotonic() - down_at
        assert a.wait() == 0, a.log[-5000:]
        assert b.wait() == 0, b.log[-5000:]
        stats = reader.views.stats()
    finally:
        cluster.stop()
    assert "fail" in states, states  # the outage reached CLUSTERDOWN
    got = Counter(fetched(grid_server, mark))
    assert set(got) == set(EXPECTED), set(EXPECTED) - set(got)
    # Every page once. A robots.txt may be fetched once more: a worker that
    # meets a host while the cache's shard is down cannot read the shared
    # copy, and fetches it rather than crawl unguarded (crawler/frontier/robots.py).
    pages = Counter({k: n for k, n in got.items() if k[1] != "/robots.txt"})
    assert pages == Counter({k: n for k, n in EXPECTED.items() if k[1] != "/robots.txt"}), \
        (+(got - EXPECTED), outage, during)
    assert all(n in (1, 2) for k, n in got.items() if k[1] == "/robots.txt"), (+(got - EXPECTED), outage, during)
    for w in (a, b):
        assert "Traceback" not in w.log, w.log[-5000:]
        assert w.stat("frontier/redis_error") > 0
    assert "Redis unavailable" in a.log + b.log and "Redis is back after" in a.log + b.log
    assert (stats["done"], stats["queued"], stats["leased"], stats.get("delayed", 0)) == (PAGES, 0, 0, 0)
    assert stored_pages(tmp_path, name) == {h: len(grid_paths()) for h in GRID_HOSTS}
