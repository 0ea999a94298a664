"""Scrapy scheduler backed by the shared Redis frontier.

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
- ``FRONTIER_LEASE_BATCH``: most requests leased in one call (one per site).
- ``DUPEFILTER_BUCKETS``: dedup sets (see frontier.py for sizing).

Stats: ``frontier/enqueued``, ``frontier/duplicates``, ``frontier/capped``,
``frontier/leased``, ``frontier/acked/C``, ``frontier/acked/E``,
``frontier/requeued/retry``, ``frontier/released``, ``frontier/stale_ack``,
``frontier/released_orphans``,
``frontier/reaped``, ``frontier/redis_round_trips``, ``frontier/redis_error``.

Where this departs from scrapy-redis (0.9.1), and why:

- scrapy-redis pops a request off the shared queue when a worker takes it, so
  a killed worker loses what it held. Here taking a request leases it; the
  lease ends with an acknowledgement after the page and its links are stored,
  or goes back to the queue when the worker's heartbeat stops.
- scrapy-redis queues per crawl and leaves delays to each process's
  downloader, so N workers hit a site N times as hard. Here requests queue
  per site and Redis decides when a site may be served next, for everyone.
- scrapy-redis's dupefilter keeps 40-character hex SHA1s in one set (about 88
  bytes a URL) computed with a private hash; here 8-byte integers from
  ``crawler.request_fingerprinter`` in bucketed integer sets (about 9).
- scrapy-redis flushes the shared queue when any worker closes with the
  default ``SCHEDULER_PERSIST = False``. Here closing a worker never deletes
  shared state: persistence is not optional.
- scrapy-redis pickles requests; these are JSON with callbacks by name.
Kept from scrapy-redis: its connection helper and setting names
(``REDIS_URL``, ``REDIS_PARAMS``).
"""

from __future__ import annotations

import inspect
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import redis
from scrapy import Request, signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.exceptions import DontCloseSpider
from twisted.internet.task import LoopingCall

from crawler.crawldir import crawl_dir, crawl_name
from crawler.frontier.connection import get_redis
from crawler.frontier.frontier import Frontier, Lease, LinkEntry
from crawler.frontier.serialize import SerializationError, request_from_json, request_to_json
from crawler.pipelines import store_waiting
from crawler.store import StoreUnavailable
from crawler.urls import host_of, queue_key

from scrapy.crawler import Crawler

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.http import Response
    from twisted.internet.base import DelayedCall
    from twisted.python.failure import Failure
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = ["FrontierScheduler", "frontier_of"]

LEASE_META = "frontier_lease"
GAP_META = "frontier_gap"

# The frontier of each running crawler, for the middlewares that report to it.
_FRONTIERS: WeakKeyDictionary[Crawler, Frontier] = WeakKeyDictionary()


def frontier_of(crawler: Crawler) -> Frontier | None:
    """The frontier the crawler's scheduler opened (None before it opened)."""
    return _FRONTIERS.get(crawler)


class _Tracker:
    """What is still outstanding for one leased request."""

    __slots__ = ("items", "output_done", "state", "reason", "since", "release")

    def __init__(self) -> None:
        self.release = False  # give the URL back instead of acknowledging it
        self.items = 0
        self.output_done = False
        self.state = "C"
        self.reason = ""
        self.since = time.monotonic()


