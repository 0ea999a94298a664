"""Sitemaps in a crawl (issue 37): robots.txt naming a sitemap index and a
text sitemap, a gzipped urlset, pages reachable only through sitemaps,
listed URLs out of location, denied and off scope, an index naming itself,
nesting past the limit, an HTML page and a gzip bomb posing as sitemaps.
An index that loops back is read once. Exact fetches (the server's log), their order, what was stored, and what
``scrapy status`` counts; then two workers on one crawl, and a crawl with
``-a sitemaps=0``."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import crawl_cmd, run_crawl, stop_embedded_redis
from tests.support.servers import start_server

pytestmark = pytest.mark.slow

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
ON = {"SITEMAP_ENABLED": True}  # the default the test helpers turn off for other tests


def html(title: str, links: list[str] = ()) -> str:
    words = "harbour lantern meadow orchard quarry tunnel valley window garden bridge castle forest".split()
    seed = sum(map(ord, title))
    text = " ".join(words[(seed * 7 + i * (seed % 5 + 2)) % len(words)] for i in range(150))
    items = "".join(f'<li><a href="{u}">{u}</a></li>' for u in links)
    return f"<html><head><title>{title}</title></head><body><p>{text}</p><ul>{items}</ul></body></html>"


def index(*locs: str) -> str:
    return f'<?xml version="1.0"?><sitemapindex {NS}>' + "".join(
        f"<sitemap><loc>{u}</loc></sitemap>" for u in locs) + "</sitemapindex>"


def urlset(*entries: tuple[str, str]) -> str:
    return f'<?xml version="1.0"?><urlset {NS}>' + "".join(f"<url><loc>{u}</loc>{extra}</url>" for u, extra in entries) \
        + "</urlset>"


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


@pytest.fixture
def site(tmp_path: Path):
    root = tmp_path / "www"
    root.mkdir()
    server = start_server(tmp_path, hosts="127.0.0.1", root=root)
    u = server.url
    files: dict[str, str | bytes] = {
        "robots.txt": "User-agent: *\nAllow: /\nSitemap: /sitemap_index.xml\nSitemap: /sitemap.txt\n",
        "index.html": html("home", ["/docs/page.html"]),
        "docs/page.html": html("page"),
        "only-in-sitemap.html": html("only in a sitemap"),
        "text-only.html": html("only in the text sitemap"),
        "private/x.html": html("private"),
        "deep/leaf.html": html("leaf"),
        "sitemap_index.xml": index(u("/maps/a.xml.gz"), u("/sitemap_index.xml"), u("/maps/nested.xml"),
                                   u("/maps/html.xml"), u("/maps/bomb.xml.gz"), u("/maps/loop.xml"),
                                   u("/x.xml", host="127.0.0.2")),
        # An index naming its parent, itself and a file read already: nothing read twice.
        "maps/loop.xml": index(u("/sitemap_index.xml"), u("/maps/loop.xml"), u("/maps/a.xml.gz")),
        "maps/a.xml.gz": gzip.compress(urlset(
            (u("/only-in-sitemap.html"), "<lastmod>2026-01-01</lastmod><changefreq>daily</changefreq>"),
            (u("/index.html"), "<lastmod>2026-02-01T00:00:00Z</lastmod>"),
            (u("/private/x.html"), ""),
            (u("/elsewhere.html", host="127.0.0.3"), "")).encode()),
        "maps/nested.xml": index(u("/maps/deep.xml")),
        "maps/deep.xml": index(u("/maps/leaf.xml")),
        "maps/leaf.xml": urlset((u("/deep/leaf.html"), "")),
        "maps/html.xml": html("not a sitemap"),
        "maps/bomb.xml.gz": gzip.compress(b"\0" * (60 * 1024 * 1024), compresslevel=9),
        "sitemap.txt": f"{u('/text-only.html')}\n{u('/index.html')}\n",
    }
    for path, body in files.items():
        f = root / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(body if isinstance(body, bytes) else body.encode())
    try:
        yield server
    finally:
        server.stop()


SITEMAPS_IN_ORDER = ["/sitemap_index.xml", "/sitemap.txt", "/maps/a.xml.gz", "/maps/nested.xml", "/maps/html.xml",
                     "/maps/bomb.xml.gz", "/maps/loop.xml", "/maps/deep.xml"]
PAGES = ["/index.html", "/docs/page.html", "/only-in-sitemap.html", "/text-only.html"]


def status(crawl_dir: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "scrapy", "status", "--json", "-s", f"CRAWL_DIR={crawl_dir}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_crawl_reads_its_sitemaps_one_at_a_time_within_the_limits(site, tmp_path):
    crawl_dir = tmp_path / "crawl"
    try:
        result = run_crawl(site, crawl_dir, [f"seeds={site.url('/index.html')}", "follow=all", "deny=/private/"], ON)
        assert result.returncode == 0, result.log[-3000:]
        assert Counter(result.fetched) == Counter(["/robots.txt", *SITEMAPS_IN_ORDER, *PAGES]), result.fetched
        # One file after another: the next is queued once the one before is read.
        assert [p for p in result.fetched if p in SITEMAPS_IN_ORDER] == SITEMAPS_IN_ORDER
        with SQLiteStore(result.store_path) as store:
            pages = {p["url"]: p for p in store.iter_pages()}
        assert sorted(pages) == sorted(site.url(p) for p in PAGES)  # sitemaps are not pages
        listed = {site.url("/index.html"): (True, ts("2026-02-01T00:00:00"), None),
                  site.url("/only-in-sitemap.html"): (True, ts("2026-01-01T00:00:00"), "daily"),
                  site.url("/text-only.html"): (True, None, None),
                  site.url("/docs/page.html"): (False, None, None)}
        assert {u: (p["in_sitemap"], p["lastmod"], p["changefreq"]) for u, p in pages.items()} == listed
        only = pages[site.url("/only-in-sitemap.html")]
        assert only["referer"] == site.url("/maps/a.xml.gz") and only["depth"] == 1
        # changefreq daily: the re-crawl's first interval, rather than the default.
        assert only["revisit_interval"] == 86400 and only["next_fetch_at"] == pytest.approx(only["fetched_at"] + 86400)

        st = status(crawl_dir)
        assert st["sitemaps"] == {"read": 6, "errors": 3, "listed": 6, "taken": 4}
        assert (st["totals"]["pages"], st["totals"]["errors"]) == (4, 0)
        assert st["control"]["sitemaps"] == "1"
        assert st["errors"] == {"sitemap": 3}
        log = result.log
        assert f"Sitemap {site.url('/maps/html.xml')}: an HTML page, not a sitemap" in log
        assert f"Sitemap {site.url('/maps/bomb.xml.gz')}: neither XML nor a list of URLs" in log
        assert (f"Sitemap {site.url('/maps/deep.xml')}: a sitemap index 3 levels below robots.txt "
                "(SITEMAP_MAX_DEPTH is 2): its 1 files not read") in log
        for stat, n in (("sitemap/urls_off_location", 2), ("rules/denied", 1),
                        ("sitemap/urls_taken", 4), ("sitemap/read", 6), ("sitemap/failed", 2)):
            assert f"'{stat}': {n}," in log or f"'{stat}': {n}}}" in log, stat

        # Run again: nothing new, no sitemap read twice.
        again = run_crawl(site, crawl_dir, [f"seeds={site.url('/index.html')}"], ON)
        assert again.returncode == 0 and again.fetched == []
    finally:
        stop_embedded_redis(crawl_dir)


def test_two_workers_read_each_sitemap_once(site, tmp_path):
    crawl_dir = tmp_path / "crawl"
    settings = {**ON, "DOWNLOAD_DELAY": 0.2}
    args = [f"seeds={site.url('/index.html')}", "follow=all", "deny=/private/"]
    mark = site.mark()
    first = subprocess.Popen(crawl_cmd(args, settings, crawl_dir), cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        second = run_crawl(site, crawl_dir, args, settings)
        out, _ = first.communicate(timeout=120)
        assert first.returncode == 0 and second.returncode == 0, (out[-2000:], second.log[-2000:])
        fetched = Counter(str(r["path"]) for r in site.requests(mark))
        robots = fetched.pop("/robots.txt")
        assert robots in (1, 2)  # the cluster's cache, or both asked at once before it was filled
        assert fetched == Counter([*SITEMAPS_IN_ORDER, *PAGES])
    finally:
        if first.poll() is None:
            first.kill()
        stop_embedded_redis(crawl_dir)


def test_sitemaps_off_for_a_crawl_and_a_worker_that_asks_otherwise_is_refused(site, tmp_path):
    crawl_dir = tmp_path / "crawl"
    try:
        result = run_crawl(site, crawl_dir, [f"seeds={site.url('/index.html')}", "follow=all", "sitemaps=0"], ON)
        assert result.returncode == 0, result.log[-3000:]
        assert result.fetched == ["/robots.txt", "/index.html", "/docs/page.html"]
        assert status(crawl_dir)["control"]["sitemaps"] == "0"
        refused = run_crawl(site, crawl_dir, ["sitemaps=1"], ON)
        assert refused.returncode == 1 and refused.fetched == []
        assert refused.log.strip().splitlines()[-1] == (
            "Error: crawl 'site' has -a sitemaps=0 (recorded when it started); this worker asks -a sitemaps=1: join "
            "it with -a sitemaps=0 (or without -a sitemaps), or start another crawl (-s CRAWL_NAME=...)")
    finally:
        stop_embedded_redis(crawl_dir)
