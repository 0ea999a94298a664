"""``scrapy seed URL... | --file PATH [--new] [--remove] [--site SITE...] [--json]``.

Adds URLs to a running or stopped crawl through the path seeds take:
normalised, their sites added to the crawl's scope, deduplicated against
every URL the crawl has seen, queued at the tail of their site's queue
(robots.txt is read by the worker that fetches them). ``--remove`` deletes
the given URLs, or with ``--site`` every URL of those sites, from the queues
(queued or waiting for a retry; requests being fetched stay); removed URLs
stay seen, so links found later do not bring them back.

The crawl must exist (a typo in ``CRAWL_NAME`` is one line naming the
crawls that do); ``--new`` seeds a crawl that does not exist yet on
purpose, which the next ``scrapy crawl site`` (without seeds) crawls.

Prints what happened, or with ``--json`` one object:
``{"added", "seen", "capped", "refused": [{"url", "reason"}], "removed"}``.
Exit status 1 when Redis cannot be reached or no URL was valid.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError

from crawler.operations import ops
from crawler.operations.cli import FrontierCommand

if TYPE_CHECKING:
    import argparse


class Command(FrontierCommand):
    def syntax(self) -> str:
        return "URL... | --file PATH [--new] [--remove] [--site SITE...] [--json]"

    def short_desc(self) -> str:
        return "Add URLs to the crawl (or --remove unprocessed ones)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--file", help="read URLs from this file, one a line (# starts a comment)")
        parser.add_argument("--remove", action="store_true", help="remove unprocessed URLs instead")
        parser.add_argument("--new", action="store_true",
                            help="start the crawl CRAWL_NAME with these seeds if it does not exist yet")
        parser.add_argument("--site", action="append", default=[],
                            help="with --remove: every unprocessed URL of this site (repeatable)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        urls = list(args)
        if opts.file:
            try:
                text = Path(opts.file).read_text(encoding="utf-8")
            except (OSError, UnicodeError) as exc:
                raise UsageError(f"--file {opts.file}: cannot read it ({exc})", print_help=False) from None
            urls += [line.split("#", 1)[0].strip() for line in text.splitlines()]
            urls = [u for u in urls if u]
        if opts.site and not opts.remove:
            raise UsageError("--site goes with --remove (to add a site, seed its home page)", print_help=False)
        if not urls and not opts.site:
            raise UsageError("give URLs, --file PATH, or --remove --site SITE", print_help=False)
        queue_by = self.settings.get("FRONTIER_QUEUE_BY")
        def work() -> tuple[str, dict[str, Any]]:
            frontier = self.open_frontier(create=opts.new and not opts.remove)
            if opts.remove:
                return frontier.crawl, ops.remove(frontier, urls, opts.site, queue_by=queue_by)
            return frontier.crawl, ops.seed(frontier, urls, queue_by=queue_by)

        done = self.guarded("seed", work)
        if done is None:
            return
        crawl, out = done
        if opts.json:
            print(ops.dumps(out))
        else:
            for r in out["refused"]:
                print(f"refused {r['url']!r}: {r['reason']}", file=sys.stderr)
            if opts.remove:
                print(f"crawl {crawl}: removed {out['removed']} unprocessed request(s)")
            else:
                capped = f", {out['capped']} over FRONTIER_MAX_PAGES_PER_SITE" if out["capped"] else ""
                print(f"crawl {crawl}: added {out['added']}, already seen {out['seen']}{capped}, "
                      f"refused {len(out['refused'])}")
        if out["refused"] and not (out["added"] or out["seen"] or out["capped"] or out["removed"]) \
                and len(out["refused"]) == len(urls):
            self.exitcode = 1
