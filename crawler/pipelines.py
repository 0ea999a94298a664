"""Item pipelines: thin adapters between the spider and crawler.store.

``StorePipeline`` writes pages to the crawl's store in batches:

- ``STORE_BATCH_SIZE``: pages per write (one transaction);
- ``STORE_FLUSH_INTERVAL``: seconds after which a partial batch is written;
- ``STORE_RETRY_DELAY`` / ``STORE_RETRY_MAX_DELAY``: backoff between attempts
  while the store is away (doubling from the first to the second);
- ``STORE_CLOSE_TIMEOUT``: how long a stopping crawl keeps trying;
- ``STORE_SPILL_PATH``: where pages that could not be written before the
  crawl stopped are kept (default ``<CRAWL_DIR>/<CRAWL_NAME>.unstored.jsonl``).

Writes run on one background thread so that the crawl does not wait on the
disk. ``process_item`` returns only once the item's batch is written: the
frontier acknowledges a URL after its items have passed the pipelines, so a
worker killed at any moment leaves no URL marked done but not stored.

When the store is away (MongoDB down, SQLite locked or the disk full), the
batch is retried with backoff for as long as the crawl runs. Nothing is
acknowledged meanwhile: the pages wait in memory, Scrapy's scraper limit
(``SCRAPER_SLOT_MAX_ACTIVE_SIZE``) stops new downloads, and the crawl
resumes where it was when the store is back. If the crawl is stopped during
the outage, the pipeline keeps trying for ``STORE_CLOSE_TIMEOUT`` seconds,
then appends what it could not write to the spill file, says so at ERROR
level, and fails those items with ``StoreUnavailable``: the frontier gives
their URLs back to the queue instead of acknowledging them. The next crawl
of the same name writes the spill file first and removes it.

A page the store refuses for good (an error ``Store.transient`` does not
accept: a document too large, a value it cannot encode) is retried alone,
then fails: its URL is settled as an error with the reason.

Stats: ``store/pages_written``, ``store/write_error/<ExcClass>``,
``store/outages``, ``store/outage_seconds``, ``store/pages_spilled``,
``store/pages_replayed``, ``store/pages_refused``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from crawler.crawldir import crawl_dir, crawl_name
from crawler.store import StoreUnavailable, open_store, short_error

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from crawler.store import Store

logger = logging.getLogger(__name__)

__all__ = ["NotStored", "StorePipeline", "read_spill", "store_waiting"]

_PIPELINES: WeakKeyDictionary[Crawler, StorePipeline] = WeakKeyDictionary()


def store_waiting(crawler: Crawler) -> int:
    """Pages of ``crawler`` waiting for the store (0 without the pipeline)."""
    pipeline = _PIPELINES.get(crawler)
    return pipeline.waiting if pipeline is not None else 0


def read_spill(path: Path) -> list[dict[str, Any]]:
    """The pages in a spill file, skipping a line cut short by a crash while
    it was appended (that page's URL was never acknowledged: the crawl
    fetches it again)."""
    pages: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                page = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("%(path)s:%(n)d: skipping an incomplete line", {"path": path, "n": n})
                continue
            if isinstance(page, dict) and isinstance(page.get("url"), str):
                pages.append(page)
    return pages


class NotStored(DropItem):
    """The item's page is not in the store; the reason is the exception's
    ``reason``. Scrapy logs a dropped item at the given level without a
    traceback; the pipeline has already said what happened, once."""

    def __init__(self, reason: BaseException) -> None:
        super().__init__(f"not stored: {reason}", log_level="DEBUG")
        self.reason = reason


class StorePipeline:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.batch_size = settings.getint("STORE_BATCH_SIZE")
        self.flush_interval = settings.getfloat("STORE_FLUSH_INTERVAL")
        self.retry_delay = settings.getfloat("STORE_RETRY_DELAY")
        self.retry_max_delay = settings.getfloat("STORE_RETRY_MAX_DELAY")
        self.close_timeout = settings.getfloat("STORE_CLOSE_TIMEOUT")
        # Values were checked at start (crawler.config): the store is required,
        # a bad setting stops the crawl instead of switching the store off.
        self.crawler = crawler
        self.stats = crawler.stats
        self.store: Store | None = None
        self.spill_path: Path | None = None
        self._buffer: list[dict[str, Any]] = []
        self._waiters: list[Deferred[None]] = []
        self._pending: deque[Deferred[Any]] = deque()
        self._pool = ThreadPool(minthreads=1, maxthreads=1, name="store-writer")
        self._timer: LoopingCall | None = None
        self._last_flush = time.monotonic()
        self.waiting = 0  # pages handed to process_item and not settled
        # Writer-thread state:
        self._down_since: float | None = None
        self._last_warning = 0.0
        self._close_deadline: float | None = None
        self._abort = False  # the reactor is going down: stop retrying now
        self._spill_lock = threading.Lock()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def open_spider(self) -> None:
        assert self.crawler.spider is not None
        settings = self.crawler.settings
        name = crawl_name(settings, self.crawler.spider.name)
        self.spill_path = Path(settings.get("STORE_SPILL_PATH")
                               or crawl_dir(settings) / f"{name}.unstored.jsonl")
        self.store = open_store(settings, name)
        logger.info("Storing pages in %(store)s", {"store": self.store.describe()},
                    extra={"spider": self.crawler.spider})
        _PIPELINES[self.crawler] = self
        self._pool.start()
        from twisted.internet import reactor  # not at import: Scrapy installs the reactor

        # A forced shutdown (second Ctrl-C) must not wait for the store.
        reactor.addSystemEventTrigger("before", "shutdown", self._on_shutdown)  # type: ignore[arg-type]
        self._replay_spill()
        self._timer = LoopingCall(self._flush_if_due)
        self._timer.start(self.flush_interval, now=False)

    async def process_item(self, item: Any) -> Any:
        record = item.to_dict() if hasattr(item, "to_dict") else ItemAdapter(item).asdict()
        written: Deferred[None] = Deferred()
        self._buffer.append(record)
        self._waiters.append(written)
        self.waiting += 1
        try:
            if len(self._buffer) >= self.batch_size:
                self._flush()
            await maybe_deferred_to_future(written)
        finally:
            self.waiting -= 1
        return item

    def _flush_if_due(self) -> None:
        if not self._buffer or time.monotonic() - self._last_flush < self.flush_interval:
            return
        if self._down_since is not None and len(self._buffer) < self.batch_size and not self._closing():
            return  # the store is away: gather full batches rather than queue many small ones
        self._flush()

    def _flush(self) -> None:
        batch, self._buffer = self._buffer, []
        waiters, self._waiters = self._waiters, []
        self._last_flush = time.monotonic()
        self._submit(batch, waiters)

    def _submit(self, batch: list[dict[str, Any]], waiters: list[Deferred[None]] | None) -> None:
        from twisted.internet import reactor

        d: Deferred[Any] = deferToThreadPool(reactor, self._pool, self._write, batch, waiters is not None)
        self._pending.append(d)
        d.addBoth(self._done, d, waiters)

    def _done(self, result: Any, d: Deferred[Any], waiters: list[Deferred[None]] | None) -> None:
        self._pending.remove(d)
        if waiters is None:
            return
        if isinstance(result, Failure):  # a bug in _write: fail the items, loudly
            logger.error("Store writer failed: %(f)s", {"f": result.getTraceback()})
            result = [result.value] * len(waiters)
        for w, outcome in zip(waiters, result):
            if outcome is None:
                w.callback(None)
            else:
                w.errback(NotStored(outcome))

    # -- the writer thread ------------------------------------------------------------
    def _closing(self) -> bool:
        try:
            engine = self.crawler.engine
        except RuntimeError:  # Scrapy 2.19: not set (yet, or any more)
            return True
        if engine is None or not engine.running:
            return True
        slot = getattr(engine, "_slot", None)  # Scrapy 2.19: set while the spider closes
        return slot is not None and slot.closing is not None

    def _write(self, batch: list[dict[str, Any]], spill: bool) -> list[BaseException | None]:
        """Write ``batch``; one outcome per page: None (written), a
        ``StoreUnavailable`` (spilled, if ``spill``) or the store's refusal."""
        outcome = self._write_with_retry(batch, spill)
        if outcome is None or len(batch) == 1 or isinstance(outcome, StoreUnavailable):
            return [outcome] * len(batch)
        # Refused for good: find the page(s) at fault, write the others.
        return [self._write_with_retry([page], spill) for page in batch]

    def _write_with_retry(self, batch: list[dict[str, Any]], spill: bool) -> BaseException | None:
        assert self.store is not None
        delay = self.retry_delay
        while True:
            if self._gave_up():
                return self._give_up(batch, spill, None)
            try:
                self.store.write(batch)
            except Exception as exc:
                self.stats.inc_value(f"store/write_error/{type(exc).__name__}")
                if not self.store.transient(exc):
                    if len(batch) == 1:
                        self.stats.inc_value("store/pages_refused")
                        logger.error("The store refused %(url)s: %(exc)s", {"url": batch[0]["url"], "exc": exc})
                    return exc
                self._outage(exc, delay)
                if self._sleep(delay):
                    return self._give_up(batch, spill, exc)
                delay = min(delay * 2, self.retry_max_delay)
            else:
                self.stats.inc_value("store/pages_written", len(batch))
                if self._down_since is not None:
                    down = time.monotonic() - self._down_since
                    self._down_since = None
                    self.stats.inc_value("store/outage_seconds", round(down))
                    logger.warning("The store is back after %(s).1fs; writing the %(n)d pages that waited",
                                   {"s": down, "n": self.waiting})
                return None

    def _outage(self, exc: Exception, delay: float) -> None:
        now = time.monotonic()
        if self._down_since is None:
            self._down_since = now
            self.stats.inc_value("store/outages")
            self._last_warning = 0.0
        if now - self._last_warning >= 30:
            self._last_warning = now
            logger.warning(
                "The store is unavailable (%(exc)s) for %(s).0fs; %(n)d pages wait for it and are not "
                "acknowledged; retrying in %(delay).1fs", {"exc": short_error(exc), "s": now - self._down_since,
                                                          "n": self.waiting, "delay": delay})

    def _gave_up(self) -> bool:
        """Stopping, the store is away and the close timeout has passed (or
        the reactor is going down: no waiting at all)."""
        if self._down_since is None:
            return False
        if self._abort:
            return True
        if self._close_deadline is None:
            return False
        return time.monotonic() >= self._close_deadline

    def _sleep(self, delay: float) -> bool:
        """Sleep ``delay`` seconds; True if the pipeline must give up."""
        end = time.monotonic() + delay
        while True:
            if self._close_deadline is None and self._closing():
                self._close_deadline = time.monotonic() + self.close_timeout
            if self._gave_up():
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, 0.1))

    def _give_up(self, batch: list[dict[str, Any]], spill: bool, exc: Exception | None) -> StoreUnavailable:
        reason = StoreUnavailable(f"store unavailable ({short_error(exc) if exc else 'still down'}) when the crawl stopped")
        if spill:
            self._spill(batch, exc)
        return reason

    def _spill(self, batch: list[dict[str, Any]], exc: Exception | None) -> None:
        assert self.spill_path is not None
        with self._spill_lock:
            try:
                self.spill_path.parent.mkdir(parents=True, exist_ok=True)
                with self.spill_path.open("a", encoding="utf-8") as f:
                    for page in batch:
                        f.write(json.dumps(page, ensure_ascii=False) + "\n")
                    f.flush()
            except OSError as err:
                logger.critical("Could not write %(n)d unstored pages to %(path)s (%(err)s); their URLs "
                                "go back to the frontier: %(urls)s",
                                {"n": len(batch), "path": self.spill_path, "err": err,
                                 "urls": " ".join(p["url"] for p in batch)})
                return
        self.stats.inc_value("store/pages_spilled", len(batch))
        logger.error("The store is still unavailable (%(exc)s) as the crawl stops: %(n)d pages saved to "
                     "%(path)s (written to the store when this crawl next starts); their URLs go back "
                     "to the frontier. %(urls)s",
                     {"exc": short_error(exc) if exc else "down", "n": len(batch), "path": self.spill_path,
                      "urls": " ".join(p["url"] for p in batch[:20]) + (" ..." if len(batch) > 20 else "")})

    # -- spill file ------------------------------------------------------------------
    def _replay_spill(self) -> None:
        """Write the pages a previous run could not, before any new page."""
        assert self.spill_path is not None
        if not self.spill_path.exists():
            return
        pages = read_spill(self.spill_path)
        if not pages:
            self.spill_path.unlink()
            return
        logger.info("Writing %(n)d pages left unstored by an earlier run (%(path)s)",
                    {"n": len(pages), "path": self.spill_path})
        from twisted.internet import reactor

        path = self.spill_path
        d: Deferred[Any] = deferToThreadPool(reactor, self._pool, self._replay, pages, path)
        self._pending.append(d)
        d.addBoth(self._replayed, d)

    def _replayed(self, result: Any, d: Deferred[Any]) -> Any:
        self._pending.remove(d)
        return result

    def _replay(self, pages: list[dict[str, Any]], path: Path) -> None:
        outcomes: list[BaseException | None] = []
        for start in range(0, len(pages), self.batch_size):
            outcomes += self._write(pages[start:start + self.batch_size], False)
        if any(isinstance(o, StoreUnavailable) for o in outcomes):
            logger.error("%(path)s is kept: the store went away while it was written", {"path": path})
            return
        self.stats.inc_value("store/pages_replayed", sum(o is None for o in outcomes))
        with self._spill_lock:
            path.unlink(missing_ok=True)

    def _on_shutdown(self) -> None:
        """The reactor stops (a forced shutdown, or after close_spider): the
        writer stops retrying and spills what it holds; then its thread ends."""
        self._abort = True
        if self._buffer:
            self._flush()
        if self._pool.started and not self._pool.joined:
            from twisted.internet import reactor

            reactor.addSystemEventTrigger("during", "shutdown", self._pool.stop)  # type: ignore[arg-type]

    async def close_spider(self) -> None:
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        if self._buffer:
            self._flush()
        while self._pending:
            await maybe_deferred_to_future(self._pending[0])
        if not self._pool.joined:
            self._pool.stop()
        _PIPELINES.pop(self.crawler, None)
        if self.store is not None:
            self.store.close()
        spilled = self.stats.get_value("store/pages_spilled", 0)
        if spilled:
            # "Not confirmed": a write the server applied but whose reply was
            # lost looks failed too; writing it again is harmless (upserts).
            logger.error("%(n)d pages could not be stored (or their writes confirmed) before the crawl "
                         "stopped; they are in %(path)s "
                         "and their URLs are queued again", {"n": spilled, "path": self.spill_path})
