"""Between Scrapy requests and frontier entries, for the scheduler
(``scheduler.py``): a request the spider queues becomes a ``LinkEntry``
(``link_entry``), and the leases Redis hands out become requests again
(``lease_requests``), tracked by the lease book until their pages settle.

``request.meta`` keys: ``frontier_lease`` (``LEASE_META``: the lease a
request holds), ``frontier_gap`` (``GAP_META``: the site's gap, for
``SendSpacingMiddleware``), ``importance`` (set under the importance order),
``dont_redirect`` (set: redirects go back through the frontier as new URLs);
read: ``topic_priority``, ``imp``, ``imp_cash``.

Stats: ``frontier/refused_entry``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from crawler.frontier.queues import LinkEntry
from crawler.frontier.serialize import SerializationError, request_from_json
from crawler.frontier.tracking import Tracked, visit_kind
from crawler.requestmeta import DONT_REDIRECT, FRONTIER_GAP, FRONTIER_LEASE, IMP, IMP_CASH, IMPORTANCE, TOPIC_PRIORITY
from crawler.scope.urls import host_of, queue_key

if TYPE_CHECKING:
    from crawler.frontier.spiderface import FrontierSpider
    from collections.abc import Iterable

    from scrapy import Request, Spider
    from scrapy.statscollectors import StatsCollector

    from crawler.frontier.leasebook import LeaseBook
    from crawler.frontier.queues import Lease

logger = logging.getLogger(__name__)

__all__ = ["GAP_META", "LEASE_META", "lease_requests", "link_entry"]

LEASE_META, GAP_META = FRONTIER_LEASE, FRONTIER_GAP  # the registry's names; these kept for importers


def link_entry(request: Request, entry: str, slot: tuple[str, str], queue_by: str) -> LinkEntry:
    """The frontier entry of ``request`` (serialised as ``entry``; ``slot``
    its dedup bucket and member, empty for a request not filtered)."""
    priority = request.meta.get(TOPIC_PRIORITY, 0)
    imp, cash = request.meta.get(IMP), request.meta.get(IMP_CASH, 0)
    return LinkEntry(slot[0], slot[1], queue_key(host_of(request.url), queue_by), entry,
                     request.priority > 0,
                     priority if type(priority) is int and 0 <= priority <= 1000 else 0,
                     f"i{imp}:{cash}" if type(imp) is int and type(cash) is int else "")


def lease_requests(leases: Iterable[Lease], *, spider: FrontierSpider, book: LeaseBook, stats: StatsCollector,
                   scheduler: Any, importance: bool) -> list[Request]:
    """The requests of ``leases``, each added to ``book`` and its callback
    and errback tracked for ``scheduler`` (``tracking.Tracked``);
    ``importance``: the crawl is in the importance order."""
    out = []
    for lease in leases:
        try:
            request = request_from_json(lease.entry, spider)
        except SerializationError as exc:
            # Settled once, as an error with the reason: leaving it leased
            # (or giving it back) would serve it again and again, and hold
            # up the entries behind it in its site queue.
            logger.error("Refused a frontier entry of site %(site)s: %(exc)s",
                         {"site": lease.site, "exc": exc}, extra={"spider": spider})
            book.refuse(lease.id, f"refused frontier entry: {exc}"[:300])
            stats.inc_value("frontier/refused_entry")
            continue
        request.meta[FRONTIER_LEASE] = lease.id
        if lease.importance is not None and importance:
            request.meta[IMPORTANCE] = lease.importance
        if lease.gap > 0:
            request.meta[FRONTIER_GAP] = lease.gap  # SendSpacingMiddleware may hold it at the wire
        # Redirects go back through the frontier as new URLs (the spider
        # follows them); Scrapy's RedirectMiddleware is left to robots.txt.
        request.meta[DONT_REDIRECT] = True
        book.add(lease, visit_kind(request))
        request.callback = Tracked(scheduler, lease.id, request.callback or spider.parse, False)
        request.errback = Tracked(scheduler, lease.id, request.errback, True)
        out.append(request)
    return out