class FrontierScheduler(BaseScheduler):
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        s = crawler.settings
        self.stats = crawler.stats
        self.delay = s.getfloat("DOWNLOAD_DELAY")
        self.conc = s.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
        self.margin = s.getfloat("FRONTIER_DELAY_MARGIN")
        self.lease_timeout = s.getfloat("FRONTIER_LEASE_TIMEOUT")
        self.heartbeat_interval = s.getfloat("FRONTIER_HEARTBEAT_INTERVAL")
        self.retry_base = s.getfloat("FRONTIER_RETRY_BACKOFF")
        self.retry_max = s.getfloat("FRONTIER_RETRY_BACKOFF_MAX")
        self.wait_for_seeds = s.getbool("FRONTIER_WAIT_FOR_SEEDS")
        self.lease_batch = s.getint("FRONTIER_LEASE_BATCH")
        self.queue_by = s.get("FRONTIER_QUEUE_BY")
        self.max_concurrency = s.getint("CONCURRENT_REQUESTS")
        # Values were checked at start (crawler.config): the frontier is
        # required, a bad setting stops the crawl rather than switching it off.
        self.frontier: Frontier | None = None
        self.spider: Spider | None = None
        self._links: list[LinkEntry] = []
        self._acks: list[tuple[str, str, str]] = []
        self._releases: list[str] = []  # leases to give back (pages that could not be stored)
        self._requeues: list[tuple[str, float, str, str]] = []
        self._buffer: deque[Request] = deque()
        self._leased: dict[str, Lease] = {}
        self._trackers: dict[str, _Tracker] = {}
        self._wake_call: DelayedCall | None = None
        self._loops: list[LoopingCall] = []
        self._redis_down_since: float | None = None
        self._lease_after = 0.0
        self._downloaded: list[str] = []
        self._maybe_orphans: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    # -- lifecycle -----------------------------------------------------------
    def open(self, spider: Spider) -> None:
        self.spider = spider
        s = self.crawler.settings
        client = get_redis(s, crawl_dir(s))
        self.frontier = Frontier(
            client, crawl_name(s, spider.name),
            default_delay=self.delay, concurrency_per_site=self.conc,
            delay_margin=self.margin, max_pages_per_site=s.getint("FRONTIER_MAX_PAGES_PER_SITE"),
            buckets=s.getint("DUPEFILTER_BUCKETS"), lease_timeout=self.lease_timeout,
        )
        _FRONTIERS[self.crawler] = self.frontier
        # The frontier spaces requests to a site for the whole cluster; the
        # local downloader must not add DOWNLOAD_DELAY (and its jitter) on top.
        # Scrapy 2.19 reads it once into Downloader._delay, with no public hook.
        engine = self.crawler.engine
        if engine is not None and hasattr(engine.downloader, "_delay"):
            engine.downloader._delay = 0.0
        # The first heartbeat may already reap a dead worker's leases (a worker
        # restarted after FRONTIER_LEASE_TIMEOUT): counted like any other.
        self._heartbeat()
        logger.info("Frontier %(crawl)s on %(redis)s, node %(node)s",
                    {"crawl": self.frontier.crawl, "redis": _where(client), "node": self.frontier.node},
                    extra={"spider": spider})
        sig = self.crawler.signals
        sig.connect(self._item_settled, signal=signals.item_scraped)
        sig.connect(self._item_settled, signal=signals.item_dropped)
        sig.connect(self._item_settled, signal=signals.item_error)
        sig.connect(self._spider_idle, signal=signals.spider_idle)
        sig.connect(self._left_downloader, signal=signals.request_left_downloader)
        for fn, interval in ((self._heartbeat, self.heartbeat_interval), (self._tick, 0.25)):
            loop = LoopingCall(fn)
            loop.start(interval, now=False)
            self._loops.append(loop)

    def close(self, reason: str) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()
        frontier = self.frontier
        if frontier is None:
            return
        # Settle what can be settled; give back what was never started.
        for lease_id, tracker in list(self._trackers.items()):
            if tracker.output_done and tracker.items <= 0:
                self._ack(lease_id)
        unstarted = [r.meta[LEASE_META] for r in self._buffer] + self._releases
        self._buffer.clear()
        self._releases = []
        try:
            self._flush()
            released = frontier.release(unstarted)
            self.stats.inc_value("frontier/released", released)
            frontier.leave(self._node_record())
        except redis.RedisError as exc:
            logger.error("Could not settle the frontier on close (%(exc)s); leases return "
                         "after FRONTIER_LEASE_TIMEOUT", {"exc": exc}, extra={"spider": self.spider})
        self.stats.set_value("frontier/redis_round_trips", frontier.round_trips)
        for name, count in frontier.calls.items():
            self.stats.set_value(f"frontier/redis_calls/{name.lower()}", count)

    # -- engine interface ------------------------------------------------------
    def has_pending_requests(self) -> bool:
        if self._buffer or self._links or self._acks or self._requeues or self._trackers:
            return True
        assert self.frontier is not None
        try:
            return self.frontier.pending() > 0
        except redis.RedisError as exc:
            self._redis_error(exc)
            return True  # Redis away: wait for it rather than end the crawl

    def enqueue_request(self, request: Request) -> bool:
        assert self.spider is not None and self.frontier is not None
        lease_id = request.meta.get(LEASE_META)
        if lease_id is not None:
            # A leased request scheduled again is a retry (redirects are not:
            # leased requests carry dont_redirect, the spider follows them as
            # new links). A copy of a lease already settled is a new request.
            lease = self._leased.get(lease_id)
            if lease is not None:
                return self._requeue(request, lease)
            request.meta.pop(LEASE_META, None)
            request.callback = getattr(request.callback, "original", request.callback)
            request.errback = getattr(request.errback, "original", request.errback)
        try:
            entry = request_to_json(request, self.spider)
        except SerializationError as exc:
            logger.error("Cannot queue %(request)s: %(exc)s", {"request": request, "exc": exc},
                         extra={"spider": self.spider})
            return False
        if request.dont_filter:
            bucket, member = "", ""
        else:
            bucket, member = self.frontier.slot(self.crawler.request_fingerprinter.fingerprint(request))
        self._links.append(LinkEntry(bucket, member, self._site(request.url), entry, request.priority > 0))
        if len(self._links) >= 1000:
            self._flush()
        return True

    def next_request(self) -> Request | None:
        self._flush()
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

    # -- leases and acknowledgements -------------------------------------------------
    def _lease(self) -> None:
        assert self.frontier is not None and self.spider is not None
        engine = self.crawler.engine
        active = len(engine.downloader.active) if engine is not None else 0
        n = max(1, min(self.lease_batch, self.max_concurrency - active))
        downloaded, self._downloaded = self._downloaded, []
        try:
            leases, wait = self.frontier.lease(n, downloaded)
        except redis.RedisError as exc:
            self._downloaded = downloaded + self._downloaded
            self._redis_error(exc)
            self._wake_in(1.0)
            return
        self._redis_ok()
        for lease in leases:
            try:
                request = request_from_json(lease.entry, self.spider)
            except SerializationError as exc:
                # Settled once, as an error with the reason: leaving it leased
                # (or giving it back) would serve it again and again, and hold
                # up the entries behind it in its site queue.
                logger.error("Refused a frontier entry of site %(site)s: %(exc)s",
                             {"site": lease.site, "exc": exc}, extra={"spider": self.spider})
                self._acks.append((lease.id, "E", f"refused frontier entry: {exc}"[:300]))
                self.stats.inc_value("frontier/refused_entry")
                continue
            request.meta[LEASE_META] = lease.id
            if lease.gap > 0:
                request.meta[GAP_META] = lease.gap  # SendSpacingMiddleware holds it at the wire
            # Redirects go back through the frontier as new URLs (the spider
            # follows them); Scrapy's RedirectMiddleware is left to robots.txt.
            request.meta["dont_redirect"] = True
            self._leased[lease.id] = lease
            self._trackers[lease.id] = _Tracker()
            request.callback = _Tracked(self, lease.id, request.callback or self.spider.parse, False)
            request.errback = _Tracked(self, lease.id, request.errback, True)
            self._buffer.append(request)
        self.stats.inc_value("frontier/leased", len(leases))
        if len(leases) < n:
            # Nothing is ready: do not ask Redis again on every engine call
            # until the next site's time comes, or at most 0.5 s (other
            # workers' commits), or until our own commit frees a site.
            pause = 0.5 if wait is None else min(wait, 0.5)
            self._lease_after = time.monotonic() + pause
            self._wake_in(pause)

    def _requeue(self, request: Request, lease: Lease) -> bool:
        """A retry (same URL, same lease): back to the tail of its site queue
        after an exponential backoff, in Redis, so it survives this worker."""
        assert self.spider is not None
        retries = int(request.meta.get("retry_times", 1))
        delay = min(self.retry_base * 2 ** max(retries - 1, 0), self.retry_max)
        request.callback = getattr(request.callback, "original", request.callback)
        request.errback = getattr(request.errback, "original", request.errback)
        request.meta.pop(LEASE_META, None)
        entry = request_to_json(request, self.spider)
        self._requeues.append((lease.id, delay, lease.site, entry))
        self._trackers.pop(lease.id, None)
        self._leased.pop(lease.id, None)
        self.stats.inc_value("frontier/requeued/retry")
        self._flush()
        return True

    def output_done(self, lease_id: str, error: str | None = None) -> None:
        tracker = self._trackers.get(lease_id)
        if tracker is None:
            return
        tracker.output_done = True
        if error:
            tracker.state, tracker.reason = "E", error
        if tracker.items <= 0:
            self._ack(lease_id)

    def item_yielded(self, lease_id: str, item: Any) -> None:
        tracker = self._trackers.get(lease_id)
        if tracker is None:
            return
        tracker.items += 1
        if getattr(item, "state", None) == "E":
            tracker.state, tracker.reason = "E", str(getattr(item, "error", "") or "error")

    def _item_settled(self, item: Any, response: Response | Failure | None, **kwargs: Any) -> None:
        request = getattr(response, "request", None)
        lease_id = request.meta.get(LEASE_META) if request is not None else None
        tracker = self._trackers.get(lease_id) if lease_id else None
        if tracker is None:
            return
        exc = kwargs.get("exception")
        if isinstance(getattr(exc, "reason", None), StoreUnavailable):
            # Saved to the spill file, not to the store: the URL goes back to
            # the queue rather than being settled.
            tracker.release = True
        elif exc is not None or "failure" in kwargs:
            tracker.state = "E"
            tracker.reason = f"item not stored: {getattr(exc, 'reason', exc) or kwargs.get('failure')}"[:500]
        tracker.items -= 1
        if tracker.output_done and tracker.items <= 0:
            self._ack(lease_id)  # type: ignore[arg-type]

    def _left_downloader(self, request: Request, spider: Spider) -> None:
        """The download is over: the site's concurrency slot can go to the
        next request (told to Redis with the next lease call)."""
        lease_id = request.meta.get(LEASE_META)
        if lease_id is not None and lease_id in self._leased:
            self._downloaded.append(lease_id)
            self._lease_after = 0.0
            # Scrapy asks the scheduler again only after the response is
            # processed; the freed slot can serve the next request now.
            self._wake_in(0)

    def _ack(self, lease_id: str) -> None:
        tracker = self._trackers.pop(lease_id, None)
        self._leased.pop(lease_id, None)
        if tracker is None:
            return
        if tracker.release:
            self._releases.append(lease_id)
            return
        self._acks.append((lease_id, tracker.state, tracker.reason))
        self.stats.inc_value(f"frontier/acked/{tracker.state}")

    def _flush(self) -> None:
        assert self.frontier is not None
        if self._releases:
            try:
                self.stats.inc_value("frontier/released", self.frontier.release(self._releases))
                self._releases = []
            except redis.RedisError as exc:
                self._redis_error(exc)
        if not (self._links or self._acks or self._requeues):
            return
        links, acks, requeues = self._links, self._acks, self._requeues
        try:
            result = self.frontier.commit(links, acks, requeues)
        except redis.RedisError as exc:
            self._redis_error(exc)
            return  # kept; sent again with the next flush
        self._links, self._acks, self._requeues = [], [], []
        self._lease_after = 0.0  # our links or acks may have made a site ready
        self._redis_ok()
        self.stats.inc_value("frontier/enqueued", result["added"])
        self.stats.inc_value("frontier/duplicates", result["duplicates"])
        if result["capped"]:
            self.stats.inc_value("frontier/capped", result["capped"])
        if result["stale"]:
            self.stats.inc_value("frontier/stale_ack", result["stale"])
            logger.warning("%(n)d acknowledgements came after their leases expired; those "
                           "URLs may be fetched twice", {"n": result["stale"]}, extra={"spider": self.spider})
        self.stats.set_value("frontier/redis_round_trips", self.frontier.round_trips)

    # -- timers ------------------------------------------------------------------------
    def _tick(self) -> None:
        """Flush what callbacks settled since the last engine call."""
        if self._links or self._acks or self._requeues:
            self._flush()
            self._wake_in(0)

    def _heartbeat(self) -> None:
        assert self.frontier is not None
        try:
            reaped, nodes, held = self.frontier.heartbeat(self._node_record())
        except redis.RedisError as exc:
            self._redis_error(exc)
            return
        self._redis_ok()
        # Leases Redis holds for us that we do not know (their acknowledgement
        # was lost, e.g. Redis restarted without its last writes): give them
        # back, or the crawl would wait for them forever. Twice in a row, so
        # that a lease taken between the two calls is not mistaken.
        unknown = held - set(self._leased) - {r.meta.get(LEASE_META) for r in self._buffer}
        orphans = unknown & self._maybe_orphans
        self._maybe_orphans = unknown - orphans
        if orphans:
            try:
                released = self.frontier.release(sorted(orphans))
            except redis.RedisError as exc:
                self._redis_error(exc)
            else:
                self.stats.inc_value("frontier/released_orphans", released)
                logger.warning("Gave back %(n)d leases Redis held for this worker without its "
                               "knowing (lost acknowledgements)", {"n": released}, extra={"spider": self.spider})
        if reaped:
            self.stats.inc_value("frontier/reaped", reaped)
            logger.warning("%(n)d leases of %(nodes)d stopped worker(s) went back to their queues",
                           {"n": reaped, "nodes": nodes}, extra={"spider": self.spider})
            self._wake_in(0)
        # Safety net: output done but an item never settled (a middleware
        # swallowed it): acknowledge after the lease timeout.
        now = time.monotonic()
        if store_waiting(self.crawler):
            return  # items wait for the store (an outage): they will settle
        for lease_id, tracker in list(self._trackers.items()):
            if tracker.output_done and now - tracker.since > self.lease_timeout:
                logger.warning("Acknowledging lease %(id)s: its items never settled", {"id": lease_id},
                               extra={"spider": self.spider})
                self._ack(lease_id)

    def _node_record(self) -> dict[str, Any]:
        get = self.stats.get_value
        return {"pages": get("response_received_count", 0), "items": get("item_scraped_count", 0),
                "errors": get("frontier/acked/E", 0), "spider": self.spider.name if self.spider else None}

    def _wake_in(self, seconds: float) -> None:
        """Ask the engine for requests again in ``seconds``: Scrapy polls an
        empty scheduler only every 5 s, too slow for sites with short delays.
        (No public engine API does this; nextcall is the engine's own trigger.)"""
        from twisted.internet import reactor  # not at import: Scrapy installs the reactor

        clock: Any = reactor
        if self._wake_call is not None and self._wake_call.active():
            if self._wake_call.getTime() <= clock.seconds() + seconds:
                return  # an earlier wake is already due
            self._wake_call.cancel()
        self._wake_call = clock.callLater(max(seconds, 0.0), self._wake)

    def _wake(self) -> None:
        slot = getattr(self.crawler.engine, "_slot", None)
        nextcall = getattr(slot, "nextcall", None)
        if nextcall is not None:
            nextcall.schedule()

    def _spider_idle(self, spider: Spider) -> None:
        if self.wait_for_seeds:
            raise DontCloseSpider

    # -- helpers -----------------------------------------------------------------------
    def _site(self, url: str) -> str:
        return queue_key(host_of(url), self.queue_by)  # site_of is lru-cached

    def _redis_error(self, exc: Exception) -> None:
        self.stats.inc_value("frontier/redis_error")
        now = time.monotonic()
        if self._redis_down_since is None:
            self._redis_down_since = now
            logger.error("Redis unavailable (%(exc)s); holding work until it is back", {"exc": exc},
                         extra={"spider": self.spider})

    def _redis_ok(self) -> None:
        if self._redis_down_since is not None:
            logger.warning("Redis is back after %(s).1fs", {"s": time.monotonic() - self._redis_down_since},
                           extra={"spider": self.spider})
            self._redis_down_since = None


