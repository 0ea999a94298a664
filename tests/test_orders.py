"""Crawl orders (issue 38): -a order=bfs|dfs|importance on one small site,
one worker: the exact fetch order of each, importance raised by links found
to a URL after it was queued, the importance stored, the order recorded and
a worker asking another refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import run_crawl, stop_embedded_redis
from tests.support.servers import serve_pages

pytestmark = pytest.mark.slow

SITE = {
    "/index.html": ["/a/", "/b/", "/c/"],
    "/a/index.html": ["/a/1.html", "/a/2.html", "/a/3.html"],
    "/b/index.html": ["/b/1.html", "/x/deep/p.html"],
    "/c/index.html": ["/x/deep/p.html", "/c/1.html"],
    "/a/1.html": [], "/a/2.html": [], "/a/3.html": [], "/b/1.html": [], "/c/1.html": [], "/x/deep/p.html": [],
}
ORDERS = {
    "bfs": ["/", "/a/", "/b/", "/c/", "/a/1.html", "/a/2.html", "/a/3.html", "/b/1.html", "/x/deep/p.html",
            "/c/1.html"],
    # The newest link of the site first.
    "dfs": ["/", "/c/", "/c/1.html", "/x/deep/p.html", "/b/", "/b/1.html", "/a/", "/a/3.html", "/a/2.html",
            "/a/1.html"],
    # /x/deep/p.html: 33.33 for its depth, 191.66 from /b/ and as much again
    # from /c/ once queued; /b/1.html and /c/1.html 50 + 191.66; /a/'s three
    # links 50 + 383.33 / 3.
    "importance": ["/", "/a/", "/b/", "/c/", "/x/deep/p.html", "/b/1.html", "/c/1.html", "/a/1.html", "/a/2.html",
                   "/a/3.html"],
}


WORDS = ("harbour lantern meadow orchard quarry tunnel valley window garden bridge castle forest river market "
         "village mountain island candle engine ladder mirror pocket rabbit saddle thunder violin wagon yellow "
         "anchor basket cabin desert feather glacier hammer jungle kettle lemon marble needle").split()


def page(path: str, links: list[str]) -> str:
    import random

    rng = random.Random(path)  # each page its own words: no page a near copy of another
    text = " ".join(rng.choice(WORDS) for _ in range(200))
    items = "".join(f'<li><a href="{u}">{u}</a></li>' for u in links)
    return f"<html><head><title>{path}</title></head><body><p>{text}</p><ul>{items}</ul></body></html>"


@pytest.fixture
def site(tmp_path: Path):
    server = serve_pages(tmp_path, {path: page(path, links) for path, links in SITE.items()})
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("order", list(ORDERS))
def test_each_order_fetches_in_its_order(site, tmp_path, order):
    crawl_dir = tmp_path / "crawl"
    mark = site.mark()
    try:
        result = run_crawl(site, crawl_dir, [f"seeds={site.url('/')}", "follow=all", f"order={order}"],
                           {"DOWNLOAD_DELAY": 0.3})
        assert result.returncode == 0, result.log[-3000:]
        assert [p for p in result.fetched if p != "/robots.txt"] == ORDERS[order], " ".join(result.fetched)
        # Politeness holds whatever the order: 0.3 s between two fetches of the site.
        times = [float(r["t"]) for r in site.requests(mark)]
        assert min(b - a for a, b in zip(times, times[1:])) >= 0.3
        with SQLiteStore(result.store_path) as store:
            stored = {p["url"].split(str(site.port), 1)[1]: p["importance"] for p in store.iter_pages()}
        if order == "importance":
            assert stored == {"/": 1000.0, "/a/": 383.33, "/b/": 383.33, "/c/": 383.33, "/x/deep/p.html": 416.65,
                              "/b/1.html": 241.66, "/c/1.html": 241.66, "/a/1.html": 177.77, "/a/2.html": 177.77,
                              "/a/3.html": 177.77}
            # /c/'s link to /x/deep/p.html, which this worker had sent: raised without a request.
            assert "'importance/raised_sent': 1," in result.log
        else:
            assert set(stored.values()) == {None}
        st = json.loads(subprocess.run([sys.executable, "-m", "scrapy", "status", "--json", "-s",
                                        f"CRAWL_DIR={crawl_dir}"], cwd=ROOT, capture_output=True, text=True,
                                       timeout=60).stdout)
        assert (st["control"]["order"], st["control"]["best_waiting"]) == (order, None)
        other = "dfs" if order != "dfs" else "bfs"
        refused = run_crawl(site, crawl_dir, [f"order={other}"])
        assert refused.returncode == 1 and refused.fetched == []
        assert refused.log.strip().splitlines()[-1] == (
            f"Error: crawl 'site' has -a order={order} (recorded when it started); this worker asks -a order={other}: "
            f"join it with -a order={order} (or without -a order), or start another crawl (-s CRAWL_NAME=...)")
    finally:
        stop_embedded_redis(crawl_dir)
