"""Extension: Python's garbage collector tuned for a crawling process.

A worker allocates a great many short-lived objects a page (the tree's
elements, text runs, URLs, Redis replies) and keeps a large, settled set of
long-lived ones (Scrapy, Twisted, the models, the frontier's books). With
CPython's default thresholds (700, 10, 10) the collector runs more than once
a page and each older-generation run walks the whole settled set: 0.8 ms a
page on the PostgreSQL manual, 7 % of the process's CPU (bench/RESULTS.md,
"Speed with everything on"). Very little of a page's garbage is cyclic
(reference counting frees it), so collecting less often costs little memory.

``GC_THRESHOLD`` (three counts, as ``gc.set_threshold`` takes them; ``""``
keeps Python's own) is applied when the engine starts, after every import
and model load, and what exists then is moved out of the collector's sight
(``gc.freeze``): it lives as long as the process. At the engine's stop both
are undone, so a process that runs several crawlers (a test, a script)
gets its collector back as it was.

Either way the collections while the engine runs and this thread's CPU
they take are counted: stats ``gc/collections`` and ``gc/cpu_seconds``
(a callback at each collection, not at each allocation: nothing a page).
"""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from typing_extensions import Self

__all__ = ["GarbageCollector", "thresholds"]


def thresholds(value: Any) -> tuple[int, int, int] | None:
    """``GC_THRESHOLD``'s three counts (None: Python's own); ValueError
    with the reason for anything else."""
    if value is None or value == "":
        return None
    parts = value.split(",") if isinstance(value, str) else value
    try:
        counts = tuple(int(str(p).strip()) for p in parts)
    except (TypeError, ValueError):
        raise ValueError("must be three whole numbers, as 100000,50,100") from None
    if len(counts) != 3:
        raise ValueError("must be three whole numbers, as 100000,50,100")
    if counts[0] < 1 or counts[1] < 1 or counts[2] < 1:
        raise ValueError("must be three numbers of at least 1 (0 would turn the collector off)")
    return counts[0], counts[1], counts[2]


class GarbageCollector:
    def __init__(self, counts: tuple[int, int, int] | None, stats: StatsCollector | None = None) -> None:
        self.counts = counts
        self.stats = stats
        self.before: tuple[int, int, int] | None = None
        self.running = False
        self.collections = 0
        self.cpu = 0.0
        self._started = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        counts = thresholds(crawler.settings.get("GC_THRESHOLD"))  # checked by SettingsCheck first
        ext = cls(counts, crawler.stats)
        crawler.signals.connect(ext.engine_started, signal=signals.engine_started)
        crawler.signals.connect(ext.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(ext.engine_stopped, signal=signals.engine_stopped)
        return ext

    def _count(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.thread_time()
        else:
            self.collections += 1
            self.cpu += time.thread_time() - self._started

    def engine_started(self) -> None:
        if self.running:
            return
        self.running = True
        gc.callbacks.append(self._count)
        if self.counts is not None:
            self.before = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(*self.counts)

    def spider_closed(self) -> None:
        if self.stats is not None:
            self.stats.set_value("gc/collections", self.collections)
            self.stats.set_value("gc/cpu_seconds", round(self.cpu, 4))

    def engine_stopped(self) -> None:
        if not self.running:
            return
        self.running = False
        if self._count in gc.callbacks:
            gc.callbacks.remove(self._count)
        if self.before is not None:
            gc.set_threshold(*self.before)
            gc.unfreeze()
            self.before = None
