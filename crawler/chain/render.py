"""Step ``render`` (``-a render=auto|always``): the DOM after the page's scripts ran.

``crawler/render/``: when the crawl renders and the page is worth it, the
page's tree, analysis and text become the rendered DOM's, and the URLs its
scripts tried to send the browser to are kept as links
(``page.navigations``). A browser failure retries the page (the retry is
what the page yields); after ``RETRY_TIMES`` the static page is kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request

from crawler.chain.page import HTML, Page
from crawler.chain.parts import PartStep
from crawler.chain.parse import read_html
from crawler.reading.extract import Page as Analysis

if TYPE_CHECKING:
    from crawler.chain.parts import Parts

__all__ = ["Render"]


class Render(PartStep):
    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.contexts = parts.topic is not None

    async def process_page(self, page: Page) -> None:
        renderer = self.parts.renderer
        if page.kind != HTML or renderer.mode == "never":
            return
        assert page.analysis is not None
        trees: list[Any] = []

        def extract(html: str) -> Analysis:
            tree, analysis = read_html(html, page.url, self.contexts, self.parts.main_content)
            trees.append(tree)
            return analysis

        rendered = await renderer.page_step(self.parts.spider, page.response, page.item, page.analysis, extract)
        if isinstance(rendered, Request):
            page.emit(rendered)  # the browser failed it: a retry
            page.stop()
        elif rendered is not None:
            page.text, page.analysis, page.navigations = rendered
            page.tree = trees[-1]
