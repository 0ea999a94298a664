"""``scrapy changes --since T [--until T] [--site S] [--kind K,...] [--diff] [--json]``:
the pages that were new, changed, gone or moved in a time window.

Reads the crawl's store (``CRAWL_DIR``, ``CRAWL_NAME``; ``STORE_PATH``;
``MONGO_URI``, ``MONGO_DATABASE``) as ``scrapy export`` does: its changes
table, which the crawl and the re-crawl fill (``crawler/recrawl/diff.py``).
``T`` is a date or time in ISO 8601 (``2026-12-06``, ``2026-12-06T05:00``,
local time unless it names its zone), seconds since the epoch, or a time
ago (``90s``, ``30m``, ``6h``, ``7d``).

Text: a line ``crawl NAME: N changes since ...`` with the count of each
kind, then one line a change, oldest first: ``YYYY-MM-DD HH:MM:SS  KIND  URL``
and, for a changed page, ``+A -R blocks`` (blocks of its main text added
and removed), for a moved one ``-> TARGET``; ``--diff`` prints each changed
page's Markdown diff below its line. ``--json``: one object
``{"crawl", "since", "until", "changes": [...]}`` with every field of each
change. A store that does not exist, or a bad time: one line, exit 1.
"""

from __future__ import annotations

import datetime
import json
import re
import sys
import time
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.crawldir import crawl_name
from crawler.recrawl.diff import KINDS
from crawler.store import StoreNotFound, StoreUnavailable, open_store

if TYPE_CHECKING:
    import argparse

_AGO = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def read_time(text: str, now: float | None = None) -> float:
    """A time as ``scrapy changes`` reads it (module docstring)."""
    now = time.time() if now is None else now
    text = text.strip()
    ago = _AGO.fullmatch(text)
    if ago:
        return now - float(ago.group(1)) * _UNIT[ago.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{text!r} is no time: give ISO 8601 (2026-12-06T05:00), seconds since the epoch, "
                         "or a time ago (30m, 6h, 7d)", print_help=False) from None
    return moment.timestamp()  # naive: local time


def _shown(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "--since T [--until T] [--site SITE] [--kind new,changed,gone,moved] [--diff] [--json]"

    def short_desc(self) -> str:
        return "List the pages new, changed, gone or moved since a time, with what changed"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--since", required=True, help="from this time (ISO 8601, epoch seconds, or 30m/6h/7d ago)")
        parser.add_argument("--until", help="before this time (default: now and later)")
        parser.add_argument("--site", help="only this site's pages")
        parser.add_argument("--kind", help="only these kinds, comma-separated: " + ",".join(KINDS))
        parser.add_argument("--diff", action="store_true", help="print each changed page's Markdown diff")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        if args:
            raise UsageError(f"scrapy changes takes no arguments, not {args}", print_help=False)
        since = read_time(opts.since)
        until = read_time(opts.until) if opts.until else None
        kinds = set(KINDS)
        if opts.kind:
            kinds = {k.strip() for k in opts.kind.split(",") if k.strip()}
            unknown = sorted(kinds - set(KINDS))
            if unknown:
                raise UsageError(f"--kind {','.join(unknown)}: the kinds are {', '.join(KINDS)}", print_help=False)
        name = crawl_name(self.settings, "site")
        try:
            store = open_store(self.settings, name, create=False)
        except (StoreNotFound, StoreUnavailable) as exc:
            print(f"scrapy changes: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        try:
            found = [c for c in store.changes(since, until, opts.site) if c["kind"] in kinds]
        finally:
            store.close()
        if opts.json:
            print(json.dumps({"crawl": name, "since": since, "until": until, "changes": found}, ensure_ascii=False))
            return
        counts = {k: sum(c["kind"] == k for c in found) for k in KINDS if k in kinds}
        print(f"crawl {name}: {len(found)} change{'' if len(found) == 1 else 's'} since {_shown(since)}"
              + (f" until {_shown(until)}" if until else "") + ": "
              + ", ".join(f"{n} {k}" for k, n in counts.items()))
        for c in found:
            line = f"{_shown(c['at'])}  {c['kind']:<7}  {c['url']}"
            if c["kind"] == "changed":
                line += f"  +{len(c['added'])} -{len(c['removed'])} blocks" + (" (cut)" if c.get("cut") else "")
            elif c["kind"] == "moved" and c.get("target"):
                line += f"  -> {c['target']}"
            print(line)
            if opts.diff and c["kind"] == "changed" and c.get("diff"):
                print(c["diff"].rstrip("\n"))
