"""The frontier on a Redis Cluster: 1 master against 3, frontier load only.

    CRAWLER_TEST_REDIS_SERVER=/usr/bin/redis-server python -m bench.bench_frontier_cluster
        [--quick] [--sites 10000] [--urls 10000000] [--workers 4] [--no-load]
        [--mem-scales 100000,300000,1000000q] [--mem-config hash-max-ziplist-value=128] [--mem-config-only]
        [--failover-sites 100] [--no-failover] [--lag 0.5] [--wait-replicas 1] [--stall-limit 30] [--verbose]

No HTTP: ``--workers`` processes drive ``crawler.frontier.Frontier`` as
workers do (lease batch ``FRONTIER_LEASE_BATCH``, ``default_delay=0`` so
politeness does not throttle the load, concurrency 1 a site, a heartbeat
every ``FRONTIER_HEARTBEAT_INTERVAL``, each process its own node), against a
fresh cluster from ``tests.support.redis_cluster`` (append-only file on, as there;
its server is ``CRAWLER_TEST_REDIS_SERVER``, else the first on PATH).

The crawl: ``--sites`` sites, each seeded with its home page and 32 section
pages. A leased page is duplicate-checked (``near_duplicate`` with a random
64-bit SimHash and a content key, as the spider sends them) and committed:
acknowledged (C) with 40 links: itself, its home page and its 32 sections
(seen), 4 home or section pages of other sites (seen) and 2 new pages, each
on its own site (80 %) or another. A page's links, SimHash and content key
follow from its URL and ``--seed``, so both clusters see the same crawl. The
lease of the next batch carries the download-over ids of the batch being
processed (its site slots are free before its commit), as the scheduler's.
Pages to crawl: (``--urls`` - seeds) / 40, split evenly over the workers.

Entries are what the spider queues: ``request_to_json`` of a request as
``SiteSpider._request`` and ``Follower.follow`` build it (callback, errback, referer,
depth), with the trap guard's evidence (``TrapGuardMiddleware``): the real
serializer and guard, on a stand-in request object (checked once against a
real ``scrapy.Request``). Dedup slots: SHA-1 of the URL (the fingerprinter's
own hash is SHA-1 too; only its spread matters here).

Each worker counts the Redis nodes each of its pipelines reaches (the
requests Redis serves: ``wrap_pipelines``). redis-py 8.1's cluster pipeline
asks its default node ``COMMAND GETKEYS`` for every EVALSHA it is not told
the node of; the frontier names the node (this bench found the cost), and
the bench reports the GETKEYS a page it sees, which should be 0.

Reported: Redis CPU a page (``INFO cpu`` of every master around the load),
the busiest master's share of commands (``INFO commandstats``, commands run
inside scripts included), of CPU and of memory (``used_memory``), round
trips and Lua calls a page (counted by ``Frontier``), pages/s on this
machine; Redis memory a queued request and a crawled page at ``--mem-scales``
(1 master; "q": queued only), with the keys behind it (``MEMORY USAGE``,
``OBJECT ENCODING``), the largest crawled scale again with ``--mem-config``;
and ``--failover``: a 3+3 cluster whose first master is SIGKILLed a third of
the way into a crawl of ``--failover-sites`` sites that ends (no new links
below depth 2), counting URLs lost and leased twice, once as it comes and
once with the master's replication link cut ``--lag`` seconds before the
kill. ``--quick``: 200 sites, 20k URLs, small memory scales, failover on 10
sites.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing as mp
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster

from crawler import settings as defaults
from crawler.frontier import Frontier, LinkEntry
from crawler.redis import scripts
from crawler.frontier.frontier import fingerprint_slot
from crawler.frontier.serialize import request_to_json
from crawler.spiders.site import SiteSpider
from crawler.scope.traps import PathTrapGuard
from crawler.scope.urls import max_segment_repeats, site_of, url_shape
from tests.support.redis_cluster import redis_server_binary, start_cluster

ROOT = Path(__file__).resolve().parent.parent

CRAWL = "bench"
SECTIONS = ("news", "blog", "docs", "about", "products", "support", "events", "careers", "press", "research",
            "services", "shop", "forum", "wiki", "help", "contact", "team", "partners", "pricing", "faq",
            "legal", "privacy", "community", "downloads", "guides", "reviews", "videos", "podcasts",
            "archive", "tags", "authors", "topics")
TOPICS = ("world", "local", "tech", "science", "health", "sports", "culture", "business", "travel", "food",
          "music", "film", "books", "games", "cars", "homes", "money", "jobs", "weather", "style",
          "design", "energy", "climate", "space", "ocean", "history", "art", "garden", "pets", "family",
          "school", "city")
SITE_LINKS = 2 + len(SECTIONS)  # itself, its home page, its sections
CROSS_SEEN = 4  # home or section pages of other sites, already seen
NEW_LINKS = 2
LINKS = SITE_LINKS + CROSS_SEEN + NEW_LINKS
OWN_SITE_SHARE = 0.8  # of the new links
MEM_SCALES = "100000,300000,1000000q"


# -- the crawl's pages ----------------------------------------------------------

class _Req:
    """What ``request_to_dict`` reads of a ``scrapy.Request`` the spider
    built (no body, headers or priority): the real serializer, without
    Scrapy's URL parsing on every link."""

    __slots__ = ("url", "meta", "callback", "errback")
    method = "GET"
    body = b""
    cb_kwargs: dict[str, Any] = {}
    headers: dict[bytes, list[bytes]] = {}
    priority = 0
    dont_filter = False

    def __init__(self, spider: SiteSpider, url: str, meta: dict[str, Any]) -> None:
        self.url, self.meta, self.callback, self.errback = url, meta, spider.parse, spider.errback


