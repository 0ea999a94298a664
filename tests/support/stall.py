"""A worker starved of CPU, on purpose: ``ReactorStall`` blocks the reactor
for ``STALL_SECONDS`` every ``STALL_EVERY`` seconds (default 0.15 in 0.2),
as a process on a machine loaded to several runnable processes per core
would be. Enabled in tests with ``-s EXTENSIONS=...`` (see
tests/test_cluster.py: ``tests.support.stall.ReactorStall``)."""

from __future__ import annotations

import time
from typing import Any

from scrapy import signals
from twisted.internet.task import LoopingCall


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
