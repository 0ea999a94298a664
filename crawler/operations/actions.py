"""What operators change in a crawl: ``seed`` URLs into it, ``remove``
queued ones, ``request_stop`` its workers (``scrapy seed``, ``seed
--remove``, ``stop`` and the console's actions; ``crawler.operations.ops`` re-exports
them). Each goes through ``Frontier`` (``crawler/frontier/frontier.py``) and
answers with a JSON-ready dict: {"added", "seen", "capped", "refused":
[{"url", "reason"}], "removed"}, or for a stop {"crawl", "stop", "by"}.

Seeds are taken as ``-a seeds=`` takes them: normalised, refused when the
crawl's recorded URL rules exclude them, their sites added to the crawl's
scope, deduplicated against everything the crawl has seen."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.utils.request import RequestFingerprinter

from crawler.frontier.queues import LinkEntry
from crawler.frontier.serialize import SerializationError, request_to_json
from crawler.scope.rules import UrlRules
from crawler.scope.urls import InvalidURL, host_of, normalize, queue_key, site_of, url_prefix

if TYPE_CHECKING:
    from crawler.frontier.frontier import Frontier

__all__ = ["remove", "request_stop", "seed"]


class _SeedSpider:
    """What the request serializer reads of the spider (``spiderface.EntrySpider``).
    (``SiteSpider``'s seeds are requests with ``parse`` and ``errback``.)"""

    name = "site"
    frontier_callbacks = frozenset({"parse"})
    frontier_errbacks = frozenset({"errback"})
    frontier_head_callbacks: frozenset[str] = frozenset()

    def parse(self, response: Any) -> None:  # pragma: no cover (never called)
        pass

    def errback(self, failure: Any) -> None:  # pragma: no cover (never called)
        pass


def _normalized(urls: Iterable[str], refused: list[dict[str, str]]) -> Iterator[str]:
    """The URLs in normal form; the others go to ``refused`` with the reason."""
    for raw in urls:
        raw = raw.strip()
        if not raw:
            continue
        try:
            yield normalize(raw)
        except InvalidURL as exc:
            refused.append({"url": raw[:2000], "reason": str(exc)[:300]})


def _crawl_rules(frontier: Frontier) -> UrlRules:
    """The URL rules the crawl recorded (none: no rules); unusable ones are
    an error, not a reason to seed past them."""
    raw = frontier.meta.crawl_policy("rules")
    return UrlRules.from_json(raw) if raw is not None else UrlRules()


def seed(frontier: Frontier, urls: Iterable[str], queue_by: str = "site") -> dict[str, Any]:
    """Add URLs to the crawl as ``-a seeds=`` does: normalised, refused when
    the crawl's URL rules exclude them, their sites
    (and hosts) added to the crawl's scope, deduplicated against everything
    the crawl has seen, queued at the tail of their site's queue (robots.txt
    is read by the worker that fetches them). Returns {"added", "seen",
    "capped", "refused": [{"url", "reason"}], "removed": 0}."""
    spider = _SeedSpider()
    fingerprinter = RequestFingerprinter()
    refused: list[dict[str, str]] = []
    links: list[LinkEntry] = []
    good: dict[str, None] = {}
    rules = _crawl_rules(frontier)
    for url in _normalized(urls, refused):
        if url in good:
            continue
        if rules.verdict(url) is not None:
            refused.append({"url": url[:2000], "reason": f"excluded by the crawl's URL rules: {rules.describe(url)}"})
            continue
        try:
            request = Request(url, callback=spider.parse, errback=spider.errback)
            entry = request_to_json(request, spider)
        except (SerializationError, ValueError) as exc:
            refused.append({"url": url[:2000], "reason": str(exc)[:300]})
            continue
        good[url] = None
        bucket, member = frontier.queues.slot(fingerprinter.fingerprint(request))
        links.append(LinkEntry(bucket, member, queue_key(host_of(url), queue_by), entry))
    added = seen = capped = 0
    if links:
        frontier.check_layout()  # a crawl seeded before any worker ran exists as a worker would leave it
        hosts = sorted({host_of(u) for u in good})
        frontier.scope_store.share(sorted({site_of(h) for h in hosts}), hosts, sorted({url_prefix(u) for u in good}))
        for i in range(0, len(links), 1000):
            a, d, c = frontier.queues.enqueue(links[i:i + 1000])
            added, seen, capped = added + a, seen + d, capped + c
    return {"added": added, "seen": seen, "capped": capped, "refused": refused, "removed": 0}


def remove(frontier: Frontier, urls: Sequence[str] = (), sites: Sequence[str] = (),
           queue_by: str = "site") -> dict[str, Any]:
    """Remove unprocessed (queued or waiting to be retried) requests: the
    given URLs, and every one of the given sites. Requests being fetched
    stay; the removed URLs stay seen, so links found later do not bring
    them back. Returns {"added": 0, "seen": 0, "refused", "removed"}."""
    refused: list[dict[str, str]] = []
    by_site: dict[str, list[str]] = {}
    for url in _normalized(urls, refused):
        by_site.setdefault(queue_key(host_of(url), queue_by), []).append(url)
    for raw in sites:
        raw = raw.strip().lower().rstrip(".")
        if "://" in raw:
            try:
                raw = queue_key(host_of(normalize(raw)), queue_by)
            except InvalidURL as exc:
                refused.append({"url": raw[:2000], "reason": str(exc)[:300]})
                continue
        if raw:
            by_site[raw] = []
    removed = frontier.views.remove(by_site) if by_site else 0
    return {"added": 0, "seen": 0, "capped": 0, "refused": refused, "removed": removed}


def request_stop(frontier: Frontier, now: bool = False) -> dict[str, Any]:
    """Ask every worker to stop (see ``Frontier.request_stop``)."""
    by = f"{socket.gethostname()} at {time.strftime('%Y-%m-%d %H:%M:%S')}"
    frontier.control.request_stop("now" if now else "graceful", by=by)
    return {"crawl": frontier.crawl, "stop": "now" if now else "graceful", "by": by}
