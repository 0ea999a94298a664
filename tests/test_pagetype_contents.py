"""Contents pages of a section are typed index, on real pages of three
generators copied (gzipped) from Debian's documentation packages into
``tests/data/contents`` (never the PostgreSQL or Python documentation): a
DocBook XSL part's table of contents of refentries, each a name and a
line of purpose (the kind of page the PostgreSQL manual's SPI functions
hide behind); gtk-doc's chapter listing its sections, each with a line of
purpose; a Doxygen class's list of all its members, each a link to where
it is documented. Their rows' descriptions keep their link density low,
and the model took the first two kinds for prose
(``crawler.pagetypes.template.contents_list``; the Doxygen page the model typed
index here already, with this small template, but info in the bench's
crawl order). Ordinary content pages of the same trees stay information
pages.

Each page is typed as the crawler types it: with its site's template
learned from the tree's first pages in crawl order (``pages.json``:
``template``), by ``classify_stats`` with a ``RuleTrust``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from crawler.pagetypes.classify import classify_stats
from crawler.pagetypes.features import page_features
from crawler.pagetypes.rules import INDEX, INFO, RuleTrust, thin_navigation
from crawler.reading.extract import analyze
from crawler.pagetypes.template import LocalTemplates, block_keys, block_stats, contents_list, contents_rows

DATA = Path(__file__).parent / "data" / "contents"
TREES = json.loads((DATA / "pages.json").read_text())


def url_of(tree: str, rel: str) -> str:
    return f"http://{tree}.docs.test/{rel}"


def typed(tree: str, rel: str) -> tuple[str, bool]:
    """The type the crawler gives ``rel`` after the tree's template pages,
    and whether it is a contents list."""
    templates, trust = LocalTemplates(), RuleTrust()
    for page_rel in [*TREES[tree]["template"], rel]:
        url = url_of(tree, page_rel)
        page = analyze(gzip.decompress((DATA / tree / f"{page_rel}.gz").read_bytes()), url)
        keys = block_keys(page.blocks)
        known = templates.observe(tree, keys).template(keys, templates.policy)
        stats = block_stats(page.blocks)
        kind = classify_stats(page_features(url, page), stats, known, None, thin_navigation(page), trust, tree)
    assert known is not None  # the template is known by then, as in a crawl
    return kind, contents_list(stats, known)


CONTENTS = [(tree, rel) for tree, pages in TREES.items() for rel in pages["contents"]]
INFO_PAGES = [(tree, rel) for tree, pages in TREES.items() for rel in pages["info"]]


@pytest.mark.parametrize(("tree", "rel"), CONTENTS)
def test_a_section_contents_page_is_an_index_page(tree: str, rel: str) -> None:
    assert typed(tree, rel) == (INDEX, True)


@pytest.mark.parametrize(("tree", "rel"), INFO_PAGES)
def test_a_content_page_of_the_same_tree_stays_an_information_page(tree: str, rel: str) -> None:
    assert typed(tree, rel) == (INFO, False)


def test_contents_rows_count_rows_led_by_a_link_to_another_page() -> None:
    # (key, size, link chars, in-page link chars, opens with a link, navigation markup)
    row = ("r", 60, 20, 0, True, False)
    assert contents_rows([row] * 8, frozenset()) == (8, 1.0)
    # a member summary's row links to the page itself: not a contents row
    assert contents_rows([("m", 60, 20, 10, True, False)] * 8, frozenset()) == (0, 0.0)
    # "term, link" rows, and rows longer than ROW_CHARS, are not counted
    assert contents_rows([("t", 60, 20, 0, False, False), ("p", 241, 20, 0, True, False)], frozenset()) == (0, 0.0)
    # the template's blocks are not the page's own
    assert contents_rows([row] * 8 + [("p", 480, 0, 0, False, False)], frozenset()) == (8, 0.5)
    assert contents_rows([row] * 8 + [("p", 480, 0, 0, False, False)], frozenset({"p"})) == (8, 1.0)


def test_a_contents_list_needs_eight_rows_and_most_of_the_text() -> None:
    row = ("r", 60, 20, 0, True, False)
    prose = ("p", 60, 0, 0, False, False)
    assert contents_list([row] * 8 + [prose] * 5, frozenset())  # 480 of 780: 0.62
    assert not contents_list([row] * 7, frozenset())
    assert not contents_list([row] * 8 + [prose] * 6, frozenset())  # 480 of 840: 0.57
