"""Step ``kind``: what sort of page an HTML page is (``item.kind``).

``crawler/pagetypes/kind.py`` names it from the page's analysis and URL:
article, forum, product, collection, listing, documentation, service, or
other where its model is unsure. The kinds' probabilities stay on the page
(``page.kind_scores``) for the type step, which types a page alone (no
site template known yet) by them. A PDF or another document has no kind
(None).

Stats: ``kind/<kind>``.
"""

from __future__ import annotations

from crawler.chain.page import HTML, Page
from crawler.chain.parts import PartStep
from crawler.pagetypes.features import page_features
from crawler.pagetypes.kind import OTHER, kind_of, kind_scores

__all__ = ["Kind"]


class Kind(PartStep):
    def process_page(self, page: Page) -> None:
        if page.kind != HTML:
            return
        analysis, item = page.analysis, page.item
        if analysis is None or not analysis.features:  # nothing read of it (unparsable)
            item.kind = OTHER
        else:
            page.base_features = page_features(item.url, analysis)
            page.kind_scores = kind_scores(analysis, item.url, page.base_features)
            item.kind = kind_of(page.kind_scores)
        self.parts.stats.inc_value(f"kind/{item.kind}")
