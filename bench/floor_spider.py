"""The floor: a do-nothing Scrapy spider that fetches every page of a list
and does nothing with them (``parse`` returns nothing): what Scrapy itself
costs a request, the least any Scrapy-based crawler pays.

    scrapy runspider bench/floor_spider.py -a urls=FILE   (one URL a line)
"""

from __future__ import annotations

from pathlib import Path

from scrapy import Request, Spider


class FloorSpider(Spider):
    name = "floor"

    def __init__(self, urls: str, **kwargs):
        super().__init__(**kwargs)
        self.url_file = urls

    async def start(self):
        for url in Path(self.url_file).read_text().split():
            yield Request(url, callback=self.parse)

    def parse(self, response):
        return None
