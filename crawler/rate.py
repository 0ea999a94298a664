"""A site's pace after it refuses requests or lets them time out.

``SiteBackoffMiddleware`` (downloader middleware, before Scrapy's retry)
slows a site down for the whole cluster when it answers 429 or 503 or times
out. With ``ADAPTIVE_RATE`` (the default) the site's pace is learned
(``crawler/redis/lua/slow.lua``, docs/politeness.md): each new incident
lengthens the gap between its requests, a site that keeps refusing is
paused (``ADAPTIVE_RATE_PAUSE`` doubled, at most ``FRONTIER_BACKOFF_MAX``;
``Retry-After`` honoured), answers that slow down past
``ADAPTIVE_RATE_LATENCY`` times the site's fastest slow it too
(``LatencyWatch``), and successes bring the pace back towards
``DOWNLOAD_DELAY`` step by step. Stats: ``rate/refused/<reason>``,
``rate/slowdowns``, ``rate/pauses``, ``rate/stalled`` (latencies and
timeouts measured across a stall of this worker's own loop: not the
site's, ignored; ``crawler/stall.py``). Without it: the site's extra delay
doubles (at least ``Retry-After`` or ``FRONTIER_BACKOFF_MIN``, at most
``FRONTIER_BACKOFF_MAX``) and halves again with every success; stats
``frontier/backoff/<reason>``.
"""

from __future__ import annotations

import logging
import math
import re
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import DownloadTimeoutError
from twisted.internet.error import TCPTimedOutError, TimeoutError

from crawler.frontier.faces import FrontierFaces
from crawler.requestmeta import DOWNLOAD_LATENCY, DOWNLOAD_TIMEOUT
from crawler.scope.urls import host_of, queue_key
from crawler.stall import LoopWatch

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

    from crawler.frontier.faces import PolitenessFace

logger = logging.getLogger(__name__)

__all__ = ["SiteBackoffMiddleware", "SiteSlower", "retry_after"]

_TIMEOUTS = (DownloadTimeoutError, TimeoutError, TCPTimedOutError)

_BACKOFF_STATUSES = frozenset({429, 503})


class SiteSlower:
    """Slows a site down for the whole cluster: its adaptive pace
    (``ADAPTIVE_RATE``) or, without it, the fixed backoff. Used by the
    middleware below for refusals and timeouts and by the chain's
    ``blocked`` step for bot walls."""

    def __init__(self, crawler: Crawler, frontier: PolitenessFace) -> None:
        s = crawler.settings
        self.frontier = frontier
        self.minimum = s.getfloat("FRONTIER_BACKOFF_MIN")
        self.maximum = s.getfloat("FRONTIER_BACKOFF_MAX")
        self.adaptive = s.getbool("ADAPTIVE_RATE")
        self.pause = s.getfloat("ADAPTIVE_RATE_PAUSE")
        self.max_pace = s.getfloat("ADAPTIVE_RATE_MAX_DELAY")
        # Values were checked at start (crawler.config): backoff is required.
        self.queue_by = s.get("FRONTIER_QUEUE_BY")
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, FrontierFaces(crawler).politeness)

    def slow(self, url: str, seconds: float, latency: float, reason: str) -> None:
        """``url``'s site refused it (``reason``), asked for ``seconds``
        (Retry-After; 0: none), ``latency`` seconds after it was sent."""
        if self.adaptive:
            self._slow(url, seconds, latency, reason)
        else:
            self._backoff(url, seconds, reason)

    def _slow(self, url: str, seconds: float, latency: float, reason: str) -> None:
        frontier = self.frontier
        if not frontier.is_open:
            return
        site = queue_key(host_of(url), self.queue_by)
        try:
            pace, pause, new = frontier.politeness.slow(site, seconds, latency, self.pause, self.maximum,
                                                        self.max_pace, reason)
        except Exception as exc:  # Redis away: the retry still happens
            if not frontier.refused_for_memory(exc):
                logger.warning("Could not slow %(site)s down: %(exc)s", {"site": site, "exc": exc})
            return
        stats = self.crawler.stats
        stats.inc_value(f"rate/refused/{reason}")
        if new:
            stats.inc_value("rate/slowdowns")
            logger.info("Slowing %(site)s to one request every %(pace).2fs (%(reason)s)",
                        {"site": site, "pace": pace, "reason": reason}, extra={"spider": self.crawler.spider})
        if pause:
            stats.inc_value("rate/pauses")
            logger.info("Pausing %(site)s for %(s).1fs (%(reason)s)", {"site": site, "s": pause, "reason": reason},
                        extra={"spider": self.crawler.spider})

    def _backoff(self, url: str, seconds: float, reason: str) -> None:
        frontier = self.frontier
        if not frontier.is_open:
            return
        site = queue_key(host_of(url), self.queue_by)
        try:
            backoff = frontier.politeness.backoff(site, max(seconds, self.minimum), self.maximum)
        except Exception as exc:  # Redis away: the retry still happens
            if not frontier.refused_for_memory(exc):  # Redis full: said once, by the service
                logger.warning("Could not back off %(site)s: %(exc)s", {"site": site, "exc": exc})
            return
        self.crawler.stats.inc_value(f"frontier/backoff/{reason}")
        logger.info("Backing off %(site)s for %(s).1fs (%(reason)s)",
                    {"site": site, "s": backoff, "reason": reason}, extra={"spider": self.crawler.spider})