class Model:
    """URLs, links, SimHashes and entries of the crawl, from URLs and a seed."""

    def __init__(self, sites: int, seed: int, max_depth: int | None = None) -> None:
        self.sites = sites
        self.seed = seed
        self.max_depth = max_depth  # pages at this depth or deeper link no new pages
        self.spider = SiteSpider()
        self.guard = PathTrapGuard()
        self.max_shape_run = defaults.TRAP_MAX_SHAPE_RUN
        self.dropped = 0
        self._seen_entries: dict[str, LinkEntry] = {}
        self._check_entries()

    def _check_entries(self) -> None:
        spider = self.spider
        request = spider._request("http://site7.example/news/world/page-12.html", "http://site7.example/news/")
        request.meta["depth"] = 2
        request.meta["descent_run"] = 1
        ours = request_to_json(_Req(spider, request.url, dict(request.meta)), spider)
        if ours != request_to_json(request, spider):
            raise RuntimeError(f"stand-in request serializes differently: {ours}")

    @staticmethod
    def home(s: int) -> str:
        return f"http://site{s}.example/"

    @staticmethod
    def section(s: int, j: int) -> str:
        return f"http://site{s}.example/{SECTIONS[j]}/"

    @staticmethod
    def site_index(url: str) -> int:
        return int(url.split("/", 3)[2][4:-8])

    def rng(self, key: str) -> random.Random:
        return random.Random(hashlib.blake2b(f"{self.seed}|{key}".encode(), digest_size=8).digest())

    def new_url(self, rng: random.Random, own: int) -> str:
        s = own if rng.random() < OWN_SITE_SHARE else rng.randrange(self.sites)
        return (f"http://site{s}.example/{SECTIONS[rng.randrange(len(SECTIONS))]}/"
                f"{TOPICS[rng.randrange(len(TOPICS))]}/page-{rng.randrange(1, 1_000_000)}.html")

    def entry(self, url: str, parent: str | None, depth: int, parent_meta: dict[str, Any],
              page: Any) -> LinkEntry | None:
        """The frontier entry of a link found on ``parent`` (None: a seed),
        or None when the trap guard drops it."""
        meta: dict[str, Any] = {"referer_url": parent} if parent else {}
        meta["depth"] = depth
        if parent is not None:
            # TrapGuardMiddleware._keep, in its order.
            if max_segment_repeats(url) >= defaults.TRAP_MAX_REPEATED_SEGMENT:
                self.dropped += 1
                return None
            run = int(parent_meta.get("shape_run", 0)) + 1 if url_shape(url) == url_shape(parent) else 0
            if run > self.max_shape_run:
                self.dropped += 1
                return None
            verdict = self.guard.judge(page, url, url.split("/", 3)[2])
            if verdict.reason is not None:
                self.dropped += 1
                return None
            meta.update(verdict.evidence.to_meta())
            if run:
                meta["shape_run"] = run
        bucket, member = fingerprint_slot(hashlib.sha1(url.encode()).digest(), defaults.DUPEFILTER_BUCKETS)
        return LinkEntry(bucket, member, site_of(url.split("/", 3)[2]),
                         request_to_json(_Req(self.spider, url, meta), self.spider))

    def seeds(self) -> list[tuple[str, LinkEntry]]:
        out = []
        for s in range(self.sites):
            home = self.home(s)
            out.append((home, self.entry(home, None, 0, {}, None)))
            page = self.guard.page(home, {})
            for j in range(len(SECTIONS)):
                url = self.section(s, j)
                e = self.entry(url, home, 1, {}, page)
                if e is not None:
                    out.append((url, e))
        return out

    def page(self, entry_json: str) -> tuple[str, int, int, str, list[tuple[str, LinkEntry]]]:
        """A leased entry's page: (url, SimHash, depth, content key, links)."""
        d = json.loads(entry_json)
        url, meta = d["u"], d.get("m", {})
        depth = int(meta.get("depth", 0))
        rng = self.rng(url)
        simhash = rng.getrandbits(64)
        content_key = f"{rng.getrandbits(160):040x}"
        s = self.site_index(url)
        targets = [url, self.home(s)] + [self.section(s, j) for j in range(len(SECTIONS))]
        for _ in range(CROSS_SEEN):
            t = rng.randrange(self.sites)
            j = rng.randrange(len(SECTIONS) + 1)
            targets.append(self.home(t) if j == len(SECTIONS) else self.section(t, j))
        if self.max_depth is None or depth < self.max_depth:
            targets += [self.new_url(rng, s) for _ in range(NEW_LINKS)]
        parent_page = self.guard.page(url, meta)
        links = []
        for k, target in enumerate(targets):
            # A seen link (all but the page itself and the new ones) carries
            # the entry built for it the first time: Redis drops it at its
            # SADD, only its length counts, and building it again for every
            # page would make this process, not Redis, the bottleneck.
            cached = 0 < k < SITE_LINKS + CROSS_SEEN
            e = self._seen_entries.get(target) if cached else None
            if e is None:
                e = self.entry(target, url, depth + 1, meta, parent_page)
                if cached and e is not None:
                    self._seen_entries[target] = e
            if e is not None:
                links.append((target, e))
        return url, simhash, depth, content_key, links


# -- workers ------------------------------------------------------------------------

def _client(ports: list[int]) -> RedisCluster:
    return RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports],
                        socket_timeout=5, socket_connect_timeout=5)


def _frontier(client: Any, node: str) -> Frontier:
    return Frontier(client, CRAWL, node=node, default_delay=0, concurrency_per_site=1,
                    buckets=defaults.DUPEFILTER_BUCKETS, shards=defaults.FRONTIER_SHARDS,
                    lease_timeout=defaults.FRONTIER_LEASE_TIMEOUT)


class _Pipeline:
    """A cluster pipeline that counts the nodes each of its executions
    reaches (the requests Redis serves)."""

    def __init__(self, client: RedisCluster, pipe: Any, counts: Counter[str]) -> None:
        self._client, self._pipe, self._counts = client, pipe, counts
        self._nodes: set[str] = set()

    def execute_command(self, *args: Any, **options: Any) -> Any:
        keyed = args[0] in ("EVALSHA", "EVAL") and int(args[2]) > 0 or args[0] not in ("EVALSHA", "EVAL")
        if keyed:
            node = self._client.get_node_from_key(args[3] if args[0] in ("EVALSHA", "EVAL") else args[1])
            self._nodes.add(node.name)
        return self._pipe.execute_command(*args, **options)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._counts["node_requests"] += len(self._nodes)
        self._nodes = set()
        return self._pipe.execute(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pipe, name)


