"""HTML text to an lxml tree, and text made safe to store. Pure logic, no
Scrapy.

``parse_html`` parses a page given as text or bytes (bytes are decoded by
``crawler.reading.encoding.decode_html`` first) with lxml's own parser, recovering
from any markup: None for an empty or unparsable document.

Any string or bytes is a page: control characters, noncharacters and lone
surrogates, as raw characters or as character references, never make
parsing or ``crawler.reading.extract.analyze`` raise. ``scrub`` and ``scrub_tree``
take out of text what no stored text should hold (form feed and vertical
tab read as spaces, C1 controls as the windows-1252 characters they almost
always stand for); ``UNSAFE`` finds it; ``clean`` folds whitespace.

No settings, no stats.
"""

from __future__ import annotations

import re
from typing import Any

import lxml.etree

from crawler.reading.encoding import decode_html

__all__ = ["STRING", "UNSAFE", "clean", "parse_html", "scrub", "scrub_tree"]

# An element's text, its descendants' included, in one call into lxml's C code.
STRING = lxml.etree.XPath("string()", smart_strings=False)

# lxml.etree's parser, not lxml.html's: the latter calls back into Python to
# pick an element class for every element touched, which cost more than all
# of the analysis below.
_PARSER = lxml.etree.HTMLParser(
    encoding="utf-8", recover=True, remove_comments=True, remove_pis=True,
    huge_tree=True, no_network=True,
)


def parse_html(html: str | bytes) -> Any:
    """lxml root of ``html``, or None for an empty or unparsable document.
    ``bytes`` are decoded with ``decode_html`` first."""
    if isinstance(html, bytes):
        html = decode_html(html)[0]
    if not html.strip():
        return None
    try:
        data = html.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: one U+FFFD each, as a decoder would give
        data = _SURROGATE.sub("\ufffd", html).encode("utf-8")
    try:
        return lxml.etree.fromstring(data, _PARSER)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError):
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")
# What no stored text should hold, and what lxml refuses to write back into
# the tree ("All strings must be XML compatible"), though its parser lets it
# through from the page or from a character reference (&#12;): C0 controls
# but tab, LF and CR; DEL; C1 controls; the noncharacters U+FDD0..U+FDEF
# (which hold the markers below) and U+FFFE, U+FFFF.
UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufdd0-\ufdef\ufffe\uffff]")


def _safe_char(c: int) -> str:
    if c in (0x0B, 0x0C) or 0x1C <= c <= 0x1F:
        return " "  # whitespace to HTML (form feed) or to str.split() (the rest)
    if 0x80 <= c <= 0x9F:
        # C1 controls in a page are windows-1252 text mislabelled as
        # ISO-8859-1 along the way; the HTML parser reads &#x80;..&#x9F; the
        # same way. The five bytes windows-1252 leaves undefined are dropped.
        return bytes([c]).decode("cp1252", "ignore")
    return ""


_SAFE = {chr(c): _safe_char(c) for c in [*range(0x20), *range(0x7F, 0xA0), *range(0xFDD0, 0xFDF0), 0xFFFE, 0xFFFF]}


def scrub(text: str) -> str:
    return UNSAFE.sub(lambda m: _SAFE[m.group()], text)


def scrub_tree(root: Any) -> None:
    for el in root.iter():
        if el.text and UNSAFE.search(el.text):
            el.text = scrub(el.text)
        if el.tail and UNSAFE.search(el.tail):
            el.tail = scrub(el.tail)


def clean(text: str) -> str:
    # split()/join() folds every run of whitespace, as \s+ would, and is
    # about twice as fast on the short strings of blocks and anchors.
    return " ".join(text.split())
