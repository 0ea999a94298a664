"""The pieces of crawler.reading.markdown: the private characters its walk
writes Markdown syntax with, and what turns them into Markdown (the text
escaped) or into text; links' URLs; code spans and blocks and their
language. Pure logic, no Scrapy.

No settings, no stats.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urljoin

import lxml.etree

from crawler.reading.html import clean

__all__ = ["BLOCK", "BR_", "CAPTION", "CELL", "CODE", "DD", "DEFLIST", "DISPATCH", "DT", "EMPH", "FRAME",
           "HEADING", "HEADINGS", "HR", "IMG", "INLINE", "ITEM", "LINK", "LIST", "PRE", "QUOTE", "ROW", "SEP",
           "STRONG", "plain_text", "TABLE", "TAIL", "BR", "BSL", "EM", "IMAGE", "LINK_OPEN", "LINK_URL", "PAD", "TICK", "URL_END", "Urls", "code_block",
           "code_span", "finish_md", "finish_tx", "lang_of", "lead", "protect"]

# What an element does at its start and its end (an int: one dict lookup an element).
(INLINE, BLOCK, SEP, HEADING, LIST, ITEM, QUOTE, PRE, CODE, EMPH, STRONG, LINK, IMG, BR_, HR, TABLE, ROW,
 CELL, CAPTION, DT, DD, TAIL, FRAME, DEFLIST) = range(24)

DISPATCH: dict[Any, int] = {}
for _tags, _code in (
    ("address article aside body center details dialog div fieldset figcaption figure footer form header hgroup "
     "html main nav p search section summary legend thead tbody tfoot dl", BLOCK),
    ("h1 h2 h3 h4 h5 h6", HEADING), ("ul ol menu dir", LIST), ("li", ITEM), ("blockquote", QUOTE),
    ("pre listing xmp plaintext", PRE), ("code kbd samp tt var", CODE), ("em i cite dfn", EMPH),
    ("strong b", STRONG), ("a", LINK), ("img", IMG), ("br", BR_), ("hr", HR), ("table", TABLE), ("tr", ROW),
    ("td th", CELL), ("caption", CAPTION), ("dt", DT), ("dd", DD),
):
    for _tag in _tags.split():
        DISPATCH[_tag] = _code
DISPATCH["dl"] = DEFLIST
HEADINGS = {f"h{n}": "#" * n + " " for n in range(1, 7)}

# Syntax, as noncharacters (crawler.reading.html.scrub takes them out of a
# page's text): a line's text is escaped first, then these become syntax in
# the Markdown and nothing (a line break for BR) in the text.
BR = "\ufdd0"
EM = "\ufdd1"  # * (twice: **)
LINK_OPEN = "\ufdd2"  # [
LINK_URL = "\ufdd3"  # ](   the URL that follows, up to URL_END, is not text
URL_END = "\ufdd4"  # )
IMAGE = "\ufdd5"  # !
TICK = "\ufdd6"  # `
PAD = "\ufdd7"  # a space inside a code span's ticks
BSL = "\ufdd8"  # a backslash: a hard line break, an escape at a line's start or of a cell's pipe
_SYNTAX = {BR: "\n", EM: "*", LINK_OPEN: "[", LINK_URL: "](", URL_END: ")", IMAGE: "!", TICK: "`", PAD: " ",
           BSL: "\\"}
# Characters of code spans and URLs, kept from escaping as noncharacters.
_KEPT = "\\`*_[]<>&!"
_PROTECT_PAIRS = [(c, chr(0xFDE0 + i)) for i, c in enumerate(_KEPT)]
_KEPT_PAIRS = [(chr(0xFDE0 + i), c) for i, c in enumerate(_KEPT)]
_MD_PAIRS = [*_SYNTAX.items(), *_KEPT_PAIRS]
_TX_PAIRS = [*((k, "\n" if k == BR else "") for k in _SYNTAX), *_KEPT_PAIRS]
_URL_PART = re.compile(f"{LINK_URL}[^{URL_END}]*{URL_END}")
# Text that would be syntax: backslashes, emphasis, code, brackets, "_" at
# a word's edge, "<" that could open a tag, "&" that could be an entity, "!"
# before a link.
_ESCAPE_IF = [("_", re.compile(r"_(?:(?![^\W_])|(?<![^\W_]_))")), ("<", re.compile("<(?=[A-Za-z/!?])")),
              ("&", re.compile(r"&(?=#?\w+;)")), ("!", re.compile("!(?=\ufdd2)"))]
# ... and at the start of a line: a heading, quote, list item, rule or fence.
_LEAD = re.compile(r"#{1,6}(?=\s|$)|>|[-+](?=\s|-|$)|=|~~~|(\d{1,9})(?=[.)](?:\s|$))")


def protect(s: str) -> str:
    for char, private in _PROTECT_PAIRS:
        if char in s:
            s = s.replace(char, private)
    return s


def lead(line: str) -> str:
    """A line whose start would be syntax escaped (the rest is escaped by finish_md)."""
    m = _LEAD.match(line)
    if m is None:
        return line
    cut = m.end(1) if m.group(1) else 0
    return line[:cut] + BSL + line[cut:]


def finish_md(doc: str) -> str:
    """Blocks of text and syntax characters as Markdown: the text escaped, the syntax written."""
    for char in "\\`*[]":  # always syntax: a plain replace is many times faster than a regex
        if char in doc:
            doc = doc.replace(char, "\\" + char)
    for char, pattern in _ESCAPE_IF:
        if char in doc:
            doc = pattern.sub(r"\\\g<0>", doc)
    for private, char in _MD_PAIRS:
        if private in doc:
            doc = doc.replace(private, char)
    return doc


def finish_tx(doc: str) -> str:
    """Blocks of text and syntax characters as text: URLs and syntax left out."""
    if LINK_URL in doc:
        doc = _URL_PART.sub("", doc)
    for private, char in _TX_PAIRS:
        if private in doc:
            doc = doc.replace(private, char)
    return doc


_LANG = re.compile(r"(?:^|\s)(?:lang(?:uage)?-|highlight-(?:source-)?|brush:\s*)([\w+#.-]{1,30})", re.I)
_LANG_OK = re.compile(r"[\w+#.-]{1,30}")


def lang_of(el: Any) -> str | None:
    """The language a code block's markup names (on it, or on the two
    elements around it for a pre: Sphinx's highlight-x)."""
    for _ in range(3 if el.tag == "pre" else 1):
        for name in ("data-lang", "data-language"):
            value = el.get(name)
            if value and _LANG_OK.fullmatch(value.strip()):
                return str(value.strip())
        cls = el.get("class")
        if cls and (m := _LANG.search(cls)) is not None:
            return m.group(1)
        el = el.getparent()
        if el is None:
            break
    return None


