"""What changed in a page, as the store keeps it: one *change* a page's
new, changed, gone or moved version. Pure logic, no Scrapy, no store.

The merge of a fetch with the stored page (``crawler/recrawl/merge.py``)
attaches a change to the page it writes (under ``CHANGE_KEY``); the stores
keep it in their ``changes`` table or collection, keyed by URL and time
(written twice, kept once); ``scrapy changes`` and the API read them.

A change (JSON-safe)::

    url, site, at        the page, its site, when the version was fetched
    kind                 new | changed | gone | moved
    previous_at          when the version before was fetched (None: new)
    added, removed       the main text's blocks (its lines: paragraphs, headings,
                         list items) found only in the new version, or only in the old,
                         in order; each cut at MAX_BLOCK characters, at most MAX_BLOCKS
    diff                 a unified diff of the two Markdown versions (git's
                         format, two lines of context), cut at ``max_diff``
                         characters (``CHANGES_MAX_DIFF``)
    cut                  whether anything above was cut
    target               a moved page's new URL

A change the re-crawl judged trivial (reformatted: its SimHash within
``SIMHASH_MAX_DISTANCE``) or unchanged is no change.
"""

from __future__ import annotations

import difflib
from typing import Any

__all__ = ["CHANGE_KEY", "KINDS", "blocks_changed", "change", "markdown_diff"]

CHANGE_KEY = "_change"
KINDS = ("new", "changed", "gone", "moved")
MAX_BLOCK = 2000
MAX_BLOCKS = 200


def _blocks(text: str | None) -> list[str]:
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def blocks_changed(old: str | None, new: str | None) -> tuple[list[str], list[str], bool]:
    """The blocks only in ``new`` (added) and only in ``old`` (removed)."""
    before, after = _blocks(old), _blocks(new)
    added: list[str] = []
    removed: list[str] = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed += before[i1:i2]
        if tag in ("replace", "insert"):
            added += after[j1:j2]
    cut = len(added) > MAX_BLOCKS or len(removed) > MAX_BLOCKS or any(
        len(b) > MAX_BLOCK for b in added[:MAX_BLOCKS] + removed[:MAX_BLOCKS])
    return [b[:MAX_BLOCK] for b in added[:MAX_BLOCKS]], [b[:MAX_BLOCK] for b in removed[:MAX_BLOCKS]], cut


def markdown_diff(url: str, old: str | None, new: str | None, max_chars: int) -> tuple[str, bool]:
    lines = difflib.unified_diff((old or "").splitlines(), (new or "").splitlines(), fromfile=f"a/{url}",
                                 tofile=f"b/{url}", lineterm="", n=2)
    out: list[str] = []
    size = 0
    for line in lines:
        size += len(line) + 1
        if size > max_chars:
            return "\n".join(out) + "\n", True
        out.append(line)
    return ("\n".join(out) + "\n") if out else "", False


def change(kind: str, new: dict[str, Any], old: dict[str, Any] | None, max_diff: int) -> dict[str, Any]:
    """The change ``new`` (the page as it is to be written) makes to ``old``
    (as stored; None for a new page)."""
    record: dict[str, Any] = {"url": new["url"], "site": new.get("site"), "at": float(new.get("fetched_at") or 0.0),
                              "kind": kind, "previous_at": old.get("fetched_at") if old else None,
                              "added": [], "removed": [], "diff": "", "cut": False, "target": None}
    if kind == "changed" and old is not None:
        added, removed, cut = blocks_changed(old.get("text"), new.get("text"))
        old_md = old.get("markdown") or old.get("text")
        new_md = new.get("markdown") or new.get("text")
        diff, diff_cut = markdown_diff(new["url"], old_md, new_md, max_diff)
        record.update(added=added, removed=removed, diff=diff, cut=cut or diff_cut)
    elif kind == "moved":
        links = new.get("links") or []
        record["target"] = links[0]["url"] if links else None
    return record
