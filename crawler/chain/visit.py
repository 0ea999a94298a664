"""Step ``visit``: the response as a visit of its URL.

A re-crawl's visit answered 304 (``If-None-Match`` / ``If-Modified-Since``
matched) ends here: the stored version stands (``record.not_modified``).
Any other response marks its URL fetched: never worth sending to the
frontier again, a host the crawl's scope may learn, a page its sitemaps
listed.
"""

from __future__ import annotations

from crawler.chain import record
from crawler.chain.page import Page
from crawler.chain.parts import PartStep

__all__ = ["Visit"]


class Visit(PartStep):
    def process_page(self, page: Page) -> None:
        if page.response.status == 304 and page.item.revisit is not None:
            page.emit(record.not_modified(self.parts.crawler, page.response, page.item.warc))
            page.stop()
            return
        url = page.url
        follower = self.parts.follower
        follower.seen.add(url)
        follower.learn_scope_from(url)
        self.parts.sitemaps.page_seen(url)
