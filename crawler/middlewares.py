"""Downloader and spider middlewares: thin adapters over crawler.urls.

``TrapGuardMiddleware`` (spider middleware) drops followed links that look
like a spider trap:

- ``TRAP_MAX_SHAPE_RUN``: the request continues a chain of more than this
  many links between URLs of one shape (``crawler.urls.url_shape``:
  calendars, endless "next" links, session ids). Meta key ``shape_run``
  carries the chain length; ``dont_trap_guard`` opts a request out.
- ``TRAP_MAX_REPEATED_SEGMENT``: a path segment occurs this many times
  (``/a/b/a/b/a/b``: relative links that pile up).

Stats: ``trap/dropped/shape_run``, ``trap/dropped/repeated_segment``.

``SiteBackoffMiddleware`` (downloader middleware, before Scrapy's retry)
backs a site off for the whole cluster when it answers 429 or 503 or times
out: the site's extra delay doubles (at least ``Retry-After`` or
``FRONTIER_BACKOFF_MIN``, at most ``FRONTIER_BACKOFF_MAX``) and halves again
with every success. Stats: ``frontier/backoff/<reason>``.

``RobotsTxtGuardMiddleware`` (downloader middleware, before Scrapy's
``RobotsTxtMiddleware`` sees the answer) bounds the robots.txt request:

- ``ROBOTSTXT_DOWNLOAD_TIMEOUT``: seconds before the robots.txt request gives up.
- ``ROBOTSTXT_MAX_RETRY_TIMES``: retries of the robots.txt request.

A robots.txt answered with a status other than 2xx is read as empty (allow
all), as RFC 9309 asks for 4xx. For 5xx the RFC asks for "disallow all" until
it can be fetched; a crawler that cannot re-schedule the site would then drop
every URL of it, so it is read as empty too and counted in
``robotstxt/unavailable`` (a warning names the site).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterable
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import DownloadTimeoutError, NotConfigured
from twisted.internet.error import TCPTimedOutError, TimeoutError

from crawler.urls import host_of, max_segment_repeats, queue_key, url_shape

_TIMEOUTS = (DownloadTimeoutError, TimeoutError, TCPTimedOutError)

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = ["RobotsTxtGuardMiddleware", "SiteBackoffMiddleware", "TrapGuardMiddleware"]


class TrapGuardMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.max_shape_run = settings.getint("TRAP_MAX_SHAPE_RUN")
        self.max_repeated = settings.getint("TRAP_MAX_REPEATED_SEGMENT")
        if self.max_shape_run < 0 or self.max_repeated < 0:
            raise NotConfigured(
                f"TRAP_MAX_SHAPE_RUN ({self.max_shape_run!r}) and TRAP_MAX_REPEATED_SEGMENT "
                f"({self.max_repeated!r}) must be 0 (off) or more."
            )
        if not self.max_shape_run and not self.max_repeated:
            raise NotConfigured
        self.stats = crawler.stats
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _keep(self, request: Request, parent_shape: str, parent_run: int) -> bool:
        if request.meta.get("dont_trap_guard"):
            return True
        if self.max_repeated and max_segment_repeats(request.url) >= self.max_repeated:
            self.stats.inc_value("trap/dropped/repeated_segment")
            logger.debug("Dropped %(request)s: repeated path segment", {"request": request},
                         extra={"spider": self.crawler.spider})
            return False
        if self.max_shape_run:
            run = parent_run + 1 if url_shape(request.url) == parent_shape else 0
            if run > self.max_shape_run:
                self.stats.inc_value("trap/dropped/shape_run")
                logger.debug("Dropped %(request)s: %(run)d links in a row of one URL shape",
                             {"request": request, "run": run}, extra={"spider": self.crawler.spider})
                return False
            if run:
                request.meta["shape_run"] = run
        return True

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        shape, run = url_shape(response.url), int(response.meta.get("shape_run", 0))
        async for r in result:
            if not isinstance(r, Request) or self._keep(r, shape, run):
                yield r

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Spider | None = None
    ) -> Iterable[Any]:
        shape, run = url_shape(response.url), int(response.meta.get("shape_run", 0))
        for r in result:
            if not isinstance(r, Request) or self._keep(r, shape, run):
                yield r


class RobotsTxtGuardMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        if not settings.getbool("ROBOTSTXT_OBEY"):
            raise NotConfigured
        self.timeout = settings.getfloat("ROBOTSTXT_DOWNLOAD_TIMEOUT")
        self.max_retry_times = settings.getint("ROBOTSTXT_MAX_RETRY_TIMES")
        if self.timeout <= 0:
            raise NotConfigured(f"ROBOTSTXT_DOWNLOAD_TIMEOUT ({self.timeout!r}) must be higher than 0.")
        self.stats = crawler.stats
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    @staticmethod
    def _is_robots(request: Request) -> bool:
        # Scrapy's RobotsTxtMiddleware marks its own request this way.
        return bool(request.meta.get("dont_obey_robotstxt")) and request.url.endswith("/robots.txt")

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if self._is_robots(request):
            request.meta.setdefault("download_timeout", self.timeout)
            request.meta.setdefault("max_retry_times", self.max_retry_times)

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


_BACKOFF_STATUSES = frozenset({429, 503})


class SiteBackoffMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        s = crawler.settings
        self.minimum = s.getfloat("FRONTIER_BACKOFF_MIN")
        self.maximum = s.getfloat("FRONTIER_BACKOFF_MAX")
        if not 0 < self.minimum <= self.maximum:
            raise NotConfigured(
                f"FRONTIER_BACKOFF_MIN ({self.minimum!r}) must be above 0 and at most "
                f"FRONTIER_BACKOFF_MAX ({self.maximum!r})."
            )
        self.queue_by = s.get("FRONTIER_QUEUE_BY")
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def _backoff(self, request: Request, seconds: float, reason: str) -> None:
        from crawler.frontier.scheduler import frontier_of

        frontier = frontier_of(self.crawler)
        if frontier is None:
            return
        site = queue_key(host_of(request.url), self.queue_by)
        try:
            backoff = frontier.backoff(site, max(seconds, self.minimum), self.maximum)
        except Exception as exc:  # Redis away: the retry still happens
            logger.warning("Could not back off %(site)s: %(exc)s", {"site": site, "exc": exc})
            return
        self.crawler.stats.inc_value(f"frontier/backoff/{reason}")
        logger.info("Backing off %(site)s for %(s).1fs (%(reason)s)",
                    {"site": site, "s": backoff, "reason": reason}, extra={"spider": self.crawler.spider})

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        if response.status in _BACKOFF_STATUSES:
            self._backoff(request, retry_after(response.headers.get(b"Retry-After")), str(response.status))
        return response

    def process_exception(self, request: Request, exception: Exception, spider: Spider | None = None) -> None:
        if isinstance(exception, _TIMEOUTS):
            self._backoff(request, 0.0, "timeout")


def retry_after(value: bytes | None, now: float | None = None) -> float:
    """Seconds asked by a Retry-After header (delta-seconds or HTTP date); 0 if absent or bad."""
    if not value:
        return 0.0
    text = value.decode("latin-1").strip()
    if text.isdigit():
        return float(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return 0.0
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)