class LatencyWatch:
    """A site whose answers slow down is asked less often, before it
    refuses: per site, in this worker, the fastest answer seen and an
    average of the latest (weight ``_EWMA``); when the average is both
    ``ADAPTIVE_RATE_LATENCY`` times the fastest and half a second more, the
    site is slowed as a refusal would slow it (reason ``latency``), at most
    once in ``_QUIET`` seconds."""

    _EWMA = 0.2
    _MARGIN = 0.5  # seconds above the fastest answer: a slow-down a visitor would notice
    _QUIET = 10.0
    _SITES = 10_000  # sites watched at most (the oldest forgotten)

    def __init__(self, factor: float) -> None:
        self.factor = factor
        self.sites: dict[str, list[float]] = {}  # site -> [fastest, average, last slow-down]

    def slower(self, site: str, latency: float, now: float) -> bool:
        """Whether ``latency`` makes ``site`` due a slow-down."""
        seen = self.sites.get(site)
        if seen is None:
            if len(self.sites) >= self._SITES:
                self.sites.pop(next(iter(self.sites)))
            self.sites[site] = [latency, latency, 0.0]
            return False
        seen[0] = min(seen[0], latency)
        seen[1] += self._EWMA * (latency - seen[1])
        fastest, average, last = seen
        if average > fastest * self.factor and average > fastest + self._MARGIN and now - last >= self._QUIET:
            seen[2] = now
            return True
        return False


class SiteBackoffMiddleware:
    def __init__(self, crawler: Crawler, frontier: PolitenessFace) -> None:
        self.slower = SiteSlower(crawler, frontier)
        self.stats = crawler.stats
        self.maximum = self.slower.maximum
        self.timeout = crawler.settings.getfloat("DOWNLOAD_TIMEOUT")
        factor = crawler.settings.getfloat("ADAPTIVE_RATE_LATENCY")
        self.latency = LatencyWatch(factor) if self.slower.adaptive and factor > 0 else None
        # A latency or a timeout measured across a stall of this worker (it
        # was stopped, or its loop busy) says nothing of the site (stall.py).
        self.loop = LoopWatch()
        crawler.signals.connect(self.loop.start, signal=signals.engine_started)
        crawler.signals.connect(self.loop.stop, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, FrontierFaces(crawler).politeness)

    def _backoff(self, request: Request, seconds: float, reason: str, latency: float = 0.0) -> None:
        self.slower.slow(request.url, seconds, latency, reason)

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        if response.status in _BACKOFF_STATUSES:
            seconds = retry_after(response.headers.get(b"Retry-After"), maximum=self.maximum)
            latency = request.meta.get(DOWNLOAD_LATENCY)
            self._backoff(request, seconds, str(response.status),
                          float(latency) if isinstance(latency, (int, float)) else 0.0)
        elif self.latency is not None and response.status < 400:
            latency = request.meta.get(DOWNLOAD_LATENCY)
            if isinstance(latency, (int, float)) and self._measured(float(latency)):
                site = queue_key(host_of(request.url), self.slower.queue_by)
                if self.latency.slower(site, float(latency), time.monotonic()):
                    self._backoff(request, 0.0, "latency", float(latency))
        return response

    def process_exception(self, request: Request, exception: Exception, spider: Spider | None = None) -> None:
        if isinstance(exception, _TIMEOUTS):
            timeout = request.meta.get(DOWNLOAD_TIMEOUT)
            seconds = float(timeout) if isinstance(timeout, (int, float)) else self.timeout
            if self._measured(seconds):
                self._backoff(request, 0.0, "timeout", seconds)

    def _measured(self, seconds: float) -> bool:
        """The last ``seconds`` crossed no stall of this worker's loop (else
        counted ``rate/stalled``: the measure is not the site's)."""
        if self.loop.clean(time.monotonic() - seconds):
            return True
        self.stats.inc_value("rate/stalled")
        return False


