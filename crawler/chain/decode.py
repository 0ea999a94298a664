"""Step ``decode``: what the response holds, and its HTML as text.

Reads the robots directives of the response's ``X-Robots-Tag`` headers and
tells the page's kind: a PDF (``crawler/reading/documents.py``), an HTML page, or
another document. A PDF or another document is an information page; another
document is stored as it came (its bytes' hash is what a re-crawl compares)
and goes no further. HTML is decoded with ``crawler.reading.encoding.decode_html``,
the site's last legacy encoding as the hint for pages that declare none.
"""

from __future__ import annotations

from scrapy.http import TextResponse

from crawler.chain.page import OTHER, PDF, Page
from crawler.chain.parts import PartStep
from crawler.reading.encoding import decode_html
from crawler.duplicates.fingerprint import content_hash
from crawler.reading.head import parse_robots_directives
from crawler.reading.responses import header, is_html

__all__ = ["Decode"]


class Decode(PartStep):
    def process_page(self, page: Page) -> None:
        response, item, parts = page.response, page.item, self.parts
        page.robots = parse_robots_directives(
            ",".join(v.decode("latin-1") for v in response.headers.getlist(b"X-Robots-Tag")))
        if parts.documents.is_pdf(response, item.content_type):
            page.kind = PDF
            item.page_type = parts.typer.other_type()
            return
        if not isinstance(response, TextResponse) or not is_html(response):
            page.kind = OTHER
            parts.documents.skipped(item.content_type)
            item.page_type = parts.typer.other_type()
            item.encoding = getattr(response, "encoding", None)
            # What a re-crawl compares: the bytes, as they came.
            item.content_hash = content_hash(response.body.decode("latin-1"))
            return
        page.text, item.encoding = decode_html(response.body, header(response, b"Content-Type"),
                                               parts.encodings.get(item.site))
        parts.encodings.remember(item.site, item.encoding)
