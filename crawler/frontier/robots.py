"""robots.txt once per site for the whole cluster, and its Crawl-delay.

``ClusterRobotsTxtMiddleware`` replaces Scrapy's ``RobotsTxtMiddleware``:

- the robots.txt body is cached in Redis (``{crawl}:robots``) for
  ``ROBOTSTXT_CACHE_TTL`` seconds; a worker that needs it reads the cache
  first, and only one worker at a time fetches it (a lock with a timeout);
- the fetch of robots.txt counts as a request to the site: the next request
  there (from any worker) waits ``DOWNLOAD_DELAY`` after it;
- a ``Crawl-delay`` for our user agent raises the site's delay in the
  frontier (never lowers it below ``DOWNLOAD_DELAY``), capped at
  ``FRONTIER_MAX_CRAWL_DELAY``.

Failed robots.txt fetches are not cached: the next worker tries again.
Stats: ``robotstxt/cache_hit``, ``robotstxt/crawl_delay``.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

import redis
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler
from twisted.internet.task import deferLater

from crawler.frontier.scheduler import frontier_of
from crawler.urls import queue_key

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser

    from crawler.frontier.frontier import Frontier

logger = logging.getLogger(__name__)

__all__ = ["ClusterRobotsTxtMiddleware"]


class ClusterRobotsTxtMiddleware(RobotsTxtMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        s = crawler.settings
        self.ttl = s.getfloat("ROBOTSTXT_CACHE_TTL")
        self.max_crawl_delay = s.getfloat("FRONTIER_MAX_CRAWL_DELAY")
        self.base_delay = s.getfloat("DOWNLOAD_DELAY")
        self.lock_timeout = max(5.0, s.getfloat("ROBOTSTXT_DOWNLOAD_TIMEOUT") * 3)
        self.queue_by = s.get("FRONTIER_QUEUE_BY")

    def _frontier(self) -> Frontier | None:
        return frontier_of(self.crawler)

    async def robot_parser(self, request: Request) -> RobotParser | None:
        netloc = urlparse_cached(request).netloc
        frontier = self._frontier()
        if netloc not in self._parsers and frontier is not None:
            body = self._cached(frontier, netloc)
            if body is None and not self._lock(frontier, netloc):
                # Another worker is fetching it: wait for its answer.
                deadline = time.monotonic() + self.lock_timeout
                while body is None and time.monotonic() < deadline:
                    await maybe_deferred_to_future(deferLater(_reactor(), 0.25, lambda: None))
                    body = self._cached(frontier, netloc)
            if body is not None and netloc not in self._parsers:
                self.crawler.stats.inc_value("robotstxt/cache_hit")
                rp = build_from_crawler(self._parserimpl, self.crawler, body)
                self._parsers[netloc] = rp
                self._apply_crawl_delay(rp, request)
        return await super().robot_parser(request)

    async def _parse_robots(self, response: Response, netloc: str, request: Request) -> None:
        await self._after_robots_fetch(request)
        await super()._parse_robots(response, netloc, request)
        frontier = self._frontier()
        rp = self._parsers.get(netloc)
        if frontier is not None and rp is not None and not hasattr(rp, "callback"):
            try:
                frontier.round_trips += 1
                frontier.client.hset(frontier.key("robots"), netloc, json.dumps(
                    {"t": time.time(), "body": response.body.decode("latin-1")}))
            except redis.RedisError as exc:
                logger.warning("Could not cache robots.txt of %(netloc)s: %(exc)s",
                               {"netloc": netloc, "exc": exc})
            self._apply_crawl_delay(rp, request)

    async def _after_robots_fetch(self, request: Request) -> None:
        """robots.txt was one request to the site: the page request that waits
        for it, and every other worker's, keep DOWNLOAD_DELAY after it."""
        if self.base_delay <= 0:
            return
        frontier = self._frontier()
        gap = self.base_delay + (frontier.margin_ms / 1000.0 if frontier else 0.0)
        if frontier is not None:
            site = queue_key(urlparse_cached(request).hostname or "", self.queue_by)
            try:
                # Two gaps: the page request waiting for robots.txt goes out one
                # gap from now, the site's next request one gap after that.
                frontier.touch(site, 2 * gap)
            except redis.RedisError:
                pass
        await maybe_deferred_to_future(deferLater(_reactor(), gap, lambda: None))

    def _cached(self, frontier: Frontier, netloc: str) -> bytes | None:
        try:
            frontier.round_trips += 1
            raw = frontier.client.hget(frontier.key("robots"), netloc)
        except redis.RedisError:
            return None
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
        except ValueError:
            return None
        if time.time() - float(entry.get("t", 0)) > self.ttl:
            return None
        return str(entry.get("body", "")).encode("latin-1")

    def _lock(self, frontier: Frontier, netloc: str) -> bool:
        try:
            frontier.round_trips += 1
            return bool(frontier.client.set(frontier.key("robots:lock:" + netloc), frontier.node,
                                             nx=True, ex=int(self.lock_timeout)))
        except redis.RedisError:
            return True  # no Redis: fetch it ourselves

    def _apply_crawl_delay(self, rp: Any, request: Request) -> None:
        protego = getattr(rp, "rp", None)
        if protego is None or not hasattr(protego, "crawl_delay"):
            return
        ua = self._robotstxt_useragent or self._default_useragent
        try:
            delay = protego.crawl_delay(ua)
        except Exception:  # a parser quirk must not stop the crawl
            return
        if not delay or float(delay) <= self.base_delay:
            return
        delay = min(float(delay), self.max_crawl_delay)
        frontier = self._frontier()
        if frontier is None:
            return
        site = queue_key(urlparse_cached(request).hostname or "", self.queue_by)
        try:
            frontier.set_site_delay(site, delay)
        except redis.RedisError:
            return
        self.crawler.stats.inc_value("robotstxt/crawl_delay")
        logger.info("robots.txt of %(site)s asks for Crawl-delay %(delay).1fs", {"site": site, "delay": delay})


def _reactor() -> Any:
    # Imported late: importing it at module load would install Twisted's
    # default reactor before Scrapy installs the asyncio one.
    from twisted.internet import reactor

    return reactor