def code_span(core: str, after_span: bool) -> str:
    """Inline code: ``core`` between enough ticks (as text right after another
    span: `a``b` would be one span)."""
    ticks = 1
    if "`" in core:
        ticks = max(map(len, re.findall("`+", core))) + 1
        if core[0] == "`" or core[-1] == "`":
            core = PAD + core + PAD
    if after_span:
        return protect(core.replace(PAD, ""))
    return TICK * ticks + protect(core) + TICK * ticks


def code_block(code: str, lang: str | None) -> tuple[str, str] | None:
    """A fenced code block of a pre's text, and its text (a line a line)."""
    lines = code.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    first = 0
    while first < len(lines) and not lines[first].strip():
        first += 1
    if first == len(lines):
        return None
    body = "\n".join(lines[first:])
    ticks = 3
    if "```" in body:
        ticks = max(map(len, re.findall("`+", body))) + 1
    return (f"{TICK * ticks}{protect(lang or '')}\n{protect(body)}\n{TICK * ticks}",
            "\n".join(t for t in map(clean, lines[first:]) if t))


_ORIGIN = re.compile(r"https?://[^/?#\\]+")
_BAD_SCHEME = re.compile(r"\s*(?:javascript|data|vbscript|about):", re.I)
# A relative path urljoin would put after the page's directory as it is: no
# scheme (no ":" before the first "/", "?" or "#"), not "/", ".", "?" or
# "#" first, no query (urljoin drops an empty one), no backslash or tab, CR,
# LF (urlsplit drops the last three), no "//" (its empty segment goes); an
# empty fragment is dropped too.
_PLAIN_RELATIVE = re.compile(r"[^./?#:\\\s][^:/?#\\\t\r\n]*(?:[/#][^?\\\t\r\n]*)?\Z")
_CONTROL = re.compile(r"[\t\r\n]")
_NEEDS_QUOTE = re.compile("[\\s()<>\ufdd0-\ufdef]")
_QUOTED = re.compile(r"[\s()<>]")  # percent-encoded in a link's URL: what would end it
_PRIVATE = re.compile("[\ufdd0-\ufdef]")


def _quote(m: re.Match[str]) -> str:
    return quote(m.group(), safe="")


class Urls:
    """Links' and images' URLs resolved against a page's, as Markdown
    writes them (None for none and for javascript:, data: ...)."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        m = _ORIGIN.match(url or "")
        self.origin = m.group() if m else ""  # scheme://host of url: the base of "/x"
        self.urls: dict[str, str | None] = {}
        # The page's URL without its fragment (the base of "#x") and its
        # directory (of "x/y.html"): urljoin's answers for the two hrefs a
        # page holds most, joined without it (33,000 urljoin calls were 19 %
        # of the analysis of the Python manual's largest pages).
        self.here = self.folder = ""
        if url and url.startswith(("http://", "https://")):
            try:
                self.here, self.folder = url.split("#", 1)[0], urljoin(url, "_")[:-1]
            except ValueError:
                pass

    def url_of(self, href: str | None) -> str | None:
        if not href:
            return None
        got = self.urls.get(href, "")
        if got != "":
            return got
        out: str | None = href.strip()
        if not out:
            out = None
        elif out.startswith(("http://", "https://")):
            pass
        elif self.origin and out[0] == "/" and out[1:2] != "/" and "/." not in out:
            out = self.origin + out
        elif self.here and out[0] == "#" and len(out) > 1 and not _CONTROL.search(out):
            out = self.here + out
        elif self.folder and _PLAIN_RELATIVE.match(out) and "/." not in out and "//" not in out and out[-1] != "#":
            out = self.folder + out
        elif _BAD_SCHEME.match(out):
            out = None
        elif self.url:
            try:
                out = urljoin(self.url, out)
            except ValueError:
                out = None
        if out is not None and _NEEDS_QUOTE.search(out):
            out = _PRIVATE.sub("", out)
            out = _QUOTED.sub(_quote, out.replace("\n", "").replace("\t", "").replace("\r", ""))
        if out is not None:
            out = protect(out)
        if len(self.urls) < 10_000:
            self.urls[href] = out
        return out


def plain_text(el: Any, limit: int) -> str:
    """An element's text, whitespace folded, at most ``limit`` characters ("" where it cannot be read)."""
    try:
        return clean(lxml.etree.tostring(el, method="text", encoding=str, with_tail=False))[:limit]
    except Exception:
        return ""
