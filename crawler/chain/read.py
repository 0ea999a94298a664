"""Step ``read``: the page's text, links and head onto its record.

An HTML page: its robots meta joins the headers'; its title, text (at most
``STORE_MAX_TEXT_CHARS``) and abstract; its links made absolute
(``crawler/reading/resolve.py``), with a meta refresh's target and the URLs
its scripts navigated to (rendered pages) among them. A PDF: its text and
links read by ``crawler/reading/documents.py`` (one that cannot be read is an error
record, and its chain ends).

Stats: ``frontier/hrefs_found`` (every ``<a href>``), ``frontier/links_found``
(distinct valid links per page).
"""

from __future__ import annotations

from crawler.chain.page import HTML, PDF, Page
from crawler.chain.parts import PartStep
from crawler.reading.resolve import resolve_links
from crawler.reading.redirects import meta_refresh

__all__ = ["Read"]


class Read(PartStep):
    async def process_page(self, page: Page) -> None:
        if page.kind == PDF:
            await self._pdf(page)
        elif page.kind == HTML:
            self._html(page)

    def _html(self, page: Page) -> None:
        parts, item, analysis, url = self.parts, page.item, page.analysis, page.url
        assert analysis is not None
        page.robots |= analysis.robots
        item.title, item.text, item.abstract = analysis.title, analysis.text[: parts.max_text_chars], analysis.abstract
        out, page.contexts = resolve_links(parts.resolver, url, analysis, with_contexts=parts.topic is not None)
        page.refresh = refresh = meta_refresh(page.text, url)
        if refresh is not None:
            out.setdefault(refresh, "[meta refresh]")
        for target in page.navigations:
            moved = parts.resolver.resolve(url, target)
            if moved is not None:
                out.setdefault(moved, "[script navigation]")
        page.links = out
        item.links = [{"url": u, "anchor": a} for u, a in out.items()]
        parts.stats.inc_value("frontier/hrefs_found", len(analysis.links))
        parts.stats.inc_value("frontier/links_found", len(out))

    async def _pdf(self, page: Page) -> None:
        parts = self.parts
        links = await parts.documents.read_pdf(page.response, page.item, parts.resolver, parts.max_text_chars)
        if links is None:  # an error record with the reason
            page.emit(page.item)
            page.stop()
            return
        page.links = links
