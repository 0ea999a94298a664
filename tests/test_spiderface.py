"""The frontier reads the spider through a declared Protocol
(crawler/frontier/spiderface.py), not attribute names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from crawler.frontier.scheduler import FrontierScheduler
from crawler.frontier.spiderface import FrontierSpider
from crawler.spiders.recrawl import RecrawlSpider
from crawler.spiders.site import SiteSpider

ROOT = Path(__file__).resolve().parents[1]


def test_the_spiders_declare_what_the_frontier_needs():
    site, recrawl = SiteSpider(seeds="http://a.test/"), RecrawlSpider()
    assert isinstance(site, FrontierSpider) and isinstance(recrawl, FrontierSpider)
    assert (site.revisits, recrawl.revisits) == (False, True)
    assert (list(site.seed_urls), list(recrawl.seed_urls)) == (["http://a.test/"], [])
    assert (site.frontier_order, recrawl.frontier_order) == ("any", None)
    assert site.frontier_head_callbacks == frozenset()
    assert recrawl.frontier_head_callbacks == frozenset({"parse_head"})
    assert site.frontier_callbacks == frozenset({"parse", "parse_sitemap"})
    assert recrawl.frontier_errbacks == frozenset({"errback", "head_failed", "sitemap_failed"})


def test_a_spider_that_does_not_declare_it_is_refused_at_open():
    class Plain(Spider):
        name = "plain"

        def parse(self, response):
            pass

    assert not isinstance(Plain(), FrontierSpider)
    scheduler = FrontierScheduler(get_crawler(Plain, {"EXTENSIONS": {"crawler.frontier.service.FrontierService": 0}}))
    with pytest.raises(TypeError, match="spider 'plain' does not declare what the frontier needs of it"):
        scheduler.open(Plain())


def test_the_frontier_reads_no_spider_attribute_by_name():
    named = re.compile(r"getattr\((self\.)?spider, ['\"f]|spider\.name ==")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "crawler" / "frontier").rglob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if named.search(line)]
    assert found == []
