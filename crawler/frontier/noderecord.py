"""This worker's record for operators (``scrapy status``, ``crawler/operations/ops.py``),
sent with each heartbeat: its pages, fetches, errors and links, its rate over
the last minute, its state, and the re-crawl's and focused crawl's figures.

Reads the stats ``response_received_count``, ``frontier/links_parsed``,
``recrawl/*``, ``topic/*`` and ``page/step_ms/*``; writes nothing but its own rate samples.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from crawler.frontier.leasebook import LeaseBook

__all__ = ["NodeRecord"]


class NodeRecord:
    """The record of one worker (the scheduler's): ``record`` makes it."""

    def __init__(self, stats: StatsCollector, book: LeaseBook, *, lease_timeout: float, crawl_dir: str,
                 clock: Any = time.monotonic) -> None:
        self.stats = stats
        self.book = book
        self.lease_timeout = lease_timeout
        self.crawl_dir = crawl_dir
        self.clock = clock
        self._rate: deque[tuple[float, int]] = deque()  # (time, pages acknowledged) samples, last minute

    def record(self, *, stopping: bool, spider: str | None, download_delay: float) -> dict[str, Any]:
        get = self.stats.get_value
        now, done = self.clock(), self.book.done
        self._rate.append((now, done))
        while len(self._rate) > 2 and now - self._rate[1][0] >= 60.0:
            self._rate.popleft()
        t0, d0 = self._rate[0]
        per_min = (done - d0) * 60.0 / (now - t0) if now - t0 >= 1.0 else 0.0
        return {"pages": done, "fetched": get("response_received_count", 0), "errors": self.book.acked.get("E", 0),
                "links": get("frontier/links_parsed", 0), "pages_per_min": round(per_min, 2),
                "lease_timeout": self.lease_timeout, "state": "stopping" if stopping else "running",
                # The delay between two fetches of a site this worker keeps
                # (DOWNLOAD_DELAY): operators see the crawl's, not their own.
                "download_delay": download_delay,
                "crawl_dir": self.crawl_dir,
                "spider": spider,
                # The re-crawl's figures (crawler/recrawl/merge.py), when it revisits.
                "recrawl": {k.split("/", 1)[1]: v for k, v in self.stats.get_stats().items()
                            if k.startswith("recrawl/") and isinstance(v, int)},
                # The page steps' CPU a page (crawler/chain/__init__.py: page/step_ms/*)
                # and the pages it is over.
                "steps": {k.rsplit("/", 1)[1]: v for k, v in self.stats.get_stats().items()
                          if k.startswith("page/step_ms/") and isinstance(v, (int, float))},
                "step_pages": get("page/step_pages", 0),
                # A focused crawl's figures (crawler/spiders/site.py: topic/*).
                "topic": {k.split("/", 1)[1]: v for k, v in self.stats.get_stats().items()
                          if k.startswith("topic/") and isinstance(v, int)}}
