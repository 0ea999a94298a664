"""Step ``follow``: the page's links, to the frontier.

``crawler/following/follow.py`` judges each link (scope, URL rules, the follow policy,
the URL cache, depth; a focused crawl's priorities) and makes its request.
Robots ``nofollow`` follows nothing; a copy (a duplicate, or a copy by its
trusted canonical) and a page in a language the crawl does not follow give
their links up (a copy's links only repeat work). An HTML page's hreflang
alternates are queued first, and its meta refresh is followed as a redirect
(``crawler/chain/redirect.py``) whatever the page's type. A PDF's links are
an information page's.

Stats: ``robots/nofollow``.
"""

from __future__ import annotations

from crawler.chain.page import HTML, PDF, Page
from crawler.chain.parts import PartStep
from crawler.chain.redirect import follow_hop
from crawler.following.follow import meta_int
from crawler.reading.resolve import resolve_navigation
from crawler.pagetypes.rules import INDEX
from crawler.requestmeta import TOPIC_HOPS

__all__ = ["Follow"]


class Follow(PartStep):
    def process_page(self, page: Page) -> None:
        item, follower = page.item, self.parts.follower
        if page.kind == PDF:
            if not page.duplicate and page.followed:
                page.emit(*follower.page_links(False, item.url, item.depth, iter(page.links), item.importance))
            return
        if page.kind != HTML:
            return
        if not page.followed:
            self.parts.stats.inc_value("robots/nofollow")
            return
        page.emit(*self.parts.variants.alternates(item))
        refresh = page.refresh
        if refresh is not None and not page.duplicate:
            # A meta refresh is a redirect: followed whatever the page's type,
            # under the same loop and hop limits. The page itself, which has
            # content, stays a page whatever becomes of its refresh.
            hop, _ = follow_hop(self.parts, page, refresh)
            if hop is not None:
                page.emit(hop)
        if page.duplicate or page.canonical_copy or not page.language_followed:
            return
        links = (u for u in page.links if u != refresh)  # the refresh target was judged as a hop above
        topic = self.parts.topic
        if topic is not None and item.topic_score is not None:
            requests = follower.follow_topic(topic, item.url, item.depth, item.topic_score, bool(item.on_topic),
                                             meta_int(page.meta, TOPIC_HOPS), links, page.links, page.contexts)
        else:
            assert page.analysis is not None
            requests = follower.page_links(item.page_type == INDEX, item.url, item.depth, links, item.importance,
                                           resolve_navigation(self.parts.resolver, item.url, page.analysis))
        page.emit(*requests)