_DAY = rb"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_MONTHS = (b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec")
_MONTH = rb"(" + b"|".join(_MONTHS) + rb")"
_TIME = rb"([0-9]{2}):([0-9]{2}):([0-9]{2})"
# RFC 9110 section 5.6.7, case-sensitive as its ABNF (%s) says:
# IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" (the form senders must use),
# obsolete RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT", asctime "Sun Nov  6 08:49:37 1994".
_IMF_FIXDATE = re.compile(_DAY + rb", ([0-9]{2}) " + _MONTH + rb" ([0-9]{4}) " + _TIME + rb" GMT")
_RFC850_DATE = re.compile(rb"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), "
                          rb"([0-9]{2})-" + _MONTH + rb"-([0-9]{2}) " + _TIME + rb" GMT")
_ASCTIME_DATE = re.compile(_DAY + rb" " + _MONTH + rb" ([0-9]{2}| [0-9]) " + _TIME + rb" ([0-9]{4})")
_DELAY_SECONDS = re.compile(rb"[0-9]+")  # 1*DIGIT: ASCII digits only, no sign, no fraction


def retry_after(value: bytes | None, *, maximum: float, now: float | None = None) -> float:
    """Seconds a ``Retry-After`` value asks to wait (RFC 9110 section 10.2.3),
    at most ``maximum``: delay-seconds, or an HTTP-date in any of its three
    forms, less ``now``. Anything else (absent, empty, signed, fractional,
    non-ASCII digits such as "²", a date in the past, undecodable bytes) is 0.
    Never raises."""
    if not value or not isinstance(value, bytes):
        return 0.0
    value = value.strip(b" \t")  # OWS around a field value is not part of it
    if _DELAY_SECONDS.fullmatch(value):
        digits = value.lstrip(b"0")
        # A 400-digit delay is no reason to build a 400-digit number (nor an
        # infinite float): anything that long is over any sane maximum.
        return min(float(digits) if len(digits) <= 15 else math.inf, maximum) if digits else 0.0
    when = _http_date(value, time.time() if now is None else now)
    if when is None:
        return 0.0
    return min(max(when - (time.time() if now is None else now), 0.0), maximum)


def _http_date(value: bytes, now: float) -> float | None:
    """The Unix time of an HTTP-date, None when it is not one (or names no real day)."""
    if m := _IMF_FIXDATE.fullmatch(value):
        day, month, year, hh, mm, ss = m.groups()
        year_n = int(year)
    elif m := _RFC850_DATE.fullmatch(value):
        day, month, year, hh, mm, ss = m.groups()
        # A two-digit year more than 50 years ahead is the latest such year
        # in the past (RFC 9110 section 5.6.7).
        this_year = time.gmtime(now).tm_year
        year_n = this_year - this_year % 100 + int(year)
        if year_n > this_year + 50:
            year_n -= 100
        elif year_n <= this_year - 50:
            year_n += 100
    elif m := _ASCTIME_DATE.fullmatch(value):
        month, day, hh, mm, ss, year = m.groups()
        year_n = int(year)
    else:
        return None
    try:
        # second 60 is a leap second: the same instant as :59 for a delay.
        moment = datetime(year_n, _MONTHS.index(month) + 1, int(day), int(hh), int(mm),
                          min(int(ss), 59), tzinfo=timezone.utc)
    except ValueError:  # 31 Feb, hour 25, year 0
        return None
    return moment.timestamp()
