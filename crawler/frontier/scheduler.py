"""Scrapy scheduler backed by the shared Redis frontier: a thin adapter
between Scrapy's scheduler interface and the frontier service
(``service.py``), which holds the Redis client, the ``Frontier`` and the
lease book (``leasebook.py``).

Settings:

- ``REDIS_URL``, ``REDIS_PARAMS``: the shared Redis (else the embedded one
  under ``CRAWL_DIR``); ``CRAWL_NAME`` keys everything (default: spider name).
- ``DOWNLOAD_DELAY``, ``CONCURRENT_REQUESTS_PER_DOMAIN``: as in Scrapy, but
  per site for the whole cluster, enforced in Redis.
- ``FRONTIER_DELAY_MARGIN``: seconds added to each gap, so that the gaps a
  server sees stay above the delay despite network jitter between workers.
- ``FRONTIER_MAX_PAGES_PER_SITE``: URLs admitted per site, cluster-wide.
- ``FRONTIER_LEASE_TIMEOUT``: seconds without heartbeat after which a worker's
  leases go back to their queues; ``FRONTIER_HEARTBEAT_INTERVAL``.
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
- ``DUPEFILTER_BUCKETS``: dedup sets (queues.py). ``CLOSESPIDER_PAGECOUNT``: pages stored and held, at most.

Stats: ``frontier/enqueued``, ``frontier/duplicates``, ``frontier/capped``, ``frontier/leased``,
``frontier/acked/C``, ``/T`` (done, on a focused crawl's topic), ``/E``, ``/F`` (robots.txt forbade it),
``frontier/lease_held_back``, ``frontier/requeued/retry``, ``frontier/released``, ``frontier/stale_ack``,
``frontier/released_orphans``, ``frontier/reaped``, ``frontier/redis_round_trips``, ``frontier/redis_error``.

Where this departs from scrapy-redis (0.9.1), and why (at length in
``docs/cluster.md``): a taken request is leased, not popped, so a killed
worker loses nothing; requests queue per site and Redis decides when a site
may be served, for every worker; dedup keeps 8-byte fingerprints in bucketed
integer sets (about 9 bytes a URL, not 88); closing a worker never deletes
shared state; requests are JSON with callbacks by name, never pickles. Kept:
its connection helper and setting names (``REDIS_URL``, ``REDIS_PARAMS``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import redis
from scrapy import Request, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import CloseSpider, DontCloseSpider
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.task import LoopingCall

from crawler import compat
from crawler.crawldir import crawl_dir
from crawler.frontier.queues import LinkEntry
from crawler.frontier.serialize import SerializationError, request_from_json, request_to_json
from crawler.frontier.service import FrontierService
from crawler.frontier.signals import HEARTBEAT, ITEMS_WAITING, WORKER_IDLE, GiveBack
from crawler.frontier.spiderface import FrontierSpider
from crawler.frontier.tracking import Tracked, answered, unwrap, visit_kind
from crawler.requestmeta import (
    DONT_REDIRECT, FRONTIER_GAP, FRONTIER_LEASE, IMP, IMPORTANCE, IMP_CASH, RETRY_TIMES, TOPIC_PRIORITY,
)
from crawler.urls import host_of, queue_key

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

LEASE_META, GAP_META = FRONTIER_LEASE, FRONTIER_GAP  # the registry's names; these kept for importers


class FrontierScheduler(BaseScheduler):
    def __init__(self, crawler: Crawler) -> None:
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
        self.page_limit = s.getint("CLOSESPIDER_PAGECOUNT")
        self.lease_timeout = s.getfloat("FRONTIER_LEASE_TIMEOUT")
        self.crawl_dir = str(crawl_dir(s).resolve())
        self.service = FrontierService.of(crawler)
        self.book = self.service.book
        self.spider: FrontierSpider | None = None
        self._buffer: deque[Request] = deque()  # leased, not yet handed to the engine
        self._wake_call: DelayedCall | None = None
        self._acks_call: DelayedCall | None = None
        self._tick_loop: LoopingCall | None = None
        self._lease_after = 0.0
        self.stopping: str | None = None  # "graceful" or "now", once an operator asked (scrapy stop)
        self._rate: deque[tuple[float, int]] = deque()  # (time, pages acknowledged) samples, last minute

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

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
        # After CoreStats's (connected when the extensions were built): a
        # stop --now stops the reactor, which closes the spider as "shutdown".
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
        done, errors = self.service.resumed.get("done", 0), self.service.resumed.get("errors", 0)
        revisiting = self.spider is not None and self.spider.revisits  # says what was due itself
        if reason == "finished" and done + errors and not revisiting \
                and not self.stats.get_value("response_received_count"):
            logger.warning("Crawl %(crawl)s was already finished: it holds %(done)d pages done and %(errors)d "
                           "errors, and nothing is pending, so this run fetched nothing. To crawl again, name "
                           "a new crawl (-s CRAWL_NAME=...) or clear this one's frontier with `scrapy reset "
                           "--yes`; `scrapy seed URL` adds pages to it, and a seed stored as an error is "
                           "tried again when given again (-a seeds=)",
                           {"crawl": self.service.frontier.crawl, "done": done, "errors": errors},
                           extra={"spider": self.spider})

    # -- engine interface ------------------------------------------------------
    def has_pending_requests(self) -> bool:
        if self._buffer or self.book.busy():
            return True
        if self.stopping:
            return False
        try:
            return self.service.frontier.pending() > 0
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
            bucket, member = self.service.frontier.slot(
                self.crawler.request_fingerprinter.fingerprint(request))  # sitemaps, revisits: fingerprinter.py
        priority = request.meta.get(TOPIC_PRIORITY, 0)
        imp, cash = request.meta.get(IMP), request.meta.get(IMP_CASH, 0)
        self.book.enqueue(LinkEntry(bucket, member, queue_key(host_of(request.url), self.queue_by), entry,
                                    request.priority > 0,
                                    priority if type(priority) is int and 0 <= priority <= 1000 else 0,
                                    f"i{imp}:{cash}" if type(imp) is int and type(cash) is int else ""))
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
        room = min(self.max_held - self.book.unprocessed(), self.book.page_room(self.page_limit))
        if room <= 0:
            # Enough in hand (or CLOSESPIDER_PAGECOUNT's pages stored or held): let the pages be
            # processed first (their site slots, freed by the downloads' reports, go to other workers).
            self.stats.inc_value("frontier/lease_held_back")
            self._lease_after = time.monotonic() + 0.05
            self._wake_in(0.05)
            return
        n = max(1, min(self.lease_batch, self.max_concurrency - active, room))
        downloaded, self.book.downloaded = self.book.downloaded, []
        try:
            if not self.service.frontier.state.order_known:
                # Joined before the crawl recorded its order: there is work
                # only once it has, so read it before the first lease.
                self.service.frontier.meta.refresh_order()
            leases, wait = self.service.frontier.lease(n, downloaded, self.book.in_flight())
        except redis.RedisError as exc:
            self.book.downloaded[:0] = downloaded
            self.service.redis_error(exc)
            self._wake_in(1.0)
            return
        for lease in leases:
            try:
                request = request_from_json(lease.entry, self.spider)
            except SerializationError as exc:
                # Settled once, as an error with the reason: leaving it leased
                # (or giving it back) would serve it again and again, and hold
                # up the entries behind it in its site queue.
                logger.error("Refused a frontier entry of site %(site)s: %(exc)s",
                             {"site": lease.site, "exc": exc}, extra={"spider": self.spider})
                self.book.refuse(lease.id, f"refused frontier entry: {exc}"[:300])
                self.stats.inc_value("frontier/refused_entry")
                continue
            request.meta[FRONTIER_LEASE] = lease.id
            if lease.importance is not None and self.service.frontier.state.order == "importance":
                request.meta[IMPORTANCE] = lease.importance
            if lease.gap > 0:
                request.meta[FRONTIER_GAP] = lease.gap  # SendSpacingMiddleware may hold it at the wire
            # Redirects go back through the frontier as new URLs (the spider
            # follows them); Scrapy's RedirectMiddleware is left to robots.txt.
            request.meta[DONT_REDIRECT] = True
            self.book.add(lease, visit_kind(request))
            request.callback = Tracked(self, lease.id, request.callback or self.spider.parse, False)
            request.errback = Tracked(self, lease.id, request.errback, True)
            self._buffer.append(request)
        self.stats.inc_value("frontier/leased", len(leases))
        if len(leases) < n:
            # Nothing more is ready: do not ask Redis again on every engine
            # call until the next site's time comes, or at most 0.5 s (other
            # workers' commits), or until our own commit frees a site.
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
        self._count_acks(lambda: self.book.output_done(lease_id, error))
        if self.idle():
            # The pages in hand wait only for the store: a crawl's last pages
            # (or a polite crawl's, between two slots) need not wait for its
            # next timed flush, then for the next tick to be acknowledged.
            self.crawler.signals.send_catch_log(signal=WORKER_IDLE)

    # -- what the frontier service asks of this worker (service.Worker) -------------------
    def idle(self) -> bool:
        """Nothing downloading, waiting for its callback or leased to start."""
        return not self._buffer and self.book.unprocessed() == 0

    def buffered_leases(self) -> set[str]:
        """Leases taken but not yet handed to the engine."""
        return {str(r.meta.get(FRONTIER_LEASE)) for r in self._buffer}

    def item_yielded(self, lease_id: str, item: Any) -> None:
        error = None
        if getattr(item, "state", None) == "E" and not answered(item):
            error = str(getattr(item, "error", "") or "error")
        # A page typed again (PageTyper.retype) is an earlier request's
        # page: it says nothing of this one's topic.
        on_topic = getattr(item, "on_topic", None) is True and not getattr(item, "typed_again", False)
        self.book.item_yielded(lease_id, error, on_topic)

    def _item_settled(self, item: Any, response: Response | Failure | None, **kwargs: Any) -> None:
        request = getattr(response, "request", None)
        lease_id = request.meta.get(FRONTIER_LEASE) if request is not None else None
        if not lease_id:
            return
        exc = kwargs.get("exception")
        if getattr(item, "typed_again", False):
            # An earlier request's page stored again with its new type: what
            # became of it says nothing of this request's page.
            if exc is not None or "failure" in kwargs:
                self.stats.inc_value("classifier/retype/not_stored")
            self._count_acks(lambda: self.book.item_settled(lease_id))
        elif isinstance(exc, GiveBack):
            # Not kept for now (a page saved to the store's spill file): the
            # URL goes back to the queue rather than being settled.
            self._count_acks(lambda: self.book.item_settled(lease_id, unstored=True))
        elif exc is not None or "failure" in kwargs:
            reason = f"item not stored: {getattr(exc, 'reason', exc) or kwargs.get('failure')}"
            self._count_acks(lambda: self.book.item_settled(lease_id, error=reason))
        else:
            self._count_acks(lambda: self.book.item_settled(lease_id))
        if self.idle() and self._acks_call is None:
            # The acknowledgements now (once for a batch's pages, after they
            # have all settled): other workers may be waiting for the crawl's end.
            from twisted.internet import reactor  # not at import: Scrapy installs the reactor

            self._acks_call = cast(Any, reactor).callLater(0, self._send_acks)

    def _send_acks(self) -> None:
        self._acks_call = None
        if self.book.has_writes():
            self._flush()
            self._wake_in(0)

    def _count_acks(self, event: Callable[[], None]) -> None:
        before = dict(self.book.acked)
        event()
        for state, n in self.book.acked.items():
            if n != before.get(state, 0):
                self.stats.inc_value(f"frontier/acked/{state}", n - before.get(state, 0))

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
        for lease_id in self.book.overdue(self.lease_timeout):
            logger.warning("Acknowledging lease %(id)s: its items never settled", {"id": lease_id},
                           extra={"spider": self.spider})
            self._count_acks(lambda: self.book.settle(lease_id))  # noqa: B023

    def node_record(self) -> dict[str, Any]:
        """This node's record for operators (``scrapy status``), sent with each heartbeat."""
        get = self.stats.get_value
        now, done = time.monotonic(), self.book.done
        self._rate.append((now, done))
        while len(self._rate) > 2 and now - self._rate[1][0] >= 60.0:
            self._rate.popleft()
        t0, d0 = self._rate[0]
        per_min = (done - d0) * 60.0 / (now - t0) if now - t0 >= 1.0 else 0.0
        return {"pages": done, "fetched": get("response_received_count", 0), "errors": self.book.acked.get("E", 0),
                "links": get("frontier/links_parsed", 0), "pages_per_min": round(per_min, 2),
                "lease_timeout": self.lease_timeout, "state": "stopping" if self.stopping else "running",
                # The delay between two fetches of a site this worker keeps
                # (DOWNLOAD_DELAY): operators see the crawl's, not their own.
                "download_delay": self.service.frontier.default_delay_ms / 1000.0,
                "crawl_dir": self.crawl_dir,
                "spider": self.spider.name if self.spider else None,
                # The re-crawl's figures (crawler/recrawl.py), when it revisits.
                "recrawl": {k.split("/", 1)[1]: v for k, v in self.stats.get_stats().items()
                            if k.startswith("recrawl/") and isinstance(v, int)},
                # A focused crawl's figures (crawler/spiders/site.py: topic/*).
                "topic": {k.split("/", 1)[1]: v for k, v in self.stats.get_stats().items()
                          if k.startswith("topic/") and isinstance(v, int)}}

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
