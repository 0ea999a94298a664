"""One pass over a page's HTML: links, title, main text, abstract, robots
directives and the features the page classifier reads. Pure logic, no Scrapy.

The page is parsed once with lxml (``crawler.reading.html``; bytes are decoded
by ``crawler.reading.encoding.decode_html`` first) and walked once
(``lxml.etree.iterwalk``, iterative, so hostile nesting cannot overflow
the Python stack). Text is cut into blocks at block-level tags; a block's
share of link text and whether it sits in navigation (``nav``, ``header``,
``footer``, ``aside``, or a class/id such as ``menu`` or ``sidebar``)
decide whether it belongs to the main text. That main text is what the
SimHash of a later stage fingerprints, so the same article framed by
different navigation reads the same. The head is read by
``crawler.reading.head``; where links lead and what surrounds them, by
``crawler.reading.links``.

Any string or bytes is a page: ``analyze`` never raises on control
characters, noncharacters or lone surrogates (``crawler.reading.html``).
Text, titles and anchors come out without them; hrefs are kept as
written, for the URL parser to read as a browser does.

No settings, no stats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

import lxml.etree

from crawler.reading.html import STRING, UNSAFE, clean, parse_html, scrub, scrub_tree
from crawler.reading.head import read_head
from crawler.reading.content import main_content
from crawler.reading.figures import LONG_BLOCK
from crawler.reading.figures import abstract as _abstract
from crawler.reading.figures import page_figures as _features
from crawler.reading.metadata import read_metadata
from crawler.reading.links import MAX_NAVIGATION, in_page, is_navigation, link_contexts, own_file

__all__ = ["Block", "LONG_BLOCK", "Page", "analyze"]

SKIP_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "iframe", "object",
     "embed", "canvas", "select", "textarea", "head"}
)
BLOCK_TAGS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "br", "caption", "center",
     "dd", "details", "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure",
     "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "html",
     "li", "main", "menu", "nav", "ol", "p", "pre", "section", "summary", "table",
     "tbody", "td", "tfoot", "th", "thead", "tr", "ul"}
)
BOILER_TAGS = frozenset({"nav", "header", "footer", "aside", "form", "menu"})
_BOILER_ATTR = re.compile(
    r"(?:^|[\s_-])(?:nav|navbar|navigation|menu|footer|sidebar|side-bar|breadcrumbs?|"
    r"cookie|banner|share|social|related|widget|toolbar|masthead|pagination|pager)"
    r"(?:$|[\s_-])",
    re.I,
)
_CART = re.compile(r"\badd to (?:cart|bag|basket|trolley)\b", re.I)
_PRICE = re.compile(r"(?:[$€£¥]\s?\d[\d,]*(?:\.\d\d)?|\d[\d,]*(?:\.\d\d)?\s?(?:USD|EUR|GBP|€))")
# _PRICE where no currency follows a number anywhere in the text: the same
# matches (_PRICE's second branch cannot match), without trying that branch
# at every digit of a page whose "$" is a shell prompt.
_PRICE_PREFIX = re.compile(r"[$€£¥]\s?\d[\d,]*(?:\.\d\d)?")
_SUFFIX_HINTS = ("USD", "EUR", "GBP", "€")  # what _PRICE's second branch needs
_PREFIX_HINTS = ("$", "£", "¥")  # and its first, besides "€"
REPEAT_TAGS = frozenset({"li", "div", "article", "tr", "section"})
NOSCRIPT_PAGE = 500  # characters of text that make a <noscript> the page's own content


@dataclass(slots=True)
class Block:
    text: str
    link_chars: int  # characters of link text, in-page links included
    boiler: bool
    tag: str
    # Of ``link_chars``, those of links to a place on the same page ("#x", or
    # the page's own URL with a fragment: javadoc's method summaries,
    # rustdoc's method lists, a table of contents of the page): they lead
    # nowhere a crawler goes, so they are not navigation.
    frag_chars: int = 0
    # The block opens with a link to another page: a row of a link list
    # (a menu entry, a table of contents line, a summary table's name cell).
    lead_link: bool = False
    # With ``analyze(..., link_context=True)``: the block's text without its
    # links' text (None: the same as ``text``).
    plain: str | None = None


@dataclass(slots=True)
class Page:
    """What the crawler keeps of one HTML page."""

    title: str = ""
    text: str = ""
    abstract: str = ""
    links: list[tuple[str, str]] = field(default_factory=list)  # (href, anchor)
    base_href: str | None = None
    canonical: str | None = None  # <link rel="canonical">'s href, as written
    lang: str | None = None  # the declared language, as written (crawler/reading/head.py)
    alternates: list[tuple[str, str]] = field(default_factory=list)  # (hreflang, href), as written
    # hrefs of <link> and <a> whose rel places the page in its document
    # (next, prev, up, contents ...: crawler.reading.links.is_navigation), as written
    navigation: list[str] = field(default_factory=list)
    robots: frozenset[str] = frozenset()
    features: dict[str, float] = field(default_factory=dict)
    ld_types: frozenset[str] = frozenset()
    h1: str = ""
    blocks: list[Block] = field(default_factory=list)  # the text's blocks, in page order
    # With ``analyze(..., link_context=True)``: each link's surroundings (the
    # text of its parent element, at most CONTEXT_CHARS), as ``links``.
    link_contexts: list[str] = field(default_factory=list)
    # ... and the main text without the text of its links: what the page
    # itself says (a focused crawl scores it; a list of links about a topic
    # is not a page about it).
    own_text: str = ""
    # The page's main content (crawler.reading.content): its text and its
    # Markdown (the same words), and what the page says about itself for
    # machines (crawler.reading.metadata). Empty when analyze was asked not
    # to read them.
    main: str = ""
    markdown: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)

def _is_boiler(el: Any, tag: str, title_path: frozenset[Any]) -> bool:
    """Navigation by its tag, role, class or id. ``title_path``: the
    elements that hold the page's first h1."""
    if tag in BOILER_TAGS:
        return True
    role = el.get("role")
    if role in ("navigation", "banner", "contentinfo", "complementary", "menu"):
        return True
    cls = el.get("class") or ""
    if _boiler_value(cls):
        # Classes are for styling, and themes name the page's own wrappers
        # after the navigation beside them: the Read the Docs theme's
        # "wy-nav-content" holds the whole page, as do WordPress's body
        # classes and layouts' "container sidebar-right" (a quarter of
        # WCXB's web pages had all their text in such a wrapper). The page
        # itself, and a wrapper holding its title and a paragraph, are not
        # navigation.
        if tag in ("html", "body"):
            return False
        return not (el in title_path and el.find(".//p") is not None)
    # Generators name the content's container after the page (Sphinx: id
    # "topics-pagination", "fields-related"): an id that reads like
    # navigation but holds the page's title is the page, not its menu
    # (the Django manual's pages on pagination lost all their text).
    return _boiler_value(el.get("id") or "") and el.find(".//h1") is None


