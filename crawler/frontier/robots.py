"""robots.txt once per site for the whole cluster, its Crawl-delay, and the
groups of it that name this crawler.

``ClusterRobotsTxtMiddleware`` replaces Scrapy's ``RobotsTxtMiddleware``:

- robots.txt groups are matched on a product token, as RFC 9309 asks, never
  on the whole ``User-Agent`` string (in which groups named ``site``,
  ``crawler``, ``example`` or ``https`` would find themselves): the group
  whose user-agent line is the token (case-insensitive), else the ``*``
  group, else none. That holds for allow/disallow and for Crawl-delay.
  Scrapy's Protego parser (``ROBOTSTXT_PARSER``'s default) is replaced by
  ``ProductTokenRobotParser``, the same parser with that matching; another
  parser is given the token and matches as it does;
- the robots.txt body is cached in Redis, one key per host
  (``robots:body:<host>`` in its site's shard, ``RobotsCache``) that expires after ``ROBOTSTXT_CACHE_TTL``
  seconds; a worker that needs it reads the cache first, and only one worker
  at a time fetches it (``{crawl}:robots:lock:<host>``, with a timeout). The
  entry is the body's own bytes behind a one-line header, and the body kept
  (and parsed) is cut at the last line end within 500 KiB (the least
  RFC 9309 lets a parser read). An entry not in that form (another format,
  another type, too large) counts as absent: robots.txt is fetched again,
  the first time for a host is logged at WARNING, and it is counted.
  Whatever is read from Redis is only ever parsed as robots.txt: it names no
  code to run;
- the fetch of robots.txt counts as a request to the site: the next request
  there (from any worker) waits ``DOWNLOAD_DELAY`` after it;
- a ``Crawl-delay`` for our product token raises the site's delay in the
  frontier (never lowers it below ``DOWNLOAD_DELAY``), capped at
  ``FRONTIER_MAX_CRAWL_DELAY``.

Failed robots.txt fetches (network errors, timeouts, 5xx) are not cached:
the next worker tries again.

Settings: ``ROBOTSTXT_USER_AGENT`` (the product token; default the first
token of ``USER_AGENT``, up to its ``/``), ``ROBOTSTXT_CACHE_TTL``,
``ROBOTSTXT_PARSER``, ``FRONTIER_MAX_CRAWL_DELAY``,
``DOWNLOAD_DELAY``, ``ROBOTSTXT_DOWNLOAD_TIMEOUT`` (the lock lasts three of
them, at least 5 s), ``FRONTIER_QUEUE_BY``.

Stats: ``robotstxt/cache_hit``, ``robotstxt/cache_malformed`` (hosts whose
cache entry was ignored), ``robotstxt/crawl_delay``, ``robotstxt/truncated``
(bodies cut at 500 KiB).
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import redis
from scrapy.robotstxt import ProtegoRobotParser, decode_robotstxt
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater

from crawler.compat import GroupChoosingProtego, RobotsTxtHooks, reactor
from crawler.config import product_token
from crawler.frontier.faces import FrontierFaces
from crawler.frontier.signals import ROBOTS_READ
from crawler.scope.urls import queue_key

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser
    from typing_extensions import Self

    from crawler.frontier.faces import PolitenessFace
    from crawler.frontier.politeness import RobotsCache

logger = logging.getLogger(__name__)

__all__ = ["ROBOTSTXT_MAX_BODY", "ClusterRobotsTxtMiddleware", "MalformedEntry", "ProductTokenRobotParser",
           "cap_body", "decode_entry", "encode_entry", "product_token"]

# RFC 9309, 2.5: "The parsing limit MUST be at least 500 kibibytes".
ROBOTSTXT_MAX_BODY = 500 * 1024

# A cache entry: b"rtxt1 <fetched at, Unix seconds>\n" and the body's bytes.
_MAGIC = b"rtxt1 "
_HEADER_MAX = len(_MAGIC) + 12 + 1
_ENTRY_MAX = _HEADER_MAX + ROBOTSTXT_MAX_BODY
def cap_body(body: bytes, limit: int = ROBOTSTXT_MAX_BODY) -> bytes:
    """``body`` cut to at most ``limit`` bytes, at the last line end within
    them: half a rule (``Disallow: /pri``) would forbid more than it says."""
    if len(body) <= limit:
        return body
    end = body.rfind(b"\n", 0, limit)
    return body[:end + 1] if end >= 0 else body[:limit]


def encode_entry(body: bytes, fetched_at: float) -> bytes:
    return _MAGIC + str(int(fetched_at)).encode() + b"\n" + body


class MalformedEntry(ValueError):
    """A robots.txt cache entry this code did not write."""


def decode_entry(raw: object) -> tuple[float, bytes]:
    """(fetched at, body) of a cache entry; ``MalformedEntry`` saying what is
    wrong with anything else."""
    if not isinstance(raw, bytes):
        raise MalformedEntry(f"not bytes but {type(raw).__name__}")
    if len(raw) > _ENTRY_MAX:
        raise MalformedEntry(f"over {_ENTRY_MAX} bytes")
    if not raw.startswith(_MAGIC):
        raise MalformedEntry("no header")
    end = raw.find(b"\n", len(_MAGIC), _HEADER_MAX)
    stamp = raw[len(_MAGIC):end]
    if end < 0 or not stamp.isdigit():
        raise MalformedEntry("bad header")
    body = raw[end + 1:]
    if len(body) > ROBOTSTXT_MAX_BODY:
        raise MalformedEntry(f"body over {ROBOTSTXT_MAX_BODY} bytes")
    return float(stamp), body


class _ProductTokenProtego(GroupChoosingProtego):
    def choose_group(self, user_agent: str, groups: Mapping[str, Any]) -> Any:
        # RFC 9309, 2.2.1: the group whose user-agent is the product token,
        # case-insensitively, else the "*" group, else none. Protego also
        # takes groups named by a prefix or a later word of what it is given.
        found = groups.get(user_agent.strip().lower())
        return found if found is not None else groups.get("*")


class ProductTokenRobotParser(ProtegoRobotParser):
    """Scrapy's Protego parser, matching groups on the product token only."""

    def __init__(self, robotstxt_body: bytes, spider: Spider | None) -> None:
        self.spider = spider
        self.rp = _ProductTokenProtego.parse(decode_robotstxt(robotstxt_body, spider))


