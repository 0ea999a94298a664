"""A million-page crawl, end to end: pages/s, worker RSS, Redis memory and
store size every 50,000 pages, on the embedded Redis and on a Redis Cluster.

    python -m bench.bench_million [--pages 1000000] [--sites 1000] [--every 50000] [--words 50-2000]
                                  [--redis embedded|cluster|both] [--plot bench/million.png] [--keep]

The full run, both modes, takes hours (a million pages at the 250-280
pages/s of a 20,000-page crawl on the 2-core machines of
``bench/RESULTS.md``: 1 to 1.5 hours a mode; the first samples' pages/s
tell) and about 11 GB of disk a mode (the store):

    python -m bench.bench_million --redis both --plot bench/million.png

or one mode a run, the second drawn with the first (``--also``, the first's
samples CSV):

    python -m bench.bench_million --redis embedded --samples bench/million-embedded.csv
    python -m bench.bench_million --redis cluster --samples bench/million-cluster.csv \\
        --also bench/million-embedded.csv --plot bench/million.png

The web: ``bench/webgen.py``'s (``--pages`` pages over ``--sites`` sites on
127.0.1.1 ..., ``--seed``; power-law in-degree, 15 % of the random links
cross-site), each page's text ``--words`` long, drawn uniformly (default
50-2,000 words; ``--words 120`` is bench_order's web, ``50-50`` or
``2000-2000`` state the figures for short or long pages alone), served by
``python -m bench.webgen`` (one aiohttp process, every request logged).
Printed first: the server's start (building the web) and RSS, then the
server alone under ``--load`` requests of the sites' home pages, 16 at a
time from an aiohttp client in this process: requests/s, and the server's
CPU a request, whose inverse is what one core of it serves.

Each mode is one crawl as a user runs it (``tests.support.crawl.crawl_cmd``:
no download delay, one request at a time a site, 127.0.0.0/8 allowed, no
sitemaps): ``scrapy crawl site -a seeds_file=<every site's home page> -a
follow=all -s CRAWL_PROCESSES=2 -s FRONTIER_MAX_PAGES_PER_SITE=0 -s
DEPTH_LIMIT=0``, robots.txt obeyed (the server answers 404), the embedded
SQLite store in a fresh ``CRAWL_DIR``. ``--redis embedded``: the embedded
Redis, started by this process before the crawl (the crawl joins it, and
it outlives the crawl so that it can be measured at the end); ``cluster``:
3 masters of ``redis-server`` (``tests.support.redis_cluster``, append-only
file on) with ``hash-max-ziplist-value 128`` as docs/reference.md advises
for a Redis of your own, ``REDIS_URL=redis+cluster://...``; ``both``: one
after the other, the same server.

Every ``--every`` pages fetched (requests the server answered 200,
``/robots.txt`` left out, read from its log), and once more after the
crawl ends (``end``: figures over the whole crawl), a sample: seconds
since the crawl's first request, pages/s over the interval and overall,
the summed RSS of the crawl's processes (the supervisor and its two
workers, psutil), Redis ``used_memory`` (summed over the masters;
everything counted) and that a page fetched, the store's files
(``site.sqlite3`` with its WAL), the frontier's queued and done counters,
and CPU ms a page over the interval: the crawl's processes, Redis, and the
server's share of a core. Written to ``samples.csv`` in the work directory
(``--samples`` elsewhere) and printed as a table; then Redis memory by key
kind at the end (``MEMORY USAGE`` of every key, grouped by the name after
its hash tag: ``bench_dupindex``'s ``memory_by_structure``). ``--plot
PATH`` draws pages/s, RSS, Redis bytes a page and store size against pages
fetched, every mode on one figure.

Targets (issue 40), each mode: Redis bytes a page after the crawl at most
400; pages/s (over the last interval) and Redis bytes a page (after the
crawl) within 1.3x of their values at the first sample at or past a tenth
of ``--pages`` (100,000 of a million). A crawl that fetches no page for
``--stall`` seconds is stopped (SIGINT) and said so. ``--keep`` keeps the
work directory (server log, crawl logs, crawl directories).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import csv
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from scrapy.settings import Settings

from bench.bench_dupindex import memory_by_structure
from bench.harness import ROOT, process_cpu, serve_web
from bench.webgen import site_host
from crawler.frontier import Frontier
from crawler.redis.client import get_redis
from tests.support.crawl import crawl_cmd
from tests.support.redis_cluster import start_cluster
from tests.support.servers import Server, stop_process

CRAWL = "site"  # the crawl's name: the spider's
MAX_BYTES = 400  # Redis bytes a crawled page at the end, everything counted
GROWTH = 1.3  # pages/s and bytes a page at the end against at a tenth of the pages
MIB = 2 ** 20
COLUMNS = ("mode", "kind", "pages", "seconds", "rate", "rate_all", "rss", "rss_peak", "processes",
           "redis_used", "redis_rss", "redis_per_page", "store", "queued", "done", "cpu_ms", "redis_cpu_ms",
           "server_share")


# -- the server ------------------------------------------------------------------------------
def start_web(args: argparse.Namespace, work: Path) -> tuple[Server, float]:
    """``python -m bench.webgen`` serving the web; (the server, seconds to start)."""
    t0 = time.monotonic()
    return serve_web(work, args.pages, args.sites, args.seed, args.words), time.monotonic() - t0


def load(server: Server, urls: list[str], concurrency: int = 16) -> dict[str, float]:
    """The server alone: ``urls`` fetched ``concurrency`` at a time; requests/s
    and the server's CPU ms a request."""
    import aiohttp

    statuses: list[int] = []

    async def run() -> None:
        todo = iter(urls)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency)) as session:
            async def fetch() -> None:
                for url in todo:
                    async with session.get(url) as r:
                        await r.read()
                        statuses.append(r.status)
            await asyncio.gather(*(fetch() for _ in range(concurrency)))

    proc = psutil.Process(server.proc.pid)
    c0, t0 = process_cpu(proc), time.monotonic()
    asyncio.run(run())
    seconds, used = time.monotonic() - t0, process_cpu(proc) - c0
    return {"requests": len(statuses), "ok": statuses.count(200), "rate": len(statuses) / seconds,
            "cpu_ms": 1000 * used / max(1, len(statuses))}


