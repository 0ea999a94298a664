"""Canonical links (issue 37): read from the markup and the Link header,
stored, acted on in scope, ignored when bad, and not trusted on a site that
misuses them. Pure parts first, then a crawl of a real server."""

from __future__ import annotations

from collections import Counter

import pytest

from crawler.canonical import LEARNING, MIN_PAGES, TRUSTED, UNTRUSTED, CanonicalTrust, link_header_canonical
from crawler.extract import analyze
from crawler.store import SQLiteStore
from tests.support.crawl import run_crawl, stop_embedded_redis
from tests.support.servers import start_server


@pytest.mark.parametrize(("values", "target"), [
    (['<https://a.org/b>; rel="canonical"'], "https://a.org/b"),
    (['<https://a.org/x>; rel="preload", </b>; rel=canonical'], "/b"),
    (['<https://a.org/x>; rel="alternate canonical"'], "https://a.org/x"),
    (['<https://a.org/x>; rel="next"'], None),
    (["garbage", '<>; rel="canonical"'], None),
    ([], None),
])
def test_the_link_header(values, target):
    assert link_header_canonical(values) == target


@pytest.mark.parametrize(("html", "canonical"), [
    ('<html><head><link rel="canonical" href="/b.html"></head><body>x</body></html>', "/b.html"),
    ('<html><head><LINK REL="Canonical" HREF=" /b.html "></head></html>', "/b.html"),
    ('<html><head><link rel="stylesheet" href="/s.css"><link rel="canonical" href=""></head></html>', None),
    ('<html><head><link rel="canonical" href="/1"><link rel="canonical" href="/2"></head></html>', "/1"),
])
def test_the_markup(html, canonical):
    assert analyze(html.encode(), "http://a.org/a.html").canonical == canonical


def test_a_site_is_learned_then_trusted_or_not():
    trust = CanonicalTrust()
    verdicts = [trust.record("good", f"http://good/{i}") for i in range(MIN_PAGES + 3)]
    assert verdicts == [LEARNING] * (MIN_PAGES - 1) + [TRUSTED] * 4
    misused = [trust.record("bad", "http://bad/" if i % 3 else f"http://bad/{i}") for i in range(MIN_PAGES + 1)]
    assert misused == [LEARNING] * (MIN_PAGES - 1) + [UNTRUSTED] * 2
    assert trust.record("bad", "http://bad/other") == UNTRUSTED  # a verdict stands


WORDS = "river mountain harbour lantern meadow orchard quarry tunnel valley window garden bridge".split()


def page(title: str, seed: int, head: str = "", links: tuple[str, ...] = ()) -> str:
    text = " ".join(WORDS[(seed * 7 + i * (seed % 5 + 2)) % len(WORDS)] for i in range(120)) + f" {title} {seed}"
    items = "".join(f'<a href="{u}">{u}</a> ' for u in links)
    return f"<html><head><title>{title}</title>{head}</head><body><p>{text}</p><p>{items}</p></body></html>"


@pytest.mark.slow
def test_canonicals_in_a_crawl(tmp_path):
    root = tmp_path / "www"
    (root / "m").mkdir(parents=True)
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    misused = [f"/m/{i}.html" for i in range(1, 26)]
    (root / "index.html").write_text(page("Home", 0, links=("/a.html", "/c.html", "/d.html", *misused)))
    canon = lambda href: f'<link rel="canonical" href="{href}">'  # noqa: E731
    (root / "a.html").write_text(page("A", 1, canon("/b.html"), ("/only-from-a.html",)))
    (root / "b.html").write_text(page("B", 2))
    (root / "only-from-a.html").write_text(page("Only from A", 3))
    (root / "c.html").write_text(page("C", 4, canon("http://127.0.0.9:1/x.html")))
    (root / "d.html").write_text(page("D", 5, canon("javascript:alert(1)")))
    for i, path in enumerate(misused, 1):
        (root / path.lstrip("/")).write_text(page(f"M{i}", 10 + i, canon("/index.html")))
    server = start_server(tmp_path, hosts="127.0.0.1", root=root)
    crawl_dir = tmp_path / "crawl"
    try:
        result = run_crawl(server, crawl_dir, [f"seeds={server.url('/index.html')}"], {"LOG_LEVEL": "INFO"})
        assert result.returncode == 0, result.log[-3000:]
        # The canonical of a.html, linked from nowhere, is fetched; a.html's
        # own link is followed (the site is still being learned); the other
        # site's URL is not fetched; every page of the misusing template is.
        expected = ["/index.html", "/a.html", "/c.html", "/d.html", *misused, "/b.html", "/only-from-a.html"]
        assert Counter(p for p in result.fetched if p != "/robots.txt") == Counter(expected)
        assert set(result.hosts) == {"127.0.0.1"}
        u = server.url
        with SQLiteStore(result.store_path) as store:
            pages = {p["url"][len(u("")):]: p for p in store.iter_pages()}
        assert (pages["/a.html"]["canonical"], pages["/a.html"]["dup_of"]) == (u("/b.html"), u("/b.html"))
        assert (pages["/c.html"]["canonical"], pages["/c.html"]["dup_of"]) == ("http://127.0.0.9:1/x.html", None)
        assert (pages["/d.html"]["canonical"], pages["/d.html"]["dup_of"]) == (None, None)
        assert pages["/b.html"]["canonical"] is None
        assert all(pages[p]["canonical"] == u("/index.html") for p in misused)
        # a.html and the first 18 M pages were learned from: the 20th page
        # counted (M19) found one URL the canonical of 19 of 20, and from
        # there the site's canonicals are not trusted.
        assert [p for p in misused if pages[p]["dup_of"] == u("/index.html")] == misused[:18]
        assert all(pages[p]["dup_of"] is None for p in misused[18:])
        for stat, n in (("canonical/copy", 19), ("canonical/untrusted", 7), ("canonical/ignored", 1),
                        ("canonical/invalid", 1)):
            assert f"'{stat}': {n}," in result.log, (stat, result.log[-3000:])
    finally:
        server.stop()
        stop_embedded_redis(crawl_dir)
