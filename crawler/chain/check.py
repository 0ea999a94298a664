"""Step ``check``: the duplicate check and the template count, one Redis round trip.

``crawler/duplicates/check.py`` asks the cluster's duplicate index whether the
page is a copy (exact or near, ``crawler/frontier/dupindex.py``) and counts
its blocks toward its site's template (``crawler/pagetypes/template.py``), in one
call; ``page.checked`` holds the answer (``Checked``: duplicate, the site's
template, whether the site is still too young for one). An HTML page's
blocks and their keys (``page.blocks``, ``page.keys``) come from the typer;
a PDF is checked by its text alone; other documents are not checked.
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
        page.checked = await self.parts.pagecheck.check(page.item, page.keys)
