"""Item pipelines: thin adapters between the spider and crawler.store.

``StorePipeline`` writes pages to the crawl's store in batches, through a
``crawler.store.buffer.WriteBuffer`` (which retries, waits out outages and
spills; its docstring says how):

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
worker killed at any moment leaves no URL marked done but not stored. An
item whose page is not written fails with ``NotStored``: as ``Spilled`` (the
store was away when the crawl stopped; a ``crawler.frontier.signals.GiveBack``)
the frontier gives its URL back to the queue, otherwise it settles it as an
error with the reason (the store refused the page). The pipeline answers the
frontier's ``ITEMS_WAITING`` signal with the pages it holds, and writes a
partial batch at once on ``WORKER_IDLE``.

While the store is away, partial batches gather into full ones, and the
pipeline tells the buffer once the crawl is stopping; a forced shutdown
(second Ctrl-C) makes it give up at once.

Before each batch is written, re-fetched pages are merged with their stored
versions (``crawler/recrawl/merge.py``) by a plan that this writer remakes every
``REVISIT_PLAN_INTERVAL`` from ``REVISIT_SAMPLE`` stored pages' evidence
(``crawler/recrawl/change.py``: the crawl's prior over change rates and, with
``REVISIT_BUDGET``, the budget's multiplier); ``REVISIT_MIN_INTERVAL``,
``REVISIT_MAX_INTERVAL``, ``REVISIT_DEFAULT_INTERVAL``, ``REVISIT_HISTORY``,
``REVISIT_EVIDENCE`` and ``RECRAWL_GONE_AFTER`` shape each page's schedule.

Stats: ``revisit/plan_sample``, ``revisit/plan_multiplier``,
``revisit/plan_failed``; the write buffer counts ``store/*``.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from crawler.compat import spider_closing
from crawler.crawldir import crawl_dir, crawl_name
from crawler.frontier.faces import FrontierFaces
from crawler.frontier.signals import ITEMS_WAITING, WORKER_IDLE, GiveBack
from crawler.recrawl.merge import Revisits, evidence_of
from crawler.recrawl.change import Policy
from crawler.recrawl.plan import Plan, RateModel, importance_weight
from crawler.store import StoreUnavailable, open_store
from crawler.store.buffer import WriteBuffer

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from crawler.frontier.faces import StoreFace
    from crawler.store import Store

logger = logging.getLogger(__name__)

__all__ = ["NotStored", "Spilled", "StorePipeline"]


class NotStored(DropItem):
    """The item's page is not in the store; the reason is the exception's
    ``reason``. Scrapy logs a dropped item at the given level without a
    traceback; the pipeline has already said what happened, once."""

    def __init__(self, reason: BaseException) -> None:
        super().__init__(f"not stored: {reason}", log_level="DEBUG")
        self.reason = reason


class Spilled(NotStored, GiveBack):
    """The store was away when the crawl stopped: the page is in the spill
    file (written to the store at the next start), and the frontier gives
    its URL back to the queue (``GiveBack``)."""


class StorePipeline:
    def __init__(self, crawler: Crawler, frontier: StoreFace) -> None:
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
        self.buffer: WriteBuffer | None = None
        self._batch: list[dict[str, Any]] = []
        self._waiters: list[Deferred[None]] = []
        self._pending: deque[Deferred[Any]] = deque()
        self._pool = ThreadPool(minthreads=1, maxthreads=1, name="store-writer")
        self._timer: LoopingCall | None = None
        self._soon: Any = None  # the reactor's call of _flush_now, when one is due
        self.frontier = frontier  # asked whether the worker is idle, once the spider is open
        self._opened = False
        self._last_flush = time.monotonic()
        self.waiting = 0  # pages handed to process_item and not settled
        self._engine_ran = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, FrontierFaces(crawler).store)

    def open_buffer(self, store: Store, spill_path: Path) -> WriteBuffer:
        """The write buffer over ``store``, with this crawl's settings."""
        self.buffer = WriteBuffer(store, spill_path, self.stats, batch_size=self.batch_size,
                                  retry_delay=self.retry_delay, retry_max_delay=self.retry_max_delay,
                                  close_timeout=self.close_timeout, waiting=lambda: self.waiting,
                                  prepare=self.revisits(), announce=self.announcer())
        return self.buffer

    def announcer(self) -> Callable[[list[dict[str, Any]]], None] | None:
        """Each written batch's webhook events, when the crawl posts them
        (WEBHOOK_URL, WEBHOOK_EVENTS: crawler/webhooks/)."""
        from crawler.webhooks.extension import page_prefix

        prefix = page_prefix(self.crawler.settings)
        if prefix is None:
            return None
        from crawler.webhooks.events import EventLog, page_events

        logs: list[EventLog] = []  # made at the first batch: the frontier is open by then

        def announce(pages: list[dict[str, Any]]) -> None:
            if not logs:
                logs.append(EventLog(self.frontier.client, self.frontier.crawl))
            logs[0].add(page_events(pages, prefix))

        return announce

    def revisits(self) -> Revisits:
        """Each page's schedule: started on its first fetch, merged with the
        stored version on a re-crawl's visit (crawler/recrawl/merge.py)."""
        s = self.crawler.settings
        policy = Policy(min_interval=s.getfloat("REVISIT_MIN_INTERVAL"),
                        max_interval=s.getfloat("REVISIT_MAX_INTERVAL"),
                        default_interval=s.getfloat("REVISIT_DEFAULT_INTERVAL"),
                        history=s.getint("REVISIT_HISTORY"), evidence=s.getfloat("REVISIT_EVIDENCE"),
                        max_distance=s.getint("SIMHASH_MAX_DISTANCE"))
        budget = s.getfloat("REVISIT_BUDGET")
        sample = s.getint("REVISIT_SAMPLE")
        every = s.getfloat("REVISIT_PLAN_INTERVAL")
        weighed = s.getbool("REVISIT_IMPORTANCE")
        # Remade every REVISIT_PLAN_INTERVAL, by the writer thread only.
        current, made_at = Plan(RateModel()), -math.inf

        def plan() -> Plan:
            nonlocal current, made_at
            now = time.monotonic()
            if self.buffer is not None and now - made_at > every:
                made_at = now  # a failure is not retried at every batch
                try:
                    total, pages = self.buffer.store.revisit_sample(sample)
                    current = Plan.make([evidence_of(p) for p in pages], policy,
                                        budget / 86400 if budget > 0 else None, total, previous=current.model,
                                        importance=[importance_weight(p.get("indegree"), p.get("mirror_degree"))
                                                    for p in pages] if weighed else None)
                except Exception as exc:  # the pages in hand are still merged, with the plan before
                    self.stats.inc_value("revisit/plan_failed")
                    logger.error("Re-crawl plan not made again (the last one stands): %(exc)r", {"exc": exc},
                                 extra={"spider": self.crawler.spider})
                else:
                    self.stats.set_value("revisit/plan_sample", len(pages))
                    if current.mu is not None:
                        self.stats.set_value("revisit/plan_multiplier", current.mu)
            return current

        return Revisits(policy, gone_after=s.getint("RECRAWL_GONE_AFTER"), plan=plan, importance=weighed,
                        changes=s.getbool("CHANGES_ENABLED"), max_diff=s.getint("CHANGES_MAX_DIFF"))

    def open_spider(self) -> None:
        assert self.crawler.spider is not None
        settings = self.crawler.settings
        name = crawl_name(settings, self.crawler.spider.name)
        spill_path = Path(settings.get("STORE_SPILL_PATH") or crawl_dir(settings) / f"{name}.unstored.jsonl")
        buffer = self.open_buffer(open_store(settings, name), spill_path)
        logger.info("Storing pages in %(store)s", {"store": buffer.store.describe()},
                    extra={"spider": self.crawler.spider})
        self._opened = True
        # The frontier's safety net (leases whose items never settle) must
        # not fire while pages wait for an absent store.
        self.crawler.signals.connect(self._items_waiting, signal=ITEMS_WAITING)
        self._pool.start()
        from twisted.internet import reactor  # not at import: Scrapy installs the reactor

        # A forced shutdown (second Ctrl-C) must not wait for the store.
        reactor.addSystemEventTrigger("before", "shutdown", self._on_shutdown)  # type: ignore[arg-type]
        if spill_path.exists():
            self._run(buffer.replay)  # first in the writer's queue: before any new page
        self._timer = LoopingCall(self._flush_if_due)
        self._timer.start(self.flush_interval, now=False)
        self.crawler.signals.connect(self._flush_soon, signal=WORKER_IDLE)

    async def process_item(self, item: Any) -> Any:
        record = item.to_dict() if hasattr(item, "to_dict") else ItemAdapter(item).asdict()
        written: Deferred[None] = Deferred()
        self._batch.append(record)
        self._waiters.append(written)
        self.waiting += 1
        try:
            if len(self._batch) >= self.batch_size:
                self._flush()
            elif self._opened and self.frontier.worker_idle():
                self._flush_soon()  # a page that came after its worker's WORKER_IDLE
            await maybe_deferred_to_future(written)
        finally:
            self.waiting -= 1
        return item

    def _items_waiting(self) -> int:
        """Pages handed to ``process_item`` and not settled (ITEMS_WAITING)."""
        return self.waiting

    def _flush_if_due(self) -> None:
        assert self.buffer is not None
        # Scrapy says only through its internals that the crawl is stopping
        # (items waiting for the store keep the engine from closing). Before
        # the engine runs, it looks stopped: a replay waiting for the store at
        # start must not make the whole crawl give up on the next outage.
        if not self.buffer.closing:
            if not spider_closing(self.crawler):
                self._engine_ran = True
            elif self._engine_ran:
                self.buffer.start_closing()
        if not self._batch or time.monotonic() - self._last_flush < self.flush_interval:
            return
        if self.buffer.down and len(self._batch) < self.batch_size and not self.buffer.closing:
            return  # the store is away: gather full batches rather than queue many small ones
        self._flush()

    def _flush_soon(self) -> None:
        """The worker has nothing else in hand (WORKER_IDLE): the batch is
        written on the reactor's next turn, with the pages already on their
        way through the pipelines, rather than at the next timed flush.
        Unless the store is away: then full batches are gathered, as in
        ``_flush_if_due``."""
        if self._soon is None:
            from twisted.internet import reactor  # not at import: Scrapy installs the reactor

            self._soon = cast(Any, reactor).callLater(0, self._flush_now)

    def _flush_now(self) -> None:
        self._soon = None
        if self._batch and self.buffer is not None and not self.buffer.down and not self.buffer.closing:
            self._flush()

    def _flush(self) -> None:
        assert self.buffer is not None
        batch, self._batch = self._batch, []
        waiters, self._waiters = self._waiters, []
        self._last_flush = time.monotonic()
        self._run(self.buffer.write, batch).addBoth(self._settle, waiters)

    def _run(self, task: Callable[..., Any], *args: Any) -> Deferred[Any]:
        """Run ``task`` on the writer thread; ``close_spider`` waits for it."""
        from twisted.internet import reactor

        d: Deferred[Any] = deferToThreadPool(reactor, self._pool, task, *args)
        self._pending.append(d)
        d.addBoth(self._forget, d)
        return d

    def _forget(self, result: Any, d: Deferred[Any]) -> Any:
        self._pending.remove(d)
        return result

    def _settle(self, result: Any, waiters: list[Deferred[None]]) -> None:
        if isinstance(result, Failure):  # a bug in the buffer: fail the items, loudly
            logger.error("Store writer failed: %(f)s", {"f": result.getTraceback()})
            result = [result.value] * len(waiters)
        for w, outcome in zip(waiters, result):
            if outcome is None:
                w.callback(None)
            else:
                w.errback(Spilled(outcome) if isinstance(outcome, StoreUnavailable) else NotStored(outcome))

    def _on_shutdown(self) -> None:
        """The reactor stops (a forced shutdown, or after close_spider): the
        writer stops retrying and spills what it holds; then its thread ends."""
        if self.buffer is not None:
            self.buffer.abort()
        if self._batch:
            self._flush()
        if self._pool.started and not self._pool.joined:
            from twisted.internet import reactor

            reactor.addSystemEventTrigger("during", "shutdown", self._pool.stop)  # type: ignore[arg-type]

    async def close_spider(self) -> None:
        if self._timer is not None and self._timer.running:
            self._timer.stop()
        if self.buffer is not None:
            self.buffer.start_closing()
        if self._batch:
            self._flush()
        while self._pending:
            await maybe_deferred_to_future(self._pending[0])
        if not self._pool.joined:
            self._pool.stop()
        if self.buffer is None:
            return
        self.buffer.store.close()
        spilled = self.stats.get_value("store/pages_spilled", 0)
        if spilled:
            # "Not confirmed": a write the server applied but whose reply was
            # lost looks failed too; writing it again is harmless (upserts).
            logger.error("%(n)d pages could not be stored (or their writes confirmed) before the crawl "
                         "stopped; they are in %(path)s "
                         "and their URLs are queued again", {"n": spilled, "path": self.buffer.spill_path})
