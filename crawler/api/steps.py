"""Step ``api_html`` (590, after render and the wall check): an HTML page's
HTML onto its record, for API jobs that ask for the ``html`` or ``rawHtml``
format (``crawler/api/runner.py`` adds it to those jobs' ``PAGE_STEPS``;
a crawl of the command line never has it).

- ``rawHtml``: the page as decoded (the rendered DOM's HTML once rendered);
- ``html``: the same without its scripts, styles, ``noscript``,
  ``template`` elements and comments.

Both go into ``page.fields`` and so are stored in the page's ``extra``,
each cut at ``MAX_CHARS``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import lxml.etree
import lxml.html

from crawler.chain.page import HTML

if TYPE_CHECKING:
    from crawler.chain.page import Page

__all__ = ["KeepHtml"]

MAX_CHARS = 5_000_000


class KeepHtml:
    def process_page(self, page: Page) -> None:
        if page.kind != HTML:
            return
        page.fields["rawHtml"] = page.text[:MAX_CHARS]
        page.fields["html"] = cleaned(page.text)[:MAX_CHARS]


def cleaned(text: str) -> str:
    """The HTML without what a reader of its content does not need."""
    try:
        root = lxml.html.document_fromstring(text)
    except (ValueError, lxml.etree.ParserError):
        return ""
    found: Any = root.xpath("//script | //style | //noscript | //template | //comment()")
    for element in found:
        element.drop_tree()
    return str(lxml.html.tostring(root, encoding="unicode", method="html"))
