"""Where a page's links lead and what surrounds them. Pure logic, no
Scrapy.

``in_page`` tells a link to a place on the page itself (``#x``, or the
page's own URL with a fragment: javadoc's method summaries, a table of
contents of the page) from one to another page: ``crawler.reading.extract``
counts the first kind apart (``Block.frag_chars``), since they lead
nowhere a crawler goes. ``link_contexts`` gives each link's surroundings,
the text of its parent element (at most ``CONTEXT_CHARS`` characters,
reading at most ``CONTEXT_NODES`` elements), which a focused crawl scores
(``analyze(..., link_context=True)``).

``is_navigation`` tells a link that states the page's place in its
document, by its ``rel`` (``<link rel="next">`` in the head, ``<a
rel="up">``): HTML's link types for a series (``next``, ``prev``,
``first``, ``last``, ``start``) and for a document's structure (``up``,
``contents``, ``toc``, ``index``, ``top``, ``home``). The author declares
these links to be the way through the document, so the default crawl
follows them from every page, information pages too
(``crawler.following.follow.Follower.page_links``): a section whose own contents
page is linked from no page typed index (a chapter in a manual of its own,
an orphaned part of a tree) is still reached through the ``prev`` or
``up`` of one of its pages. ``nofollow`` among the rel's words wins.

No settings, no stats.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from urllib.parse import urljoin

from crawler.reading.html import clean

__all__ = ["CONTEXT_CHARS", "CONTEXT_NODES", "MAX_NAVIGATION", "NAVIGATION_RELS", "in_page", "is_navigation",
           "link_contexts", "own_file"]

# HTML's link types that place a page in its document: a series (HTML's
# next and prev; HTML 4's start, and first / last) and its structure (HTML
# 4's contents and index, and the up / top / home / toc that DocBook,
# gtk-doc and texinfo write). Not search, help, author, copyright,
# license, bookmark (a permalink to the page itself), stylesheet or icon:
# they say nothing of where the document goes.
NAVIGATION_RELS = frozenset({"next", "prev", "previous", "first", "last", "start", "begin",
                             "up", "top", "home", "contents", "toc", "index"})
MAX_NAVIGATION = 16  # navigation links kept a page (a generator writes 2-6; a hostile page thousands)


def is_navigation(rel: str | None) -> bool:
    """Whether a ``rel`` attribute's value names a navigation link type
    (``NAVIGATION_RELS``; space-separated, any case) without ``nofollow``."""
    if not rel:
        return False
    words = rel.lower().split()
    return "nofollow" not in words and not NAVIGATION_RELS.isdisjoint(words)


def own_file(url: str | None) -> str | None:
    """The last path segment of ``url`` ("" for a directory URL), the part
    of a relative href that names the page itself; None without a URL."""
    if not url:
        return None
    path = url.split("#", 1)[0].split("?", 1)[0]
    if "://" in path:
        path = path.split("://", 1)[1].partition("/")[2]
    return path.rsplit("/", 1)[-1]


def in_page(href: str, own_file: str | None, url: str | None) -> bool:
    """Whether ``href`` leads to a place on the page itself: "#x", or (with
    the page's URL known) the page's own address with a fragment. Only hrefs
    whose last segment names the page's file are resolved, so the cost is a
    string comparison for almost every link."""
    href = href.strip()
    if href.startswith("#"):
        return True
    if own_file is None or "#" not in href:
        return False
    target = href.split("#", 1)[0]
    if "?" in target or target.rsplit("/", 1)[-1] != own_file:
        return False
    try:
        return _same_document(url or "", target)
    except ValueError:
        return False


@lru_cache(maxsize=4096)
def _same_document(url: str, target: str) -> bool:
    joined = urljoin(url, target)
    return joined.split("#", 1)[0] == url.split("#", 1)[0]


CONTEXT_CHARS = 240
CONTEXT_NODES = 64  # elements of a link's parent read at most (a hostile page nests thousands of empty links)


def link_contexts(root: Any) -> list[str]:
    """Each link's surroundings: the text of its parent element, read only
    as far as needed (``CONTEXT_CHARS``, ``CONTEXT_NODES``), once a parent."""
    seen: dict[Any, str] = {}
    out = []
    for el in root.iter("a", "area"):
        if el.get("href") is None:
            continue
        parent = el.getparent()
        if parent is None or parent.tag in ("body", "html"):
            out.append("")
            continue
        got = seen.get(parent)
        if got is None:
            got = seen[parent] = _text_of(parent)
        out.append(got)
    return out


def _text_of(parent: Any) -> str:
    parts: list[str] = []
    size = 0
    for n, node in enumerate(parent.iter()):
        if n >= CONTEXT_NODES or size >= CONTEXT_CHARS:
            break
        if not isinstance(node.tag, str):
            continue  # comments, processing instructions
        for t in (node.text, node.tail if node is not parent else None):
            if t:
                parts.append(t)
                size += len(t)
    return clean("".join(parts))[:CONTEXT_CHARS]
