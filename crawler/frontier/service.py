"""The frontier service: one per crawl process, the frontier's only door.

``FrontierService`` is a Scrapy extension (``EXTENSIONS``), built once per
crawler. It holds the process's single Redis client, the ``Frontier``, the
lease book (``leasebook.py``: what this worker holds and owes), the
heartbeat that reaps stopped workers, the "Redis is down" state and the
"Redis is full" one (``fullness.py``: no new work, nothing dropped, until
memory is raised or freed). Components do not look it up: each is
handed the narrow face it needs (``faces.py``: the spider's parts, the
politeness middlewares, the store's pipeline, progress)::

    face = FrontierFaces(crawler).politeness   # in a component's from_crawler
    face.politeness.backoff(site, ...)

The scheduler (``scheduler.py``) opens it, passing itself as the
``Worker`` the heartbeat asks for this node's record and for the leases it
has not handed to Scrapy yet, and adapts Scrapy's scheduler interface to it;
the spider reads the crawl's scope and the duplicate index through it; the
middlewares report backoffs, send times and robots.txt through it; the
store's pipeline asks it whether the worker is idle (``worker_idle``).
After each heartbeat it sends the ``HEARTBEAT`` signal
(``crawler/frontier/signals.py``).

At open it refuses a Redis whose ``maxmemory-policy`` would evict keys
(``crawler/redis/memory.py``), and one that is full already.

Settings: ``REDIS_URL``, ``REDIS_PARAMS``, ``CRAWL_NAME``, ``CRAWL_DIR``,
``DOWNLOAD_DELAY``, ``CONCURRENT_REQUESTS_PER_DOMAIN``,
``FRONTIER_DELAY_MARGIN``, ``FRONTIER_MAX_PAGES_PER_SITE``,
``FRONTIER_LEASE_TIMEOUT``, ``FRONTIER_HEARTBEAT_INTERVAL``,
``FRONTIER_SHARDS``, ``DUPEFILTER_BUCKETS`` (see ``docs/reference.md``).

Stats: ``frontier/redis_round_trips``, ``frontier/redis_calls/<script>``,
``frontier/redis_error``, ``frontier/reaped``, ``frontier/released``,
``frontier/released_orphans``, ``frontier/stale_ack``, ``frontier/enqueued``,
``frontier/duplicates``, ``frontier/capped``, ``frontier/redis_full``,
``frontier/redis_full_seconds``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

import redis
from twisted.internet.task import LoopingCall

from crawler import compat
from crawler.crawldir import crawl_dir, crawl_name
from crawler.frontier.frontier import Frontier
from crawler.frontier.fullness import Fullness
from crawler.frontier.joining import say_what_it_resumes, take_over_local, until_seeded
from crawler.frontier.leasebook import LeaseBook
from crawler.frontier.signals import HEARTBEAT
from crawler.redis.client import get_redis
from crawler.redis.memory import full_at_start, is_oom, refuse_evicting

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from crawler.frontier.spiderface import FrontierSpider

logger = logging.getLogger(__name__)

# The scripts whose writes wait for REDIS_WAIT_REPLICAS: leases, and commits
# (new URLs marked seen and queued, leases settled).
DURABLE = frozenset({"LEASE", "COMMIT", "RELEASE"})

__all__ = ["FrontierService", "Worker"]


class Worker(Protocol):
    """What the service asks of the worker that opens it (the scheduler)."""

    def node_record(self) -> dict[str, Any]:
        """This node's record for operators (pages, rates, state ...)."""

    def buffered_leases(self) -> set[str]:
        """Leases taken but not yet handed to Scrapy."""

    def idle(self) -> bool:
        """Nothing downloading, waiting for its callback or leased to start."""


