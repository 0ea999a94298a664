"""Where a crawl's start and end go: launch to first request, last request
to exit, plain Scrapy against ours, in the same run.

    python -m bench.bench_timeline [--root DIR] [--processes 2] [--runs 3]

Serves ``--root`` (default: the PostgreSQL 15 documentation, link-light
pages on which a 5 s crawl leaves start-up weighing heavily; measured, not
tuned on) on 127.0.0.1 and crawls it with the plain ``CrawlSpider`` of
``bench/plain_spider.py`` and with ours (``bench/bench_crawl.py``'s
settings, ``-s CRAWL_PROCESSES=--processes``), alternating. The test
server logs each request's time; printed per crawl: the whole process's
time, its first request and last request after launch, and how long the
process took to exit after its last request.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import subprocess
from pathlib import Path

from bench.harness import COMMON, LOOPBACK, ROOT, plain_crawl, scrapy_crawl, serve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path("/usr/share/doc/postgresql-doc-15/html"))
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="timeline-"))
    server = serve(work, args.root)
    seed = server.url("/index.html")

    def requests() -> list[float]:
        if not server.log.exists():
            return []
        return [json.loads(line)["t"] for line in server.log.read_text().splitlines() if line]

    def crawl(kind: str, run: int) -> float:
        before = len(requests())
        if kind == "plain":  # outside the project: none of our settings apply
            cmd, cwd = plain_crawl(seed, COMMON), work
        else:
            settings = {**COMMON, "CRAWL_DIR": work / f"ours{run}", "NETWORK_ALLOWLIST": LOOPBACK,
                        "CRAWL_PROCESSES": args.processes}
            cmd, cwd = scrapy_crawl([f"seeds={seed}", "follow=all"], settings), ROOT
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800)
        t1 = time.time()
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-3000:])
        time.sleep(0.3)  # the server's log line of the last request
        times = sorted(requests()[before:])
        label = "plain" if kind == "plain" else f"ours, {args.processes} processes"
        print(f"run {run}, {label}: {t1 - t0:.2f} s; first request at {times[0] - t0:.2f} s, last at "
              f"{times[-1] - t0:.2f} s, exit {t1 - times[-1]:.2f} s after it; {len(times)} requests", flush=True)
        return t1 - t0

    try:
        for run in range(1, args.runs + 1):
            plain = crawl("plain", run)
            ours = crawl("ours", run)
            print(f"run {run}: whole process, ours {plain / ours:.2f}x plain", flush=True)
    finally:
        server.stop()

if __name__ == "__main__":
    main()
