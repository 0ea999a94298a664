"""A focused crawl's links (``-a topic``): which of a page's links go on, and
with what priority. ``Follower`` (``crawler/following/follow.py``) queues what this
chooses, with the meta it gives each link.

Links of on-topic pages and seeds are followed whatever the page's type,
each with its priority (``TopicLinks.page``); a link of an on-topic page
whose priority is below ``TOPIC_MIN_PRIORITY`` is set aside (not queued,
not remembered: a better page may link to it later), so a focused crawl
ends once what is left is not worth fetching. An off-topic page within the
tunnel (``TOPIC_TUNNEL`` pages in a row) passes on its ``TOPIC_TUNNEL_LINKS``
most promising links whatever their priority (``topic.passage``; with 0,
those reaching ``TOPIC_MIN_PRIORITY``). A sitemap's URLs are judged as
links without an anchor from a page of unknown score (``TopicLinks.listed``).

Settings: ``TOPIC_TUNNEL``, ``TOPIC_TUNNEL_LINKS``, ``TOPIC_MIN_PRIORITY``,
``TOPIC_SIBLINGS`` (directories whose on-topic share each worker remembers).

``request.meta`` keys set: ``topic_hops``, ``topic_parent``,
``topic_priority`` (``crawler/requestmeta.py``).

Stats: ``topic/tunnel_stopped``, ``topic/below_min_priority``,
``topic/tunnel_passed`` (links an off-topic page passed on below
``TOPIC_MIN_PRIORITY``).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import TYPE_CHECKING, Any

from crawler.requestmeta import TOPIC_HOPS, TOPIC_PARENT, TOPIC_PRIORITY
from crawler.following.topic import Siblings, Topic, follow_links, passage

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

__all__ = ["LinkMeta", "TopicLinks"]

# The meta each chosen link's request gets, by link.
LinkMeta = Callable[[str], dict[str, Any]]


class TopicLinks:
    """One worker's focused-crawl link choice; ``seen`` is its URL cache
    (links sent before get no priority: they are not sent again)."""

    def __init__(self, crawler: Crawler, seen: Container[str]) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.seen = seen
        self.tunnel = settings.getint("TOPIC_TUNNEL")
        self.min_priority = settings.getfloat("TOPIC_MIN_PRIORITY")
        self.tunnel_links = settings.getint("TOPIC_TUNNEL_LINKS")
        self.siblings = Siblings(settings.getint("TOPIC_SIBLINGS"))

    @property
    def stats(self) -> StatsCollector:
        # Not read in __init__: Scrapy sets crawler.stats when the crawl starts.
        return self.crawler.stats

    def priorities(self, topic: Topic, links: Iterable[str], anchors: dict[str, str], contexts: dict[str, str],
                   score: float, gate: bool) -> dict[str, float]:
        """The priority of each link not sent before (in their order); with
        ``gate``, those below ``TOPIC_MIN_PRIORITY`` set aside (not
        remembered: a better page may link to them later) and counted."""
        siblings = self.siblings
        priorities: dict[str, float] = {}
        for link in links:
            if link in self.seen:
                continue
            priority = topic.link_priority(link, anchors.get(link, ""), contexts.get(link, ""), score,
                                           siblings.rate(link, score))
            if gate and priority < self.min_priority:
                self.stats.inc_value("topic/below_min_priority")
                continue
            priorities[link] = priority
        return priorities

    def listed(self, topic: Topic, links: Iterable[str]) -> tuple[list[str], LinkMeta]:
        """A sitemap's URLs to follow, and their meta: each judged as a link
        without an anchor from a page of unknown score, set aside below
        ``TOPIC_MIN_PRIORITY`` (a sitemap must not bring a focused crawl
        every page of a site)."""
        priorities = self.priorities(topic, links, {}, {}, 0.0, gate=True)
        return list(priorities), lambda link: {TOPIC_HOPS: 1, TOPIC_PRIORITY: round(priorities[link] * 1000)}

    def page(self, topic: Topic, depth: int, score: float, on_topic: bool, hops_so_far: int,
             links: Iterable[str], anchors: dict[str, str],
             contexts: dict[str, str]) -> tuple[list[str], LinkMeta] | None:
        """A page's links to follow after an on-topic page and through the
        tunnel, and their meta; None where the tunnel ends (nothing followed)."""
        # A seed's links are followed whatever its score: the crawl starts there.
        go, hops = follow_links(on_topic or depth == 0, hops_so_far, self.tunnel)
        if not go:
            self.stats.inc_value("topic/tunnel_stopped")
            return None
        if depth > 0 and hops > 0 and self.tunnel_links > 0:
            # An off-topic page in the tunnel: its best links, whatever their priority.
            priorities = passage(self.priorities(topic, links, anchors, contexts, score, gate=False),
                                 self.tunnel_links)
            passed = sum(1 for p in priorities.values() if p < self.min_priority)
            if passed:
                self.stats.inc_value("topic/tunnel_passed", passed)
        else:
            # A seed's links are never set aside either.
            priorities = self.priorities(topic, links, anchors, contexts, score, gate=depth > 0)

        def meta(link: str) -> dict[str, Any]:
            return {TOPIC_HOPS: hops, TOPIC_PARENT: round(score * 1000),
                    TOPIC_PRIORITY: round(priorities[link] * 1000)}

        return list(priorities), meta
