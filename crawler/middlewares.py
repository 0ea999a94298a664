"""Downloader and spider middlewares: thin adapters over crawler.scope.urls.

``TrapGuardMiddleware`` (spider middleware) drops followed links that look
like a spider trap:

- ``TRAP_MAX_SHAPE_RUN``: the request continues a chain of more than this
  many links between URLs of one shape (``crawler.scope.urls.url_shape``:
  calendars, endless "next" links, session ids). Meta key ``shape_run``
  carries the chain length; ``dont_trap_guard`` opts a request out.
- ``TRAP_MAX_REPEATED_SEGMENT``: a path segment occurs this many times
  (``/a/b/a/b/a/b``: relative links that pile up).
- Path-level traps (``crawler.scope.traps``): chains that go deeper at every step
  (``TRAP_MAX_DESCENT_RUN``), deeper into numbered or token levels
  (``/x1/y2/z3/``: ``TRAP_MAX_NUMBERED_RUN``), or bring a fresh random token
  at every step (``/s/<session>/``: ``TRAP_MAX_TOKEN_RUN``,
  ``TRAP_MAX_TOKEN_VARIANTS``, ``TRAP_HOSTS_TRACKED``). Meta keys
  ``descent_run``, ``numbered_run``, ``token_run`` carry the evidence.

Stats: ``trap/dropped/shape_run``, ``trap/dropped/repeated_segment``,
``trap/dropped/descent_run``, ``trap/dropped/numbered_run``,
``trap/dropped/token_run``, ``trap/dropped/token_variants``. Each drop is
logged at DEBUG.

``SiteBackoffMiddleware``: ``crawler/rate.py`` (a site's pace after 429, 503, timeouts).

``RobotsTxtGuardMiddleware`` (downloader middleware, before Scrapy's
``RobotsTxtMiddleware`` sees the answer) bounds the robots.txt request:

- ``ROBOTSTXT_DOWNLOAD_TIMEOUT``: seconds before the robots.txt request gives up.
- ``ROBOTSTXT_MAX_RETRY_TIMES``: retries of the robots.txt request.

A robots.txt answered with a status other than 2xx is read as empty (allow
all), as RFC 9309 asks for 4xx. For 5xx the RFC asks for "disallow all" until
it can be fetched; a crawler that cannot re-schedule the site would then drop
every URL of it, so it is read as empty too and counted in
``robotstxt/unavailable`` (a warning names the site).

``SendSpacingMiddleware`` (downloader middleware, last before the download
handler) keeps the gap between two requests to a site at the wire, for the
whole cluster: each request reserves its send time in Redis, at least the
site's delay (``DOWNLOAD_DELAY`` or its robots.txt ``Crawl-delay``, plus
backoff and ``FRONTIER_DELAY_MARGIN``) after the last one any worker
reserved, and waits for it. The frontier's leases already space requests;
this holds when a busy worker sends one late and another sends the next on
time. It costs one Redis round trip a request to a site with a delay (the
default ``DOWNLOAD_DELAY`` of 1 s allows one request a second anyway), none
at a delay of 0. Stats: ``frontier/send_waits``,
``frontier/send_wait_ms``. Before that, a leased request is sent only while
its worker can show it still holds the lease (``lease_current``: a worker
stopped, or cut off from Redis, for most of ``FRONTIER_LEASE_TIMEOUT`` may
have been reaped, and its URL given to another): else it is given back
unsent (``frontier/lease_lost``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater

from crawler.compat import reactor
from crawler.failures import LeaseLost
from crawler.frontier.faces import FrontierFaces
from crawler.requestmeta import (
    DONT_OBEY_ROBOTSTXT, DONT_TRAP_GUARD, DOWNLOAD_TIMEOUT, FRONTIER_GAP, FRONTIER_LEASE, MAX_RETRY_TIMES, RENDER_FOR,
    SHAPE_RUN, TRAP_EVIDENCE, TRAP_PARENT,
)
from crawler.scope.traps import LinkParent, PathTrapGuard, TrapLimits
from crawler.rate import SiteBackoffMiddleware, retry_after
from crawler.scope.urls import host_of, max_segment_repeats, queue_key, url_shape

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

    from crawler.frontier.faces import PolitenessFace

logger = logging.getLogger(__name__)

__all__ = ["TRAP_PARENT", "RobotsTxtGuardMiddleware", "SendSpacingMiddleware", "SiteBackoffMiddleware",
           "TrapGuardMiddleware", "retry_after"]



class TrapGuardMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.max_shape_run = settings.getint("TRAP_MAX_SHAPE_RUN")
        self.max_repeated = settings.getint("TRAP_MAX_REPEATED_SEGMENT")
        # Values were checked at start (crawler.config).
        # The defaults stand in for settings a project does not define (tests
        # built with get_crawler(), projects with settings of their own).
        default = TrapLimits()
        self.paths = PathTrapGuard(TrapLimits(
            max_descent_run=settings.getint("TRAP_MAX_DESCENT_RUN", default.max_descent_run),
            max_numbered_run=settings.getint("TRAP_MAX_NUMBERED_RUN", default.max_numbered_run),
            max_token_run=settings.getint("TRAP_MAX_TOKEN_RUN", default.max_token_run),
            max_token_variants=settings.getint("TRAP_MAX_TOKEN_VARIANTS", default.max_token_variants),
            hosts_tracked=settings.getint("TRAP_HOSTS_TRACKED", default.hosts_tracked),
        ))
        if not self.max_shape_run and not self.max_repeated and not self.paths.limits.enabled:
            # The guard stays in place (a required part), doing nothing, and
            # says so: every TRAP_* limit was set to 0 on purpose.
            logger.warning("Spider-trap guard off: every TRAP_* limit is 0")
        self.stats = crawler.stats
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _drop(self, request: Request, reason: str, why: str, values: dict[str, Any]) -> bool:
        self.stats.inc_value(f"trap/dropped/{reason}")
        logger.debug("Dropped %(request)s: " + why, {"request": request, **values},
                     extra={"spider": self.crawler.spider})
        return False

    def _keep(self, request: Request, parent_shape: str, parent_run: int, page: LinkParent | None) -> bool:
        if request.meta.get(DONT_TRAP_GUARD):
            return True
        if self.max_repeated and max_segment_repeats(request.url) >= self.max_repeated:
            return self._drop(request, "repeated_segment", "repeated path segment", {})
        run = 0
        if self.max_shape_run:
            run = parent_run + 1 if url_shape(request.url) == parent_shape else 0
            if run > self.max_shape_run:
                return self._drop(request, "shape_run", "%(run)d links in a row of one URL shape",
                                  {"run": run})
        if page is not None:
            verdict = self.paths.judge(page, request.url, host_of(request.url))
            if verdict.reason is not None:
                return self._drop(request, verdict.reason, "path trap (%(evidence)s)",
                                  {"evidence": verdict.evidence})
            for key in TRAP_EVIDENCE:
                request.meta.pop(key, None)
            request.meta.update(verdict.evidence.to_meta())
        if run:
            request.meta[SHAPE_RUN] = run
        return True

    def _parent(self, url: str, meta: Mapping[str, Any]) -> tuple[str, int, LinkParent | None]:
        page = self.paths.page(url, meta) if self.paths.limits.enabled else None
        return url_shape(url), int(meta.get(SHAPE_RUN, 0)), page

    def _judge(self, request: Request, parent: tuple[str, int, LinkParent | None]) -> bool:
        # A link of another page than the response's (a site's first page,
        # typed again as an index page later: crawler/pagetypes/typer.py) is judged
        # against its own page, as it would have been then.
        other = request.meta.pop(TRAP_PARENT, None)
        if isinstance(other, tuple) and len(other) == 2:
            parent = self._parent(*other)
        return self._keep(request, *parent)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        parent = self._parent(response.url, response.meta)
        async for r in result:
            if not isinstance(r, Request) or self._judge(r, parent):
                yield r

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Spider | None = None
    ) -> Iterable[Any]:
        parent = self._parent(response.url, response.meta)
        for r in result:
            if not isinstance(r, Request) or self._judge(r, parent):
                yield r


class RobotsTxtGuardMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured  # optional: robots.txt switched off on purpose
        self.timeout = settings.getfloat("ROBOTSTXT_DOWNLOAD_TIMEOUT")
        self.max_retry_times = settings.getint("ROBOTSTXT_MAX_RETRY_TIMES")
        self.stats = crawler.stats
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    @staticmethod
    def _is_robots(request: Request) -> bool:
        # Scrapy's RobotsTxtMiddleware marks its own request this way.
        return bool(request.meta.get(DONT_OBEY_ROBOTSTXT)) and request.url.endswith("/robots.txt")

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if self._is_robots(request):
            request.meta.setdefault(DOWNLOAD_TIMEOUT, self.timeout)
            request.meta.setdefault(MAX_RETRY_TIMES, self.max_retry_times)

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        if not self._is_robots(request) or 200 <= response.status < 300:
            return response
        if response.status >= 500:
            self.stats.inc_value("robotstxt/unavailable")
            logger.warning(
                "robots.txt of %(url)s answered %(status)d; crawling the site as if it had none",
                {"url": request.url, "status": response.status}, extra={"spider": self.crawler.spider},
            )
        return response.replace(body=b"")

    def process_exception(
        self, request: Request, exception: Exception, spider: Spider | None = None
    ) -> None:
        if self._is_robots(request):
            self.stats.inc_value("robotstxt/unavailable")


class SendSpacingMiddleware:
    def __init__(self, crawler: Crawler, frontier: PolitenessFace) -> None:
        self.crawler = crawler
        self.frontier = frontier
        self.concurrency = crawler.settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
        self.queue_by = crawler.settings.get("FRONTIER_QUEUE_BY")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, FrontierFaces(crawler).politeness)

    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        # A rendered page's request (crawler/render/) is no lease: it takes
        # its place in the site's timeline, whatever the site's concurrency.
        # Else only requests the frontier leased for a site with a gap, and
        # only where a site takes more than one request at a time: with one,
        # the next lease waits a full gap after this request's download is
        # over (crawler/redis/lua/send.lua), which holds however late this
        # worker sends it. robots.txt requests are spaced by the robots
        # middleware. No round trip else.
        lease = request.meta.get(FRONTIER_LEASE)
        if isinstance(lease, str) and not self.frontier.lease_current(lease):
            self.crawler.stats.inc_value("frontier/lease_lost")
            logger.warning("Not sending %(url)s: this worker cannot show it still holds its lease (stopped "
                           "or cut off from Redis for most of FRONTIER_LEASE_TIMEOUT); given back",
                           {"url": request.url}, extra={"spider": self.crawler.spider})
            raise LeaseLost(f"lease {lease} may be another worker's now")
        rendering = bool(request.meta.get(RENDER_FOR))
        if not rendering and (self.concurrency <= 1 or not request.meta.get(FRONTIER_GAP)):
            return
        site = queue_key(host_of(request.url), self.queue_by)
        politeness = self.frontier.politeness
        try:
            wait = politeness.reserve(site) if rendering else politeness.reserve_send(site)
        except Exception as exc:  # Redis away: the lease's spacing still holds
            if not self.frontier.refused_for_memory(exc):  # Redis full: said once, by the service
                logger.warning("Could not reserve a send time for %(site)s: %(exc)s", {"site": site, "exc": exc})
            return
        if wait > 0:
            stats = self.crawler.stats
            stats.inc_value("frontier/send_waits")
            stats.inc_value("frontier/send_wait_ms", int(wait * 1000))
            await maybe_deferred_to_future(deferLater(reactor(), wait, lambda: None))