def _boiler_value(attrs: str) -> bool:
    if len(attrs) > 256:  # kept out of the cache: a hostile page could fill it with megabytes
        return _BOILER_ATTR.search(attrs) is not None
    return len(attrs) > 1 and _boiler_attrs(attrs)


# A site's template repeats its class lists on every page (and a page within
# itself): remembered, the regex runs for one in four of them on real pages.
@lru_cache(maxsize=16384)
def _boiler_attrs(attrs: str) -> bool:
    return _BOILER_ATTR.search(attrs) is not None


# Markers written into the tree so that lxml's C code can flatten it in one
# itertext() pass: Unicode noncharacters (U+FDD0...), which are valid in XML
# text and never occur in interchange text.
_BLOCK = "\ufdd0"
_LINK_OPEN, _LINK_CLOSE = "\ufdd1", "\ufdd2"
_BOIL_OPEN, _BOIL_CLOSE = "\ufdd3", "\ufdd4"
_H1 = "\ufdd5"
_FRAG_OPEN, _FRAG_CLOSE = "\ufdd6", "\ufdd7"  # a link to a place on the same page
_LINK_SPLIT = re.compile("([\ufdd1\ufdd2\ufdd6\ufdd7])")
_EDGE = " \t\n\r\f\v\ufdd3\ufdd4\ufdd5"

_HEADING_LINKS = lxml.etree.XPath(
    "count(//h1//a[@href] | //h2//a[@href] | //h3//a[@href] | //h4//a[@href] | "
    "//h5//a[@href] | //h6//a[@href])"
)


