"""``scrapy status`` as an operator reads it, after real crawls (``scrapy
crawl`` subprocesses against a test server): the counts add up and say
what they are; URLs robots.txt forbids are counted apart from errors;
``--errors`` lists the failed URLs; a crawl left with URLs queued reads
STOPPED; ``CLOSESPIDER_PAGECOUNT`` stores exactly that many pages; the
progress line shows a topic and an ETA only where they mean something."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

import pytest

from crawler.operations.progress import Sample, draining
from tests.support import ROOT
from tests.support.crawl import run_crawl, stop_embedded_redis
from tests.support.mockserver import article_page, index_page
from tests.support.servers import Server, serve_pages

ARTICLES = 12


@pytest.fixture
def site(tmp_path: Path):
    """A home page linking to articles, one page robots.txt forbids and one
    that is missing (404)."""
    links = [(f"/p{i}.html", f"Article {i}") for i in range(ARTICLES)]
    links += [("/private/x.html", "Private"), ("/missing.html", "Missing")]
    pages = {"/index.html": index_page("Home", links), "/private/x.html": article_page("X", "secret " * 40)}
    for i in range(ARTICLES):
        pages[f"/p{i}.html"] = article_page(f"Article {i}", f"Article number {i} tells of its river. " * 20)
    server = serve_pages(tmp_path, pages, robots="User-agent: *\nDisallow: /private/\n")
    try:
        yield server
    finally:
        server.stop()


def status(crawl_dir: Path, *args: str) -> tuple[int, str, str]:
    p = subprocess.run([sys.executable, "-m", "scrapy", "status", *args, "-s", f"CRAWL_DIR={crawl_dir}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def pages_stored(crawl_dir: Path) -> dict[str, int]:
    with sqlite3.connect(crawl_dir / "site.sqlite3") as db:
        return dict(db.execute("SELECT state, COUNT(*) FROM pages GROUP BY state").fetchall())


@pytest.mark.slow
def test_robots_forbidden_urls_are_counted_apart_and_failed_urls_are_listed(site: Server, tmp_path: Path):
    crawl_dir = tmp_path / "crawl"
    try:
        # In importance order: an ordered crawl that has no topic.
        result = run_crawl(site, crawl_dir, [f"seeds={site.url('/')}", "order=importance"], {"PROGRESS_INTERVAL": 1})
        assert result.returncode == 0, result.log[-3000:]
        assert "/private/x.html" not in result.fetched and "/missing.html" in result.fetched
        assert pages_stored(crawl_dir) == {"C": ARTICLES + 1, "E": 1}  # no record of the forbidden URL

        # The progress line: no topic (not a focused crawl), no ETA (nothing is pending at close).
        closing = [line for line in result.log.splitlines() if line.endswith("(at close)")]
        assert len(closing) == 1, result.log[-3000:]
        assert re.fullmatch(
            r".* \[crawler\.operations\.progress\] INFO: Progress: 13 pages \([\d,]+/min here, [\d,]+/min cluster\), 14 links "
            r"parsed, queued 0, leased 0, delayed 0, errors 1 \(cluster 13 pages, 1 errors\) \(at close\)",
            closing[0]), closing[0]

        code, out, err = status(crawl_dir)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0] == ("crawl site  FINISHED   13 pages, 1 errors, 0 pages/min, 14 links parsed, 0 s between "
                            "a site's fetches, 1 forbidden by robots.txt")
        assert lines[1] == "control: order importance, scope site, follow index, sitemaps off, languages any, " \
                           "render never"
        reasons = out[out.index("errors by reason"):]
        assert re.search(r"│ HTTP 404 +│ +1 │", reasons) and "IgnoreRequest" not in out and "HttpError" not in out

        code, out, err = status(crawl_dir, "--json")
        assert code == 0, err
        st = json.loads(out)
        assert (st["totals"]["pages"], st["totals"]["errors"], st["totals"]["robots_forbidden"]) == (13, 1, 1)
        assert st["errors"] == {"HTTP 404": 1} and st["control"]["render"] == "never"

        code, out, err = status(crawl_dir, "--errors")
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0] == "crawl site: 1 URL failed; the latest 1, newest first:"
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  HTTP 404  " + re.escape(site.url("/missing.html")),
                            lines[1]), lines
        assert len(lines) == 2

        code, out, err = status(crawl_dir, "--errors", "5", "--json")
        assert code == 0, err
        listed = json.loads(out)
        assert listed["crawl"] == "site" and listed["errors_total"] == 1
        [failed] = listed["failed"]
        assert (failed["url"], failed["site"], failed["reason"]) == (site.url("/missing.html"), "127.0.0.1",
                                                                     "HTTP 404")
        assert abs(failed["at"] - time.time()) < 600

        code, out, err = status(crawl_dir, "--errors", "0")
        assert (code, out, err.strip()) == (1, "", "scrapy status: --errors 0: give a number of URLs, 1 or more")
    finally:
        stop_embedded_redis(crawl_dir)


@pytest.mark.slow
def test_closespider_pagecount_stores_exactly_that_many_pages_and_the_crawl_reads_stopped(site: Server,
                                                                                          tmp_path: Path):
    """Sitemaps on (the site has none: a 404 that Scrapy's count took for a
    page) and four requests at a time (those in flight were stored past the
    count): exactly 5 pages, and the crawl left with URLs queued reads
    STOPPED with how to resume it, not IDLE."""
    crawl_dir = tmp_path / "crawl"
    try:
        result = run_crawl(site, crawl_dir, [f"seeds={site.url('/')}"],
                           {"CLOSESPIDER_PAGECOUNT": 5, "SITEMAP_ENABLED": True, "CONCURRENT_REQUESTS_PER_DOMAIN": 4})
        assert result.returncode == 0, result.log[-3000:]
        assert "'finish_reason': 'closespider_pagecount'" in result.log, result.log[-3000:]
        assert pages_stored(crawl_dir) == {"C": 5}

        code, out, err = status(crawl_dir, "--json")
        assert code == 0, err
        st = json.loads(out)
        f = st["frontier"]
        assert (st["state"], st["stop"], st["totals"]["pages"]) == ("stopped", None, 5)
        assert f["queued"] == ARTICLES + 2 - 4 and f["leased"] == f["delayed"] == 0, f

        code, out, err = status(crawl_dir)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[0].startswith("crawl site  STOPPED   5 pages, 0 errors, 0 pages/min, "), lines[0]
        resume = [line for line in lines if line.startswith("stopped with")]
        assert resume == [(f"stopped with {f['queued']} URLs to fetch ({f['queued']} queued, 0 leased, 0 waiting "
                            "for a retry); `scrapy crawl site` with the same -s CRAWL_NAME (and CRAWL_DIR or "
                            "REDIS_URL) resumes it")], lines

        # Resumed: the rest, and the crawl is finished.
        again = run_crawl(site, crawl_dir, [])
        assert again.returncode == 0, again.log[-3000:]
        assert pages_stored(crawl_dir) == {"C": ARTICLES + 1, "E": 1}
        code, out, err = status(crawl_dir, "--json")
        assert json.loads(out)["state"] == "finished"
    finally:
        stop_embedded_redis(crawl_dir)


@pytest.mark.slow
def test_a_crawl_stopped_by_ctrl_c_with_urls_queued_reads_stopped(site: Server, tmp_path: Path):
    crawl_dir = tmp_path / "crawl"
    try:
        # A site's pages 0.5 s apart: Ctrl-C lands with most of them queued.
        result = run_crawl(site, crawl_dir, [f"seeds={site.url('/')}"], {"DOWNLOAD_DELAY": 0.5}, interrupt_after=4)
        assert result.returncode == 0, result.log[-3000:]
        assert "'finish_reason': 'shutdown'" in result.log, result.log[-3000:]
        code, out, err = status(crawl_dir, "--json")
        assert code == 0, err
        st = json.loads(out)
        f = st["frontier"]
        assert (st["state"], st["stop"]) == ("stopped", None) and f["queued"] > 0, st
        code, out, err = status(crawl_dir)
        lines = out.splitlines()
        assert lines[0].startswith(f"crawl site  STOPPED   {st['totals']['pages']} pages, "), lines[0]
        pending = f["queued"] + f["leased"] + f["delayed"]
        assert lines[2] == (f"stopped with {pending} URLs to fetch ({f['queued']} queued, {f['leased']} leased, "
                            f"{f['delayed']} waiting for a retry); `scrapy crawl site` with the same -s CRAWL_NAME "
                            "(and CRAWL_DIR or REDIS_URL) resumes it"), lines
    finally:
        stop_embedded_redis(crawl_dir)


def sample(at: float, queued: int) -> Sample:
    s = Sample()
    s.at, s.queued = at, queued
    return s


@pytest.mark.parametrize(("queued", "expected"), [
    ((100, 120, 150), None),  # still finding more than it fetches: no end in sight
    ((100, 100, 100), None),
    ((150, 120, 100), "60s"),  # 50 fewer in 30 s: 100 more take 60 s
    ((40, 20, 0), None),  # nothing left
    ((5, 4, 2), "20s"),
])
def test_an_eta_only_while_the_pending_requests_fall(queued, expected):
    history = deque(sample(1000.0 + 15 * i, q) for i, q in enumerate(queued))
    assert draining(history, history[-1]) == expected
