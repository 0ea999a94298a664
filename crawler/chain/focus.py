"""Step ``focus`` (``-a topic=FILE``): a focused crawl's page scored by its topic.

``crawler/following/topic.py`` scores the page's title and own text (0 to 1) and says
whether it reaches the topic's threshold; the follower's sibling record
learns from it (``crawler/following/follow.py``).

Stats: ``topic/pages_scored``, ``topic/on_topic``, ``topic/off_topic``,
``topic/tunnel_pages``, ``topic/tunnel_on_topic``.
"""

from __future__ import annotations

from crawler.chain.page import HTML, Page
from crawler.chain.parts import PartStep
from crawler.following.follow import meta_int
from crawler.requestmeta import TOPIC_HOPS

__all__ = ["Focus"]


class Focus(PartStep):
    def process_page(self, page: Page) -> None:
        topic, item = self.parts.topic, page.item
        if topic is None or page.kind != HTML:
            return
        assert page.analysis is not None
        stats = self.parts.stats
        item.topic_score = topic.score(page.analysis.title, page.analysis.own_text)
        item.on_topic = topic.on_topic(item.topic_score)
        self.parts.follower.siblings.record(item.url, item.on_topic)
        stats.inc_value("topic/pages_scored")
        stats.inc_value("topic/on_topic" if item.on_topic else "topic/off_topic")
        if meta_int(page.meta, TOPIC_HOPS) > 0:
            stats.inc_value("topic/tunnel_pages")
            if item.on_topic:
                stats.inc_value("topic/tunnel_on_topic")