class _Tracked:
    """Wraps a leased request's callback or errback to count its output, so
    that the lease is acknowledged only after the page's items are stored
    and its links are queued."""

    def __init__(self, scheduler: FrontierScheduler, lease_id: str,
                 original: Callable[..., Any] | None, errback: bool) -> None:
        self.scheduler = scheduler
        self.lease_id = lease_id
        self.original = original
        self.errback = errback
        self.frontier_name = getattr(original, "__name__", None)

    def __call__(self, result: Any, **kwargs: Any) -> Any:
        if self.original is None:  # no errback: record the failure, let Scrapy log it
            self.scheduler.output_done(self.lease_id, _failure_reason(result))
            result.raiseException()
        return self._run(result, **kwargs)

    async def _run(self, result: Any, **kwargs: Any) -> AsyncIterator[Any]:
        error = _failure_reason(result) if self.errback else None
        try:
            assert self.original is not None
            output = self.original(result, **kwargs)
            if inspect.isawaitable(output):
                output = await output
            if output is None:
                return
            if isinstance(output, Request) or not hasattr(output, "__iter__") and not hasattr(output, "__aiter__"):
                output = [output]
            if hasattr(output, "__aiter__"):
                async for x in output:
                    self._seen(x)
                    yield x
            else:
                for x in output:
                    self._seen(x)
                    yield x
        except Exception as exc:
            error = f"spider error: {type(exc).__name__}: {exc}"[:500]
            raise
        finally:
            self.scheduler.output_done(self.lease_id, error)

    def _seen(self, x: Any) -> None:
        if not isinstance(x, Request):
            self.scheduler.item_yielded(self.lease_id, x)


def _failure_reason(failure: Any) -> str:
    exc = getattr(failure, "value", None)
    return f"{type(exc).__name__}: {exc}"[:500] if exc is not None else "error"


def _where(client: redis.Redis) -> str:
    kw = client.connection_pool.connection_kwargs
    return str(kw.get("path") or f"{kw.get('host')}:{kw.get('port')}")
