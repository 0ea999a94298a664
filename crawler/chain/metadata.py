"""Step ``metadata``: what an HTML page says about itself for machines
(JSON-LD, microdata, RDFa, OpenGraph, Twitter cards and the normalised
fields taken from them: ``crawler/reading/metadata.py``, read by the parse
step's analysis before the scripts are stripped) onto its record's
``metadata``; None for a page without any, and for PDFs and other
documents. Taken out with ``PAGE_STEPS = {"crawler.chain.metadata.Metadata": None}``.
"""

from __future__ import annotations

from crawler.chain.page import HTML, Page
from crawler.chain.parts import PartStep

__all__ = ["Metadata"]


class Metadata(PartStep):
    def process_page(self, page: Page) -> None:
        if page.kind == HTML and page.analysis is not None:
            page.item.metadata = page.analysis.metadata or None
