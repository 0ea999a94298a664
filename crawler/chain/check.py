"""Step ``check``: the duplicate check and the template count, one Redis round trip.

``crawler/duplicates/check.py`` asks the cluster's duplicate index whether the
page is a copy (exact or near, ``crawler/frontier/dupindex.py``) and counts
its blocks toward its site's template (``crawler/pagetypes/template.py``), in one
call; ``page.checked`` holds the answer (``Checked``: duplicate, the site's
template, whether the site is still too young for one). An HTML page's
blocks and their keys (``page.blocks``, ``page.keys``) come from the typer;
a PDF is checked by its text alone; other documents are not checked.

An HTML page is fingerprinted (content hash, SimHash: the duplicate check
and the re-crawl's change check) by every block of its text but navigation
and link lists (``analysis.text``), not by its main content alone: one
page's main content is a single page's judgement, and where it falls on a
block the site repeats on every page (a long notice, a legal text), every
page of the site would read as a copy of every other and its links be left
unfollowed. Navigation is out of both, so the same article framed by
different menus still reads the same.
"""

from __future__ import annotations

from crawler.chain.page import HTML, PDF, Page
from crawler.chain.parts import PartStep

__all__ = ["Check"]


class Check(PartStep):
    async def process_page(self, page: Page) -> None:
        if page.kind == HTML:
            assert page.analysis is not None
            page.blocks, page.keys = self.parts.typer.blocks(page.analysis)
        elif page.kind != PDF:
            return
        text = page.analysis.text[: self.parts.max_text_chars] if page.analysis is not None else None
        page.checked = await self.parts.pagecheck.check(page.item, page.keys, text)
