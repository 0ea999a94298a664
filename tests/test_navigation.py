"""Navigation links (``crawler.reading.links.is_navigation``): a page's
``<link>`` and ``<a>`` whose rel places it in its document (next, prev,
up, contents ...), read by ``analyze`` and resolved by
``resolve_navigation``; the default crawl follows them from every page
(issue 48, item 13). The crawl itself: ``tests/test_reach.py``."""

from __future__ import annotations

import pytest

from crawler.reading.extract import analyze
from crawler.reading.resolve import resolve_navigation
from crawler.reading.links import MAX_NAVIGATION, is_navigation
from crawler.scope.urls import LinkResolver


@pytest.mark.parametrize("rel, expected", [
    ("next", True), ("prev", True), ("previous", True), ("NEXT", True), ("up", True), ("start", True),
    ("first", True), ("last", True), ("contents", True), ("toc", True), ("index", True), ("home", True),
    ("top", True), ("begin", True), ("prev chapter", True), ("  next\t", True),
    # Said to be navigation, but the author asks robots not to follow it.
    ("next nofollow", False), ("NOFOLLOW up", False),
    # Not the document's way through: the page's own permalink, search,
    # help, who wrote it, its licence, its look.
    ("bookmark", False), ("search", False), ("help", False), ("author", False), ("copyright", False),
    ("license", False), ("stylesheet", False), ("icon", False), ("shortcut icon", False),
    ("canonical", False), ("alternate", False), ("nofollow", False), ("noopener", False),
    ("nextpage", False), ("", False), (None, False),
])
def test_which_rels_are_navigation(rel, expected):
    assert is_navigation(rel) is expected


SPHINX_PAGE = """<html><head><title>Building</title>
<link rel="stylesheet" href="../_static/basic.css" />
<link rel="index" title="Index" href="../genindex.html" />
<link rel="search" title="Search" href="../search.html" />
<link rel="copyright" title="Copyright" href="../copyright.html" />
<link rel="next" title="Examples" href="examples.html" />
<link rel="prev" title="Sources" href="sourcedist.html" />
<link rel="canonical" href="https://docs.example/legacy/builtdist.html" />
</head><body><div class="related"><a href="../genindex.html" accesskey="I">index</a>
<a href="index.html" accesskey="U">Legacy</a></div>
<h1>Building</h1><p>How a built distribution is made, <a href="../other.html">elsewhere</a>.</p>
<p>Texinfo: <a href="../chapter.html" rel="up" accesskey="u">Up</a>
<a href="more.html" rel="next nofollow">more</a> <a href="examples.html" rel="next">again</a></p>
</body></html>"""


def test_analyze_reads_the_heads_and_the_bodys_navigation_links_once_each_in_order():
    page = analyze(SPHINX_PAGE, "http://127.0.0.1/legacy/builtdist.html")
    assert page.navigation == ["../genindex.html", "examples.html", "sourcedist.html", "../chapter.html"]
    # The body's links are all still links (recorded, followed from index pages).
    assert [h for h, _ in page.links] == ["../genindex.html", "index.html", "../other.html", "../chapter.html",
                                          "more.html", "examples.html"]


def test_resolved_against_the_base_without_the_page_itself_or_duplicates():
    page = analyze('<html><head><base href="http://127.0.0.1/b/"><link rel="next" href="n.html">'
                   '<link rel="up" href="/b/n.html"><link rel="prev" href="self.html">'
                   '<link rel="start" href="self.html#top">'
                   '<link rel="contents" href="javascript:void(0)"></head><body><p>x</p></body></html>',
                   "http://127.0.0.1/b/self.html")
    assert resolve_navigation(LinkResolver(), "http://127.0.0.1/b/self.html", page) == ["http://127.0.0.1/b/n.html"]


def test_a_page_of_navigation_links_keeps_a_few():
    links = "".join(f'<link rel="next" href="p{i}.html">' for i in range(1000))
    page = analyze(f"<html><head>{links}</head><body><p>x</p></body></html>")
    assert page.navigation == [f"p{i}.html" for i in range(MAX_NAVIGATION)]