# -- one crawl's samples -------------------------------------------------------------------------
class Probe:
    """What a sample reads: the server's log (pages fetched), the crawl's
    processes, Redis (``nodes``: one client a master) and the store."""

    def __init__(self, server: Server, since: int, proc: subprocess.Popen[bytes], crawl_dir: Path,
                 nodes: list[Any], reader: Frontier) -> None:
        self.server, self.proc, self.crawl_dir, self.nodes, self.reader = server, proc, crawl_dir, nodes, reader
        self.log = server.log.open()
        self.log.seek(since)
        self.partial = ""  # a line the server was still writing
        self.top = psutil.Process(proc.pid)
        self.server_proc = psutil.Process(server.proc.pid)
        self.pages = self.fetches = 0
        self.distinct: set[int] = set()
        self.first: float | None = None  # the crawl's first request (server time)
        self.cpu: dict[int, float] = {}  # the crawl's processes' CPU seconds, by pid, as last seen
        self.rss = self.rss_peak = self.processes = 0
        self.start = self.last = {"pages": 0, "t": 0.0, "cpu": 0.0, "redis_cpu": self.redis_cpu(),
                                  "server": process_cpu(self.server_proc)}

    def poll(self) -> None:
        lines = (self.partial + self.log.read()).split("\n")
        self.partial = lines.pop()
        for line in lines:
            r = json.loads(line)
            self.first = self.first or r["t"]
            if r["status"] == 200 and r["path"] != "/robots.txt":
                self.fetches += 1
                self.distinct.add(hash(r["host"] + r["path"]))
        self.pages = len(self.distinct)
        if self.proc.poll() is not None:
            self.rss = 0  # ended: its CPU as last seen
            return
        try:
            procs = [self.top, *self.top.children(recursive=True)]
            rss = 0
            for p in procs:
                self.cpu[p.pid] = process_cpu(p)
                rss += p.memory_info().rss
        except psutil.Error:
            return  # a process ended between the listing and the reading
        self.rss, self.processes = rss, max(self.processes, len(procs))
        self.rss_peak = max(self.rss_peak, rss)

    def redis_cpu(self) -> float:
        return sum(float(i["used_cpu_sys"]) + float(i["used_cpu_user"]) for i in (n.info("cpu") for n in self.nodes))

    def sample(self, mode: str, kind: str) -> dict[str, Any]:
        """A sample over the last interval; ``kind`` "end": over the whole crawl."""
        now = time.time()
        mem = [n.info("memory") for n in self.nodes]
        used = sum(int(m["used_memory"]) for m in mem)
        stats = self.reader.stats()
        crawl_cpu, redis_cpu, server_cpu = sum(self.cpu.values()), self.redis_cpu(), process_cpu(self.server_proc)
        last, start = self.last if kind == "sample" else self.start, self.first or now
        span, new = now - (last["t"] or start), self.pages - last["pages"]
        row = {"mode": mode, "kind": kind, "pages": self.pages, "seconds": round(now - start, 1),
               "rate": round(new / span, 1) if span > 0 else 0.0,
               "rate_all": round(self.pages / (now - start), 1) if now > start else 0.0,
               "rss": self.rss or "", "rss_peak": self.rss_peak, "processes": self.processes,
               "redis_used": used, "redis_rss": sum(int(m["used_memory_rss"]) for m in mem),
               "redis_per_page": round(used / max(1, self.pages), 1),
               "store": sum(f.stat().st_size for f in self.crawl_dir.glob(f"{CRAWL}.sqlite3*")),
               "queued": stats.get("queued", 0), "done": stats.get("done", 0),
               "cpu_ms": round(1000 * (crawl_cpu - last["cpu"]) / max(1, new), 2),
               "redis_cpu_ms": round(1000 * (redis_cpu - last["redis_cpu"]) / max(1, new), 2),
               "server_share": round((server_cpu - last["server"]) / span, 3) if span > 0 else 0.0}
        self.last = {"pages": self.pages, "t": now, "cpu": crawl_cpu, "redis_cpu": redis_cpu, "server": server_cpu}
        return row