class ClusterRobotsTxtMiddleware(RobotsTxtHooks):
    def __init__(self, crawler: Crawler, frontier: PolitenessFace) -> None:
        super().__init__(crawler)
        self.frontier = frontier
        s = crawler.settings
        # Values were checked at start (crawler.config).
        self.ttl = s.getfloat("ROBOTSTXT_CACHE_TTL")
        self.max_crawl_delay = s.getfloat("FRONTIER_MAX_CRAWL_DELAY")
        self.base_delay = s.getfloat("DOWNLOAD_DELAY")
        self.lock_timeout = max(5.0, s.getfloat("ROBOTSTXT_DOWNLOAD_TIMEOUT") * 3)
        self.queue_by = s.get("FRONTIER_QUEUE_BY")
        self.token = str(s.get("ROBOTSTXT_USER_AGENT") or "").strip() or product_token(str(s.get("USER_AGENT") or ""))
        # Not on the request's whole User-Agent header, which Scrapy matches on otherwise.
        self.match_on(self.token)
        if load_object(s.get("ROBOTSTXT_PARSER")) is ProtegoRobotParser:
            GroupChoosingProtego.check()  # ProductTokenRobotParser matches groups through it
            self.use_parser(ProductTokenRobotParser)
        self._malformed_hosts: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, FrontierFaces(crawler).politeness)

    def _frontier(self) -> PolitenessFace | None:
        return self.frontier if self.frontier.is_open else None

    def _cache(self) -> RobotsCache | None:
        frontier = self._frontier()
        return frontier.robots if frontier is not None else None

    def parse(self, body: bytes) -> RobotParser:
        """The parser of a robots.txt body (cut at ``ROBOTSTXT_MAX_BODY``)."""
        return build_from_crawler(self.parser_class, self.crawler, cap_body(body))

    def crawl_delay(self, rp: RobotParser) -> float | None:
        """The Crawl-delay robots.txt asks of our product token, if any."""
        try:
            delay = rp.crawl_delay(self.token)
        except Exception:  # a parser quirk must not stop the crawl
            return None
        return None if delay is None else float(delay)

    async def robot_parser(self, request: Request) -> RobotParser | None:
        netloc = urlparse_cached(request).netloc
        cache = self._cache()
        if netloc not in self.parsers and cache is not None:
            body = self.cached_body(cache, netloc)
            if body is None and not self._lock(cache, netloc):
                # Another worker is fetching it: wait for its answer.
                deadline = time.monotonic() + self.lock_timeout
                while body is None and time.monotonic() < deadline:
                    await maybe_deferred_to_future(deferLater(reactor(), 0.25, lambda: None))
                    body = self.cached_body(cache, netloc)
            if body is not None and netloc not in self.parsers:
                self.crawler.stats.inc_value("robotstxt/cache_hit")
                rp = self.parse(body)
                self.parsers[netloc] = rp
                self._apply_crawl_delay(rp, request)
                self._read(request, body)
        return await super().robot_parser(request)

    async def robots_fetched(self, response: Response, netloc: str, request: Request) -> None:
        await self._after_robots_fetch(request)
        body = cap_body(response.body)
        if len(body) < len(response.body):
            self.crawler.stats.inc_value("robotstxt/truncated")
            logger.info("robots.txt of %(netloc)s is %(size)d bytes: reading its first %(kept)d",
                        {"netloc": netloc, "size": len(response.body), "kept": len(body)})
            response = response.replace(body=body)
        await self.parse_fetched(response, netloc, request)
        self._read(request, body if response.status == 200 else b"")
        cache = self._cache()
        rp = self.parsers.get(netloc)
        if cache is None or rp is None or isinstance(rp, Deferred):
            return
        # A 5xx reads as an empty robots.txt (RobotsTxtGuardMiddleware) for
        # this worker only: the next one tries again.
        if response.status < 500:
            self.cache_body(cache, netloc, body)
        else:
            # Nothing to share: let the workers waiting for our answer fetch it
            # themselves now rather than when the lock expires.
            try:
                cache.unlock(self._site(netloc), netloc)
            except redis.RedisError:
                pass
        self._apply_crawl_delay(rp, request)

    def _read(self, request: Request, body: bytes) -> None:
        """Tell the crawl this worker has read a host's robots.txt (``ROBOTS_READ``)."""
        parsed = urlparse_cached(request)
        self.crawler.signals.send_catch_log(signal=ROBOTS_READ, url=f"{parsed.scheme}://{parsed.netloc}/robots.txt",
                                            body=body)

    def _site(self, netloc: str) -> str:
        """The frontier site (queue) of a robots.txt's host: its cache lives
        in that site's shard."""
        try:
            host = urlsplit("//" + netloc).hostname or ""
        except ValueError:
            host = ""
        return queue_key(host, self.queue_by)

    def cache_body(self, cache: RobotsCache, netloc: str, body: bytes) -> None:
        """Share ``body`` (already cut) with the cluster for ``ROBOTSTXT_CACHE_TTL``."""
        try:
            cache.put(self._site(netloc), netloc, encode_entry(body, time.time()), math.ceil(self.ttl))
        except redis.RedisError as exc:
            if not self.frontier.refused_for_memory(exc):  # Redis full: said once
                logger.warning("Could not cache robots.txt of %(netloc)s: %(exc)s", {"netloc": netloc, "exc": exc})

    def cached_body(self, cache: RobotsCache, netloc: str) -> bytes | None:
        """The cluster's robots.txt body for ``netloc``; None if there is none
        fresh and well-formed (or Redis is away): then it is fetched."""
        try:
            # One byte past the largest entry we write: enough to tell a huge
            # value without moving it.
            exists, raw = cache.get(self._site(netloc), netloc, _ENTRY_MAX)
        except redis.ResponseError as exc:
            if "WRONGTYPE" in str(exc):
                self._malformed(netloc, "not a string")
            return None
        except redis.RedisError:
            return None
        if not exists:
            return None
        try:
            fetched_at, body = decode_entry(raw)
        except MalformedEntry as exc:
            self._malformed(netloc, str(exc))
            return None
        if time.time() - fetched_at > self.ttl:
            return None
        return body

    def _malformed(self, netloc: str, reason: str) -> None:
        if netloc in self._malformed_hosts:
            return
        self._malformed_hosts.add(netloc)
        self.crawler.stats.inc_value("robotstxt/cache_malformed")
        logger.warning("Ignoring the robots.txt cache entry of %(netloc)s (%(reason)s): fetching robots.txt again",
                       {"netloc": netloc, "reason": reason})

    def _lock(self, cache: RobotsCache, netloc: str) -> bool:
        try:
            return cache.lock(self._site(netloc), netloc, int(self.lock_timeout))
        except redis.RedisError:
            return True  # no Redis: fetch it ourselves

    async def _after_robots_fetch(self, request: Request) -> None:
        """robots.txt was one request to the site: the page request that waits
        for it, and every other worker's, keep DOWNLOAD_DELAY after it."""
        if self.base_delay <= 0:
            return
        frontier = self._frontier()
        gap = self.base_delay + (frontier.margin if frontier else 0.0)
        if frontier is not None:
            site = queue_key(urlparse_cached(request).hostname or "", self.queue_by)
            try:
                # Two gaps: the page request waiting for robots.txt goes out one
                # gap from now, the site's next request one gap after that.
                frontier.politeness.touch(site, 2 * gap)
            except redis.RedisError:
                pass
        await maybe_deferred_to_future(deferLater(reactor(), gap, lambda: None))

    def _apply_crawl_delay(self, rp: RobotParser, request: Request) -> None:
        delay = self.crawl_delay(rp)
        if delay is None or delay <= self.base_delay:
            return
        delay = min(delay, self.max_crawl_delay)
        frontier = self._frontier()
        if frontier is None:
            return
        site = queue_key(urlparse_cached(request).hostname or "", self.queue_by)
        try:
            frontier.politeness.set_site_delay(site, delay)
        except redis.RedisError:
            return
        self.crawler.stats.inc_value("robotstxt/crawl_delay")
        logger.info("robots.txt of %(site)s asks for Crawl-delay %(delay).1fs", {"site": site, "delay": delay})