def wrap_pipelines(f: Frontier, counts: Counter[str]) -> None:
    """Count the nodes each pipeline of ``f`` reaches. Nothing else of the
    frontier changes."""
    client = f.client
    if isinstance(client, RedisCluster):
        plain = client.pipeline
        client.pipeline = lambda *a, **kw: _Pipeline(client, plain(*a, **kw), counts)  # type: ignore


def worker(cfg: dict[str, Any], index: int, ready: Any, go: Any, progress: Any, out: Any) -> None:
    """One worker: lease, check, commit until its quota of pages (or, with
    ``drain``, until the crawl has nothing left)."""
    client = _client(cfg["ports"])
    f = _frontier(client, f"bench-w{index}")
    if cfg.get("wait"):  # REDIS_WAIT_REPLICAS, as the frontier service sets it
        from crawler.frontier.service import DURABLE

        f.gateway.require_replicas(cfg["wait"], cfg.get("wait_timeout", 1.0), DURABLE)
    c: Counter[str] = Counter()
    wrap_pipelines(f, c)
    model = Model(cfg["sites"], cfg["seed"], cfg.get("max_depth"))
    with_links = cfg.get("links", True)
    track = cfg.get("track", False)
    quota, batch, drain = cfg.get("quota"), cfg["batch"], cfg.get("drain", False)
    hb_every = cfg["heartbeat"]
    ready.wait()
    go.wait()
    start = time.monotonic()
    next_hb = start  # a worker's first act is a heartbeat (FrontierService.open)
    held: list[Any] = []  # leased, downloaded, to process
    carry_links: list[tuple[str, LinkEntry]] = []
    carry_acks: list[tuple[str, str, str]] = []
    unacked: set[str] = set()
    maybe_orphans: set[str] = set()
    lease_log: list[tuple[str, str, float]] = []
    submitted: list[str] = []
    idle_since: float | None = None
    last_error = ""
    last_progress = start
    next_report = start + 2.0
    while True:
        now = time.monotonic()
        if cfg.get("stall_limit") and now - last_progress > cfg["stall_limit"]:
            c["gave_up"] = 1
            c["unsent_links_at_end"] = len(carry_links)
            c["unsent_acks_at_end"] = len(carry_acks) + len(held)
            break
        if cfg.get("verbose") and now >= next_report:
            next_report = now + 2.0
            print(f"worker {index}: {dict(c)}, held {len(held)}, unsent links {len(carry_links)} "
                  f"acks {len(carry_acks)}; last error {last_error}", file=sys.stderr, flush=True)
        if now >= next_hb:
            next_hb = now + hb_every
            try:
                reaped, _, mine = f.control.heartbeat()
                c["reaped"] += reaped
                # LeaseBook.orphans: held by Redis for this node, unknown here,
                # twice in a row (an acknowledgement lost): give back.
                unknown = mine - unacked
                orphans = unknown & maybe_orphans
                maybe_orphans = unknown - orphans
                if orphans:
                    c["orphans_released"] += f.queues.release(sorted(orphans))
                    c["orphan_ids"] += len(orphans)
                    if track:
                        lease_log += [(i, "", -1.0) for i in orphans]
            except redis.RedisError as exc:
                last_error = f"{type(exc).__name__}: {str(exc)[:120]}"
                c["heartbeat_errors"] += 1
        want = batch if quota is None or c["pages"] + len(held) < quota else 0
        got: list[Any] = []
        if want:
            try:
                got, _wait = f.queues.lease(want, [lease.id for lease in held])
            except redis.RedisError as exc:
                last_error = f"{type(exc).__name__}: {str(exc)[:120]}"
                c["lease_errors"] += 1
        for lease in got:
            unacked.add(lease.id)
            if track:
                lease_log.append((lease.id, json.loads(lease.entry)["u"], time.monotonic()))
        links, acks = carry_links, carry_acks
        for lease in held:
            url, simhash, _depth, content_key, page_links = model.page(lease.entry)
            try:
                # The exact check only: the near one takes a page's sketch, since
                # the SimHash gave way to it (crawler/duplicates/fingerprint.py).
                f.duplicates.check(url, site_of(url.split("/", 3)[2]), content_key,
                                 None, mirror_min_pages=defaults.SIMHASH_MIRROR_MIN_PAGES,
                                 mirror_share=defaults.SIMHASH_MIRROR_SHARE)
            except redis.RedisError as exc:
                last_error = f"{type(exc).__name__}: {str(exc)[:120]}"
                c["near_duplicate_errors"] += 1
            if with_links:
                links = links + page_links
            acks = acks + [(lease.id, "C", "")]
        carry_links, carry_acks = [], []
        if links or acks:
            try:
                result = f.queues.commit([e for _, e in links], acks)
            except redis.RedisError as exc:
                last_error = f"{type(exc).__name__}: {str(exc)[:120]}"
                c["commit_errors"] += 1
                carry_links, carry_acks = links, acks
            else:
                unsent = {id(e) for e in result.unsent_links}
                unsent_acks = set(result.unsent_acks)
                carry_links = [x for x in links if id(x[1]) in unsent]
                carry_acks = [a for a in acks if a in unsent_acks]
                if result.error is not None:
                    c["commit_partial_errors"] += 1
                    last_error = f"{type(result.error).__name__}: {str(result.error)[:120]}"
                for a in acks:
                    if a not in unsent_acks:
                        unacked.discard(a[0])
                c["pages"] += result.acked
                if result.acked:
                    last_progress = time.monotonic()
                c["stale_acks"] += result.stale
                c["added"] += result.added
                c["duplicates"] += result.duplicates
                c["links"] += len(links) - len(carry_links)
                if track:
                    submitted += [u for u, e in links if id(e) not in unsent]
                with progress.get_lock():
                    progress.value += result.acked
        held = got
        if held or carry_links or carry_acks:
            idle_since = None
            continue
        if quota is not None and c["pages"] >= quota:
            break
        if drain:
            # Done when the crawl holds nothing for anyone for a second (the
            # others' commits may still add links).
            try:
                empty = f.views.pending() == 0
            except redis.RedisError as exc:
                last_error = f"{type(exc).__name__}: {str(exc)[:120]}"
                empty = False
            if not empty:
                idle_since = None
            elif idle_since is None:
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > 1.0 + 2 * hb_every:
                break
        time.sleep(0.02)
    c["seconds_ms"] = int((time.monotonic() - start) * 1000)
    c["dropped"] = model.dropped
    out.put({"index": index, "counts": dict(c), "round_trips": f.round_trips, "calls": dict(f.calls),
             "lease_log": lease_log, "submitted": submitted})
    client.close()


