"""The default crawl (``-a follow=index``) reaches every page of a
documentation tree, pages linked only from a section's contents page or
from the back-of-book index included (issue 35, item 7), and a section
whose contents page only information pages link to, through its pages'
navigation links (issue 48, item 13): end to end, books served from disk
on 127.0.0.1, crawled as the quick start crawls, asserting exactly which
pages were fetched and how they were typed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from crawler.store import SQLiteStore
from tests.support.crawl import run_crawl, stop_embedded_redis
from tests.support.servers import start_server

pytestmark = pytest.mark.slow

WORDS = ("query planner index vacuum tuple page buffer lock snapshot heap table column schema "
         "server client backup replica statement trigger function cursor").split()

CHAPTERS = [f"ch{i:02d}.html" for i in range(1, 11)]
REFS = [f"ref-{i:02d}.html" for i in range(1, 13)]
LETTERS = "ABCDEFGH"
TERMS = [f"term-{c.lower()}.html" for c in LETTERS]  # linked from the book index only


def prose(seed: int, n: int = 220) -> str:
    return " ".join(WORDS[(seed * 5 + i * (seed % 7 + 3)) % len(WORDS)] for i in range(n))


def page(title: str, body: str, prev: str = "index.html", nxt: str = "index.html") -> str:
    """Every page wears the book's template: a navigation header and footer."""
    nav = (f'<div class="navheader"><table><tr><th colspan="3">The Book</th></tr><tr>'
           f'<td><a accesskey="p" href="{prev}">Prev</a></td><td><a accesskey="u" href="index.html">Up</a></td>'
           f'<td><a accesskey="n" href="{nxt}">Next</a></td></tr></table><hr></div>')
    foot = ('<div class="navfooter"><hr><table><tr><td><a href="index.html">Home</a></td>'
            '<td>Copyright the authors of the book, all rights reserved.</td></tr></table></div>')
    return f"<html><head><title>{title}</title></head><body>{nav}{body}{foot}</body></html>"


def build(root: Path) -> None:
    root.mkdir()
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    toc = "".join(f'<dt><span class="chapter"><a href="{c}">Chapter {i}. The {WORDS[i]} chapter</a></span></dt>'
                  for i, c in enumerate(CHAPTERS, 1))
    toc += ('<dt><span class="part"><a href="reference.html">Part II. Reference</a></span></dt>'
            '<dt><span class="index"><a href="bookindex.html">Index</a></span></dt>')
    (root / "index.html").write_text(page("The Book", f'<h1>The Book</h1><div class="toc"><dl class="toc">{toc}</dl></div>'))
    for i, name in enumerate(CHAPTERS, 1):
        paras = "".join(f"<p>{prose(i * 10 + k)}.</p>" for k in range(3))
        (root / name).write_text(page(f"Chapter {i}", f"<h1>Chapter {i}</h1>{paras}"))
    # A section contents page: each entry a name and a line of purpose (the
    # descriptions keep its link density low).
    rows = "".join(
        f'<dt><span class="refentrytitle"><a href="{r}">book_fn_{i}</a></span><span class="refpurpose"> — '
        f"{prose(i, 9)} for the {WORDS[i % len(WORDS)]} of a table</span></dt>" for i, r in enumerate(REFS, 1))
    (root / "reference.html").write_text(page("Part II. Reference", '<h1>Part II. Reference</h1><p>The functions '
                                              f'this book documents.</p><div class="toc"><dl class="toc">{rows}</dl>'
                                              "</div>"))
    for i, name in enumerate(REFS, 1):
        (root / name).write_text(page(f"book_fn_{i}", f"<h1>book_fn_{i}</h1><p>{prose(100 + i)}.</p>"
                                                      f"<p>{prose(200 + i)}.</p>"))
    # The back-of-book index: "term, section title" entries under letters.
    divs = ""
    for c, term_page in zip(LETTERS, TERMS):
        entries = "".join(f'<dt>{c.lower()}{WORDS[k]} {k}, <a class="indexterm" href="{CHAPTERS[k % 10]}">'
                          f"The {WORDS[k]} chapter</a></dt>" for k in range(4))
        entries += f'<dt>{c.lower()}-only term, <a class="indexterm" href="{term_page}">Where {c} is explained</a></dt>'
        divs += f'<div class="indexdiv"><h3>{c}</h3><dl>{entries}</dl></div>'
    (root / "bookindex.html").write_text(page("Index", f'<div class="index"><h1>Index</h1>{divs}</div>'))
    for i, name in enumerate(TERMS):
        (root / name).write_text(page(f"Term {LETTERS[i]}", f"<h1>Term {LETTERS[i]}</h1><p>{prose(300 + i)}.</p>"))


def crawl_pages(tmp_path: Path, root: Path, pages: list[str]) -> dict[str, str]:
    """Crawls the tree at ``root`` from ``/`` as the quick start does,
    asserts it fetched each of ``pages`` (paths from the root) exactly once
    and nothing else, and returns the type each page was stored with."""
    server = start_server(tmp_path, hosts="127.0.0.1", root=root)
    crawl_dir = tmp_path / "crawl"
    try:
        result = run_crawl(server, crawl_dir, [f"seeds={server.url('/')}"], {"LOG_LEVEL": "INFO"})
        assert result.returncode == 0, result.log[-3000:]
        every = ["/", *(f"/{p}" for p in pages)]
        assert Counter(result.fetched) == Counter(["/robots.txt", *every]), sorted(set(every) - set(result.fetched))
        with SQLiteStore(result.store_path) as store:
            return {"/" + p["url"][len(server.url("/")):]: p["page_type"] for p in store.iter_pages()}
    finally:
        server.stop()
        stop_embedded_redis(crawl_dir)