def print_overheads(nodes: list[Any], pages: int) -> None:
    """Where used_memory goes besides the keys' own MEMORY USAGE (MEMORY
    STATS, summed over the masters), and the keys a kind (the fixed cost
    each key carries), B a page."""
    stats: dict[str, int] = {}
    counts: dict[str, int] = {}
    for n in nodes:
        raw = n.execute_command("MEMORY STATS")  # redis-py answers a dict; a flat list elsewhere
        flat = raw if isinstance(raw, dict) else dict(zip(raw[0::2], raw[1::2]))
        for name, value in flat.items():
            name = name.decode() if isinstance(name, bytes) else str(name)
            if isinstance(value, int):
                stats[name] = stats.get(name, 0) + value
            elif isinstance(value, (dict, list)):  # db.0: the keyspace's own tables
                sub = value if isinstance(value, dict) else dict(zip(value[0::2], value[1::2]))
                for k, v in sub.items():
                    k = f"{name}.{k.decode() if isinstance(k, bytes) else k}"
                    stats[k] = stats.get(k, 0) + int(v)
        for key in n.scan_iter(count=10_000):
            kind = key.decode().split("}:", 1)[-1].split(":", 1)[0]
            counts[kind] = counts.get(kind, 0) + 1
    per = max(1, pages)
    shown = ("startup.allocated", "dataset.bytes", "overhead.total", "db.0.overhead.hashtable.main",
             "db.0.overhead.hashtable.expires", "clients.normal", "aof.buffer", "lua.caches", "functions.caches",
             "keys.count")
    print("  MEMORY STATS, B a page: " + ", ".join(
        f"{k} {stats[k] / per:.1f}" for k in shown if k in stats and k != "keys.count")
        + f"; keys {stats.get('keys.count', 0):,}: " + ", ".join(
        f"{k} {v:,}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]) if v >= 100), flush=True)


def print_header() -> None:
    print(f"  {'mode':<12} {'pages':>9} {'seconds':>8} {'pages/s':>8} {'overall':>8} {'RSS MiB':>8} "
          f"{'Redis MiB':>9} {'B/page':>7} {'store MiB':>9} {'queued':>8} {'CPU ms/p':>8} {'Redis ms/p':>10} "
          f"{'server':>6}", flush=True)


def print_row(r: dict[str, Any]) -> None:
    rss = f"{r['rss'] / MIB:8.0f}" if r["rss"] != "" else f"{'-':>8}"
    label = r["mode"] if r["kind"] == "sample" else f"{r['mode']} end"
    print(f"  {label:<12} {r['pages']:>9,} {r['seconds']:>8.0f} {r['rate']:>8.1f} {r['rate_all']:>8.1f} {rss} "
          f"{r['redis_used'] / MIB:>9.1f} {r['redis_per_page']:>7.0f} {r['store'] / MIB:>9.1f} {r['queued']:>8,} "
          f"{r['cpu_ms']:>8.2f} {r['redis_cpu_ms']:>10.2f} {100 * r['server_share']:>5.0f}%", flush=True)


def crawl(mode: str, args: argparse.Namespace, server: Server, seeds: Path, work: Path,
          out: csv.DictWriter) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """One mode's crawl, sampled; (its rows, Redis bytes by key kind at the end)."""
    crawl_dir = work / f"crawl-{mode}"
    settings: dict[str, object] = {"CRAWL_PROCESSES": 2, "FRONTIER_MAX_PAGES_PER_SITE": 0, "DEPTH_LIMIT": 0}
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    cluster = None
    if mode == "cluster":
        cluster = start_cluster(work / "cluster", masters=3)
        for node in cluster.nodes:
            c = node.connect()
            c.config_set("hash-max-ziplist-value", 128)
            c.close()
        nodes = [n.connect(60) for n in cluster.masters()]
        reader = Frontier(cluster.client(), CRAWL, node="bench-million")
        settings["REDIS_URL"] = cluster.url
    else:
        # This process starts the embedded Redis and holds it until it exits
        # (crawler/redis/embedded.py): the crawl joins it, and it is still
        # there to be measured once the crawl has ended.
        client = get_redis(Settings(), crawl_dir)
        nodes, reader = [client], Frontier(client, CRAWL, node="bench-million")
    rows: list[dict[str, Any]] = []
    proc = None
    try:
        empty = sum(int(n.info("memory")["used_memory"]) for n in nodes)
        print(f"\n{mode}: Redis used_memory before the crawl {empty / MIB:.1f} MiB; crawl log "
              f"{work / f'crawl-{mode}.log'}", flush=True)
        cmd = crawl_cmd([f"seeds_file={seeds}", "follow=all"], settings, crawl_dir)
        since = server.mark()
        with (work / f"crawl-{mode}.log").open("w") as log:
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        probe = Probe(server, since, proc, crawl_dir, nodes, reader)
        print_header()
        mark, moved, last_pages, stalled = args.every, time.monotonic(), 0, False
        while proc.poll() is None:
            time.sleep(1.0)
            probe.poll()
            if probe.pages >= mark:
                rows.append(probe.sample(mode, "sample"))
                out.writerow(rows[-1])
                print_row(rows[-1])
                mark = (probe.pages // args.every + 1) * args.every
            if probe.pages != last_pages:
                moved, last_pages = time.monotonic(), probe.pages
            elif time.monotonic() - moved > args.stall and not stalled:
                print(f"  no page fetched for {args.stall:g} s: stopping the crawl (SIGINT)", flush=True)
                proc.send_signal(signal.SIGINT)
                stalled = True
            elif time.monotonic() - moved > 2 * args.stall:
                proc.terminate()  # the supervisor passes it on to the workers
        probe.poll()
        rows.append(probe.sample(mode, "end"))
        out.writerow(rows[-1])
        print_row(rows[-1])
        if proc.returncode != 0:
            print(f"  the crawl exited {proc.returncode}; last lines of its log:\n"
                  + "".join((work / f"crawl-{mode}.log").read_text().splitlines(True)[-20:]))
        print(f"  {probe.pages:,} of {args.pages:,} pages fetched ({probe.fetches - probe.pages:,} fetched again); "
              f"peak RSS of the crawl's {probe.processes} processes {probe.rss_peak / MIB:.0f} MiB", flush=True)
        kinds: dict[str, int] = {}
        for n in nodes:
            for kind, size in memory_by_structure(n).items():
                kinds[kind] = kinds.get(kind, 0) + size
        print_overheads(nodes, probe.pages)
    finally:
        if proc is not None and proc.poll() is None:  # this process failed, not the crawl
            stop_process(proc)
        if cluster is not None:
            for n in nodes:
                n.close()
            cluster.stop()
    return rows, kinds


# -- the verdicts and the plot ------------------------------------------------------------------------
def verdicts(mode: str, rows: list[dict[str, Any]], pages: int) -> list[tuple[bool, str]]:
    samples = [r for r in rows if r["kind"] == "sample"]
    end = rows[-1]
    out = [(end["redis_per_page"] <= MAX_BYTES,
            f"{mode}: Redis {end['redis_per_page']:.0f} B a page after {end['pages']:,} pages (<= {MAX_BYTES})")]
    ref = next((r for r in samples if r["pages"] >= pages / 10), None)
    if ref is None or ref is samples[-1]:
        return out + [(False, f"{mode}: no two samples from a tenth of the pages on: growth not judged")]
    last = samples[-1]
    slower = ref["rate"] / last["rate"] if last["rate"] else float("inf")
    bigger = end["redis_per_page"] / ref["redis_per_page"]
    out.append((slower <= GROWTH, f"{mode}: pages/s {last['rate']:.1f} at {last['pages']:,} against "
                f"{ref['rate']:.1f} at {ref['pages']:,}: then / now {slower:.2f}x (<= {GROWTH}x)"))
    out.append((bigger <= GROWTH, f"{mode}: Redis B a page {end['redis_per_page']:.0f} at the end against "
                f"{ref['redis_per_page']:.0f} at {ref['pages']:,}: {bigger:.2f}x (<= {GROWTH}x)"))
    cpu_ratio = last["cpu_ms"] / ref["cpu_ms"] if ref["cpu_ms"] else float("nan")
    print(f"  ({mode}: the crawl's CPU a page {last['cpu_ms']:.2f} ms at {last['pages']:,} against "
          f"{ref['cpu_ms']:.2f} ms at {ref['pages']:,}: {cpu_ratio:.2f}x; reported, not a target)")
    return out


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The rows of a samples CSV as ``crawl`` made them (numbers as numbers, "" kept)."""
    def value(v: str) -> Any:
        try:
            return float(v) if v != "" else v
        except ValueError:
            return v

    with path.open(newline="") as f:
        return [{k: (v if k in ("mode", "kind") else value(v)) for k, v in row.items()} for row in csv.DictReader(f)]


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    """Pages/s, RSS, Redis bytes a page and store size against pages
    fetched, a line a mode (matplotlib, the bench extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("rate", "pages/s (last interval)", 1), ("rss", "crawl RSS (MiB)", MIB),
              ("redis_per_page", "Redis used_memory a page (B)", 1), ("store", "store on disk (MiB)", MIB))
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for ax, (key, label, scale) in zip(axes.flat, panels):
        for mode in dict.fromkeys(r["mode"] for r in rows):
            pts = [r for r in rows if r["mode"] == mode and r[key] != "" and (r["kind"] == "sample" or key in (
                "redis_per_page", "store"))]
            ax.plot([r["pages"] / 1000 for r in pts], [r[key] / scale for r in pts], "o-", ms=3, label=mode)
        if key == "redis_per_page":
            ax.axhline(MAX_BYTES, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("pages fetched (thousands)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"plot: {path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=1_000_000)
    ap.add_argument("--sites", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--words", default="50-2000", help="FEWEST-MOST words of text a page (webgen --words)")
    ap.add_argument("--every", type=int, default=50_000, help="pages between two samples")
    ap.add_argument("--redis", choices=("embedded", "cluster", "both"), default="embedded")
    ap.add_argument("--load", type=int, default=5000, help="requests of the server-alone load")
    ap.add_argument("--stall", type=float, default=900, help="seconds without a page before the crawl is stopped")
    ap.add_argument("--samples", type=Path, help="the samples' CSV (default: samples.csv in the work directory)")
    ap.add_argument("--plot", type=Path, help="draw the samples (matplotlib)")
    ap.add_argument("--also", type=Path, action="append", default=[],
                    help="an earlier run's samples CSV, drawn on the plot too (its other modes)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args()
    commit = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %cd", "--date=iso"],
                            capture_output=True, text=True).stdout.strip()
    print("command: python -m bench.bench_million " + shlex.join(sys.argv[1:]))
    print(f"crawler at {commit}; Python {sys.version.split()[0]}; {psutil.cpu_count()} cores", flush=True)
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="bench-million-"))
    if not args.keep:
        # Registered before the embedded Redis's own exit handler, so run
        # after it: the server is stopped before its directory goes.
        atexit.register(shutil.rmtree, work, True)
    server, started = start_web(args, work)
    rows: list[dict[str, Any]] = []
    results: list[tuple[bool, str]] = []
    try:
        rss = psutil.Process(server.proc.pid).memory_info().rss
        print(f"web: {args.pages:,} pages over {args.sites:,} sites, {args.words or 120} words a page; the server "
              f"built it and started in {started:.1f} s, RSS {rss / MIB:.0f} MiB", flush=True)
        homes = [f"http://{site_host(s)}:{server.port}/" for s in range(args.sites)]
        (work / "seeds.txt").write_text("\n".join(homes) + "\n")
        alone = load(server, [homes[i % len(homes)] for i in range(args.load)])
        print(f"server alone: {alone['requests']:,} requests ({alone['ok']:,} answered 200) of home pages, 16 at a "
              f"time: {alone['rate']:.0f} requests/s with the client on the same cores; server CPU "
              f"{alone['cpu_ms']:.2f} ms a request (one core: {1000 / alone['cpu_ms']:.0f} requests/s)", flush=True)
        samples = args.samples or work / "samples.csv"
        with samples.open("w", newline="") as f:
            out = csv.DictWriter(f, COLUMNS)
            out.writeheader()
            kinds_by_mode = {}
            for mode in (("embedded", "cluster") if args.redis == "both" else (args.redis,)):
                mode_rows, kinds_by_mode[mode] = crawl(mode, args, server, work / "seeds.txt", work, out)
                f.flush()
                rows += mode_rows
                results += verdicts(mode, mode_rows, args.pages)
        print(f"samples: {samples}")
        for mode, kinds in kinds_by_mode.items():
            end = next(r for r in reversed(rows) if r["mode"] == mode)
            per = max(1, end["pages"])
            print(f"{mode}, Redis by key kind at the end (MEMORY USAGE, B a page; keys {sum(kinds.values()) / per:.0f} "
                  f"of used_memory's {end['redis_per_page']:.0f}): "
                  + ", ".join(f"{k} {v / per:.1f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])
                              if v / per >= 0.1))
    finally:
        stop_process(server.proc)
        if args.keep:
            print(f"work directory kept: {work}")
    print("\ntargets:")
    for ok, line in results:
        print(f"  {'PASS' if ok else 'FAIL'}  {line}")
    if args.plot and rows:
        modes = {r["mode"] for r in rows}
        rows = [r for path in args.also for r in read_samples(path) if r["mode"] not in modes] + rows
        plot(rows, args.plot, f"bench_million: {args.pages:,} pages, {args.sites:,} sites, "
             f"{args.words or 120} words a page, CRAWL_PROCESSES=2 ({commit})")
    print(f"total {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
