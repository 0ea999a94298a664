"""What a leased request's page produced, told to the lease book
(``leasebook.py``) and counted: the scheduler (``scheduler.py``) hands over
Scrapy's events (an item yielded, an item through the pipelines, a callback
exhausted) and this says what each means for the lease.

Stats: ``frontier/acked/<state>`` (C, T, E, F: what each acknowledgement
settled the lease as), ``classifier/retype/not_stored``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from crawler.frontier.signals import GiveBack
from crawler.frontier.tracking import answered

if TYPE_CHECKING:
    from crawler.frontier.spiderface import FrontierSpider
    from collections.abc import Callable

    from scrapy import Spider
    from scrapy.statscollectors import StatsCollector

    from crawler.frontier.leasebook import LeaseBook

logger = logging.getLogger(__name__)

__all__ = ["Acks"]


class Acks:
    def __init__(self, book: LeaseBook, stats: StatsCollector) -> None:
        self.book = book
        self.stats = stats

    def item_yielded(self, lease_id: str, item: Any) -> None:
        error = None
        if getattr(item, "state", None) == "E" and not answered(item):
            error = str(getattr(item, "error", "") or "error")
        # A page typed again (PageTyper.retype) is an earlier request's
        # page: it says nothing of this one's topic.
        on_topic = getattr(item, "on_topic", None) is True and not getattr(item, "typed_again", False)
        self.book.item_yielded(lease_id, error, on_topic)

    def item_settled(self, lease_id: str, item: Any, exc: BaseException | None, failure: Any = None,
                     failed: bool = False) -> None:
        """``item`` passed the pipelines: stored, or ``exc`` (``failed``:
        Scrapy's ``item_error``, with its ``failure``)."""
        if getattr(item, "typed_again", False):
            # An earlier request's page stored again with its new type: what
            # became of it says nothing of this request's page.
            if exc is not None or failed:
                self.stats.inc_value("classifier/retype/not_stored")
            self.count(lambda: self.book.item_settled(lease_id))
        elif isinstance(exc, GiveBack):
            # Not kept for now (a page saved to the store's spill file): the
            # URL goes back to the queue rather than being settled.
            self.count(lambda: self.book.item_settled(lease_id, unstored=True))
        elif exc is not None or failed:
            reason = f"item not stored: {getattr(exc, 'reason', exc) or failure}"
            self.count(lambda: self.book.item_settled(lease_id, error=reason))
        else:
            self.count(lambda: self.book.item_settled(lease_id))

    def output_done(self, lease_id: str, error: str | None = None) -> None:
        self.count(lambda: self.book.output_done(lease_id, error))

    def settle_overdue(self, timeout: float, spider: FrontierSpider | None) -> None:
        """The safety net: leases whose output is done but an item never
        settled (a component swallowed it) for ``timeout`` seconds are
        acknowledged anyway."""
        for lease_id in self.book.overdue(timeout):
            logger.warning("Acknowledging lease %(id)s: its items never settled", {"id": lease_id},
                           extra={"spider": spider})
            self.count(lambda: self.book.settle(lease_id))  # noqa: B023

    def count(self, event: Callable[[], None]) -> None:
        """Run ``event`` on the book and count the acknowledgements it made."""
        before = dict(self.book.acked)
        event()
        for state, n in self.book.acked.items():
            if n != before.get(state, 0):
                self.stats.inc_value(f"frontier/acked/{state}", n - before.get(state, 0))
