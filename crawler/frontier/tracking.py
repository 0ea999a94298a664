"""What becomes of a leased request, for the scheduler
(``crawler/frontier/scheduler.py``): its callback and errback wrapped so
that the lease is acknowledged only after the page's items are stored and
its links queued (and unwrapped for a retry), and what its acknowledgement
counts (a first fetch, a revisit, an error's URL fetched again).

``request.meta`` keys: ``again`` (``AGAIN_META``), ``revisit``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from scrapy import Request

from crawler.failures import failure_reason, lease_lost, robots_forbidden
from crawler.frontier.leasebook import FORBIDDEN
from crawler.requestmeta import AGAIN, REVISIT, SITEMAP

__all__ = ["AGAIN_ERROR", "AGAIN_GONE", "AGAIN_META", "Tracked", "answered", "unwrap", "visit_kind"]

# request.meta key: a seed given again that the crawl has stored before
# (crawler/scope/seeds.py): 1, settled as an error (its success is a page and one
# error less; its failure no new error); 2, stored as gone (a visit of a
# page the crawl counted already).
AGAIN_META = AGAIN  # the registry's name; this one kept for importers
AGAIN_ERROR, AGAIN_GONE = 1, 2


def visit_kind(request: Request) -> str:
    """What a leased request's acknowledgement counts (leasebook.py): "V" a
    re-crawl's revisit of a stored page, "A" an error's URL fetched again,
    "S" a sitemap (not a page: crawler/sitemaps/crawl.py), "" a page fetched for
    the first time."""
    if SITEMAP in request.meta:
        return "S"
    due = request.meta.get(REVISIT)
    if isinstance(due, int) and not isinstance(due, bool):
        return "V"
    again = request.meta.get(AGAIN)
    return "A" if again == AGAIN_ERROR else "V" if again == AGAIN_GONE else ""


# A re-crawl's visit answered with one of these is a visit that found
# something (crawler/recrawl/merge.py): 304 the stored version stands (or a HEAD
# found the same length), 404/410 the page is gone. Not failures.
ANSWERS = (304, 404, 410)


def answered(item: Any) -> bool:
    """A re-crawl's item that acknowledges its visit, not an error (``ANSWERS``)."""
    return getattr(item, "revisit", None) is not None and getattr(item, "status", None) in ANSWERS


def _gone(failure: Any) -> bool:
    """A re-crawl's visit answered 404 or 410: the page's ``gone`` outcome, counted as a revisit."""
    request, response = getattr(failure, "request", None), getattr(getattr(failure, "value", None), "response", None)
    due = request.meta.get(REVISIT) if request is not None else None
    return isinstance(due, int) and not isinstance(due, bool) and getattr(response, "status", None) in (404, 410)


class Outputs(Protocol):
    """What a tracked callback reports to (the scheduler)."""

    def output_done(self, lease_id: str, error: str | None = None) -> None: ...

    def item_yielded(self, lease_id: str, item: Any) -> None: ...


def unwrap(request: Request) -> None:
    """The spider's own callback and errback, without the lease's wrappers."""
    request.callback = getattr(request.callback, "original", request.callback)
    request.errback = getattr(request.errback, "original", request.errback)


class Tracked:
    """Wraps a leased request's callback or errback to count its output, so
    that the lease is acknowledged only after the page's items are stored
    and its links are queued."""

    def __init__(self, scheduler: Outputs, lease_id: str,
                 original: Callable[..., Any] | None, errback: bool) -> None:
        self.scheduler = scheduler
        self.lease_id = lease_id
        self.original = original
        self.errback = errback
        self.frontier_name = getattr(original, "__name__", None)

    def __call__(self, result: Any, **kwargs: Any) -> Any:
        if self.errback and lease_lost(result):
            return []  # given back unsent (LeaseLost): nothing of it is the spider's to record
        if self.original is None:  # no errback: record the failure, let Scrapy log it
            self.scheduler.output_done(self.lease_id, _failure_reason(result))
            result.raiseException()
        return self._run(result, **kwargs)

    async def _run(self, result: Any, **kwargs: Any) -> AsyncIterator[Any]:
        # An errback marked ``recovers`` (the re-crawl's head_failed: the GET
        # it sends decides; sitemap_failed: an error record it yields does)
        # settles its lease as done, not as an error.
        error = _failure_reason(result) if self.errback and not getattr(self.original, "recovers", False) \
            and not _gone(result) else None
        try:
            assert self.original is not None
            output = self.original(result, **kwargs)
            if inspect.isawaitable(output):
                output = await output
            if output is None:
                return
            if isinstance(output, Request) or not hasattr(output, "__iter__") and not hasattr(output, "__aiter__"):
                output = [output]
            if hasattr(output, "__aiter__"):
                async for x in output:
                    self._seen(x)
                    yield x
            else:
                for x in output:
                    self._seen(x)
                    yield x
        except Exception as exc:
            error = f"spider error: {type(exc).__name__}: {exc}"[:500]
            raise
        finally:
            self.scheduler.output_done(self.lease_id, error)

    def _seen(self, x: Any) -> None:
        if not isinstance(x, Request):
            self.scheduler.item_yielded(self.lease_id, x)


def _failure_reason(failure: Any) -> str:
    if robots_forbidden(failure):
        return FORBIDDEN  # not an error: settled as "F" (leasebook.py)
    # The reason the store records too ("HTTP 404", "timeout" ...), not the
    # exception's class name.
    return failure_reason(failure) if getattr(failure, "value", None) is not None else "error"

