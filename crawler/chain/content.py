"""Step ``content``: the page's main content onto its record.

With ``MAIN_CONTENT`` (the default), an HTML page's stored ``text`` is its
main content as ``crawler/reading/content.py`` chose it (navigation, headers,
footers, sidebars, readers' comments, promotions and link lists left out)
and ``markdown`` the same content as Markdown (``crawler/reading/markdown.py``:
the same words). Each is cut at ``STORE_MAX_TEXT_CHARS``. What reads the
record's text after this step reads the main content: the duplicate check
(content hash and SimHash), the re-crawl's change check, the store. Without
``MAIN_CONTENT``, the read step's text stays (every block that is not
navigation or mostly links) and no Markdown is kept.
"""

from __future__ import annotations

from crawler.chain.page import HTML, Page
from crawler.chain.parts import PartStep

__all__ = ["Content"]


class Content(PartStep):
    def process_page(self, page: Page) -> None:
        if page.kind != HTML or not self.parts.main_content:
            return
        analysis, item, limit = page.analysis, page.item, self.parts.max_text_chars
        assert analysis is not None
        item.text = analysis.main[:limit]
        item.markdown = analysis.markdown[:limit]