def analyze(html: str | bytes | Any, url: str | None = None, link_context: bool = False,
            content: bool = True, metadata: bool = True) -> Page:
    """Analyse a page given as text, bytes or an lxml root (which is modified).
    With the page's ``url``, links to its own URL with a fragment count as
    in-page links (``Block.frag_chars``), as ``#x`` links always do. With
    ``link_context``, each link's surroundings too (``Page.link_contexts``:
    a focused crawl reads them). With ``content``, the main content
    (``Page.main``, ``Page.markdown``); with ``metadata``, ``Page.metadata``."""
    root = parse_html(html) if isinstance(html, (str, bytes)) else html
    page = Page()
    if root is None:
        page.features = _features([], 0, {}, 0)
        return page
    head = read_head(root)
    page.title, page.robots, page.ld_types, page.base_href = head.title, head.robots, head.ld_types, head.base_href
    page.canonical, page.lang, page.alternates = head.canonical, head.lang, head.alternates
    page.navigation = head.navigation
    if metadata:
        page.metadata = read_metadata(root, url)
    # What a client without scripts is shown: a <noscript> holding a page's
    # worth of text (Discourse serves its topics' posts so) is the page; the
    # rest ("enable JavaScript", a tracking pixel) goes with the scripts.
    for el in root.iter("noscript"):
        if len(cast(str, STRING(el))) >= NOSCRIPT_PAGE:
            el.tag = "div"
    lxml.etree.strip_elements(root, *SKIP_TAGS, with_tail=False)
    # One check of all the text, and the rare page that needs it cleaned:
    # cheaper than checking each string written back below.
    if UNSAFE.search(cast(str, STRING(root))) is not None:
        scrub_tree(root)
    if content:
        # Before the links and blocks are marked below: the markers are not text.
        rendered = main_content(root, url)
        page.main, page.markdown = rendered.text, rendered.markdown

    counts: dict[str, int] = {}
    repeats: dict[tuple[str, str], int] = {}
    for el in root.iter(*_COUNTED_TAGS):
        tag = el.tag
        counts[tag] = counts.get(tag, 0) + 1
        if tag in REPEAT_TAGS:
            cls = el.get("class")
            if cls:
                key = (tag, cls)
                repeats[key] = repeats.get(key, 0) + 1
    counts["heading_link"] = int(cast(float, _HEADING_LINKS(root)))

    links = page.links
    own_file_name = own_file(url)
    if link_context:
        # Before the links are marked below: their markers are not text.
        page.link_contexts = link_contexts(root)
    for el in root.iter("a", "area"):
        href = el.get("href")
        if href is None:
            continue
        if el.tag == "area":
            links.append((href, clean(scrub(el.get("alt") or ""))))
            continue
        text = el.text if len(el) == 0 else cast(str, STRING(el))
        rel = el.get("rel")
        if (rel is not None and len(page.navigation) < MAX_NAVIGATION and is_navigation(rel)
                and href not in page.navigation):
            page.navigation.append(href)
        links.append((href, clean(text or "") or clean(scrub(el.get("title") or ""))))
        if in_page(href, own_file_name, url):
            el.text = _FRAG_OPEN + (el.text or "")
            el.tail = _FRAG_CLOSE + (el.tail or "")
        else:
            el.text = _LINK_OPEN + (el.text or "")
            el.tail = _LINK_CLOSE + (el.tail or "")
    title = root.find(".//h1")
    title_path = frozenset(title.iterancestors()) if title is not None else frozenset()
    for el in root.iter(*BLOCK_TAGS):
        tag = el.tag
        opening = _BLOCK
        closing = _BLOCK
        if _is_boiler(el, tag, title_path):
            opening += _BOIL_OPEN
            closing = _BOIL_CLOSE + _BLOCK
        if tag == "h1":
            opening += _H1
        el.text = opening + (el.text or "")
        el.tail = closing + (el.tail or "")

    blocks, h1_before_para = _blocks(cast(str, STRING(root)), link_context)
    counts["h1_before_para"] = h1_before_para
    page.blocks = blocks
    main = [b for b in blocks if not b.boiler and b.link_chars * 2 < len(b.text)]
    if not main:
        main = [b for b in blocks if b.link_chars * 2 < len(b.text)] or blocks
    page.text = "\n".join(b.text for b in main)
    if link_context:
        page.own_text = "\n".join(t for b in main if (t := b.text if b.plain is None else b.plain))
    page.h1 = next((b.text for b in blocks if b.tag == "h1"), "")[:500]
    if not page.title:
        page.title = page.h1
    page.abstract = _abstract(head.description or "", page.text)
    all_text = "\n".join(b.text for b in blocks)
    # Cheap substring checks first: most pages have no prices or carts, and
    # the regexes would scan the whole text to find that out.
    counts["cart"] = len(_CART.findall(all_text)) if "add to" in all_text.lower() else 0
    counts["price"] = 0
    if any(c in all_text for c in _SUFFIX_HINTS):
        counts["price"] = len(_PRICE.findall(all_text))
    elif any(c in all_text for c in _PREFIX_HINTS):
        counts["price"] = len(_PRICE_PREFIX.findall(all_text))
    counts["repeat"] = max(repeats.values(), default=0)
    page.features = _features(blocks, len(page.text), counts, len(page.links))
    return page



