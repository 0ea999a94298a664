"""Languages in a crawl (issue 37): every page's ``lang`` (declared, checked
against the text), its hreflang ``alternates``, alternates queued when in
scope and in the crawl's languages, and ``-a languages=en,de`` keeping the
crawl to pages in those languages (others stored, their links not
followed). Exact fetches and what was stored."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import run_crawl, stop_embedded_redis
from tests.support.servers import start_server
from tests.test_language import DE, EN, FR

pytestmark = pytest.mark.slow


def page(lang: str | None, text: str, links: list[str] = (), head: str = "") -> str:
    # Each page its own order of the same words: the same language, no near duplicates.
    words = text.split()
    random.Random(text).shuffle(words)
    text = " ".join(words)
    attr = f' lang="{lang}"' if lang else ""
    items = "".join(f'<li><a href="{u}">{u}</a></li>' for u in links)
    return f"<html{attr}><head><title>{text[:20]}</title>{head}</head><body><p>{text}</p><ul>{items}</ul></body></html>"


@pytest.fixture
def site(tmp_path: Path):
    root = tmp_path / "www"
    server = start_server(tmp_path, hosts="127.0.0.1", root=root)
    alternates = "".join(f'<link rel="alternate" hreflang="{h}" href="{u}">' for h, u in (
        ("de", "/de/start.html"), ("fr", "/fr/start.html"), ("x-default", "/index.html"),
        ("not a tag!", "/x.html"), ("ja", "javascript:alert(1)"),
        ("es", server.url("/es/", host="127.0.0.2"))))
    files = {
        "robots.txt": "User-agent: *\nAllow: /\n",
        "index.html": page("en", EN + " index", ["/en/a.html", "/de/a.html", "/fr/a.html"], alternates),
        "en/a.html": page("de", EN + " a", ["/en/b.html"]),  # declared German, written in English
        "en/b.html": page(None, EN + " b"),
        "de/a.html": page("de", DE + " a", ["/de/b.html"]),
        "de/b.html": page("de", DE + " b"),
        "de/start.html": page("de", DE + " start"),
        "fr/a.html": page("fr", FR + " a", ["/fr/b.html"]),
        "fr/b.html": page("fr", FR + " b"),
        "fr/start.html": page("fr", FR + " start", ["/fr/c.html"]),
    }
    for path, body in files.items():
        f = root / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(body)
    try:
        yield server
    finally:
        server.stop()


def test_a_crawl_kept_to_its_languages(site, tmp_path):
    crawl_dir = tmp_path / "crawl"
    try:
        result = run_crawl(site, crawl_dir, [f"seeds={site.url('/index.html')}", "follow=all", "languages=en,de"])
        assert result.returncode == 0, result.log[-3000:]
        # fr/a.html is fetched (its language is known only then), its links are not followed;
        # fr/start.html, the French alternate, is not queued.
        assert Counter(result.fetched) == Counter(["/robots.txt", "/index.html", "/en/a.html", "/en/b.html",
                                                   "/de/a.html", "/de/b.html", "/de/start.html", "/fr/a.html"])
        with SQLiteStore(result.store_path) as store:
            pages = {p["url"].split(str(site.port), 1)[1]: p for p in store.iter_pages()}
        assert {u: p["lang"] for u, p in pages.items()} == {
            "/index.html": "en", "/en/a.html": "en", "/en/b.html": "en", "/de/a.html": "de", "/de/b.html": "de",
            "/de/start.html": "de", "/fr/a.html": "fr"}
        assert pages["/index.html"]["alternates"] == {
            "de": site.url("/de/start.html"), "fr": site.url("/fr/start.html"), "x-default": site.url("/index.html"),
            "es": site.url("/es/", host="127.0.0.2")}
        assert all(p["alternates"] is None for u, p in pages.items() if u != "/index.html")
        # The French page is stored with its links (edges), which were not followed.
        with SQLiteStore(result.store_path) as store:
            assert [x["url"] for x in store.outlinks(site.url("/fr/a.html"))] == [site.url("/fr/b.html")]
        for stat, n in (("lang/declared", 5), ("lang/identified", 1), ("lang/overruled", 1), ("lang/not_followed", 1),
                        ("lang/alternates_invalid", 2), ("lang/alternates_queued", 1)):
            assert f"'{stat}': {n}," in result.log or f"'{stat}': {n}}}" in result.log, stat

        st = json.loads(subprocess.run([sys.executable, "-m", "scrapy", "status", "--json", "-s",
                                        f"CRAWL_DIR={crawl_dir}"], cwd=ROOT, capture_output=True, text=True,
                                       timeout=60).stdout)
        assert st["control"]["languages"] == "de,en"
        refused = run_crawl(site, crawl_dir, ["languages=fr"])
        assert refused.returncode == 1 and refused.fetched == []
        assert refused.log.strip().splitlines()[-1] == (
            "Error: crawl 'site' has -a languages=de,en (recorded when it started); this worker asks -a languages=fr: "
            "join it with -a languages=de,en (or without -a languages), or start another crawl (-s CRAWL_NAME=...)")
    finally:
        stop_embedded_redis(crawl_dir)


def test_without_languages_every_alternate_in_scope_is_queued(site, tmp_path):
    crawl_dir = tmp_path / "crawl"
    try:
        result = run_crawl(site, crawl_dir, [f"seeds={site.url('/index.html')}", "follow=all"])
        assert result.returncode == 0, result.log[-3000:]
        assert Counter(result.fetched) == Counter(["/robots.txt", "/index.html", "/en/a.html", "/en/b.html",
                                                   "/de/a.html", "/de/b.html", "/de/start.html", "/fr/a.html",
                                                   "/fr/b.html", "/fr/start.html", "/fr/c.html"])
    finally:
        stop_embedded_redis(crawl_dir)


def test_a_site_that_declares_nothing_is_identified_until_its_language_is_clear(tmp_path):
    """An undeclared English index linking 40 undeclared English pages: the
    first 20 pages identified, then the site's language given, one page in
    16 identified again; the same site with ``-a languages=en`` has each of
    its pages identified."""
    root = tmp_path / "www"
    n = 40
    root.mkdir()
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    (root / "index.html").write_text(page(None, f"{EN} index", [f"/p{i}.html" for i in range(n)]))
    for i in range(n):
        (root / f"p{i}.html").write_text(page(None, f"{EN} page{i}"))
    server = start_server(tmp_path, hosts="127.0.0.1", root=root)
    try:
        for extra, how in (([], {"lang/identified": 21, "lang/site": 20}), (["languages=en"], {"lang/identified": 41})):
            crawl_dir = tmp_path / f"crawl{len(extra)}"
            try:
                result = run_crawl(server, crawl_dir, [f"seeds={server.url('/index.html')}", "follow=all", *extra])
                assert result.returncode == 0, result.log[-3000:]
                assert Counter(result.fetched) == Counter(["/robots.txt", "/index.html",
                                                           *(f"/p{i}.html" for i in range(n))])
                with SQLiteStore(result.store_path) as store:
                    assert [p["lang"] for p in store.iter_pages()] == ["en"] * (n + 1)
                for stat in ("lang/identified", "lang/site", "lang/declared", "lang/unknown"):
                    shown = f"'{stat}': {how[stat]}" if stat in how else f"'{stat}'"
                    assert (shown in result.log) == (stat in how), (stat, result.log[-2000:])
            finally:
                stop_embedded_redis(crawl_dir)
    finally:
        server.stop()
