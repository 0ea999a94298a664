"""A worker starved of CPU, on purpose: ``ReactorStall`` blocks the reactor
for ``STALL_SECONDS`` every ``STALL_EVERY`` seconds (default 0.15 in 0.2),
as a process on a machine loaded to several runnable processes per core
would be. Enabled in tests with ``-s EXTENSIONS=...`` (see
tests/test_cluster.py: ``tests.support.stall.ReactorStall``)."""

from __future__ import annotations

import os
import time
from typing import Any

from scrapy import signals
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import LoopingCall, deferLater

from crawler.frontier.service import FrontierService
from crawler.requestmeta import FRONTIER_LEASE


class ReactorStall:
    def __init__(self, seconds: float, every: float) -> None:
        self.seconds = seconds
        self.every = every
        self.loop = LoopingCall(self.stall)
        self.stalls = 0

    @classmethod
    def from_crawler(cls, crawler: Any) -> ReactorStall:
        ext = cls(crawler.settings.getfloat("STALL_SECONDS", 0.15), crawler.settings.getfloat("STALL_EVERY", 0.2))
        crawler.signals.connect(ext.opened, signal=signals.spider_opened)
        crawler.signals.connect(ext.closed, signal=signals.spider_closed)
        ext.stats = crawler.stats
        return ext

    def opened(self, spider: Any) -> None:
        self.loop.start(self.every, now=False)

    def closed(self, spider: Any) -> None:
        if self.loop.running:
            self.loop.stop()
        self.stats.set_value("test/reactor_stalls", self.stalls)

    def stall(self) -> None:
        self.stalls += 1
        time.sleep(self.seconds)


class StallOnce:
    """A downloader middleware (920: before ``SendSpacingMiddleware``) that
    blocks the reactor ``STALL_SECONDS`` once, as SIGSTOP would: at the
    ``STALL_AFTER``-th response (robots.txt aside), other requests in
    flight; or, with ``STALL_FILE``, as the first request after that file
    appears is about to go on the wire, a leased request in hand, once the
    worker owes Redis nothing else (every page before it acknowledged: a
    page fetched but not yet acknowledged when the lease is reaped is
    fetched again, which is another case than the one the stall is for)."""

    def __init__(self, seconds: float, after: int, file: str | None, stats: Any, crawler: Any = None) -> None:
        self.seconds, self.after, self.file, self.stats = seconds, after, file, stats
        self.crawler = crawler
        self.seen = 0
        self.done = False

    @classmethod
    def from_crawler(cls, crawler: Any) -> StallOnce:
        s = crawler.settings
        return cls(s.getfloat("STALL_SECONDS", 5.0), s.getint("STALL_AFTER", 5), s.get("STALL_FILE"), crawler.stats,
                   crawler)

    def _stall(self, url: str) -> None:
        self.done = True
        self.stats.set_value("test/stalled_url", url)
        time.sleep(self.seconds)

    async def process_request(self, request: Any, spider: Any = None) -> None:
        if self.file and not self.done and not request.url.endswith("/robots.txt") and os.path.exists(self.file):
            book = FrontierService.of(self.crawler).book
            lease = request.meta.get(FRONTIER_LEASE)
            from twisted.internet import reactor

            deadline = time.monotonic() + 30
            while (set(book.trackers) - book._downloading - {lease} or book.has_writes()) \
                    and time.monotonic() < deadline:  # a page downloaded, not yet acknowledged
                await maybe_deferred_to_future(deferLater(reactor, 0.02, lambda: None))
            if not self.done:
                self._stall(request.url)

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        if not self.file and not self.done and not request.url.endswith("/robots.txt"):
            self.seen += 1
            if self.seen == self.after:
                self._stall(request.url)
        return response
