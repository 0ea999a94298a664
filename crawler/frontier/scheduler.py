"""Scrapy scheduler backed by the shared Redis frontier: a thin adapter
between Scrapy's scheduler interface and the frontier service
(``service.py``), which holds the Redis client, the ``Frontier`` and the
lease book (``leasebook.py``).

Settings (Redis's, the crawl's name and the frontier's own: ``service.py``):

- ``FRONTIER_RETRY_BACKOFF``, ``FRONTIER_RETRY_BACKOFF_MAX``: a retried
  request waits base * 2^(n-1) seconds (capped) before going back to the
  tail of its site queue.
- ``FRONTIER_WAIT_FOR_SEEDS``: keep idle workers waiting for new URLs instead
  of closing when the cluster has nothing left.
- ``FRONTIER_JOIN_WAIT``: how long a worker without seeds (the spider's
  ``seed_urls`` empty) waits, before leasing, for a crawl nobody has seeded.
- ``FRONTIER_LEASE_BATCH``: most requests leased in one call (one per site).
- ``FRONTIER_MAX_HELD``: most leases a worker holds at once, downloading or
  waiting for the spider (0: twice ``CONCURRENT_REQUESTS``); at the bound the
  site slots its downloads free go to other workers (why: docs/reference.md).
- ``FRONTIER_MAX_UNSTORED``: most pages held that wait only for the store
  (0: two ``STORE_BATCH_SIZE``s): a store away or slow holds the worker there.
- ``FRONTIER_QUEUE_BY``, ``CLOSESPIDER_PAGECOUNT`` (pages stored and held, at
  most), ``FRONTIER_LEASE_TIMEOUT`` (items that never settle are acknowledged after it).

Stats: ``frontier/leased``, ``frontier/lease_held_back``, ``frontier/requeued/retry``;
``frontier/acked/<state>`` (``acks.py``); the commits' and heartbeats' (``service.py``).

Where this departs from scrapy-redis (0.9.1), and why: ``docs/cluster.md``
(leases, not pops; per-site queues timed in Redis; compact dedup; shared
state never deleted on close; JSON requests, never pickles).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any, cast

import redis
from scrapy import Request, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.task import LoopingCall

from crawler import compat
from crawler.crawldir import crawl_dir
from crawler.frontier.acks import Acks
from crawler.frontier.noderecord import NodeRecord
from crawler.frontier.joining import say_already_finished
from crawler.frontier.leasing import GAP_META, LEASE_META, lease_requests, link_entry
from crawler.frontier.serialize import SerializationError, request_to_json
from crawler.frontier.service import FrontierService
from crawler.frontier.signals import HEARTBEAT, ITEMS_WAITING, WORKER_IDLE
from crawler.frontier.tracking import unwrap
from crawler.frontier.spiderface import FrontierSpider
from crawler.requestmeta import FRONTIER_LEASE, RETRY_TIMES

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.base import DelayedCall
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = ["GAP_META", "LEASE_META", "FrontierScheduler"]


class FrontierScheduler(BaseScheduler):
    def __init__(self, crawler: Crawler, service: FrontierService) -> None:
        self.crawler = crawler
        s = crawler.settings
        self.stats = crawler.stats
        self.retry_base = s.getfloat("FRONTIER_RETRY_BACKOFF")
        self.retry_max = s.getfloat("FRONTIER_RETRY_BACKOFF_MAX")
        self.wait_for_seeds = s.getbool("FRONTIER_WAIT_FOR_SEEDS")
        self.lease_batch = s.getint("FRONTIER_LEASE_BATCH")
        self.queue_by = s.get("FRONTIER_QUEUE_BY")
        self.max_concurrency = s.getint("CONCURRENT_REQUESTS")
        self.max_held = s.getint("FRONTIER_MAX_HELD") or 2 * self.max_concurrency
        self.max_unstored = s.getint("FRONTIER_MAX_UNSTORED") or 2 * s.getint("STORE_BATCH_SIZE")
        self.page_limit = s.getint("CLOSESPIDER_PAGECOUNT")
        self.lease_timeout = s.getfloat("FRONTIER_LEASE_TIMEOUT")
        self.crawl_dir = str(crawl_dir(s).resolve())
        self.service = service  # the frontier's driver: it opens the service, as its Worker
        self.book = self.service.book
        self.spider: FrontierSpider | None = None
        self._buffer: deque[Request] = deque()  # leased, not yet handed to the engine
        self._wake_call: DelayedCall | None = None
        self._acks_call: DelayedCall | None = None
        self._tick_loop: LoopingCall | None = None
        self._lease_after = 0.0
        self.stopping: str | None = None  # "graceful" or "now", once an operator asked (scrapy stop)
        self.acks = Acks(self.book, self.stats)
        self.record = NodeRecord(self.stats, self.book, lease_timeout=self.lease_timeout, crawl_dir=self.crawl_dir)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        # Built when the engine opens, after the extensions: the service is
        # there to fetch (the one place outside frontier/faces.py).
        return cls(crawler, FrontierService.of(crawler))

    # -- lifecycle -----------------------------------------------------------
    def open(self, spider: Spider) -> Deferred[None] | None:
        if not isinstance(spider, FrontierSpider):
            raise TypeError(f"spider {spider.name!r} does not declare what the frontier needs of it "
                            "(crawler.frontier.spiderface.FrontierSpider: frontier_callbacks, frontier_errbacks, "
                            "frontier_head_callbacks, frontier_order, seed_urls, revisits, parse)")
        self.spider = spider
        sig = self.crawler.signals
        # Before the service opens: its first heartbeat is sent there.
        sig.connect(self._after_heartbeat, signal=HEARTBEAT)
        self.service.open(spider, worker=self)
        sig.connect(self._item_settled, signal=signals.item_scraped)
        sig.connect(self._item_settled, signal=signals.item_dropped)
        sig.connect(self._item_settled, signal=signals.item_error)
        sig.connect(self._spider_idle, signal=signals.spider_idle)
        sig.connect(self._left_downloader, signal=signals.request_left_downloader)
        # After CoreStats's: a stop --now stops the reactor, which closes the spider as "shutdown".
        sig.connect(self._closed, signal=signals.spider_closed)
        self._tick_loop = LoopingCall(self._tick)
        self._tick_loop.start(0.25, now=False)
        if not spider.seed_urls and not self.wait_for_seeds:
            # A site worker without seeds, perhaps up before the one that
            # seeds the crawl: waits for it before leasing, and before the
            # spider reads the crawl's policy (the engine waits for this open).
            return deferred_from_coro(self.service.until_seeded(self.crawler.settings.getfloat("FRONTIER_JOIN_WAIT")))
        return None

    def _closed(self, reason: str) -> None:
        if self.stopping == "now":
            self.stats.set_value("finish_reason", "stopped_now")

    def close(self, reason: str) -> None:
        if self._tick_loop is not None and self._tick_loop.running:
            self._tick_loop.stop()
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()
        if self._acks_call is not None and self._acks_call.active():
            self._acks_call.cancel()  # the service's close settles what is left
        if not self.service.is_open:
            return
        # Give back what was never started; the service settles the rest.
        self.book.give_back(r.meta[FRONTIER_LEASE] for r in self._buffer)
        self._buffer.clear()
        self.service.close()
        revisiting = self.spider is not None and self.spider.revisits  # says what was due itself
        if reason == "finished" and not revisiting and not self.stats.get_value("response_received_count"):
            say_already_finished(self.service.frontier.crawl, self.service.resumed, self.spider)

    # -- engine interface ------------------------------------------------------
    def has_pending_requests(self) -> bool:
        if self._buffer or self.book.busy():
            return True
        if self.stopping:
            return False
        try:
            return self.service.frontier.views.pending() > 0
        except redis.RedisError as exc:
            self.service.redis_error(exc)
            return True  # Redis away: wait for it rather than end the crawl

    def enqueue_request(self, request: Request) -> bool:
        assert self.spider is not None
        lease_id = request.meta.get(FRONTIER_LEASE)
        if lease_id is not None:
            # A leased request scheduled again is a retry (redirects are not:
            # leased requests carry dont_redirect, the spider follows them as
            # new links). A copy of a lease already settled is a new request.
            if self.book.holds(lease_id):
                return self._retry(request, lease_id)
            request.meta.pop(FRONTIER_LEASE, None)
            unwrap(request)
        try:
            entry = request_to_json(request, self.spider)
        except SerializationError as exc:
            logger.error("Cannot queue %(request)s: %(exc)s", {"request": request, "exc": exc},
                         extra={"spider": self.spider})
            return False
        if request.dont_filter:
            bucket, member = "", ""
        else:
            bucket, member = self.service.frontier.queues.slot(
                self.crawler.request_fingerprinter.fingerprint(request))  # sitemaps, revisits: fingerprinter.py
        self.book.enqueue(link_entry(request, entry, (bucket, member), self.queue_by))
        if len(self.book.links) >= 1000:
            self._flush()
        return True

    def next_request(self) -> Request | None:
        self._flush()
        if self.stopping:
            return None
        if not self._buffer:
            # Timers may fire a little early: 5 ms of tolerance.
            remaining = self._lease_after - time.monotonic()
            if remaining <= 0.005:
                self._lease()
            else:
                self._wake_in(remaining)
        if self._buffer:
            return self._buffer.popleft()
        return None

    # -- leases --------------------------------------------------------------------
    def _lease(self) -> None:
        assert self.spider is not None
        if self.service.redis_full:
            # No new work while Redis is full: what is held is finished, and
            # leasing resumes once a heartbeat finds Redis takes writes.
            self._lease_after = time.monotonic() + 1.0
            self._wake_in(1.0)
            return
        engine = self.crawler.engine
        active = len(engine.downloader.active) if engine is not None else 0
        unstored = len(self.book.trackers) - self.book.unprocessed()  # pages waiting for the store only
        room = min(self.max_held - self.book.unprocessed(), self.book.page_room(self.page_limit),
                   self.max_unstored - unstored)
        if room <= 0:
            # Enough in hand (or CLOSESPIDER_PAGECOUNT's pages stored or held): let the pages be
            # processed first (their site slots, freed by the downloads' reports, go to other workers).
            self.stats.inc_value("frontier/lease_held_back")
            self._lease_after = time.monotonic() + 0.05
            self._wake_in(0.05)
            return
        n = max(1, min(self.lease_batch, self.max_concurrency - active, room))
        downloaded = self.book.take_downloaded()
        try:
            if not self.service.frontier.state.order_known:
                # Joined before the crawl recorded its order: there is work
                # only once it has, so read it before the first lease.
                self.service.frontier.meta.refresh_order()
            leases, wait = self.service.frontier.queues.lease(n, downloaded, self.book.in_flight())
        except redis.RedisError as exc:
            self.book.restore(downloaded=downloaded)
            self.service.redis_error(exc)
            self._wake_in(1.0)
            return
        state = self.service.frontier.state
        if leases and not state.order_known:
            # Work leased from lists while no order is recorded: the crawl was
            # started breadth-first (an order is recorded before anything is
            # queued), so there is nothing more to wait for: no HGET before
            # every lease batch from now on.
            state.order_known = True
        importance = state.order == "importance"
        self._buffer.extend(lease_requests(leases, spider=self.spider, book=self.book, stats=self.stats,
                                           scheduler=self, importance=importance))
        self.stats.inc_value("frontier/leased", len(leases))
        if len(leases) < n:
            # Nothing more is ready: do not ask Redis again on every engine call until the next site's
            # time comes, or at most 0.5 s (other workers' commits), or until our own commit frees a site.
            pause = 0.5 if wait is None else min(wait, 0.5)
            self._lease_after = time.monotonic() + pause
            self._wake_in(pause)

    def _retry(self, request: Request, lease_id: str) -> bool:
        """A retry (same URL, same lease): back to the tail of its site queue
        after an exponential backoff, in Redis, so it survives this worker."""
        assert self.spider is not None
        retries = int(request.meta.get(RETRY_TIMES, 1))
        delay = min(self.retry_base * 2 ** max(retries - 1, 0), self.retry_max)
        unwrap(request)
        request.meta.pop(FRONTIER_LEASE, None)
        self.book.retry(lease_id, delay, request_to_json(request, self.spider))
        self.stats.inc_value("frontier/requeued/retry")
        self._flush()
        return True

    # -- what pages produce ------------------------------------------------------------
    def output_done(self, lease_id: str, error: str | None = None) -> None:
        self.acks.output_done(lease_id, error)
        if self.idle():
            # The pages in hand wait only for the store: a crawl's last pages (or a polite crawl's,
            # between two slots) need not wait for its next timed flush, then the next tick, to be acknowledged.
            self.crawler.signals.send_catch_log(signal=WORKER_IDLE)

    # -- what the frontier service asks of this worker (service.Worker) -------------------
    def idle(self) -> bool:
        """Nothing downloading, waiting for its callback or leased to start."""
        return not self._buffer and self.book.unprocessed() == 0

    def buffered_leases(self) -> set[str]:
        """Leases taken but not yet handed to the engine."""
        return {str(r.meta.get(FRONTIER_LEASE)) for r in self._buffer}

    def item_yielded(self, lease_id: str, item: Any) -> None:
        self.acks.item_yielded(lease_id, item)

    def _item_settled(self, item: Any, response: Response | Failure | None, **kwargs: Any) -> None:
        request = getattr(response, "request", None)
        lease_id = request.meta.get(FRONTIER_LEASE) if request is not None else None
        if not lease_id:
            return
        self.acks.item_settled(lease_id, item, kwargs.get("exception"), kwargs.get("failure"), "failure" in kwargs)
        if self.idle() and self._acks_call is None:
            # The acknowledgements now (once for a batch's pages, after they
            # have all settled): other workers may be waiting for the crawl's end.
            from twisted.internet import reactor  # not at import: Scrapy installs the reactor

            self._acks_call = cast(Any, reactor).callLater(0, self._send_acks)

    def _send_acks(self) -> None:
        self._acks_call = None
        self._tick()

    def _left_downloader(self, request: Request, spider: Spider) -> None:
        """The download is over: the site's concurrency slot can go to the
        next request (told to Redis with the next lease call)."""
        lease_id = request.meta.get(FRONTIER_LEASE)
        if lease_id is not None and self.book.download_over(lease_id):
            self._lease_after = 0.0
            # Scrapy asks the scheduler again only after the response is
            # processed; the freed slot can serve the next request now.
            self._wake_in(0)

    def _flush(self) -> None:
        if self.book.has_writes() or self.book.releases:
            if self.service.flush():
                self._lease_after = 0.0  # our links or acks may have made a site ready

    # -- timers ------------------------------------------------------------------------
    def _tick(self) -> None:
        """Flush what callbacks settled since the last engine call."""
        if self.book.has_writes():
            self._flush()
            self._wake_in(0)

    def _after_heartbeat(self, reaped: int, nodes: int, held: set[str]) -> None:
        mode = self.service.frontier.stop_mode
        if mode is not None and self.stopping != mode and self.stopping != "now":
            self._stop(mode)
            return
        if reaped:
            self._wake_in(0)
        # Safety net: output done but an item never settled (a middleware
        # swallowed it): acknowledge after the lease timeout, unless items
        # wait for the store (an outage): they will settle.
        if any(waiting for _, waiting in self.crawler.signals.send_catch_log(signal=ITEMS_WAITING)):
            return
        self.acks.settle_overdue(self.lease_timeout, self.spider)

    def node_record(self) -> dict[str, Any]:
        """This node's record for operators (``scrapy status``), sent with each heartbeat."""
        return self.record.record(stopping=bool(self.stopping), spider=self.spider.name if self.spider else None,
                                  download_delay=self.service.frontier.default_delay_ms / 1000.0)

    # -- an operator's stop (scrapy stop) ------------------------------------------------
    def _stop(self, mode: str) -> None:
        """Stop leasing. "graceful": what this worker holds is finished and
        acknowledged, then the spider closes (reason "stopped"). "now":
        what is done is acknowledged, everything else goes back to the
        queues, and the process exits at once."""
        self.stopping = mode
        buffered = [str(r.meta[FRONTIER_LEASE]) for r in self._buffer]
        self._buffer.clear()
        self.book.give_back(buffered)
        if mode == "graceful":
            logger.warning("Stop asked (scrapy stop): finishing the %(n)d requests in progress, then exiting; "
                           "%(b)d not started go back to the queues",
                           {"n": len(self.book.leases), "b": len(buffered)}, extra={"spider": self.spider})
            self._flush()
            self._wake_in(0)
            return
        self.book.settle_finished()
        held = list(self.book.leases)
        self.book.give_back(held)
        logger.warning("Stop asked (scrapy stop --now): %(n)d requests go back to the queues; exiting now",
                       {"n": len(held) + len(buffered)}, extra={"spider": self.spider})
        if self._tick_loop is not None and self._tick_loop.running:
            self._tick_loop.stop()
        self.service.close()
        from twisted.internet import reactor  # not at import: Scrapy installs the reactor

        clock: Any = reactor
        if clock.running:
            clock.stop()

    def _wake_in(self, seconds: float) -> None:
        """Ask the engine for requests again in ``seconds``: Scrapy polls an
        empty scheduler only every 5 s, too slow for sites with short delays."""
        from twisted.internet import reactor  # not at import: Scrapy installs the reactor

        clock: Any = reactor
        if self._wake_call is not None and self._wake_call.active():
            if self._wake_call.getTime() <= clock.seconds() + seconds:
                return  # an earlier wake is already due
            self._wake_call.cancel()
        self._wake_call = clock.callLater(max(seconds, 0.0), compat.wake_engine, self.crawler)

    def _spider_idle(self, spider: Spider) -> None:
        if self.stopping:
            raise CloseSpider("stopped")
        if self.wait_for_seeds:
            raise DontCloseSpider
