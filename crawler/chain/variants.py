"""Step ``variants``: is the page a copy by its canonical link, and in which language?

``crawler/duplicates/variants.py``: the page's canonical link (``<link
rel=canonical>`` or a ``Link`` header) recorded, and when it names another
page of the crawl the page is that page's copy (the canonical URL queued:
``page.canonical_request``; its links left alone when its site's canonicals
are trusted: ``page.canonical_copy``); the page's language, and whether its
links are followed under ``-a languages`` (``page.language_followed``).
"""

from __future__ import annotations

from crawler.chain.page import HTML, Page
from crawler.chain.parts import PartStep

__all__ = ["Variants"]


class Variants(PartStep):
    def process_page(self, page: Page) -> None:
        if page.kind != HTML:
            return
        assert page.analysis is not None
        variants = self.parts.variants
        page.canonical_request, page.canonical_copy = variants.canonical(page.response, page.analysis, page.item,
                                                                         page.stored)
        page.language_followed = variants.language(page.response, page.analysis, page.item, page.analysis.text)
