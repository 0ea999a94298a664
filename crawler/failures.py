"""What a failed request is called: the reason an error record stores
(``error``) and ``scrapy status`` counts by (its text up to the first colon
or parenthesis). Every failed request is an error record with its reason,
except one robots.txt forbids (``robots_forbidden``: not a page of the site,
counted by Scrapy's ``robotstxt/forbidden``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.internet.error import ConnectionRefusedError, DNSLookupError, TCPTimedOutError, TimeoutError

if TYPE_CHECKING:
    from twisted.python.failure import Failure

__all__ = ["LeaseLost", "failure_reason", "lease_lost", "robots_forbidden"]

ROBOTS_FORBIDDEN = "Forbidden by robots.txt"  # Scrapy's RobotsTxtMiddleware's IgnoreRequest


def robots_forbidden(failure: Failure) -> bool:
    """Not fetched at all, by the site's wish: not a page, not an error of
    the site. Every other refusal (the address guard, a decompression bomb,
    ...) is an error record."""
    exc = failure.value
    return isinstance(exc, IgnoreRequest) and not isinstance(exc, HttpError) and str(exc) == ROBOTS_FORBIDDEN


class LeaseLost(IgnoreRequest):
    """A leased request not sent: this worker cannot show it still holds the
    lease (it was stopped, or Redis away, for most of
    ``FRONTIER_LEASE_TIMEOUT``), so another worker may have the URL
    (``crawler/frontier/service.py``: ``lease_current``). Not an error: the
    lease is given back, and no record is made."""


def lease_lost(failure: Failure) -> bool:
    return isinstance(failure.value, LeaseLost)


def failure_reason(failure: Failure) -> str:
    exc = failure.value
    if isinstance(exc, HttpError):
        return f"HTTP {exc.response.status}"
    if isinstance(exc, (DNSLookupError, CannotResolveHostError)):
        return "DNS lookup failed"
    if isinstance(exc, (TimeoutError, TCPTimedOutError, DownloadTimeoutError)):
        return "timeout"
    if isinstance(exc, (ConnectionRefusedError, DownloadConnectionRefusedError)):
        return "connection refused"
    if isinstance(exc, DownloadCancelledError):
        # Scrapy cancels a download that exceeds DOWNLOAD_MAXSIZE (and those
        # still running when a crawl is stopped hard).
        return "download cancelled (over DOWNLOAD_MAXSIZE, or crawl stopped)"
    if isinstance(exc, (DownloadFailedError, ResponseDataLossError)):
        return f"connection lost ({type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"[:500]
