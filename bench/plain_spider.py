"""The anchor: a plain Scrapy CrawlSpider, LinkExtractor, no pipeline.

    scrapy runspider bench/plain_spider.py -a seed=URL[,URL...]
"""

from __future__ import annotations

from urllib.parse import urlsplit

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class PlainSpider(CrawlSpider):
    name = "plain"

    def __init__(self, seed: str, **kwargs):
        self.start_urls = seed.split(",")  # several: one site each
        self.allowed_domains = sorted({urlsplit(u).hostname for u in self.start_urls})
        # LinkExtractor(allow_domains=...) does not match IP hosts; the offsite
        # middleware applies allowed_domains to every request anyway.
        self.rules = (Rule(LinkExtractor(), follow=True),)
        super().__init__(**kwargs)
