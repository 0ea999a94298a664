"""Step ``parse``: an HTML page's tree, and what ``crawler/reading/extract.py`` reads of it.

``page.tree`` is the lxml root (``crawler/reading/html.py``; None for an empty
or unparsable document) with script, style and template elements taken
out; ``page.analysis`` holds its title, text, links, head and typing
features. A focused crawl also reads each link's context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crawler.chain.page import HTML, Page
from crawler.chain.parts import PartStep
from crawler.reading.extract import Page as Analysis
from crawler.reading.extract import analyze
from crawler.reading.html import parse_html

if TYPE_CHECKING:
    from crawler.chain.parts import Parts

__all__ = ["Parse", "read_html"]


def read_html(html: str, url: str, contexts: bool, content: bool = True) -> tuple[Any, Analysis]:
    """The tree of ``html`` and its analysis (with ``content``, its main content)."""
    tree = parse_html(html)
    return tree, analyze(tree, url, link_context=contexts, content=content)


class Parse(PartStep):
    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.contexts = parts.topic is not None
        self.content = parts.main_content

    def process_page(self, page: Page) -> None:
        if page.kind == HTML:
            page.tree, page.analysis = read_html(page.text, page.url, self.contexts, self.content)
