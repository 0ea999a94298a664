"""The adaptive rate against a site that limits its rate, and against the
fixed backoff it replaced (the anchor), in the same run.

    python -m bench.bench_rate [--limit 10] [--pages 1500] [--workers 1,2] [--anchor-seconds 120]
    python -m bench.bench_rate --slowing [--pages 1200] [--latency 0.05] [--per-request 0.15]

Serves ``tests/support/limited_server.py`` on 127.0.0.2: it answers 429
(no Retry-After) to a request that arrives when more than ``--limit``
reached the host in the second before it (refused ones count too), and
each answer takes 5 ms plus 5 ms for every other request in flight there.
The crawler is not told the limit. Each crawl: ``scrapy crawl site -a
follow=all`` on embedded defaults with ``DOWNLOAD_DELAY=0`` and
``CONCURRENT_REQUESTS_PER_DOMAIN=8``, one worker or ``CRAWL_PROCESSES=2``.
Printed for each: pages stored against pages on the site (nothing lost),
and from the server's log, after the first minute, the share of answers
that were 429 (target at most 2 %) and the rate of pages a second against
the limit (target at least 80 %). The anchor is the same crawl with
``ADAPTIVE_RATE=False`` (the fixed backoff: doubled from
``FRONTIER_BACKOFF_MIN`` per 429, halved per success), stopped after
``--anchor-seconds``.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import ROOT, check_store, store_path
from tests.support.crawl import crawl_cmd
from tests.support.servers import launch


def measure(limit: int, pages: int, workers: int, adaptive: bool, cap: float | None,
            latency: float = 0.005, per_request: float = 0.005) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-rate-"))
    log = work / "requests.jsonl"
    server = launch([sys.executable, "-m", "tests.support.limited_server", "--hosts", "127.0.0.2", "--log", str(log),
                     "--limit", str(limit), "--pages", str(pages), "--latency", str(latency),
                     "--per-request", str(per_request)],
                    log)
    settings = {"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 8, "RETRY_TIMES": 20,
                "SITEMAP_ENABLED": False, "NETWORK_ALLOWLIST": "127.0.0.0/8", "ADAPTIVE_RATE": adaptive,
                "LOG_LEVEL": "INFO"}
    if workers > 1:
        settings["CRAWL_PROCESSES"] = workers
    cmd = crawl_cmd([f"seeds={server.url('/', host='127.0.0.2')}", "follow=all"], settings, work / "crawl")
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=cap if cap else 3600)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
    wall = time.monotonic() - started
    reqs = [r for r in server.requests(0) if r["path"] != "/robots.txt"]
    server.stop()
    t0 = reqs[0]["t"] if reqs else 0.0
    late = [r for r in reqs if r["t"] >= t0 + 60]
    late_ok = [r for r in late if r["status"] == 200]
    span = (late[-1]["t"] - late[0]["t"]) if len(late) > 1 else 0.0
    stored = check_store(store_path(work / "crawl"))
    waits = sorted(latency + per_request * (r["inflight"] - 1) for r in late_ok)
    return {"wall": wall, "late_wait": waits[len(waits) // 2] if waits else 0.0,
            "late_inflight": sum(r["inflight"] for r in late_ok) / len(late_ok) if late_ok else 0.0, "requests": len(reqs), "refused": sum(r["status"] == 429 for r in reqs),
            "late": len(late), "late_refused": sum(r["status"] == 429 for r in late),
            "late_rate": len(late_ok) / span if span else 0.0, "stored": stored,
            "fetched_ok": len({r["path"] for r in reqs if r["status"] == 200})}


def slowing(pages: int, latency: float, per_request: float) -> None:
    """A server that never refuses but answers slower the more requests it
    has in flight: the latency watch against the same crawl without it."""
    for adaptive in (False, True):
        m = measure(10**6, pages, 1, adaptive, None, latency, per_request)
        print(f"{'adaptive' if adaptive else 'anchor (ADAPTIVE_RATE=False)'}, slowing server: {m['stored']} of "
              f"{pages + 1} pages stored, {m['wall']:.0f} s; after the first minute: {m['late_rate']:.2f} pages a "
              f"second, {m['late_inflight']:.1f} requests in flight on average, median answer {m['late_wait']:.2f} s "
              f"(fastest {latency:.2f} s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slowing", action="store_true",
                    help="instead: a server that slows with load and never refuses (the latency watch)")
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--per-request", type=float, default=0.15)
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--pages", type=int, default=1500)
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--anchor-seconds", type=float, default=120.0)
    args = ap.parse_args()
    if args.slowing:
        slowing(args.pages, args.latency, args.per_request)
        return
    total = args.pages + 1  # and the home page
    anchor = measure(args.limit, args.pages, 1, False, args.anchor_seconds)
    print(f"anchor (fixed backoff), one worker, stopped after {anchor['wall']:.0f} s: {anchor['fetched_ok']} pages "
          f"({anchor['fetched_ok'] / anchor['wall']:.2f} a second, {anchor['fetched_ok'] / anchor['wall'] / args.limit:.0%} "
          f"of the limit); {anchor['refused']} of {anchor['requests']} answers were 429", flush=True)
    for workers in (int(w) for w in args.workers.split(",")):
        m = measure(args.limit, args.pages, workers, True, None)
        share = m["late_refused"] / m["late"] if m["late"] else 0.0
        print(f"adaptive, {workers} worker{'s' if workers > 1 else ''}: {m['stored']} of {total} pages stored "
              f"({m['fetched_ok']} fetched), {m['wall']:.0f} s; {m['refused']} of {m['requests']} answers 429 in all; "
              f"after the first minute: {m['late_refused']} of {m['late']} answers 429 ({share:.2%}, target at most 2 %), "
              f"{m['late_rate']:.2f} pages a second = {m['late_rate'] / args.limit:.0%} of the limit (target at least 80 %); "
              f"against the anchor {m['fetched_ok'] / m['wall'] / (anchor['fetched_ok'] / anchor['wall']):.1f}x pages a second",
              flush=True)


if __name__ == "__main__":
    main()
