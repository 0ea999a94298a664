"""A worker's memory over a long crawl: resident set size by pages crawled.

    python -m bench.bench_rss [--root DIR] [--pages 10000]

Serves ``--root`` (default: OpenJDK 17's javadoc, ``apt-get install
openjdk-17-doc``, about 10,000 pages) on 127.0.0.2 and crawls ``--pages`` of
it with the full pipeline on embedded defaults (one process, no delay, 16
requests at a time), sampling the worker's RSS twice a second. Prints the
peak and the RSS when the server had answered 1,000, 2,500, 5,000, 7,500 and
10,000 requests: what the bounded caches cost, and whether anything grows
with the pages crawled.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from tests.support.crawl import crawl_cmd

from bench.harness import ROOT, serve

MARKS = (1000, 2500, 5000, 7500, 10000)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path("/usr/share/doc/openjdk-17-jre-headless/api"))
    ap.add_argument("--pages", type=int, default=10000)
    args = ap.parse_args()
    if not (args.root / "index.html").exists():
        raise SystemExit(f"{args.root}/index.html not found: apt-get install openjdk-17-doc, or pass --root")
    work = Path(tempfile.mkdtemp(prefix="bench-rss-"))
    server = serve(work, args.root, "127.0.0.2")
    try:
        settings = {"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 16, "LOG_LEVEL": "INFO",
                    "PROGRESS_INTERVAL": 0, "FRONTIER_MAX_PAGES_PER_SITE": args.pages}
        seed = f"http://127.0.0.2:{server.port}/index.html"
        proc = subprocess.Popen(crawl_cmd([f"seeds={seed}", "follow=all"], settings, work / "crawl"), cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        worker = psutil.Process(proc.pid)
        peak, at = 0, {}
        t0 = time.monotonic()
        while proc.poll() is None:
            try:
                rss = worker.memory_info().rss
            except psutil.Error:
                break
            peak = max(peak, rss)
            n = len(server.requests())
            for m in MARKS:
                if n >= m and m not in at:
                    at[m] = rss
            time.sleep(0.5)
        mib = 2 ** 20
        print(f"{len(server.requests())} requests in {time.monotonic() - t0:.0f} s; peak RSS {peak / mib:.0f} MiB; "
              "RSS after " + ", ".join(f"{m:,}: {v / mib:.0f} MiB" for m, v in at.items()))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
