"""Canonical links (issue 37): read from the markup and the Link header,
stored, acted on in scope, ignored when bad, and not trusted on a site that
misuses them. Pure parts first, then a crawl of a real server."""

from __future__ import annotations

from collections import Counter

import pytest
from scrapy.settings import Settings

from crawler.duplicates.canonical import LEARNING, MIN_PAGES, TRUSTED, UNTRUSTED, CanonicalTrust, link_header_canonical
from crawler.reading.extract import analyze
from crawler.items import PageItem
from crawler.store import SQLiteStore, open_store
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


def test_a_page_written_again_is_written_with_its_values_when_queued():
    """A first page typed again is yielded in one response's output and may
    reach the store after the same page put right by a later response: each
    write reads the page's values as they are then, so the last has them all."""
    first = PageItem(url="http://a.org/s/3", site="a.org", page_type="index", dup_of="http://a.org/")
    retyped = (setattr(first, "page_type", "info"), first.again())[1]
    first.dup_of = None  # the site's canonicals judged untrusted, later
    put_right = first.again()
    for write in (put_right, retyped):
        record = write.to_dict()
        assert (record["page_type"], record["dup_of"], "again_of" in record) == ("info", None, False)
    assert (retyped.typed_again, retyped.pending, first.typed_again) == (True, 0, False)


WORDS = "river mountain harbour lantern meadow orchard quarry tunnel valley window garden bridge".split()


def page(title: str, seed: int, head: str = "", links: tuple[str, ...] = (), own: bool = False) -> str:
    text = " ".join(WORDS[(seed * 7 + i * (seed % 5 + 2)) % len(WORDS)] for i in range(120)) + f" {title} {seed}"
    if own:  # words of its own: no page a near copy of another, whatever the order
        text = " ".join(f"{WORDS[i % len(WORDS)]}{seed}x{i}" for i in range(120))
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
        # a.html was a copy of b.html while the site was judged; the site's
        # canonicals are not trusted, so it is stored as a page of its own.
        assert (pages["/a.html"]["canonical"], pages["/a.html"]["dup_of"]) == (u("/b.html"), None)
        assert (pages["/c.html"]["canonical"], pages["/c.html"]["dup_of"]) == ("http://127.0.0.9:1/x.html", None)
        assert (pages["/d.html"]["canonical"], pages["/d.html"]["dup_of"]) == (None, None)
        assert pages["/b.html"]["canonical"] is None
        assert all(pages[p]["canonical"] == u("/index.html") for p in misused)
        # a.html and the first 18 M pages were learned from: the 20th page
        # counted (M19) found one URL the canonical of 19 of 20, and from
        # there the site's canonicals are not trusted; the 19 copies made
        # while it was judged are stored again as pages of their own.
        assert all(pages[p]["dup_of"] is None for p in misused)
        for stat, n in (("canonical/copy", 19), ("canonical/untrusted", 7), ("canonical/ignored", 1),
                        ("canonical/invalid", 1), ("canonical/put_right", 19)):
            assert f"'{stat}': {n}," in result.log, (stat, result.log[-3000:])
    finally:
        server.stop()
        stop_embedded_redis(crawl_dir)


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", "mongodb"])
def test_a_site_whose_every_page_names_its_home_as_canonical(tmp_path, frontier_settings, store, request):
    """The site of issue 48: 40 pages, each naming the home page as its
    canonical. The pages judged before the verdict (the home page's 12
    sections and 7 leaves) were copies of the home page while the site was
    judged; once it is found untrusted, they are pages of their own again,
    in either store. Their links were followed: the leaves, linked only from
    sections, are all fetched, each once."""
    root = tmp_path / "www"
    (root / "s").mkdir(parents=True)
    (root / "l").mkdir()
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    home = '<link rel="canonical" href="/index.html">'
    sections = [f"/s/{i}.html" for i in range(1, 13)]
    leaves = {s: [f"/l/{i}-{j}.html" for j in range(1, 4)] for i, s in enumerate(sections[:9], 1)}
    (root / "index.html").write_text(page("Home", 0, home, tuple(sections), own=True))
    for i, path in enumerate(sections, 1):
        (root / path.lstrip("/")).write_text(page(f"Section {i}", i, home, tuple(leaves.get(path, ())), own=True))
    for k, path in enumerate((p for ps in leaves.values() for p in ps), 13):
        (root / path.lstrip("/")).write_text(page(f"Leaf {k}", k, home, own=True))
    every = ["/index.html", *sections, *(p for ps in leaves.values() for p in ps)]
    assert len(every) == 40
    settings = dict(frontier_settings)
    if store == "mongodb":
        settings |= {"MONGO_URI": request.getfixturevalue("mongo_uri"), "MONGO_DATABASE": settings["CRAWL_NAME"]}
    server = start_server(tmp_path, hosts="127.0.0.1", root=root)
    crawl_dir = tmp_path / "crawl"
    try:
        result = run_crawl(server, crawl_dir, [f"seeds={server.url('/index.html')}", "follow=all"], settings)
        assert result.returncode == 0, result.log[-3000:]
        assert Counter(p for p in result.fetched if p != "/robots.txt") == Counter(every)
        with open_store(Settings({**settings, "CRAWL_DIR": str(crawl_dir), "MONGO_TIMEOUT": 10}), settings["CRAWL_NAME"],
                        create=False) as db:
            pages = {p["url"]: p for p in db.iter_pages() if p["state"] == "C"}
            if store == "mongodb":
                db.client.drop_database(settings["CRAWL_NAME"])
    finally:
        server.stop()
        stop_embedded_redis(crawl_dir)
    assert sorted(pages) == sorted(server.url(p) for p in every)
    assert {p["canonical"] for p in pages.values()} == {server.url("/index.html")}
    assert [(u, p["dup_of"]) for u, p in pages.items() if p["dup_of"] is not None] == [], (
        [ln for ln in result.log.splitlines() if "canonical/" in ln or "retype" in ln or "s/3.html" in ln or "page_type" in ln], result.fetched)
    # The 20th page that named another URL found the home page named by all
    # 20: the 19 before it were copies until then, and are put right.
    for stat, n in (("canonical/copy", 19), ("canonical/untrusted", 20), ("canonical/put_right", 19)):
        assert f"'{stat}': {n}," in result.log, (stat, result.log[-3000:])
