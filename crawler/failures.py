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

__all__ = ["failure_reason", "robots_forbidden"]

ROBOTS_FORBIDDEN = "Forbidden by robots.txt"  # Scrapy's RobotsTxtMiddleware's IgnoreRequest


def robots_forbidden(failure: Failure) -> bool:
    """Not fetched at all, by the site's wish: not a page, not an error of
    the site. Every other refusal (the address guard, a decompression bomb,
    ...) is an error record."""
    exc = failure.value
    return isinstance(exc, IgnoreRequest) and not isinstance(exc, HttpError) and str(exc) == ROBOTS_FORBIDDEN


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
