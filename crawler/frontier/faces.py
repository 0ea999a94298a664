"""The frontier's faces: what each consumer of the frontier service may do,
and nothing else.

The frontier service (``service.py``) holds the crawl's Redis frontier, the
lease book and the Redis-down and Redis-full states. Its consumers each need
a narrow part of it:

- ``SpiderFace``: the spider's parts (``crawler/chain/parts.py``): the
  follower (crawl meta, scope, the crawl's name), importance (the queue
  order, dedup slots, links raised through the lease book), the page check
  (duplicate index and template evidence in one round trip), the typer
  (template evidence), sitemaps (the sitemap queue), seeds (claims);
- ``PolitenessFace``: the downloader middlewares and the robots.txt
  middleware (backoff, send times, site delays, the robots.txt cache);
- ``StoreFace``: the store's pipeline (whether the worker is idle);
- ``OpsFace``: progress and the page-count closer (this worker's counts
  from the lease book, the crawl's counters, Redis's state).

The scheduler drives the service itself (it opens it, as its ``Worker``).

``FrontierFaces`` makes them all over one ``Door``: the one place where
the service is looked up (``FrontierService.of``). The lookup is lazy
because Scrapy builds the spider and the extensions before the extension
manager answers, and the scheduler opens the frontier later still; a door
resolves once, on first use. Each Scrapy component's ``from_crawler`` (its
assembly point) takes the face it needs from ``FrontierFaces(crawler)``; the
spider builds one ``SpiderFace`` and hands it to all its parts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crawler.frontier.service import FrontierService

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy.crawler import Crawler

    from crawler.frontier.dupindex import DuplicateIndex
    from crawler.frontier.frontier import Frontier
    from crawler.frontier.meta import CrawlMeta
    from crawler.frontier.politeness import Politeness, RobotsCache
    from crawler.frontier.queues import LinkEntry
    from crawler.frontier.scope import Scope
    from crawler.frontier.sitemapqueue import SitemapQueue
    from crawler.frontier.templates import SiteTemplates
    from crawler.redis.gateway import Call

__all__ = ["Door", "FrontierFaces", "OpsFace", "PolitenessFace", "SpiderFace", "StoreFace"]


class Door:
    """The crawler's frontier service, found on first use (see the module)."""

    def __init__(self, crawler: Crawler) -> None:
        self._crawler = crawler
        self._service: FrontierService | None = None

    @property
    def service(self) -> FrontierService:
        if self._service is None:
            self._service = FrontierService.of(self._crawler)
        return self._service


class _Face:
    def __init__(self, door: Door) -> None:
        self._door = door

    @property
    def is_open(self) -> bool:
        """Whether the scheduler opened the frontier (False before)."""
        return self._door.service.is_open

    @property
    def _frontier(self) -> Frontier:
        return self._door.service.frontier

    @property
    def crawl(self) -> str:
        return self._frontier.settings.crawl

    def refused_for_memory(self, exc: BaseException) -> bool:
        """Whether ``exc`` is Redis refusing a write for want of memory (said
        once for the spell, by the service: ``fullness.py``)."""
        return self._door.service.refused_for_memory(exc)


class SpiderFace(_Face):
    """What the spider's parts use of the frontier."""

    @property
    def meta(self) -> CrawlMeta:
        return self._frontier.meta

    @property
    def scope(self) -> Scope:
        return self._frontier.scope_store

    @property
    def duplicates(self) -> DuplicateIndex:
        return self._frontier.duplicates

    @property
    def templates(self) -> SiteTemplates:
        return self._frontier.templates

    @property
    def sitemaps(self) -> SitemapQueue:
        return self._frontier.sitemaps

    @property
    def order(self) -> str:
        """The crawl's queue order ("fifo", "importance", "topic:...")."""
        return self._frontier.state.order

    def slot(self, fp: bytes) -> tuple[str, str]:
        """The dedup bucket and member of fingerprint ``fp``."""
        return self._frontier.queues.slot(fp)

    def enqueue(self, link: LinkEntry) -> None:
        """Send ``link`` with the worker's next commit (the lease book's)."""
        self._door.service.book.enqueue(link)

    def run_many(self, calls: Sequence[Call], *, raise_on_error: bool = True) -> list[Any]:
        """Scripts of the parts above, sent in one round trip."""
        return self._frontier.gateway.run_many(calls, raise_on_error=raise_on_error)

    async def writable(self) -> None:
        """Return once Redis takes writes (at once unless it is full)."""
        await self._door.service.writable()


class PolitenessFace(_Face):
    """What the downloader middlewares and robots.txt use of the frontier."""

    @property
    def politeness(self) -> Politeness:
        return self._frontier.politeness

    @property
    def robots(self) -> RobotsCache:
        return self._frontier.robots

    @property
    def margin(self) -> float:
        """Seconds added to every gap (``FRONTIER_DELAY_MARGIN``)."""
        return self._frontier.settings.margin_ms / 1000.0

    def lease_current(self, lease_id: str) -> bool:
        """Whether the request leased as ``lease_id`` may go on the wire
        (``FrontierService.lease_current``); if not, its lease is given back."""
        service = self._door.service
        if service.lease_current(lease_id):
            return True
        service.book.give_back([lease_id])
        return False


class StoreFace(_Face):
    """What the store's pipeline uses of the frontier."""

    @property
    def client(self) -> Any:
        """The crawl's Redis client (its webhook events go there: crawler/webhooks/)."""
        return self._frontier.client

    def worker_idle(self) -> bool:
        return self._door.service.worker_idle()


class OpsFace(_Face):
    """What progress reports and the page-count closer read."""

    @property
    def node(self) -> str:
        return self._frontier.settings.node

    @property
    def order(self) -> str:
        return self._frontier.state.order

    @property
    def pages(self) -> int:
        """Pages this worker acknowledged as done (not sitemaps)."""
        return self._door.service.book.pages

    @property
    def done(self) -> int:
        return self._door.service.book.done

    def acked(self, state: str) -> int:
        """This worker's pages acknowledged in ``state`` ("C", "T", "E", "F")."""
        return self._door.service.book.acked.get(state, 0)

    @property
    def sitemap_errors(self) -> int:
        return self._door.service.book.sitemaps.get("E", 0)

    @property
    def redis_full(self) -> bool:
        return self._door.service.redis_full

    @property
    def redis_down(self) -> bool:
        return self._door.service.redis_down

    def counters(self) -> dict[str, int]:
        """The crawl's counters (queued, leased, done ...): one round trip."""
        return self._frontier.views.stats()


class FrontierFaces:
    """Every face, over one door: what a component's ``from_crawler`` picks from."""

    def __init__(self, crawler: Crawler) -> None:
        door = Door(crawler)
        self.spider = SpiderFace(door)
        self.politeness = PolitenessFace(door)
        self.store = StoreFace(door)
        self.ops = OpsFace(door)
