"""Step ``redirect``: a 3xx answer, and the hop any redirect makes.

The source is stored (its status, and its target as its one link); the
target is queued through the frontier like any link (deduplicated, in
scope, polite, robots.txt, the address guard), first in its site queue, at
the source's depth. A missing Location, a loop and the hop limit
(``REDIRECT_MAX_TIMES``) make the source an error record. ``hop`` is also
the follow step's for a meta refresh.

Stats: ``redirect/followed``, ``redirect/off_scope``, ``redirect/loop``,
``redirect/limit``, ``redirect/bad_location``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawler.chain.page import Page
from crawler.chain.parts import PartStep
from crawler.following.follow import meta_int
from crawler.reading.redirects import REDIRECT_STATUSES, hop, location_target
from crawler.requestmeta import TOPIC_KEYS
from crawler.reading.responses import header

if TYPE_CHECKING:
    from scrapy import Request

    from crawler.chain.parts import Parts

__all__ = ["Redirect", "follow_hop"]


class Redirect(PartStep):
    def process_page(self, page: Page) -> None:
        if page.response.status not in REDIRECT_STATUSES:
            return
        page.stop()
        item = page.item
        location = header(page.response, b"Location")
        target = location_target(location, item.url)
        if target is None:
            item.state = "E"
            item.error = f"HTTP {page.response.status} redirect without a valid Location ({location!r:.200})"
            self.parts.stats.inc_value("redirect/bad_location")
            page.emit(item)
            return
        item.links = [{"url": target, "anchor": f"[redirect {page.response.status}]"}]
        follow, error = follow_hop(self.parts, page, target)
        if error:
            item.state, item.error = "E", error
        page.emit(item)
        if follow is not None:
            page.emit(follow)


def follow_hop(parts: Parts, page: Page, target: str) -> tuple[Request | None, str | None]:
    """One redirect hop (3xx or meta refresh) from ``page`` to ``target``:
    the request for the target; or None with the error (a loop, over
    ``REDIRECT_MAX_TIMES``), or None alone (off-scope: the target stays an
    edge; or already sent)."""
    stats, item, meta_in = parts.stats, page.item, page.meta
    verdict = hop(item.url, target, meta_in, parts.max_redirects)
    if verdict.error is not None:
        stats.inc_value(str(verdict.stat))
        return None, verdict.error
    if not parts.follower.in_scope(target):
        stats.inc_value("redirect/off_scope")
        return None, None
    meta = verdict.meta
    meta.update({k: meta_in[k] for k in TOPIC_KEYS if meta_int(meta_in, k)})
    follow = list(parts.follower.follow([target], item.url, item.depth, priority=1, meta=meta))
    if follow:
        stats.inc_value("redirect/followed")
    return (follow[0] if follow else None), None
