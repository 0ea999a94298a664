"""Indexes of terms are index pages, on every generator (issue 35, item 7):
a back-of-book index's entries ("term, section title") read as prose to
link density, and it may be the only page that links to some pages, so the
default crawl (``follow=index``) must follow it. What makes one is what an
index is: entries under single-letter headings in alphabetical order, most
of them linking to another page (``crawler.pagetypes.rules.term_index``).

Real pages of four generators, copied (gzipped) from Debian's documentation
packages into ``tests/data/terms`` (never the PostgreSQL or Python
documentation): Texinfo's concept indexes (octave, mit-scheme), Sphinx's
``genindex`` (flask) and a domain index (buildbot), gtk-doc's DocBook
index (goffice). Octave's concept index was typed info before: each entry
("addition: Arithmetic Ops") is as much term as link."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from crawler.pagetypes.classify import classify, classify_stats, page_type
from crawler.reading.html import parse_html
from crawler.pagetypes.features import page_features
from crawler.pagetypes.rules import INDEX, INFO, RuleTrust, term_index, thin_navigation
from crawler.reading.extract import analyze
from crawler.pagetypes.template import block_stats

DATA = Path(__file__).parent / "data" / "terms"
REAL = sorted(p.name[:-3] for p in DATA.glob("*.html.gz"))


# Where each page lies in its tree (its URL's path, as the crawler sees it).
PATHS = {
    "gtkdoc-goffice-gsf-index.html": "goffice-0.10/gsf-index.html",
    "sphinx-buildbot-bb-chsrc.html": "html/bb-chsrc.html",
    "sphinx-flask-genindex.html": "html/genindex.html",
    "texinfo-mit-scheme-Concept-Index.html": "mit-scheme-sos/Concept-Index.html",
    # As a server of /usr/share/doc serves it: deep in its tree.
    "texinfo-octave-Concept-Index.html": "usr/share/doc/octave/octave.html/Concept-Index.html",
}


def page_of(name: str):
    url = f"http://docs.test/{PATHS[name]}"
    return url, analyze(parse_html(gzip.decompress((DATA / f"{name}.gz").read_bytes())), url)


@pytest.mark.parametrize("name", REAL)
def test_a_real_index_of_terms_is_an_index_page(name: str) -> None:
    url, page = page_of(name)
    assert term_index(page.blocks)
    assert classify(url, page) == INDEX


def test_octaves_concept_index_was_typed_info_by_the_model_alone() -> None:
    """The case that failed before: served deep in a tree, the page-only
    model types it info (its score 0.23 against 0.25)."""
    url, page = page_of("texinfo-octave-Concept-Index.html")
    stats = block_stats(page.blocks, keyed=False)
    assert classify_stats(page_features(url, page), stats, None, thin=thin_navigation(page)) == INFO
    trust = RuleTrust()
    assert classify_stats(page_features(url, page), stats, None, trust=trust, terms=True) == INDEX
    assert trust.terms == 1


def entries(letter: str, n: int, linked: bool) -> str:
    rows = []
    for i in range(n):
        term = f"{letter}term{i} option"
        title = f"Chapter {i}. A section about the {letter}term{i} option and its uses"
        rows.append(f'<dt>{term}, <a class="indexterm" href="sec-{letter}{i}.html#id{i}">{title}</a></dt>'
                    if linked else f"<dt>{term}</dt><dd><p>{title}, explained at length in the words "
                                   "of a definition rather than a link to a section.</p></dd>")
    return "".join(rows)


def docbook_index(linked: bool = True, letters: str = "ABCDEFGHIJ") -> str:
    """A back-of-book index as DocBook XSL writes one (``div.index``,
    ``div.indexdiv`` with an ``h3`` letter and a ``dl`` of "term, link"
    entries, a "Symbols" division first); unlinked, a glossary of the same
    shape."""
    divs = "".join(f'<div class="indexdiv"><h3>{c}</h3><dl>{entries(c, 6, linked)}</dl></div>' for c in letters)
    return (f'<html><head><title>Index</title></head><body><div class="navheader"><a href="prev.html">Prev</a>'
            f' <a href="index.html">Home</a></div><div class="index"><h2 class="title">Index</h2>'
            f'<div class="indexdiv"><h3>Symbols</h3><dl><dt>$, <a href="sql.html">Dollar Quoting</a></dt></dl></div>'
            f"{divs}</div></body></html>")


def test_a_docbook_back_of_book_index_is_an_index_page_and_a_glossary_is_not() -> None:
    url = "http://book.test/bookindex.html"
    index = analyze(parse_html(docbook_index()), url)
    assert term_index(index.blocks)
    assert page_type(url, docbook_index()) == INDEX
    glossary = analyze(parse_html(docbook_index(linked=False)), url)
    assert not term_index(glossary.blocks)  # definitions under letters: a content page


@pytest.mark.parametrize(("letters", "expected"), [
    ("ABCDE", True),  # five letters in order
    ("ABCD", False),  # four: too few to tell an index
    ("EDCBA", False),  # not in alphabetical order
    ("AXBYCZDE", True),  # the longest run in order (A B C D E) counts
])
def test_the_letters_must_run_in_alphabetical_order(letters: str, expected: bool) -> None:
    page = analyze(parse_html(docbook_index(letters=letters)), "http://book.test/ix.html")
    assert term_index(page.blocks) is expected