class FrontierService:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        s = crawler.settings
        self.heartbeat_interval = s.getfloat("FRONTIER_HEARTBEAT_INTERVAL")
        self.lease_timeout = s.getfloat("FRONTIER_LEASE_TIMEOUT")
        self.book = LeaseBook()
        self._frontier: Frontier | None = None
        self.spider: FrontierSpider | None = None
        self._loop: LoopingCall | None = None
        self._down_since: float | None = None
        self.fullness = Fullness(crawler.stats)
        self._worker: Worker | None = None  # given to open() by the scheduler
        self.resumed: dict[str, int] = {}  # the crawl's counters when this worker joined
        self._beat_sent = time.monotonic()  # when the last heartbeat Redis recorded was sent
        self._beat_tried = 0.0
        self._held: set[str] = set()  # the lease ids Redis held for this worker at that heartbeat

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    @classmethod
    def of(cls, crawler: Crawler) -> FrontierService:
        """The crawler's frontier service; a clear error if it is not enabled
        (the frontier is required, never switched off quietly)."""
        service = crawler.get_extension(cls)
        if service is None:
            raise RuntimeError("crawler.frontier.service.FrontierService is not in EXTENSIONS: the "
                               "frontier is required (see crawler/settings.py)")
        return service

    @property
    def frontier(self) -> Frontier:
        if self._frontier is None:
            raise RuntimeError("the frontier service is not open yet (the scheduler opens it)")
        return self._frontier

    @property
    def is_open(self) -> bool:
        return self._frontier is not None

    def worker_idle(self) -> bool:
        """Whether this worker has nothing downloading, waiting for its
        callback or leased to start (the scheduler sends ``WORKER_IDLE`` as
        it gets so); False before the scheduler opens the service."""
        return self._worker is not None and self._worker.idle()

    def _node_record(self) -> dict[str, Any]:
        record = self._worker.node_record() if self._worker is not None else {}
        if self.redis_full and record.get("state") == "running":
            record["state"] = "paused"  # Redis is full: no new work taken
        return record

    # -- lifecycle -----------------------------------------------------------
    def open(self, spider: FrontierSpider, worker: Worker | None = None) -> Frontier:
        """Connect, check the crawl's layout and start the heartbeat;
        ``worker`` (the scheduler) says what this node holds."""
        if self._frontier is not None:
            return self._frontier
        self.spider = spider
        self._worker = worker
        s = self.crawler.settings
        client = get_redis(s, crawl_dir(s))
        try:
            # A policy that evicts keys would lose leases and seen URLs
            # without a word once Redis is full: refused, in one line.
            refuse_evicting(client)
        except BaseException:
            client.close()
            raise
        frontier = Frontier(
            client, crawl_name(s, spider.name),
            default_delay=s.getfloat("DOWNLOAD_DELAY"), concurrency_per_site=s.getint("CONCURRENT_REQUESTS_PER_DOMAIN"),
            delay_margin=s.getfloat("FRONTIER_DELAY_MARGIN"), max_pages_per_site=s.getint("FRONTIER_MAX_PAGES_PER_SITE"),
            buckets=s.getint("DUPEFILTER_BUCKETS"), lease_timeout=self.lease_timeout,
            shards=s.getint("FRONTIER_SHARDS"),
        )
        replicas = s.getint("REDIS_WAIT_REPLICAS")
        if replicas:
            from crawler.redis.memory import require_replicas

            degraded = require_replicas(client, replicas)  # fewer: one line at start
            if degraded:
                logger.warning("%(text)s", {"text": degraded}, extra={"spider": spider})
            frontier.gateway.require_replicas(replicas, s.getfloat("REDIS_WAIT_TIMEOUT"), DURABLE)
        # The spider says how its crawl's queues are ordered ("fifo", or a
        # focused crawl's topic); None joins the crawl as it was made.
        try:
            frontier.check_layout(spider.frontier_order)
        except redis.RedisError as exc:
            if is_oom(exc):
                raise full_at_start(client, exc) from None
            raise
        self._frontier = frontier
        # The frontier spaces requests to a site for the whole cluster; the
        # local downloader must not add DOWNLOAD_DELAY (and its jitter) on top.
        compat.disable_downloader_delay(self.crawler)
        where = _where(client)
        if not s.get("REDIS_URL"):
            # Its data is in the crawl directory; its socket in a private temporary directory (AF_UNIX
            # paths stop at 107 bytes, which a deep CRAWL_DIR passes): both named, as docs/operating.md does.
            where = f"the embedded Redis of {(crawl_dir(s) / 'redis').resolve()} (socket {where})"
        logger.info("Frontier %(crawl)s on %(redis)s (%(shards)d shards), node %(node)s",
                    {"crawl": frontier.crawl, "redis": where, "shards": frontier.keys.shards,
                     "node": frontier.node}, extra={"spider": spider})
        self._say_what_it_resumes(frontier)
        self._take_over_local(str(crawl_dir(s).resolve()))
        # The first heartbeat may already reap a dead worker's leases (a
        # worker restarted after FRONTIER_LEASE_TIMEOUT).
        self.heartbeat()
        self._loop = LoopingCall(self.heartbeat)
        self._loop.start(self.heartbeat_interval, now=False)
        return frontier

    def _say_what_it_resumes(self, frontier: Frontier) -> None:
        try:
            st = frontier.views.stats()
        except redis.RedisError as exc:
            self.redis_error(exc)
            return
        self.resumed = dict(st)
        try:
            say_what_it_resumes(frontier, st, self.spider, self.lease_timeout)
        except redis.RedisError as exc:
            self.redis_error(exc)

    def _take_over_local(self, directory: str) -> None:
        try:
            take_over_local(self.frontier, directory, self.stats, self.spider)
        except redis.RedisError as exc:
            self.redis_error(exc)

    def close(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        frontier = self._frontier
        if frontier is None:
            return
        self.book.settle_finished()
        if self.redis_full:
            self.fullness.poll(frontier, self.spider)  # memory raised since the last heartbeat?
        try:
            flushed = self.flush()
            frontier.control.leave(self._node_record())
            if flushed:
                # The last flush and the node's record reached Redis: a crawl
                # that ends within a heartbeat of an outage says so too.
                self.redis_ok()
        except redis.RedisError as exc:
            logger.error("Could not settle the frontier on close (%(exc)s); leases return "
                         "after FRONTIER_LEASE_TIMEOUT", {"exc": exc}, extra={"spider": self.spider})
        self.stats.set_value("frontier/redis_round_trips", frontier.round_trips)
        for name, count in frontier.calls.items():
            self.stats.set_value(f"frontier/redis_calls/{name.lower()}", count)

    # -- the write buffer ------------------------------------------------------
    def flush(self) -> bool:
        """Send what the lease book gathered (links, acknowledgements,
        retries, downloads over, releases) in one round trip. False if Redis
        was away or is full: the book keeps it for the next flush (while
        Redis is full, the first after a heartbeat finds it takes writes)."""
        frontier = self.frontier
        book = self.book
        if self.redis_full:
            return False
        releases = book.take_releases()
        if releases:
            try:
                self.stats.inc_value("frontier/released", frontier.queues.release(releases))
            except redis.RedisError as exc:
                book.restore(releases=releases)
                self.redis_error(exc)
                return False
        commit = book.take()
        if not commit:
            return True
        try:
            result = frontier.queues.commit(commit.links, commit.acks, commit.requeues, commit.downloaded)
        except redis.RedisError as exc:
            book.restore(commit)
            self.redis_error(exc)
            return False
        if result.error is not None:
            book.restore(result=result)  # a shard's Redis was away: that part waits
            self.redis_error(result.error)
        self.stats.inc_value("frontier/enqueued", result.added)
        self.stats.inc_value("frontier/duplicates", result.duplicates)
        if result.capped:
            self.stats.inc_value("frontier/capped", result.capped)
        if result.stale:
            self.stats.inc_value("frontier/stale_ack", result.stale)
            logger.warning("%(n)d acknowledgements came after their leases expired; those "
                           "URLs may be fetched twice", {"n": result.stale}, extra={"spider": self.spider})
        self.stats.set_value("frontier/redis_round_trips", frontier.round_trips)
        return result.error is None

    # -- heartbeat ---------------------------------------------------------------
    def heartbeat(self) -> None:
        """Beat, give back orphaned leases, then send ``HEARTBEAT``."""
        frontier = self.frontier
        sent = time.monotonic()
        try:
            frontier.meta.refresh_order()
            reaped, nodes, held = frontier.control.heartbeat(self._node_record())
        except redis.RedisError as exc:
            self.redis_error(exc)
            return
        self._beat_sent, self._held = sent, held
        self.redis_ok()
        if self.redis_full:
            self.fullness.poll(frontier, self.spider)
        else:
            self.fullness.probe(frontier, self.spider)
        orphans = self.book.orphans(held, self._worker.buffered_leases() if self._worker is not None else set())
        if orphans:
            try:
                released = frontier.queues.release(sorted(orphans))
            except redis.RedisError as exc:
                self.redis_error(exc)
            else:
                self.stats.inc_value("frontier/released_orphans", released)
                logger.warning("Gave back %(n)d leases Redis held for this worker without its "
                               "knowing (lost acknowledgements)", {"n": released}, extra={"spider": self.spider})
        if reaped:
            self.stats.inc_value("frontier/reaped", reaped)
            logger.warning("%(n)d leases of %(nodes)d stopped worker(s) went back to their queues",
                           {"n": reaped, "nodes": nodes}, extra={"spider": self.spider})
        self.crawler.signals.send_catch_log(signal=HEARTBEAT, reaped=reaped, nodes=nodes, held=held)

    def lease_current(self, lease_id: str) -> bool:
        """Whether this worker may still send the request it leased as
        ``lease_id``. Its last heartbeat Redis recorded must have been sent
        less than 3/4 of ``FRONTIER_LEASE_TIMEOUT`` ago (else, as when it
        was stopped, its loop stalled or Redis was away that long, it beats
        now), and the lease held by Redis at that heartbeat or taken since:
        a reaped lease is another worker's URL, and its request sent late
        would be a second fetch, and could follow that worker's request to
        the site closer than the site's delay."""
        window = 0.75 * self.lease_timeout
        if time.monotonic() - self._beat_sent >= window:
            if time.monotonic() - self._beat_tried >= 1.0 and self._frontier is not None:
                self._beat_tried = time.monotonic()
                self.heartbeat()
            if time.monotonic() - self._beat_sent >= window:
                return False
        # A fresh heartbeat: the lease is current if Redis held it then, or
        # it was taken since. (Not every request after the beat: those whose
        # leases were reaped during the stall follow the first, and pass a
        # heartbeat that is fresh again.)
        tracker = self.book.trackers.get(lease_id)
        return lease_id in self._held or (tracker is not None and tracker.since >= self._beat_sent)

    # -- Redis down / back -----------------------------------------------------------
    @property
    def redis_down(self) -> bool:
        return self._down_since is not None

    @property
    def redis_full(self) -> bool:
        """Redis refused a write for want of memory and has not taken one
        since: no new work is taken (``fullness.py``)."""
        return self.fullness.full

    async def writable(self) -> None:
        """Return once Redis takes writes (at once unless it is full)."""
        await self.fullness.writable()

    async def until_seeded(self, wait: float) -> None:
        """For a worker without seeds: wait for the crawl's first URL (``joining.py``)."""
        await until_seeded(self, wait)

    def refused_for_memory(self, exc: BaseException) -> bool:
        """Whether ``exc`` is Redis refusing a write for want of memory:
        then Redis is full until a heartbeat finds it takes writes again,
        which is said once for the spell (``fullness.py``), not by each
        caller."""
        return self._frontier is not None and self.fullness.note(exc, self._frontier, self.spider)

    def redis_error(self, exc: Exception) -> None:
        if self.refused_for_memory(exc):
            return  # full, not away
        self.stats.inc_value("frontier/redis_error")
        if self._down_since is None:
            self._down_since = time.monotonic()
            logger.error("Redis unavailable (%(exc)s); holding work until it is back", {"exc": exc},
                         extra={"spider": self.spider})

    def redis_ok(self) -> None:
        """Redis is back: called after a heartbeat, which touches every
        shard (a call that reached some masters of a cluster says nothing of
        the others)."""
        if self._down_since is not None:
            logger.warning("Redis is back after %(s).1fs", {"s": time.monotonic() - self._down_since},
                           extra={"spider": self.spider})
            self._down_since = None


def _where(client: Any) -> str:
    pool = getattr(client, "connection_pool", None)
    if pool is None:  # a cluster client
        nodes = client.get_primaries() if hasattr(client, "get_primaries") else []
        return "Redis Cluster " + ",".join(f"{n.host}:{n.port}" for n in nodes)
    kw = pool.connection_kwargs
    return str(kw.get("path") or f"{kw.get('host')}:{kw.get('port')}")
