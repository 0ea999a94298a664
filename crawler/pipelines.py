"""Item pipelines: thin adapters between the spider and crawler.store.

``StorePipeline`` writes pages to the crawl's store in batches:

- ``STORE_BATCH_SIZE``: pages per write (one transaction);
- ``STORE_FLUSH_INTERVAL``: seconds after which a partial batch is written;
- ``STORE_PATH``: the embedded store's file (default under ``CRAWL_DIR``).

Writes run on one background thread so that the crawl does not wait on the
disk. ``process_item`` returns only once the item's batch is written: the
frontier acknowledges a URL after its items have passed the pipelines, so a
worker killed at any moment leaves no URL marked done but not stored. A
batch that fails to write is retried with backoff; what still cannot be
written raises (the URL is then settled as an error, loudly, with the URLs
in the log).

Stats: ``store/pages_written``, ``store/write_error/<ExcClass>``,
``store/pages_lost``.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

from crawler.crawldir import crawl_name
from crawler.store import open_store

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from crawler.store import Store

logger = logging.getLogger(__name__)

__all__ = ["StorePipeline"]

_WRITE_ATTEMPTS = 5


class StorePipeline:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.batch_size = settings.getint("STORE_BATCH_SIZE")
        self.flush_interval = settings.getfloat("STORE_FLUSH_INTERVAL")
        if self.batch_size < 1:
            raise NotConfigured(f"STORE_BATCH_SIZE ({self.batch_size!r}) must be at least 1.")
        if self.flush_interval <= 0:
            raise NotConfigured(f"STORE_FLUSH_INTERVAL ({self.flush_interval!r}) must be higher than 0.")
        self.crawler = crawler
        self.stats = crawler.stats
        self.store: Store | None = None
        self._buffer: list[dict[str, Any]] = []
        self._waiters: list[Deferred[None]] = []
        self._pending: deque[Deferred[None]] = deque()
        self._pool = ThreadPool(minthreads=1, maxthreads=1, name="store-writer")
        self._timer: LoopingCall | None = None
        self._last_flush = time.monotonic()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def open_spider(self) -> None:
        assert self.crawler.spider is not None
        self.store = open_store(self.crawler.settings, crawl_name(self.crawler.settings, self.crawler.spider.name))
        self._pool.start()
        self._timer = LoopingCall(self._flush_if_due)
        self._timer.start(self.flush_interval, now=False)

    async def process_item(self, item: Any) -> Any:
        record = item.to_dict() if hasattr(item, "to_dict") else ItemAdapter(item).asdict()
        written: Deferred[None] = Deferred()
        self._buffer.append(record)
        self._waiters.append(written)
        if len(self._buffer) >= self.batch_size:
            self._flush()
        await maybe_deferred_to_future(written)
        return item

    def _flush_if_due(self) -> None:
        if self._buffer and time.monotonic() - self._last_flush >= self.flush_interval:
            self._flush()

    def _flush(self) -> None:
        batch, self._buffer = self._buffer, []
        waiters, self._waiters = self._waiters, []
        self._last_flush = time.monotonic()
        from twisted.internet import reactor  # not at import: Scrapy installs the reactor

        d: Deferred[None] = deferToThreadPool(reactor, self._pool, self._write, batch)
        self._pending.append(d)
        d.addBoth(self._done, d, waiters)

    def _done(self, result: Any, d: Deferred[None], waiters: list[Deferred[None]]) -> None:
        self._pending.remove(d)
        for w in waiters:
            if isinstance(result, Failure):
                w.errback(result)
            else:
                w.callback(None)

    def _write(self, batch: list[dict[str, Any]]) -> None:
        """Runs on the writer thread; retries with backoff, then raises."""
        assert self.store is not None
        delay = 0.5
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                self.store.write(batch)
            except Exception as exc:
                self.stats.inc_value(f"store/write_error/{type(exc).__name__}")
                if attempt == _WRITE_ATTEMPTS:
                    self.stats.inc_value("store/pages_lost", len(batch))
                    logger.error(
                        "Could not store %(n)d pages after %(attempts)d attempts (%(exc)s): %(urls)s",
                        {"n": len(batch), "attempts": attempt, "exc": exc,
                         "urls": " ".join(p["url"] for p in batch)},
                    )
                    raise
                logger.warning("Store write failed (%(exc)s); retrying in %(delay).1fs",
                               {"exc": exc, "delay": delay})
                time.sleep(delay)
                delay *= 2
            else:
                self.stats.inc_value("store/pages_written", len(batch))
                return

    async def close_spider(self) -> None:
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        if self._buffer:
            self._flush()
        while self._pending:
            await maybe_deferred_to_future(self._pending[0])
        self._pool.stop()
        if self.store is not None:
            self.store.close()
