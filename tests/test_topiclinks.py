"""A focused crawl's link choice (crawler/following/topiclinks.py): which links go on,
their meta, and the stats, against priorities computed by the topic itself."""

from __future__ import annotations

from scrapy.utils.test import get_crawler

from crawler.following.topic import parse_topic
from crawler.following.topiclinks import TopicLinks

TOPIC = parse_topic({"keywords": {"postgres": 1, "vacuum": 2}, "threshold": 0.3})
GOOD, DULL, SEEN = "http://a.test/postgres/vacuum.html", "http://a.test/misc/cats.html", "http://a.test/old.html"
ANCHORS = {GOOD: "vacuum in postgres", DULL: "cats"}


def _links(**settings):
    crawler = get_crawler(settings_dict={"TOPIC_TUNNEL": 2, "TOPIC_MIN_PRIORITY": 0.2, "TOPIC_TUNNEL_LINKS": 0,
                                         "TOPIC_SIBLINGS": 100, **settings})
    return TopicLinks(crawler, {SEEN}), crawler.stats


def test_an_on_topic_pages_links_go_on_with_their_priority():
    links, stats = _links()
    # From an on-topic parent (0.9) even the dull link reaches the minimum (0.405).
    chosen, meta = links.page(TOPIC, 1, 0.9, True, 1, [DULL, SEEN, GOOD], ANCHORS, {})
    assert chosen == [DULL, GOOD]  # in page order, the one sent before left out
    assert meta(GOOD) == {"topic_hops": 0, "topic_parent": 900, "topic_priority": 928}
    assert meta(DULL) == {"topic_hops": 0, "topic_parent": 900, "topic_priority": 405}
    assert stats.get_value("topic/below_min_priority") is None


def test_the_tunnel_ends_after_topic_tunnel_off_topic_pages():
    links, stats = _links()
    assert links.page(TOPIC, 3, 0.0, False, 2, [GOOD], ANCHORS, {}) is None
    assert stats.get_value("topic/tunnel_stopped") == 1
    chosen, meta = links.page(TOPIC, 3, 0.0, False, 1, [GOOD, DULL], ANCHORS, {})
    assert chosen == [GOOD]  # DULL's priority from an off-topic parent (0) is below the minimum
    assert meta(GOOD) == {"topic_hops": 2, "topic_parent": 0, "topic_priority": 523}
    assert stats.get_value("topic/below_min_priority") == 1


def test_a_seeds_links_are_never_set_aside():
    links, stats = _links()
    chosen, meta = links.page(TOPIC, 0, 0.0, False, 0, [DULL, GOOD], ANCHORS, {})
    assert chosen == [DULL, GOOD]
    assert meta(DULL) == {"topic_hops": 0, "topic_parent": 0, "topic_priority": 0}
    assert stats.get_value("topic/below_min_priority") is None


def test_an_off_topic_page_in_the_tunnel_passes_on_its_best_links_with_tunnel_links():
    links, stats = _links(TOPIC_TUNNEL_LINKS=1)
    chosen, _ = links.page(TOPIC, 2, 0.0, False, 0, [DULL, GOOD], ANCHORS, {})
    assert chosen == [GOOD]
    assert stats.get_value("topic/tunnel_passed") is None  # GOOD reaches the minimum: not counted
    links, stats = _links(TOPIC_TUNNEL_LINKS=1, TOPIC_MIN_PRIORITY=0.99)
    chosen, _ = links.page(TOPIC, 2, 0.0, False, 0, [DULL, GOOD], ANCHORS, {})
    assert chosen == [GOOD]
    assert stats.get_value("topic/tunnel_passed") == 1


def test_a_sitemaps_urls_are_links_without_anchor_from_an_unknown_page():
    links, stats = _links(TOPIC_MIN_PRIORITY=0.1)
    chosen, meta = links.listed(TOPIC, [GOOD, SEEN, DULL])
    assert chosen == [GOOD]  # 0.1425 from its URL alone; DULL's 0 is set aside
    assert meta(GOOD) == {"topic_hops": 1, "topic_priority": round(TOPIC.link_priority(GOOD, "", "", 0.0, None) * 1000)}
    assert stats.get_value("topic/below_min_priority") == 1
