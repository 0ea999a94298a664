"""Importance first (``-a order=importance``): each URL's priority starts
from its directory depth and grows with the links found to it, in the
spirit of OPIC (Abiteboul, Preda and Cobena, "Adaptive on-line page
importance computation", WWW 2003; Nutch's ``scoring-opic``).

- A new URL's importance is ``depth_prior``: 100 / (1 + its directory
  depth) (``/`` and ``/a.html``: 100; ``/docs/a.html``: 50), as the
  textbook says only the depth is known before a page is fetched; a seed's
  is ``MAX_IMPORTANCE`` (1,000).
- A fetched page passes on what it gained: each link it follows gains the
  page's importance (as leased) less its depth prior, divided by the
  number of links it follows, so links from important pages count more
  (the prior is not passed on: passed on, it made every page with few links
  pass on more than it received, and the crawl went deep along them
  ahead of an index's other entries), and 10 for the link itself
  (``IN_LINK``: the in-links found, as the textbook says). A link to a URL already queued
  raises that URL's priority in Redis (``lua/shard.lua``'s ``bump``); a URL
  this worker sent before (its URL cache) is raised without building a
  request (``LinkEntry`` ``b<cash>``); a URL already fetched gains nothing.
- The frontier serves the best work of each ready site first and, among
  ready sites, the sites with the best work (the ordered queues of focused
  crawling); a mirror's pages come last. Importance is capped at 1,000 and
  kept in hundredths.

The page's importance when it was leased is stored (``importance``).
Stats: ``importance/raised_sent`` (links to URLs this worker sent before,
sent as raises); the frontier counts the queued URLs it raised in its
``bumped`` counter (links to URLs another worker queued are raised there
too).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from crawler.frontier.queues import IRANGE, LinkEntry
from crawler.requestmeta import IMP, IMPORTANCE, IMP_CASH, IMP_KEY
from crawler.scope.urls import host_of, queue_key

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from crawler.frontier.faces import SpiderFace

__all__ = ["IN_LINK", "MAX_IMPORTANCE", "Importance", "depth_prior"]

MAX_IMPORTANCE = IRANGE // 100
# What every link found adds to its target, in hundredths, besides the share
# of its page's importance: the in-degree the textbook names. Measured with
# bench/bench_order.py: the Sphinx manual's first 10 % held 0.93x
# breadth-first's PageRank without it, 1.00x with 10 or 30.
IN_LINK = 1000
IMPORTANCE_META = IMPORTANCE  # the registry's name; this one kept for importers


def depth_prior(url: str) -> int:
    """A new URL's importance in hundredths: 100 / (1 + directory depth)."""
    try:
        path = urlsplit(url).path or "/"
    except ValueError:
        path = "/"
    depth = max(0, path.count("/") - 1)
    return 10_000 // (1 + depth)


class Importance:
    """One worker's part in the importance order (see the module)."""

    def __init__(self, crawler: Crawler, frontier: SpiderFace, cache_size: int) -> None:
        self.crawler = crawler
        self.frontier = frontier
        self.queue_by = crawler.settings.get("FRONTIER_QUEUE_BY")
        self.cache_size = max(1, cache_size)
        self._members: OrderedDict[str, tuple[str, str, str]] = OrderedDict()  # url -> (site, bucket, member)

    @property
    def enabled(self) -> bool:
        return self.frontier.is_open and self.frontier.order == "importance"

    def cash(self, parent: Any, links: int, url: str = "") -> int:
        """What each of ``links`` links of the page at ``url``, of importance
        ``parent``, gains, in hundredths: ``IN_LINK`` and a share of what
        the page gained from its own in-links (its importance less its
        depth prior, which was never passed to it and is not passed on)."""
        if links <= 0 or not isinstance(parent, (int, float)) or isinstance(parent, bool) or parent <= 0:
            return IN_LINK
        gained = min(float(parent), MAX_IMPORTANCE) * 100 - (depth_prior(url) if url else 0)
        return IN_LINK + max(0, int(gained // links))

    def mark(self, request: Request, cash: int, seed: bool = False) -> None:
        """A new URL's request: its importance and dedup member in its meta
        (what the frontier ranks it by and raises it by), remembered."""
        bucket, member = self.frontier.slot(self.crawler.request_fingerprinter.fingerprint(request))
        total = IRANGE if seed else min(IRANGE, depth_prior(request.url) + cash)
        request.meta[IMP] = total
        request.meta[IMP_KEY] = member
        request.meta[IMP_CASH] = cash
        self._members[request.url] = (queue_key(host_of(request.url), self.queue_by), bucket, member)
        if len(self._members) > self.cache_size:
            self._members.popitem(last=False)

    def raise_sent(self, url: str, cash: int) -> None:
        """A link to ``url``, which this worker sent before: raise it, if still queued."""
        if cash <= 0:
            return
        known = self._members.get(url)
        if known is None:
            return  # forgotten: too old to matter much
        site, bucket, member = known
        self.frontier.enqueue(LinkEntry(bucket, member, site, "", place=f"b{cash}"))
        self.crawler.stats.inc_value("importance/raised_sent")
