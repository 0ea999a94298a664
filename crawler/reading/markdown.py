"""The main content of a page as Markdown and as plain text, from one walk
of its tree. Pure logic, no Scrapy.

``render(elements, url)`` walks the main content's containers (in page order,
chosen by ``crawler.reading.content``), leaving out every element marked ``SKIP``
with its subtree but its tail. The words of the Markdown are the words of the
text: both come from one line of text pieces and syntax characters
(crawler.reading.mdparts) that the text drops. The walk is lxml's ``iterwalk``:
no depth overflows it; output stops at ``MAX_CHARS``; a tree that breaks the
walk renders as its plain text.

No settings, no stats.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lxml.etree

from crawler.reading.html import clean
from crawler.reading.mdparts import (BLOCK, BR, BR_, BSL, CAPTION, CELL, CODE, DD, DEFLIST, DISPATCH, DT, EM, EMPH,
                                     FRAME, HEADING, HEADINGS, HR, IMAGE, IMG, INLINE, ITEM, LINK, LINK_OPEN,
                                     LINK_URL, LIST, PRE, QUOTE, ROW, SEP, STRONG, TABLE, TAIL, TICK, URL_END, Urls,
                                     code_block, code_span, finish_md, finish_tx, lang_of, lead,
                                     plain_text)
from crawler.reading.mdtable import Table, bounded, is_data_table

__all__ = ["MAX_CHARS", "SKIP", "Rendered", "render"]

# The attribute crawler.reading.content sets on an element left out of the main content.
SKIP = "data-crawler-skip"
MAX_CHARS = 1_000_000  # of Markdown; the walk stops at the block that reaches it
MAX_CONTAINERS = 16  # nested list items and quotes indented; deeper ones are plain blocks
MAX_INLINE = 16  # nested emphasis, links and code spans; deeper ones are plain text


@dataclass(slots=True)
class Rendered:
    markdown: str = ""
    text: str = ""


_LEADS = frozenset("#>=+-~0123456789")  # what a line that lead() escapes starts with
_PRIVATE = re.compile("[\ufdd0-\ufdef]")  # the syntax characters: none in URLs and alt texts


class _Full(Exception):
    """The Markdown reached MAX_CHARS."""


def render(elements: Sequence[Any], url: str | None = None, images: bool = True) -> Rendered:
    """``images`` False: images left out (a product grid's alt texts repeat its names)."""
    try:
        return _Walk(url, images).run(elements)
    except Exception:  # any tree renders: fall back to its plain text
        text = "\n".join(t for el in elements if (t := plain_text(el, MAX_CHARS)))
        return Rendered(finish_md("\n".join(map(lead, text.split("\n")))), text)


class _Walk:
    def __init__(self, url: str | None, images: bool = True) -> None:
        self.url_of = Urls(url).url_of
        self.images = images
        self.md: list[str] = []  # finished blocks, separators included
        self.tx: list[str] = []
        self.size = 0
        self.parts: list[str] = []  # the open line: text and syntax characters
        self.frames: list[list[Any]] = []  # open inline spans: [start in parts, kind, data]
        self.ctx: list[list[Any]] = []  # open containers: [first prefix, next prefix, used, in a list]
        self.lists: list[list[int]] = []  # open lists: [ordered, next number]
        self.tables: list[Any] = []  # open tables: a _Table, or None for a layout table
        self.capture = 0  # inside a heading or a table cell: blocks are spaces
        self.raw = 0  # inside pre or code: no inline syntax
        self.links = 0  # open links (of frames)
        self.pre: list[list[Any]] = []  # open pre blocks: [language]
        self.prev_listy = False
        self.prev_dt = False

    def emit(self, md: str, text: str, tight: bool = True, dt: bool = False) -> None:
        ctx = self.ctx
        if ctx:
            first = "".join(f[1] if f[2] else f[0] for f in ctx)
            cont = "".join(f[1] for f in ctx)
            blank = "".join(f[1] for f in ctx if f[2]).rstrip()  # quotes the last block was in too
            listy = False
            for f in ctx:
                f[2] = True
                listy = listy or f[3]
            if "\n" in md:
                md = md.replace("\n", "\n" + cont)
        else:
            first = cont = blank = ""
            listy = False
        if self.md:
            tight = tight and listy and (self.prev_listy or self.prev_dt)
            md = ("\n" if tight else "\n" + blank + "\n") + first + md
        else:
            md = first + md
        self.size += len(md)
        if self.size > MAX_CHARS:
            raise _Full
        self.md.append(md)
        self.tx.append(text)
        self.prev_listy = listy
        self.prev_dt = dt

    def close_frames(self) -> None:
        for f in reversed(self.frames):
            self.wrap(f)
        for f in self.frames:
            f[0] = 0

    def wrap(self, f: list[Any]) -> None:
        """Puts the open line's text since ``f`` opened inside its syntax."""
        parts = self.parts
        start, kind, data = f
        seg = "".join(parts[start:])
        del parts[start:]
        core = seg.strip()
        if not core:
            if seg:
                parts.append(" ")
            return
        if kind == CODE:
            piece = code_span(clean(core.replace(BR, " ")), bool(start) and parts[start - 1].endswith(TICK))
        elif kind == LINK:
            piece = LINK_OPEN + core + LINK_URL + data + URL_END
        else:
            piece = data + core + data
        parts.append((" " if seg[0].isspace() else "") + piece + (" " if seg[-1].isspace() else ""))

    def flush(self, head: str = "", dt: bool = False) -> None:
        """Ends the open line: a paragraph (a heading with ``head``)."""
        parts = self.parts
        if self.frames:
            self.close_frames()
        elif not parts:
            return
        line = "".join(parts)
        parts.clear()
        if not line or line.isspace():  # most lines: the white space between two blocks
            return
        if BR in line:
            pieces = [p for p in map(clean, line.split(BR)) if p]
            if head:
                pieces = [" ".join(pieces)] if pieces else []
        else:
            line = clean(line)
            pieces = [line] if line else []
        if not pieces:
            return
        room = (MAX_CHARS - self.size) // 2 - 100  # escapes at most double a line
        full = len(line) > room and sum(map(len, pieces)) > room
        if full:  # the part of the last block that fits
            pieces = [p[:room].rsplit(" ", 1)[0] for p in pieces[:1] if room > 0]
        if len(pieces) == 1:
            text = pieces[0]
            self.emit(head + (lead(text) if text[0] in _LEADS else text), text, dt=dt)
        elif pieces:
            self.emit(head + (BSL + "\n").join(map(lead, pieces)), "\n".join(pieces), dt=dt)
        if full:
            raise _Full

    def end_line(self) -> None:
        """flush(), quicker for the most common line: white space between two blocks."""
        parts = self.parts
        if len(parts) == 1 and parts[0].isspace() or "".join(parts).isspace():
            parts.clear()
            for f in self.frames:
                f[0] = 0
        else:
            self.flush()

    def cell_text(self) -> tuple[str, str]:
        line = clean("".join(self.parts).replace(BR, " "))
        self.parts.clear()
        return line.replace("|", BSL + "|"), line

    def run(self, elements: Sequence[Any]) -> Rendered:
        try:
            for root in elements:
                self.walk(root)
            self.flush()
        except _Full:
            pass
        md = finish_md("".join(self.md))
        n = len(self.md)
        while len(md) > MAX_CHARS:  # escapes made it longer: the blocks that fit
            n = n * 9 // 10
            md = finish_md("".join(self.md[:n]))
        return Rendered(md, finish_tx("\n".join(t for t in self.tx[:n] if t)))

    def walk(self, root: Any) -> None:
        if not isinstance(root.tag, str) or root.get(SKIP) is not None:
            return
        skips = set(root.xpath(_SKIP_PATH))
        parts = self.parts
        ends: list[int] = []
        dispatch = DISPATCH
        walker = lxml.etree.iterwalk(root, events=("start", "end"))
        for ev, el in walker:
            if ev == "start":
                code = dispatch.get(el.tag, INLINE)
                if skips and el in skips:
                    walker.skip_subtree()
                    ends.append(TAIL)
                    continue
                if code == INLINE:
                    t = el.text
                    if t:
                        parts.append(t)
                    ends.append(INLINE)
                    continue
                if code == BLOCK and not self.capture and not self.pre:  # start() inlined: the most common
                    if parts:
                        self.end_line()
                    ends.append(BLOCK)
                    t = el.text
                    if t and not t.isspace():  # white space at a line's start is nothing
                        parts.append(t)
                    continue
                code = self.start(el, code)
                ends.append(code)
                t = el.text
                if t and code != TAIL:
                    parts.append(t)
            else:
                code = ends.pop()
                t = el.tail
                if code == BLOCK:
                    if parts:
                        self.end_line()
                    if t and ends and not t.isspace():  # as above
                        parts.append(t)
                    continue
                if code > INLINE:
                    self.end(el, code)
                if t and ends:
                    parts.append(t)
        self.flush()

    def start(self, el: Any, code: int) -> int:
        parts = self.parts
        if code == BLOCK or code == DEFLIST:
            if self.capture:
                parts.append(" ")
                return SEP
            if self.pre:
                if parts and not parts[-1].endswith("\n"):
                    parts.append("\n")
                return SEP
            self.flush()
            return BLOCK
        if code == EMPH or code == STRONG or code == LINK or code == CODE:
            if self.raw or len(self.frames) >= MAX_INLINE:
                if code == CODE and self.pre and self.pre[-1][0] is None:
                    self.pre[-1][0] = lang_of(el)
                return INLINE
            if code == LINK:
                if self.links:  # a link in a link
                    return INLINE
                href = self.url_of(el.get("href"))
                if href is None:
                    return INLINE
                self.links += 1
                self.frames.append([len(parts), LINK, href])
            else:
                if code == CODE:
                    self.raw += 1
                self.frames.append([len(parts), code, EM if code == EMPH else EM + EM])
            return FRAME
        if code == IMG:
            alt = el.get("alt")
            if alt and self.images and not self.raw and (alt := clean(_PRIVATE.sub("", alt))):
                src = self.url_of(el.get("src") or el.get("data-src"))
                parts.append(f" {IMAGE}{LINK_OPEN}{alt}{LINK_URL}{src}{URL_END} " if src else f" {alt} ")
            return INLINE
        if code == BR_:
            parts.append("\n" if self.pre else " " if self.capture else BR)
            return INLINE
        if self.capture or self.pre:  # every other block: a space in a cell, a line in pre
            parts.append(" " if self.capture else "\n")
            return SEP
        if code == HEADING:
            self.flush()
            self.capture += 1
            return HEADING
        if code == LIST:
            self.flush()
            self.lists.append([el.tag == "ol", bounded(el.get("start"), 0, 10**9)])
            return LIST
        if code in (ITEM, QUOTE, DD, DT):
            self.flush()
            if code == DT or len(self.ctx) >= MAX_CONTAINERS:
                return DT if code == DT else BLOCK
            if code == QUOTE:
                self.ctx.append(["> ", "> ", False, False])
            elif code == DD:
                self.ctx.append([": ", "  ", False, True])
            else:
                mark = "- "
                if self.lists and self.lists[-1][0]:
                    mark = f"{self.lists[-1][1]}. "
                    self.lists[-1][1] += 1
                self.ctx.append([mark, " " * len(mark), False, True])
            return ITEM
        if code == HR:
            self.flush()
            self.emit("---", "", tight=False)
            return INLINE
        if code == PRE:
            self.flush()
            self.raw += 1
            self.pre.append([lang_of(el)])
            return PRE
        if code == TABLE:
            self.flush()
            if is_data_table(el):
                self.tables.append(Table(self.frames))
                self.frames = []
            else:
                self.tables.append(None)
            return TABLE
        table = self.tables[-1] if self.tables else None
        if table is None:  # a layout table's rows and cells (or strays): blocks
            self.flush()
            return BLOCK
        parts.clear()
        if code == ROW:
            table.end_row()
            return ROW
        if code == CAPTION:
            self.capture += 1
            return CAPTION
        self.capture += 1
        table.span = (bounded(el.get("colspan"), 1, 1000), bounded(el.get("rowspan"), 1, 1000))
        return CELL

    def end(self, el: Any, code: int) -> None:
        if code == BLOCK:
            self.flush()
        elif code == FRAME:
            f = self.frames.pop()
            if f[1] == CODE:
                self.raw -= 1
            elif f[1] == LINK:
                self.links -= 1
            self.wrap(f)
        elif code == SEP:
            self.parts.append("\n" if self.pre else " ")
        elif code == HEADING:
            self.capture -= 1
            self.flush(HEADINGS.get(el.tag, "# "))
        elif code == ITEM:
            self.flush()
            self.ctx.pop()
        elif code == DT:
            self.flush(dt=True)
        elif code == LIST:
            self.flush()
            self.lists.pop()
            if not self.lists:  # the next block is not an item of this list
                self.prev_listy = False
        elif code == PRE:
            self.raw -= 1
            got = code_block("".join(self.parts).replace(BR, "\n"), self.pre.pop()[0])
            self.parts.clear()
            if got is not None:
                self.emit(*got, tight=False)
        elif code == TABLE:
            table = self.tables.pop()
            if table is not None:
                self.parts.clear()
                self.frames = table.frames
                table.end_row()
                for md, text in table.blocks():
                    self.emit(md, text, tight=False)
            else:
                self.flush()
        elif code == ROW:
            if self.tables and self.tables[-1] is not None:
                self.tables[-1].end_row()
        elif code == CELL or code == CAPTION:
            self.capture -= 1
            if self.tables and self.tables[-1] is not None:
                self.tables[-1].add(code == CAPTION, *self.cell_text())


_SKIP_PATH = f".//*[@{SKIP}]"