def run_workers(cluster: Any, cfg: dict[str, Any], workers: int, on_progress: Any = None) -> tuple[list[dict],
                                                                                                   float]:
    """Run ``workers`` processes; returns their reports and the wall time of
    the load (from the go signal to the last report). ``cfg["before"]`` is
    called once every worker is connected, just before the go."""
    ctx = mp.get_context("fork")
    ready, go = ctx.Barrier(workers + 1), ctx.Event()
    progress = ctx.Value("q", 0)
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(cfg, i, ready, go, progress, out)) for i in range(workers)]
    for p in procs:
        p.start()
    ready.wait()
    before = cfg.get("before")
    if before is not None:
        before()
    start = time.monotonic()
    go.set()
    reports: list[dict] = []
    while len(reports) < workers:
        if on_progress is not None:
            on_progress(progress)
        try:
            reports.append(out.get(timeout=0.1))
        except Exception:  # queue.Empty
            if any(p.exitcode not in (None, 0) for p in procs):
                raise RuntimeError(f"a worker failed: exit codes {[p.exitcode for p in procs]}")
    wall = time.monotonic() - start
    for p in procs:
        p.join(30)
    return sorted(reports, key=lambda r: r["index"]), wall


# -- the servers ---------------------------------------------------------------------

_OWN_COMMANDS = ("cmdstat_info", "cmdstat_ping", "cmdstat_cluster", "cmdstat_command", "cmdstat_memory",
                 "cmdstat_scan", "cmdstat_object", "cmdstat_config", "cmdstat_readonly", "cmdstat_client",
                 "cmdstat_hello", "cmdstat_script")


def snapshot(cluster: Any) -> dict[int, dict[str, float]]:
    """Per master (by node index): CPU seconds, commands, used memory."""
    out: dict[int, dict[str, float]] = {}
    cluster.refresh()
    for node in cluster.masters():
        if not node.running:
            continue
        c = node.connect()
        try:
            cpu, mem, stats = c.info("cpu"), c.info("memory"), c.info("stats")
            cmd = c.info("commandstats")
        finally:
            c.close()
        scripts = sum(v["calls"] for k, v in cmd.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))
        # Redis 7 counts COMMAND GETKEYS apart; 6.2 with every COMMAND call
        # (a client's start asks one COMMAND: a few).
        getkeys = cmd.get("cmdstat_command|getkeys", cmd.get("cmdstat_command", {})).get("calls", 0)
        commands = sum(v["calls"] for k, v in cmd.items() if not k.startswith(_OWN_COMMANDS)) + getkeys
        out[node.index] = {"cpu": cpu["used_cpu_sys"] + cpu["used_cpu_user"], "cpu_sys": cpu["used_cpu_sys"],
                           "cpu_children": cpu["used_cpu_sys_children"] + cpu["used_cpu_user_children"],
                           "commands": commands, "scripts": scripts, "getkeys": getkeys,
                           "processed": stats["total_commands_processed"], "memory": mem["used_memory"]}
    return out


def diff(a: dict[int, dict[str, float]], b: dict[int, dict[str, float]]) -> dict[int, dict[str, float]]:
    return {i: {k: b[i][k] - a[i][k] for k in b[i]} for i in b if i in a}


def key_groups(cluster: Any) -> dict[str, dict[str, Any]]:
    """The crawl's keys by kind ("q", "seen", "sh", "shurl", ...): count,
    ``MEMORY USAGE`` summed (exact: samples 0), an encoding and a sample."""
    groups: dict[str, dict[str, Any]] = defaultdict(lambda: {"keys": 0, "bytes": 0, "encoding": "", "sample": ""})
    for node in cluster.masters():
        c = node.connect(30)
        try:
            keys = list(c.scan_iter(match="[{]" + CRAWL + "[}:]*", count=2000))
            for i in range(0, len(keys), 1000):
                chunk = keys[i:i + 1000]
                pipe = c.pipeline(transaction=False)
                for k in chunk:
                    pipe.execute_command("MEMORY USAGE", k, "SAMPLES", 0)
                sizes = pipe.execute()
                for k, size in zip(chunk, sizes):
                    name = k.decode().split("}:", 1)[1]
                    kind = name.split(":", 1)[0]
                    g = groups[kind]
                    g["keys"] += 1
                    g["bytes"] += int(size or 0)
                    if not g["sample"]:
                        g["sample"] = k.decode()
                        g["encoding"] = c.object("encoding", k).decode()
        finally:
            c.close()
    return dict(groups)


def seed(client: Any, model: Model) -> int:
    f = _frontier(client, "bench-seed")
    f.check_layout()
    seeds = model.seeds()
    for i in range(0, len(seeds), 2000):
        f.queues.enqueue([e for _, e in seeds[i:i + 2000]])
    return len(seeds)


# -- (a) and (b): the load --------------------------------------------------------------