def test_the_default_crawl_reaches_pages_linked_only_from_contents_pages_and_the_index(tmp_path):
    root = tmp_path / "book"
    build(root)
    types = crawl_pages(tmp_path, root, ["index.html", *CHAPTERS, "reference.html", "bookindex.html", *REFS, *TERMS])
    assert {u: types[u] for u in ("/", "/reference.html", "/bookindex.html")} == {
        "/": "index", "/reference.html": "index", "/bookindex.html": "index"}
    assert {types[f"/{p}"] for p in [*CHAPTERS, *REFS, *TERMS]} == {"info"}


MANUAL = [f"ch{i:02d}.html" for i in range(1, 9)]
LEGACY = [f"legacy/part{i:02d}.html" for i in range(1, 9)]  # the legacy manual's chapters, in reading order


def sphinx_page(path: str, title: str, body: str, prev: str | None, nxt: str | None) -> str:
    """A Sphinx-shaped page: the reading order in the head (``<link
    rel="prev|next">``); its related bar's links carry access keys, not
    rels. ``prev``, ``nxt``: paths from the root."""
    up = "../" * path.count("/")
    head = "".join(f'<link rel="{rel}" title="{rel}" href="{up}{to}" />' for rel, to in (("prev", prev), ("next", nxt))
                   if to is not None)
    bar = (f'<div class="related" role="navigation"><ul><li><a href="{up}bookindex.html" accesskey="I">index</a></li>'
           f'<li><a href="{up}index.html" accesskey="U">The Manual</a></li></ul></div>')
    foot = '<div class="footer">Copyright the authors of the manual, all rights reserved.</div>'
    return f"<html><head><title>{title}</title>{head}</head><body>{bar}{body}{bar}{foot}</body></html>"


def build_manual(root: Path) -> None:
    """A manual whose legacy part is in no contents page but its own: its
    contents page, ``legacy/index.html``, is linked from one chapter's prose
    (an information page) and from the legacy chapters themselves; the back
    index links one legacy chapter (part04). From part04 on, only the
    chapters' ``prev``/``next`` lead to the rest of the legacy part."""
    root.mkdir()
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    rows = "".join(f'<li class="toctree-l1"><a class="reference internal" href="{c}">{i}. The {WORDS[i]} '
                   "chapter</a></li>" for i, c in enumerate(MANUAL, 1))
    rows += '<li class="toctree-l1"><a class="reference internal" href="bookindex.html">Index</a></li>'
    (root / "index.html").write_text(sphinx_page("index.html", "The Manual", f'<h1>The Manual</h1><div '
                                                 f'class="toctree-wrapper"><ul>{rows}</ul></div>', None, MANUAL[0]))
    order = ["index.html", *MANUAL]
    for i, name in enumerate(MANUAL, 1):
        paras = "".join(f"<p>{prose(i * 10 + k)}.</p>" for k in range(3))
        if i == 5:  # the legacy part's only way in from the manual: a sentence of prose
            paras += ('<p>The tools of old are described in <a class="reference external" '
                      'href="legacy/index.html">the legacy manual</a>, kept for old projects.</p>')
        (root / name).write_text(sphinx_page(name, f"Chapter {i}", f"<h1>Chapter {i}</h1>{paras}", order[i - 1],
                                             order[i + 1] if i < len(MANUAL) else None))
    (root / "legacy").mkdir()
    rows = "".join(f'<li class="toctree-l1"><a class="reference internal" href="{p[len("legacy/"):]}">{i}. '
                   f"The old {WORDS[i + 8]} tool</a></li>" for i, p in enumerate(LEGACY, 1))
    contents = f'<h1>The legacy manual</h1><div class="toctree-wrapper"><ul>{rows}</ul></div>'
    (root / "legacy/index.html").write_text(sphinx_page("legacy/index.html", "The legacy manual", contents, None,
                                                        LEGACY[0]))
    order = ["legacy/index.html", *LEGACY]
    for i, name in enumerate(LEGACY, 1):
        paras = "".join(f"<p>{prose(400 + i * 10 + k)}.</p>" for k in range(3))
        (root / name).write_text(sphinx_page(name, f"Legacy {i}", f"<h1>The old {WORDS[i + 8]} tool</h1>{paras}",
                                             order[i - 1], order[i + 1] if i < len(LEGACY) else None))
    # The back index: "term, chapter" entries under letters; one legacy chapter among them.
    divs = ""
    for c in LETTERS:
        entries = "".join(f'<dt>{c.lower()}{WORDS[k]} {k}, <a href="{MANUAL[k % 8]}">The {WORDS[k]} chapter</a></dt>'
                          for k in range(4))
        if c == "D":
            entries += f'<dt>distutils, <a href="{LEGACY[3]}">The old tool</a></dt>'
        divs += f'<h2>{c}</h2><dl>{entries}</dl>'
    (root / "bookindex.html").write_text(sphinx_page("bookindex.html", "Index", f"<h1>Index</h1>{divs}", None, None))


def test_the_default_crawl_reaches_a_part_whose_contents_only_information_pages_link_through_prev_and_next(
        tmp_path):
    root = tmp_path / "manual"
    build_manual(root)
    types = crawl_pages(tmp_path, root, ["index.html", *MANUAL, "bookindex.html", "legacy/index.html", *LEGACY])
    # The legacy part was reached through its chapters' navigation, not by
    # following the links of information pages: they stay information
    # pages, and the contents page they lead back to is an index page.
    assert {u: types[u] for u in ("/", "/bookindex.html", "/legacy/index.html")} == {
        "/": "index", "/bookindex.html": "index", "/legacy/index.html": "index"}
    assert {types[f"/{p}"] for p in [*MANUAL, *LEGACY]} == {"info"}
