"""Sitemaps in a crawl (issue 37): robots.txt naming a sitemap index and a
text sitemap, a gzipped urlset, pages reachable only through sitemaps,
listed URLs out of location, denied and off scope, an index naming itself,
nesting past the limit, an HTML page and a gzip bomb posing as sitemaps.
An index that loops back is read once. Exact fetches (the server's log), their order, what was stored, and what
``scrapy status`` counts; then two workers on one crawl, and a crawl with
``-a sitemaps=0``. Issue 48: a site without a sitemap shows no error
anywhere (status, progress line, metrics, store, export), and a ``-a
scope=prefix`` crawl reads the site's root sitemaps."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pytest

from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import crawl_cmd, run_crawl, stop_embedded_redis, until
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


def status_text(crawl_dir: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "scrapy", "status", "-s", f"CRAWL_DIR={crawl_dir}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> dict[str, float]:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


PROGRESS = re.compile(r"Progress: (\d+) pages .*, errors (\d+) \(cluster (\d+) pages, (\d+) errors\)(.*) \(at close\)")


def progress_at_close(log: str) -> tuple[int, ...]:
    """(pages, errors, cluster pages, cluster errors) of the last progress line, and its tail."""
    found = PROGRESS.findall(log)
    assert found, log[-3000:]
    return (*(int(x) for x in found[-1][:4]), found[-1][4])


def test_a_site_without_a_sitemap_shows_no_error_anywhere(tmp_path):
    """No ``Sitemap:`` line in robots.txt and no /sitemap.xml (404): read as
    absent, which is no error in ``scrapy status`` (text and --json), the
    progress line, the Prometheus metrics, the store or ``scrapy export``.
    A sitemap that robots.txt names but that 404s is a real failure: the
    sitemaps' line and the errors section say so, the pages' errors do not."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    (root / "index.html").write_text(html("home", ["/a.html", "/b.html"]))
    (root / "a.html").write_text(html("a"))
    (root / "b.html").write_text(html("b"))
    server = start_server(tmp_path, hosts="127.0.0.1", root=root)
    crawl_dir = tmp_path / "crawl"
    port = free_port()
    # Figures sampled every second (else every 10 s: the wait for the
    # metrics to show the crawl's end took 25 s).
    settings = {**ON, "FRONTIER_WAIT_FOR_SEEDS": True, "PROMETHEUS_PORT": port, "PROGRESS_INTERVAL": 1}
    mark = server.mark()
    worker = subprocess.Popen(crawl_cmd([f"seeds={server.url('/index.html')}"], settings, crawl_dir), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # The worker waits for seeds once the site is crawled: its metrics then.
        until(lambda: len(server.requests(mark)) == 5 and status(crawl_dir)["frontier"]["leased"] == 0
              and scrape(port)["crawler_cluster_pages_total"] == 3, timeout=90, what="the crawl's end")
        metrics = scrape(port)
        assert {k: metrics[k] for k in ("crawler_pages_total", "crawler_errors_total", "crawler_cluster_pages_total",
                                        "crawler_cluster_errors_total")} == {
            "crawler_pages_total": 3, "crawler_errors_total": 0, "crawler_cluster_pages_total": 3,
            "crawler_cluster_errors_total": 0}
        assert metrics["crawler_sitemap_errors_total"] == metrics["crawler_cluster_sitemap_errors_total"] == 0
        stop = subprocess.run([sys.executable, "-m", "scrapy", "stop", "-s", f"CRAWL_DIR={crawl_dir}"], cwd=ROOT,
                              capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0, stop.stderr
        log, _ = worker.communicate(timeout=60)
        assert worker.returncode == 0, log[-3000:]
        assert sorted(str(r["path"]) for r in server.requests(mark)) == [
            "/a.html", "/b.html", "/index.html", "/robots.txt", "/sitemap.xml"]
        assert "'sitemap/absent': 1" in log
        *figures, tail = progress_at_close(log)
        assert figures == [3, 0, 3, 0] and "sitemap" not in tail, tail

        st = status(crawl_dir)
        assert st["sitemaps"] == {"read": 0, "errors": 0, "listed": 0, "taken": 0}
        assert (st["totals"]["pages"], st["totals"]["errors"], st["errors"], st["errors_total"]) == (3, 0, {}, 0)
        assert st["nodes"][0]["errors"] == 0
        text = status_text(crawl_dir)
        assert "3 pages, 0 errors" in text and "sitemaps:" not in text, text
        assert "errors by reason" not in text and "HttpError" not in text, text

        with SQLiteStore(crawl_dir / "site.sqlite3") as store:
            assert sorted((p["url"], p["state"]) for p in store.iter_pages()) == [
                (server.url(p), "C") for p in ("/a.html", "/b.html", "/index.html")]
        out = tmp_path / "pages.jsonl"
        export = subprocess.run([sys.executable, "-m", "scrapy", "export", "-o", str(out),
                                 "-s", f"CRAWL_DIR={crawl_dir}"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert export.returncode == 0, export.stderr
        assert sorted((p["url"], p["state"], p["error"]) for p in map(json.loads, out.read_text().splitlines())) == [
            (server.url(p), "C", None) for p in ("/a.html", "/b.html", "/index.html")]

        # robots.txt names a sitemap that is not there: a real failure, as such.
        (root / "robots.txt").write_text("User-agent: *\nAllow: /\nSitemap: /maps/gone.xml\n")
        named_dir = tmp_path / "named"
        result = run_crawl(server, named_dir, [f"seeds={server.url('/index.html')}", "follow=all"],
                           {**ON, "CONCURRENT_REQUESTS": 1})
        assert result.returncode == 0, result.log[-3000:]
        assert sorted(result.fetched) == ["/a.html", "/b.html", "/index.html", "/maps/gone.xml", "/robots.txt"]
        assert f"WARNING: Sitemap {server.url('/maps/gone.xml')}: HTTP 404\n" in result.log
        *figures, tail = progress_at_close(result.log)
        assert figures == [3, 0, 3, 0] and tail.startswith("; sitemaps failed 1"), tail
        st = status(named_dir)
        assert st["sitemaps"] == {"read": 0, "errors": 1, "listed": 0, "taken": 0}
        assert (st["totals"]["pages"], st["totals"]["errors"], st["errors"]) == (3, 0, {"sitemap": 1})
        text = status_text(named_dir)
        assert "3 pages, 0 errors" in text and "\nsitemaps: 0 read, 1 failed, 0 URLs listed, 0 taken\n" in text, text
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.communicate()
        server.stop()
        stop_embedded_redis(tmp_path)


@pytest.mark.parametrize("scope", ["prefix", "host"])
def test_a_prefix_crawl_reads_the_sites_root_sitemaps_and_takes_the_urls_under_its_prefix(tmp_path, scope):
    """``-a scope=prefix``: the sitemaps robots.txt names (or /sitemap.xml)
    sit at the site's root, outside the prefix, and are read all the same,
    with the index's files on its host (one on another host is off its
    location, as in any scope); the prefix keeps the URLs they list
    to those under it. Pages only the sitemaps list are found. The same
    site under ``-a scope=host`` takes every URL listed."""
    root = tmp_path / "www"
    server = start_server(tmp_path, hosts="127.0.0.1", root=root)
    u = server.url
    files = {
        "robots.txt": "User-agent: *\nAllow: /\nSitemap: /sitemap_index.xml\n",
        "sitemap_index.xml": index(u("/maps/docs.xml"), u("/maps/other.xml", host="127.0.0.2")),
        "maps/docs.xml": urlset((u("/docs/hidden.html"), "<changefreq>daily</changefreq>"),
                                (u("/docs/deep/only.html"), ""), (u("/blog/listed.html"), ""), (u("/index.html"), "")),
        "sitemap.xml": urlset((u("/docs/fallback.html"), ""), (u("/other/x.html"), "")),
        "docs/intro.html": html("intro", ["/docs/a.html", "/index.html"]),
        "docs/a.html": html("a"),
        "docs/hidden.html": html("hidden"),
        "docs/deep/only.html": html("only"),
        "docs/fallback.html": html("fallback"),
        "blog/listed.html": html("listed"),
        "other/x.html": html("x"),
        "index.html": html("home"),
    }
    for path, body in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body)
    args = [f"seeds={u('/docs/intro.html')}", f"scope={scope}", "follow=all"]
    in_prefix = ["/docs/intro.html", "/docs/a.html", "/docs/hidden.html", "/docs/deep/only.html"]
    pages = in_prefix if scope == "prefix" else [*in_prefix, "/index.html", "/blog/listed.html"]
    try:
        result = run_crawl(server, tmp_path / "crawl", args, ON)
        assert result.returncode == 0, result.log[-3000:]
        assert Counter(result.fetched) == Counter(["/robots.txt", "/sitemap_index.xml", "/maps/docs.xml", *pages])
        with SQLiteStore(result.store_path) as store:
            stored = {p["url"]: p for p in store.iter_pages()}
        assert sorted(stored) == sorted(u(p) for p in pages)
        hidden = stored[u("/docs/hidden.html")]
        assert (hidden["in_sitemap"], hidden["changefreq"], hidden["referer"]) == (True, "daily", u("/maps/docs.xml"))
        out_of_scope = 2 if scope == "prefix" else 0
        for stat, n in (("sitemap/read", 2), ("sitemap/urls_listed", 4), ("sitemap/urls_taken", 4 - out_of_scope),
                        ("sitemap/urls_off_location", 1), ("sitemap/off_scope", 0),
                        ("sitemap/urls_out_of_scope", out_of_scope)):
            assert (f"'{stat}': {n}," in result.log or f"'{stat}': {n}}}" in result.log) == bool(n), stat
        st = status(tmp_path / "crawl")
        assert st["sitemaps"] == {"read": 2, "errors": 0, "listed": 4, "taken": 4 - out_of_scope}
        # Sitemap files read are no pages, here as in the crawl's counts.
        assert (st["totals"]["pages"], progress_at_close(result.log)[:4]) == (len(pages), (len(pages), 0, len(pages), 0))

        # robots.txt names none: /sitemap.xml at the root, read whatever the scope.
        (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
        fallback = run_crawl(server, tmp_path / "fallback", args, ON)
        assert fallback.returncode == 0, fallback.log[-3000:]
        listed = ["/docs/fallback.html"] if scope == "prefix" else ["/docs/fallback.html", "/other/x.html"]
        assert Counter(fallback.fetched) == Counter(["/robots.txt", "/sitemap.xml", "/docs/intro.html", "/docs/a.html",
                                                     *listed, *(["/index.html"] if scope == "host" else [])])
    finally:
        server.stop()
        stop_embedded_redis(tmp_path)
