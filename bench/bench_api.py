"""What the HTTP API (``scrapy serve``) costs over driving the crawler
directly, in the same run.

    python -m bench.bench_api [--scrapes 5] [--sections 20] [--per-section 10]

A generated site (``tests/support/api.py``: a home page, ``--sections``
section pages, ``--per-section`` articles each) on 127.0.0.2, no delay,
``CONCURRENT_REQUESTS_PER_DOMAIN=4``, embedded defaults. Printed:

- a scrape of one article through the Firecrawl SDK, against the anchor
  ``scrapy crawl site`` of that one page (each a fresh process), seconds
  each (median of ``--scrapes``);
- a crawl of the whole site through the SDK (``crawl``: start, poll every
  second, page through the results), against the anchor ``scrapy crawl
  site -a follow=all`` of it, seconds and pages a second.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import ROOT
from tests.support.api import KEY, api_site, serve
from tests.support.crawl import crawl_cmd
from tests.support.servers import start_server

SETTINGS = {"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 4, "SITEMAP_ENABLED": False,
            "NETWORK_ALLOWLIST": "127.0.0.0/8", "LOG_LEVEL": "WARNING"}


def direct(args: list[str], work: Path) -> float:
    started = time.monotonic()
    subprocess.run(crawl_cmd(args, SETTINGS, work), cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def main() -> None:
    from firecrawl import Firecrawl

    ap = argparse.ArgumentParser()
    ap.add_argument("--scrapes", type=int, default=5)
    ap.add_argument("--sections", type=int, default=20)
    ap.add_argument("--per-section", type=int, default=10)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-api-"))
    paths = api_site(work / "www", args.sections, args.per_section)
    site = start_server(work, hosts="127.0.0.2", root=work / "www")
    api = serve(work / "api", {**SETTINGS, "API_KEY_REQUESTS_PER_MINUTE": 0})
    try:
        app = Firecrawl(api_key=KEY, api_url=api.url)
        page = site.url("/s1/a1.html", host="127.0.0.2")
        through = []
        for _ in range(args.scrapes):
            started = time.monotonic()
            app.scrape(page, formats=["markdown"])
            through.append(time.monotonic() - started)
        alone = [direct([f"seeds={page}", "follow=index"], work / f"direct-{n}") for n in range(args.scrapes)]
        a, b = statistics.median(through), statistics.median(alone)
        print(f"scrape of one page: API {a:.2f} s, scrapy crawl {b:.2f} s (median of {args.scrapes}): "
              f"{a / b:.2f}x", flush=True)
        home = site.url("/", host="127.0.0.2")
        started = time.monotonic()
        job = app.crawl(home, limit=len(paths), sitemap="skip", poll_interval=1)
        api_s = time.monotonic() - started
        alone_s = direct([f"seeds={home}", "follow=all"], work / "direct-crawl")
        print(f"crawl of {len(paths)} pages: API {api_s:.1f} s ({len(job.data)} documents, "
              f"{len(job.data) / api_s:.1f} pages/s), scrapy crawl {alone_s:.1f} s "
              f"({len(paths) / alone_s:.1f} pages/s): {api_s / alone_s:.2f}x the time", flush=True)
    finally:
        api.stop()
        site.stop()


if __name__ == "__main__":
    sys.exit(main())
