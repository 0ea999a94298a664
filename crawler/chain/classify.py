"""Step ``type``: index (navigation) or information (content) page.

``crawler/pagetypes/typer.py`` types an HTML page by its features and its site's
template (``page.checked.template``; None while the site is too young:
typed alone, and kept to be typed again once the template is known, by the
store step); typed alone by its kind's probabilities (the kind step's, or
read here without it). A PDF or another document was typed information by decode.
"""

from __future__ import annotations

from crawler.chain.page import HTML, Page
from crawler.chain.parts import PartStep

__all__ = ["Classify"]


class Classify(PartStep):
    name = "type"  # the step's name (stats: page/step_ms/type)

    def process_page(self, page: Page) -> None:
        if page.kind != HTML:
            return
        assert page.analysis is not None and page.checked is not None
        item = page.item
        page.typed = self.parts.typer.type_page(item.url, page.analysis, page.blocks, page.keys,
                                                page.checked.template, item.site, page.kind_scores,
                                                page.base_features)
        item.page_type = page.typed.page_type
