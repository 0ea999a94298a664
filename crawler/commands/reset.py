"""``scrapy reset --yes [--json]``: forget a crawl's frontier.

Deletes every Redis key of the crawl (queues, leases, URL dedup, duplicate
index, scope, robots.txt cache, counters, node records, the stop flag), so
that the next ``scrapy crawl`` with seeds starts it afresh. The store (the
SQLite file in ``CRAWL_DIR`` or the MongoDB database) is kept: pages crawled
again are updated in place. Refuses while a worker of the crawl is alive
(stop it first: ``scrapy stop``); without ``--yes`` it only says what it
would delete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crawler.operations import ops
from crawler.operations.cli import FrontierCommand

if TYPE_CHECKING:
    import argparse


class Command(FrontierCommand):
    def syntax(self) -> str:
        return "--yes [--json]"

    def short_desc(self) -> str:
        return "Delete the crawl's frontier (queues, dedup, counters) to start it afresh; the store stays"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--yes", action="store_true", help="really delete (otherwise: say what would go)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        timeout = self.settings.getfloat("FRONTIER_LEASE_TIMEOUT")

        def work() -> dict[str, Any]:
            frontier = self.open_frontier()
            st = ops.status(frontier, timeout)
            alive = [n["id"] for n in st["nodes"] if n["alive"]]
            out: dict[str, Any] = {"crawl": frontier.crawl, "pages": st["totals"]["pages"],
                                   "queued": st["frontier"]["queued"], "alive": alive, "deleted": 0}
            if alive or not opts.yes:
                return out
            out["deleted"] = frontier.views.delete_all()
            return out

        out = self.guarded("reset", work)
        if out is None:
            return
        if opts.json:
            print(ops.dumps(out))
        elif out["alive"]:
            print(f"crawl {out['crawl']}: {len(out['alive'])} worker(s) still running ({', '.join(out['alive'])}); "
                  "stop them first (scrapy stop)")
        elif not opts.yes:
            print(f"crawl {out['crawl']}: would delete its frontier ({out['pages']:,} pages done, "
                  f"{out['queued']:,} queued); the store stays. Add --yes to do it")
        else:
            print(f"crawl {out['crawl']}: deleted {out['deleted']:,} Redis keys; the store stays")
        if out["alive"] or not opts.yes:
            self.exitcode = 1