def load_run(work: Path, masters: int, args: argparse.Namespace, pages: int) -> dict[str, Any]:
    cluster = start_cluster(work / f"load{masters}{'n' if args.no_aof else ''}",
                            masters=masters)
    try:
        if args.no_aof:
            for node in cluster.nodes:
                c = node.connect()
                c.config_set("appendonly", "no")
                c.close()
        client = cluster.client()
        mem0 = snapshot(cluster)
        seeds = seed(client, Model(args.sites, args.seed))
        # Every script on every master now: loading them is a worker's start,
        # not a page's cost.
        for name in scripts.ALL:
            client.script_load(getattr(scripts, name))
        snaps: dict[str, Any] = {}
        cfg = {"ports": [n.port for n in cluster.nodes], "sites": args.sites, "seed": args.seed,
               "quota": -(-pages // args.workers), "batch": defaults.FRONTIER_LEASE_BATCH,
               "heartbeat": defaults.FRONTIER_HEARTBEAT_INTERVAL,
               "before": lambda: snaps.__setitem__("before", snapshot(cluster))}
        reports, wall = run_workers(cluster, cfg, args.workers)
        after = snapshot(cluster)
        d = diff(snaps["before"], after)
        mem = diff(mem0, after)
        c: Counter[str] = Counter()
        calls: Counter[str] = Counter()
        round_trips = 0
        for r in reports:
            c.update(r["counts"])
            calls.update(r["calls"])
            round_trips += r["round_trips"]
        stats = _frontier(client, "bench-read").views.stats()
    finally:
        cluster.stop()
    n = c["pages"]
    cpu = {i: v["cpu"] for i, v in d.items()}
    commands = {i: v["commands"] for i, v in d.items()}
    memory = {i: v["memory"] for i, v in mem.items()}
    busiest_cpu = max(cpu.values())
    return {
        "masters": masters, "pages": n, "seeds": seeds, "links": c["links"], "added": c["added"],
        "duplicates": c["duplicates"], "urls_seen": seeds + c["links"], "wall": wall,
        "pages_per_s": n / wall, "cpu_per_page": sum(cpu.values()) / n, "busiest_cpu_per_page": busiest_cpu / n,
        "cpu": cpu, "cpu_children": sum(v["cpu_children"] for v in d.values()),
        "commands_per_page": sum(commands.values()) / n,
        "node_requests_per_page": c["node_requests"] / n,
        "sys_share": sum(v["cpu_sys"] for v in d.values()) / sum(cpu.values()),
        "scripts_per_page": sum(v["scripts"] for v in d.values()) / n,
        "getkeys_per_page": sum(v["getkeys"] for v in d.values()) / n,
        "commands": commands, "memory": memory,
        "commands_share": max(commands.values()) / sum(commands.values()),
        "memory_share": max(memory.values()) / sum(memory.values()),
        "cpu_share": busiest_cpu / sum(cpu.values()),
        "round_trips_per_page": round_trips / n, "calls": dict(calls),
        "errors": {k: v for k, v in c.items() if "error" in k or k in ("stale_acks", "orphan_ids", "reaped")},
        "aof": not args.no_aof,
        "dropped": c["dropped"], "frontier_stats": stats,
    }


def print_load(a: dict[str, Any], b: dict[str, Any]) -> None:
    rows = [
        ("pages committed", "pages", "{:,.0f}"),
        ("URLs seen (seeds + links sent)", "urls_seen", "{:,.0f}"),
        ("  of which new (enqueued)", "added", "{:,.0f}"),
        ("  of which dedup hits", "duplicates", "{:,.0f}"),
        ("Redis CPU ms/page, all masters", "cpu_per_page", "ms"),
        ("Redis CPU ms/page, busiest master", "busiest_cpu_per_page", "ms"),
        ("commands/page (in scripts too)", "commands_per_page", "{:.1f}"),
        ("script calls/page (EVALSHA)", "scripts_per_page", "{:.2f}"),
        ("COMMAND GETKEYS/page (redis-py)", "getkeys_per_page", "{:.2f}"),
        ("round trips/page (Frontier)", "round_trips_per_page", "{:.3f}"),
        ("requests/page (pipelines x nodes)", "node_requests_per_page", "{:.3f}"),
        ("Redis CPU in the kernel (sys)", "sys_share", "{:.1%}"),
        ("busiest master: share of commands", "commands_share", "{:.1%}"),
        ("busiest master: share of CPU", "cpu_share", "{:.1%}"),
        ("busiest master: share of memory", "memory_share", "{:.1%}"),
        ("pages/s on this machine", "pages_per_s", "{:,.0f}"),
    ]
    print(f"{'':38s} {'(a) 1 master':>14s} {'(b) 3 masters':>14s} {'(b)/(a)':>8s}")
    for label, key, fmt in rows:
        va, vb = a[key], b[key]
        if fmt == "ms":
            sa, sb = f"{va * 1000:.4f}", f"{vb * 1000:.4f}"
        else:
            sa, sb = fmt.format(va), fmt.format(vb)
        ratio = f"{vb / va:.2f}x" if va else "-"
        print(f"{label:38s} {sa:>14s} {sb:>14s} {ratio:>8s}")
    for r in (a, b):
        print(f"({'a' if r['masters'] == 1 else 'b'}) per master: "
              + "; ".join(f"node{i}: CPU {r['cpu'][i]:.2f}s, {r['commands'][i]:,.0f} commands, "
                          f"{r['memory'][i] / 2**20:.1f} MiB" for i in sorted(r['cpu']))
              + f"; load {r['wall']:.1f}s; children CPU {r['cpu_children']:.2f}s; trap-guard drops {r['dropped']}; "
              f"errors {r['errors'] or 'none'}")
    names = sorted(set(a["calls"]) | set(b["calls"]))
    print("calls a page by script or command (Frontier.calls / pages): "
          + "; ".join(f"{n} {a['calls'].get(n, 0) / a['pages']:.3f} | {b['calls'].get(n, 0) / b['pages']:.3f}"
                      for n in names) + "   [(a) | (b)]")
    for r in (a, b):
        cap = 1 / r["busiest_cpu_per_page"]
        print(f"{'(a)' if r['masters'] == 1 else '(b)'} {r['masters']} master(s) on {r['masters']} core(s) would carry "
              f"1 / {r['busiest_cpu_per_page'] * 1000:.4f} ms = {cap:,.0f} pages/s (busiest master's CPU a page)")


# -- memory a queued request, a crawled page ------------------------------------------

def memory_run(work: Path, n: int, args: argparse.Namespace, crawl: bool = True,
               config: dict[str, str] | None = None) -> dict[str, Any]:
    """Fresh 1-master cluster (``config`` set on it): enqueue ``n`` new
    pages' entries (links found on pages of the crawl), then crawl them all
    (lease, duplicate check, commit with an acknowledgement and no links:
    links are queued requests)."""
    cluster = start_cluster(work / f"mem{n}{'' if crawl else 'q'}{'c' if config else ''}", masters=1)
    try:
        for node in cluster.nodes:
            c = node.connect()
            for k, v in (config or {}).items():
                c.config_set(k, v)
            c.close()
        client = cluster.client()
        f = _frontier(client, "bench-seed")
        f.check_layout()
        base = snapshot(cluster)
        model = Model(args.sites, args.seed)
        rng = random.Random(args.seed)
        sent = 0
        entry_bytes = 0
        sample = ""
        while sent < n:
            links = []
            while len(links) < 2000 and sent + len(links) < n:
                s = rng.randrange(args.sites)
                parent = model.new_url(random.Random(rng.getrandbits(64)), s)
                depth = rng.randrange(2, 6)
                e = model.entry(model.new_url(rng, s), parent, depth + 1, {}, model.guard.page(parent, {}))
                if e is not None:
                    links.append(e)
            added, _, _ = f.queues.enqueue(links)
            sent += added
            entry_bytes += sum(len(e.entry.encode()) for e in links)
            sample = sample or links[0].entry
        queued = snapshot(cluster)
        groups_queued = key_groups(cluster)
        pages, wall, crawled, groups_crawled = 0, 0.0, queued, {}
        if crawl:
            cfg = {"ports": [cluster.nodes[0].port], "sites": args.sites, "seed": args.seed, "quota": None,
                   "drain": True, "links": False, "batch": defaults.FRONTIER_LEASE_BATCH, "heartbeat": 1.0}
            reports, wall = run_workers(cluster, cfg, args.workers)
            pages = sum(r["counts"].get("pages", 0) for r in reports)
            crawled = snapshot(cluster)
            groups_crawled = key_groups(cluster)
        c = cluster.nodes[0].connect()
        try:
            info_memory = c.info("memory")
            settings = {k: v for k, v in c.config_get("*-max-*").items()
                        if k.startswith(("hash-", "set-", "zset-", "list-")) and "ziplist" not in k}
        finally:
            c.close()
    finally:
        cluster.stop()
    used = {k: v[0]["memory"] - base[0]["memory"] for k, v in (("queued", queued), ("crawled", crawled))}
    return {"n": n, "pages": pages, "wall": wall, "per_queued": used["queued"] / n,
            "per_crawled": used["crawled"] / pages if pages else 0.0, "used": used, "entry_bytes": entry_bytes / n,
            "sample": sample, "groups_queued": groups_queued, "groups_crawled": groups_crawled,
            "fragmentation": info_memory.get("mem_fragmentation_ratio"),
            "dataset": info_memory.get("used_memory_dataset"), "overhead": info_memory.get("used_memory_overhead"),
            "settings": settings, "config": config or {}}


def print_memory(results: list[dict[str, Any]], sites: int) -> None:
    print(f"sample queued entry: {results[0]['sample']}")
    for r in results:
        conf = f" with {r['config']}" if r["config"] else ""
        crawled = (f"crawled {r['per_crawled']:.1f} B/page ({r['pages']:,} pages crawled in {r['wall']:.1f}s)"
                   if r["pages"] else "not crawled")
        print(f"memory at {r['n']:,} (over {sites:,} sites){conf}: queued {r['per_queued']:.1f} B/request "
              f"(entry JSON {r['entry_bytes']:.1f} B); {crawled}", flush=True)
    plain = [r for r in results if not r["config"]]
    for kind, pages_key in (("queued", "n"), ("crawled", "pages")):
        points = [r for r in plain if r[pages_key]]
        if len(points) >= 2:
            lo, hi = points[0], points[-1]
            slope = (hi["used"][kind] - lo["used"][kind]) / (hi[pages_key] - lo[pages_key])
            fixed = lo["used"][kind] - slope * lo[pages_key]
            print(f"  {kind}: used_memory = {fixed / 2**20:.1f} MiB + {slope:.1f} B x N (through "
                  f"{lo[pages_key]:,} and {hi[pages_key]:,}); per item: "
                  + ", ".join(f"{p['used'][kind] / p[pages_key]:.1f} B at {p[pages_key]:,}" for p in points))
    for r in results:
        conf = f" with {r['config']}" if r["config"] else ""
        for label, groups, per in (("after enqueue", r["groups_queued"], r["n"]),
                                   ("after crawl", r["groups_crawled"], r["pages"])):
            if not groups or not per:
                continue
            total = sum(g["bytes"] for g in groups.values())
            print(f"  keys {label} at {r['n']:,}{conf}: MEMORY USAGE sum {total / per:.1f} B each; "
                  + "; ".join(f"{k} {g['keys']:,} keys {g['bytes'] / per:.1f} B ({g['encoding']})"
                              for k, g in sorted(groups.items(), key=lambda kv: -kv[1]["bytes"])
                              if g["bytes"] / per >= 0.5))
        print(f"  at {r['n']:,}{conf}, at the end: used_memory_dataset {r['dataset']:,}, overhead {r['overhead']:,}, "
              f"fragmentation {r['fragmentation']}; {r['settings']}")


# -- failover ----------------------------------------------------------------------------

def failover_run(work: Path, args: argparse.Namespace, lag: float = 0.0, wait: int = 0) -> dict[str, Any]:
    """3 masters + 3 replicas; the first master SIGKILLed once a third of the
    crawl is done; the crawl (new links down to depth 2 only: it ends) runs
    until nothing is pending, or until no page was committed for
    ``--stall-limit`` seconds. Every lease and every acknowledged link kept.
    ``lag``: the master's replica is stopped (SIGSTOP) and its link dropped
    (``CLIENT KILL TYPE replica``) that many seconds before the kill, and
    continued after it: what the master acknowledged in between reaches no
    replica, as when a network hiccup cuts the link just before a crash. (A
    replica on the same machine otherwise lags by well under a millisecond;
    a replica stopped without its link dropped still reads the writes from
    its socket buffer once continued, and one whose link is dropped while it
    runs reconnects and catches up within the second.)"""
    cluster = start_cluster(work / f"failover{lag}-{wait}", masters=3, replicas=1)
    model = Model(args.failover_sites, args.seed, max_depth=2)
    # Depth 0: home pages; 1: sections and the home pages' new links; 2: the
    # new links of depth-1 pages (which link no new pages).
    depth1 = args.failover_sites * (len(SECTIONS) + NEW_LINKS)
    expected = args.failover_sites + depth1 + NEW_LINKS * depth1
    killed: dict[str, float] = {}

    def on_progress(done: Any) -> None:
        if not killed and done.value >= expected // 3:
            replica = next(n for n in cluster.nodes if n.follows == 0)
            assert replica.process is not None
            m = cluster.nodes[0].connect()
            try:
                if lag:
                    replica.process.send_signal(signal.SIGSTOP)
                    killed["links_dropped"] = m.client_kill_filter(_type="replica")
                    killed["pages_before_lag"] = done.value
                    killed["offset_at_drop"] = m.info("replication")["master_repl_offset"]
                    time.sleep(lag)
                killed["master_offset"] = m.info("replication")["master_repl_offset"]
            finally:
                m.close()
            killed["at_pages"] = done.value
            cluster.kill_node(0)
            if lag:
                replica.process.send_signal(signal.SIGCONT)

    try:
        client = cluster.client()
        seeds = [u for u, _ in model.seeds()]
        seed(client, model)
        cfg = {"ports": [n.port for n in cluster.nodes], "sites": args.failover_sites, "seed": args.seed,
               "quota": None, "drain": True, "track": True, "max_depth": 2,
               "batch": defaults.FRONTIER_LEASE_BATCH, "heartbeat": 1.0, "stall_limit": args.stall_limit,
               "verbose": args.verbose, "wait": wait}
        reports, wall = run_workers(cluster, cfg, args.workers, on_progress)
        cluster.wait_ok()
        promoted = [n.index for n in cluster.nodes if n.running and n.role == "master"]
        reader = _frontier(client, "bench-read")
        stats, pending = reader.views.stats(), reader.views.pending()
        leases: dict[str, list[tuple[str, int]]] = defaultdict(list)
        ids: dict[str, set[str]] = defaultdict(set)
        orphan_urls: set[str] = set()
        c: Counter[str] = Counter()
        for r in reports:
            c.update(r["counts"])
            last_url_of: dict[str, str] = {}
            for lease_id, url, t in r["lease_log"]:
                if t < 0:  # an orphaned lease given back
                    if lease_id in last_url_of:
                        orphan_urls.add(last_url_of[lease_id])
                    continue
                last_url_of[lease_id] = url
                leases[url].append((lease_id, r["index"]))
                ids[lease_id].add(url)
        universe = set(seeds)
        for r in reports:
            universe.update(r["submitted"])
        lost = sorted(universe - set(leases))
        # Is a lost URL still marked seen (then no later link brings it back)?
        calls = []
        for url in lost:
            bucket, member = fingerprint_slot(hashlib.sha1(url.encode()).digest(), defaults.DUPEFILTER_BUCKETS)
            calls.append(("SISMEMBER", [reader.keys.site(site_of(url.split("/", 3)[2])).seen(bucket)], [member]))
        seen_flags = reader.gateway.run_many(calls) if calls else []
    finally:
        cluster.stop()
    twice = {u for u, ls in leases.items() if len(ls) > 1}
    return {
        "expected": expected, "universe": len(universe), "leased": len(leases),
        "lease_grants": sum(len(v) for v in leases.values()), "lost": lost,
        "lost_still_seen": sum(1 for x in seen_flags if int(x)), "twice": len(twice),
        "twice_orphans": len(twice & orphan_urls), "ids_reused": sum(1 for v in ids.values() if len(v) > 1),
        "killed": killed, "wall": wall, "counts": dict(c), "promoted": promoted, "pending": pending,
        "stats": stats, "stall_limit": args.stall_limit, "lag": lag, "wait": wait,
    }


def print_failover(r: dict[str, Any]) -> None:
    c = r["counts"]
    how = "as it comes"
    if r["lag"]:
        how = (f"its replication link dropped {r['lag']:g}s before the kill "
                f"(after {r['killed'].get('pages_before_lag')} pages)")
    if r.get("wait"):
        how += f", REDIS_WAIT_REPLICAS={r['wait']}"
    print(f"failover, {how} (3 masters + 3 replicas, master node0 SIGKILLed after "
          f"{r['killed'].get('at_pages', '?')} pages; masters after: nodes {r['promoted']}): "
          f"{r['universe']:,} URLs (expected {r['expected']:,}) in {r['wall']:.1f}s "
          f"({r['lease_grants'] / r['wall']:.0f} pages/s); pending at the end "
          f"{r['pending']}; workers that gave up after {r['stall_limit']:g}s without a commit: "
          f"{c.get('gave_up', 0)}")
    k = r["killed"]
    if "offset_at_drop" in k:
        print(f"  replication stream written by the master after its replica's link dropped: "
              f"{k['master_offset'] - k['offset_at_drop']:,} bytes ({k['at_pages'] - k['pages_before_lag']} "
              f"pages committed meanwhile)")
    if c.get("gave_up"):
        print(f"  URLs never leased: {len(r['lost'])}, not lost: the crawl stopped with them queued "
              f"({c.get('unsent_links_at_end', 0)} links and {c.get('unsent_acks_at_end', 0)} acknowledgements "
              f"still unsent by the workers)")
    else:
        print(f"  URLs never leased (lost): {len(r['lost'])} ({r['lost_still_seen']} still marked seen) "
              f"{r['lost'][:3]}")
    print(f"  URLs leased more than once: {r['twice']} ({r['twice_orphans']} after an orphaned lease was "
          f"given back); lease grants {r['lease_grants']:,} for {r['leased']:,} URLs; "
          f"lease ids handed out for two URLs: {r['ids_reused']}")
    print("  worker counts: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())
                                          if k not in ("seconds_ms", "links", "added", "duplicates")))


