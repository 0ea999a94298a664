"""``CLOSESPIDER_PAGECOUNT`` as a user reads it: the worker stores that many
pages, then closes (reason ``closespider_pagecount``).

Scrapy's ``CloseSpider`` counts responses: a sitemap's (or a robots.txt
answer Scrapy's own middleware fetched) took the place of a page, so
``CLOSESPIDER_PAGECOUNT=100`` stored 99; and it closes once the count is
reached, while the requests in flight then are still processed, so a crawl
of many sites at once stored more. Here the count is of pages acknowledged
as done (``LeaseBook.pages``: stored, not sitemaps, not errors, not URLs
robots.txt forbade), and the scheduler never holds more page requests than
the pages still to store (``LeaseBook.page_room``): the count is reached
exactly, and the URLs not fetched stay queued for the next run.

The limit is per worker process, as Scrapy's is. Every other
``CLOSESPIDER_*`` setting works as in Scrapy (this is its extension,
subclassed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.extensions.closespider import CloseSpider as ScrapyCloseSpider
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.task import LoopingCall

from crawler.frontier.faces import FrontierFaces

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from crawler.frontier.faces import OpsFace
    from twisted.internet.defer import Deferred

__all__ = ["CloseSpider"]


class CloseSpider(ScrapyCloseSpider):
    def __init__(self, crawler: Crawler, frontier: OpsFace) -> None:
        super().__init__(crawler)
        self.frontier = frontier
        self.page_limit = int(self.close_on["pagecount"])
        # Scrapy's response count never reaches 0: the pages are counted here.
        self.close_on["pagecount"] = 0
        self._watch: LoopingCall | None = None
        self._closing: Deferred[None] | None = None
        if self.page_limit > 0:
            crawler.signals.connect(self._watch_pages, signal=signals.spider_opened)
            crawler.signals.connect(self._stop_watching, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, FrontierFaces(crawler).ops)

    def _watch_pages(self, spider: Spider) -> None:
        self._watch = LoopingCall(self._check)
        self._watch.start(0.1, now=False)

    def _check(self) -> None:
        if self.frontier.pages >= self.page_limit:
            self._stop_watching()
            # Scrapy's own CloseSpider closes through its private _close_spider;
            # the engine's public close_spider_async does the same.
            self._closing = deferred_from_coro(self.crawler.engine.close_spider_async(reason="closespider_pagecount"))

    def _stop_watching(self, *args: object) -> None:
        if self._watch is not None and self._watch.running:
            self._watch.stop()
