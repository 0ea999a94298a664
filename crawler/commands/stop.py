"""``scrapy stop [--now] [--clear] [--json]``: stop every worker of a crawl.

Without options every worker stops leasing, finishes and acknowledges what
it holds, flushes its store and exits 0 (within ``FRONTIER_LEASE_TIMEOUT``
of the flag: workers read it at each heartbeat). Nothing is lost; the crawl
resumes with the next ``scrapy crawl`` once the flag is cleared. ``--now``:
workers give their leases back to the queues and exit at once (pages
fetched but not yet stored are fetched again later). The flag stays set, and
a worker started meanwhile says so and exits, until ``scrapy stop --clear``
(or ``scrapy crawl ... -s STOP_CLEAR=1``).

Reads ``REDIS_URL``, ``CRAWL_NAME``, ``CRAWL_DIR`` as the spiders do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


from crawler.operations import ops
from crawler.operations.cli import FrontierCommand

if TYPE_CHECKING:
    import argparse


class Command(FrontierCommand):
    def syntax(self) -> str:
        return "[--now] [--clear] [--json]"

    def short_desc(self) -> str:
        return "Stop every worker of the crawl (graceful; --now: at once; --clear: allow workers again)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--now", action="store_true", help="exit at once, leases back to the queues")
        parser.add_argument("--clear", action="store_true", help="clear the stop flag: workers may run again")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        interval = self.settings.getfloat("FRONTIER_HEARTBEAT_INTERVAL")

        def work() -> tuple[dict[str, Any], str]:
            frontier = self.open_frontier()
            if opts.clear:
                was = frontier.control.clear_stop()
                return ({"crawl": frontier.crawl, "cleared": was},
                        f"crawl {frontier.crawl}: stop flag cleared; workers may run it again" if was
                        else f"crawl {frontier.crawl}: no stop flag was set")
            return (ops.request_stop(frontier, now=opts.now),
                    f"crawl {frontier.crawl}: asked every worker to stop "
                    f"{'at once' if opts.now else 'after what it holds'}; they see it within {interval:g} s. "
                    "`scrapy status` shows them go; `scrapy stop --clear` lets workers run it again")

        done = self.guarded("stop", work)
        if done is not None:
            print(ops.dumps(done[0]) if opts.json else done[1])