def print_targets(loads: list[tuple[dict[str, Any], dict[str, Any]]], memory: list[dict[str, Any]]) -> None:
    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    print("targets:")
    for a, b in loads:
        ratio = b["cpu_per_page"] / a["cpu_per_page"]
        print(f"  summed Redis CPU a page, 3 masters / 1: {ratio:.2f}x (<= 1.2x): {verdict(ratio <= 1.2)}")
        for key, name in (("commands_share", "commands"), ("memory_share", "memory")):
            print(f"  busiest master's share of {name}: {b[key]:.1%} (<= 40 %): "
                  f"{verdict(b[key] <= 0.40)}")
        rt_a, rt_b = a["round_trips_per_page"], b["round_trips_per_page"]
        print(f"  round trips a page: {rt_a:.3f} -> {rt_b:.3f} (unchanged): "
              f"{verdict(abs(rt_b - rt_a) <= 0.02 * rt_a)}")
    plain = [r for r in memory if not r["config"]]
    if plain:
        q = max(plain, key=lambda r: r["n"])
        print(f"  queued request at {q['n']:,}: {q['per_queued']:.1f} B (<= 150 B): {verdict(q['per_queued'] <= 150)}")
        crawled = [r for r in plain if r["pages"]]
        if crawled:
            c = max(crawled, key=lambda r: r["pages"])
            print(f"  crawled page at {c['pages']:,}: {c['per_crawled']:.1f} B (<= 250 B): "
                  f"{verdict(c['per_crawled'] <= 250)}")


