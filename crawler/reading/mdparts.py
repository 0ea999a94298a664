"""The pieces of crawler.reading.markdown: the private characters its walk
writes Markdown syntax with, and what turns a line of them into Markdown
(escaped) or into text; GitHub tables; the language of a code block. Pure
logic, no Scrapy.

No settings, no stats.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["BR", "BSL", "EM", "IMAGE", "LINK_OPEN", "LINK_URL", "PAD", "TICK", "URL_END", "finish_md",
           "finish_tx", "lang_of", "lead", "protect", "table_markdown"]

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


MAX_CELLS = 200_000  # cells of a table, spans filled in; a larger one is rows of text


def table_markdown(rows: list[list[tuple[str, str, int, int]]]) -> tuple[str, str] | None:
    """A GitHub table of rows of (markdown, text, colspan, rowspan) cells,
    the spans filled with empty cells, the first row its header; and its
    text (a line a row). None when no cell has text."""
    grid: list[list[tuple[str, str]]] = []
    below: dict[int, int] = {}  # column -> rows a rowspan still covers
    empty = ("", "")
    cells = 0
    for row in rows:
        out: list[tuple[str, str]] = []
        for md, text, colspan, rowspan in row:
            while below.get(len(out)):
                below[len(out)] -= 1
                out.append(empty)
            if rowspan > 1:
                for c in range(len(out), len(out) + colspan):
                    below[c] = rowspan - 1
            out.append((md, text))
            out.extend([empty] * (colspan - 1))
        for c in sorted(below):
            if c >= len(out) and below[c]:
                below[c] -= 1
                out.extend([empty] * (c - len(out)) + [empty])
        cells += len(out)
        grid.append(out)
        if cells > MAX_CELLS:
            break
    text = "\n".join(line for r in grid if (line := " ".join(t for _, t in r if t)))
    if not text:
        return None
    width = max(map(len, grid))
    if width * len(grid) > MAX_CELLS:  # hostile spans: the rows as lines
        return "\n\n".join(" ".join(m for m, _ in r if m) for r in grid if any(m for m, _ in r)), text
    lines = []
    for i, r in enumerate(grid):
        lines.append("| " + " | ".join([m for m, _ in r] + [""] * (width - len(r))) + " |")
        if i == 0:
            lines.append("|" + " --- |" * width)
    return "\n".join(lines), text


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
