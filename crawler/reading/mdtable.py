"""Tables of crawler.reading.markdown: a table of data (not of layout) as a
GitHub table, its spans filled in. Pure logic, no Scrapy.

No settings, no stats.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_CELLS", "Table", "bounded", "is_data_table", "table_markdown"]


def bounded(value: str | None, low: int, high: int) -> int:
    """An integer attribute (a span, a list's start) within bounds; 1 when it is none."""
    try:
        return min(max(int(value or 1), low), high)
    except ValueError:
        return 1


def is_data_table(el: Any) -> bool:
    """A table of data, not of layout: no table inside, two columns or more."""
    if el.find(".//table") is not None or (el.get("role") or "").lower() in ("presentation", "none"):
        return False
    return any(len(tr) > 1 for tr in el.iter("tr"))


class Table:
    __slots__ = ("frames", "rows", "row", "caption", "span")

    def __init__(self, frames: list[list[Any]]) -> None:
        self.frames = frames  # the inline spans open around the table, reopened after it
        self.rows: list[list[tuple[str, str, int, int]]] = []
        self.row: list[tuple[str, str, int, int]] | None = None
        self.caption: list[tuple[str, str]] = []
        self.span = (1, 1)

    def end_row(self) -> None:
        if self.row:
            self.rows.append(self.row)
        self.row = None

    def add(self, caption: bool, md: str, text: str) -> None:
        if caption:
            if text:
                self.caption.append((md, text))
            return
        if self.row is None:
            self.row = []
        self.row.append((md, text, *self.span))
        self.span = (1, 1)

    def blocks(self) -> list[tuple[str, str]]:
        out = list(self.caption)
        got = table_markdown(self.rows)
        if got is not None:
            out.append(got)
        return out


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