_COUNTED_TAGS = ("article", "time", "img", "input", "li", "h1", "div", "tr", "section")


def _blocks(flat: str, plain: bool = False) -> tuple[list[Block], int]:
    """Cut the marked, flattened text into blocks with link and boilerplate
    information (with ``plain``, each block's text without its links' too).
    Returns the blocks and whether an h1 precedes the first long paragraph."""
    blocks: list[Block] = []
    boiler_depth = 0
    link_depth = 0
    frag_depth = 0  # of link_depth, links to a place on the same page
    long_seen = False
    h1_before_para = 0
    for part in flat.split(_BLOCK):
        if not part or part.isspace():  # most parts: whitespace between tags
            continue
        # Boilerplate and h1 markers only ever sit at the edges of a part
        # (every marked element is a block): count them, then strip them.
        is_h1 = part.startswith(_H1) or part.startswith(_BOIL_OPEN + _H1)
        opens = part.count(_BOIL_OPEN)
        in_boiler = boiler_depth + opens > 0
        if opens or _BOIL_CLOSE in part:
            boiler_depth = max(boiler_depth + opens - part.count(_BOIL_CLOSE), 0)
        part = part.strip(_EDGE)
        lead_link = part.startswith(_LINK_OPEN) or (
            link_depth > frag_depth and not part.startswith((_LINK_CLOSE, _FRAG_OPEN, _FRAG_CLOSE)))
        frag_chars = 0
        own: str | None = None
        if _LINK_OPEN in part or _LINK_CLOSE in part or _FRAG_OPEN in part or _FRAG_CLOSE in part:
            link_chars = 0
            pieces = []
            own_pieces: list[str] = []
            for piece in _LINK_SPLIT.split(part):
                if piece == _LINK_OPEN:
                    link_depth += 1
                elif piece == _LINK_CLOSE:
                    link_depth = max(link_depth - 1, 0)
                elif piece == _FRAG_OPEN:
                    link_depth += 1
                    frag_depth += 1
                elif piece == _FRAG_CLOSE:
                    link_depth = max(link_depth - 1, 0)
                    frag_depth = max(frag_depth - 1, 0)
                elif piece:
                    pieces.append(piece)
                    if link_depth:
                        n = len(piece.strip())
                        link_chars += n
                        if frag_depth:
                            frag_chars += n
                    elif plain:
                        own_pieces.append(piece)
            text = clean("".join(pieces))
            if plain:
                own = clean(" ".join(own_pieces))
        else:
            text = clean(part)
            link_chars = len(text) if link_depth else 0
            frag_chars = link_chars if frag_depth else 0
            if plain and link_depth:
                own = ""
        if not text:
            continue
        if is_h1 and not long_seen:
            h1_before_para = 1
        if len(text) - link_chars >= LONG_BLOCK:
            long_seen = True
        link_chars = min(link_chars, len(text))
        blocks.append(Block(text, link_chars, in_boiler, "h1" if is_h1 else "", min(frag_chars, link_chars),
                            lead_link, own))
    return blocks, h1_before_para
