"""A page's record (``PageItem``), made in one place for every outcome.

``fetched``: a response, before the chain's steps fill it in;
``not_modified``: a re-crawl's visit that found the page unchanged (a 304,
or a HEAD with the same length); ``failed``: a request that failed. What
all three take from the request: the URL, depth, referer, the re-crawl's
due time and first duplicate check, and the WARC record of the response.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from crawler.failures import failure_reason
from crawler.items import PageItem
from crawler.requestmeta import DEPTH, IMPORTANCE, REFERER_URL
from crawler.reading.responses import content_length, dup_order_of, header, media_type, revisit_due
from crawler.scope.urls import normalize, url_site
from crawler.warc.service import WarcService

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

__all__ = ["blocked", "failed", "fetched", "not_modified"]


def _record(crawler: Crawler, request: Request, response: Response | None, url: str, **fields: Any) -> PageItem:
    meta = request.meta
    return PageItem(
        url=url, site=url_site(url), depth=int(meta.get(DEPTH, 0)),
        status=response.status if response is not None else None, fetched_at=time.time(),
        referer=meta.get(REFERER_URL), revisit=revisit_due(meta), dup_order=dup_order_of(meta),
        warc=WarcService.record_of(crawler, request) if response is not None else None, **fields)


def fetched(crawler: Crawler, response: Response) -> PageItem:
    """What a response says of its page before any step reads its body."""
    request = response.request
    assert request is not None
    return _record(crawler, request, response, normalize(response.url),
                   etag=header(response, b"ETag"), last_modified=header(response, b"Last-Modified"),
                   content_length=content_length(response), importance=response.meta.get(IMPORTANCE),
                   content_type=media_type(response))


def not_modified(crawler: Crawler, response: Response, warc: Any) -> PageItem:
    """A visit that found the page not modified: the store's merge keeps the
    stored version and takes the validators a 304 carries
    (``crawler/recrawl/merge.py``). Its state is not written (the stored page stays
    in state C); the frontier settles it as done (``status`` 304 with
    ``revisit``), not as an error. ``warc``: the response's record, taken."""
    request = response.request
    assert request is not None
    validators = response.status == 304  # a HEAD's are not the page's
    item = _record(crawler, request, None, normalize(response.url), state="E",
                   etag=header(response, b"ETag") if validators else None,
                   last_modified=header(response, b"Last-Modified") if validators else None)
    item.status, item.warc = 304, warc
    return item


def failed(crawler: Crawler, failure: Failure) -> PageItem:
    """A failed request: an error record with its reason (``crawler/failures.py``)."""
    request: Request = failure.request  # type: ignore[attr-defined]
    response = getattr(failure.value, "response", None)
    return _record(crawler, request, response, normalize(request.url), state="E", error=failure_reason(failure),
                   etag=header(response, b"ETag"), last_modified=header(response, b"Last-Modified"))


def blocked(crawler: Crawler, response: Response, reason: str) -> PageItem:
    """A page that was a bot wall at every try (``crawler/chain/blocked.py``):
    an error record with ``reason``; the wall's text is not kept."""
    request = response.request
    assert request is not None
    return _record(crawler, request, response, normalize(response.url), state="E", error=reason)