# -- main ----------------------------------------------------------------------------------

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="200 sites, 20k URLs: under a minute")
    ap.add_argument("--sites", type=int, default=10_000)
    ap.add_argument("--urls", type=int, default=10_000_000, help="URLs seen (seeds + links sent, duplicates too)")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-aof", action="store_true", help="load runs with the append-only file off")
    ap.add_argument("--mem-scales", default=MEM_SCALES,
                    help="entries queued, then pages crawled (1 master); a trailing q: queued only")
    ap.add_argument("--mem-config", default="hash-max-ziplist-value=128",
                    help="NAME=VALUE,...: the largest crawled scale again with this server config ('' : not)")
    ap.add_argument("--mem-config-only", action="store_true",
                    help="every memory run with --mem-config (as the embedded Redis is configured), none without")
    ap.add_argument("--failover-sites", type=int, default=100)
    ap.add_argument("--no-failover", action="store_true", help="no failover runs")
    ap.add_argument("--no-load", action="store_true", help="no load runs (1 master against 3)")
    ap.add_argument("--lag", type=float, default=0.5,
                    help="failover: also a run whose master drops its replica's link this long before "
                         "the kill (0: not)")
    ap.add_argument("--wait-replicas", type=int, default=0,
                    help="failover: also each run with REDIS_WAIT_REPLICAS=N (0: not)")
    ap.add_argument("--stall-limit", type=float, default=30.0,
                    help="failover: a worker gives up after this many seconds without a commit")
    ap.add_argument("--verbose", action="store_true", help="workers report their counts every 2 s")
    args = ap.parse_args()
    if args.quick:
        args.sites, args.urls, args.failover_sites, args.stall_limit, args.lag = 200, 20_000, 10, 5.0, 0.0
        if args.mem_scales == MEM_SCALES:
            args.mem_scales, args.mem_config = "2000,6000q", ""
    scales = [(int(x.rstrip("q")), x.endswith("q")) for x in args.mem_scales.split(",") if x]
    seeds = args.sites * (1 + len(SECTIONS))
    pages = max(1, math.ceil((args.urls - seeds) / LINKS))
    commit = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %cd", "--date=iso"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--short", "crawler/frontier"],
                           capture_output=True, text=True).stdout.split()
    print(f"crawler at {commit}{' with local changes to ' + ', '.join(dirty[1::2]) if dirty else ''}; "
          f"{subprocess.run([redis_server_binary(), '--version'], capture_output=True, text=True).stdout.split()[2]}, "
          f"redis-py {redis.__version__}, Python {sys.version.split()[0]}")
    print(f"{args.sites:,} sites ({seeds:,} seed URLs), {pages:,} pages of {LINKS} links "
          f"({NEW_LINKS} new), {args.workers} workers, lease batch {defaults.FRONTIER_LEASE_BATCH}, "
          f"{defaults.FRONTIER_SHARDS} shards, {defaults.DUPEFILTER_BUCKETS} dedup buckets", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        work = Path(tmp)
        loads = []
        memory: list[dict[str, Any]] = []
        if not args.no_load:
            label = "append-only file off" if args.no_aof else "append-only file on (everysec)"
            a = load_run(work, 1, args, pages)
            print(f"(a) done: {a['pages']:,} pages in {a['wall']:.1f}s", flush=True)
            b = load_run(work, 3, args, pages)
            print(f"(b) done: {b['pages']:,} pages in {b['wall']:.1f}s", flush=True)
            print(f"-- load, {label}:")
            print_load(a, b)
            loads.append((a, b))
        if scales:
            only = None
            if args.mem_config_only and args.mem_config:
                only = dict(kv.split("=", 1) for kv in args.mem_config.split(","))
            results = [memory_run(work, n, args, crawl=not queue_only, config=only) for n, queue_only in scales]
            if args.mem_config and only is None:
                config = dict(kv.split("=", 1) for kv in args.mem_config.split(","))
                n = max(n for n, queue_only in scales if not queue_only)
                results.append(memory_run(work, n, args, config=config))
            print_memory(results, args.sites)
            memory = results
        if not args.no_failover:
            for wait in (0, args.wait_replicas) if args.wait_replicas else (0,):
                print_failover(failover_run(work, args, wait=wait))
                if args.lag:
                    print_failover(failover_run(work, args, args.lag, wait=wait))
        print_targets(loads, memory)


if __name__ == "__main__":
    main()
