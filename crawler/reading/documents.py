"""Responses that are documents, not web pages: PDF text
(``crawler/reading/pdf.py``, read in child processes by ``crawler/reading/pdfworker.py``),
and the types the crawl does not read, counted.

A PDF is an information page: its text, title and links (URI annotations)
go through the same duplicate check, storage and link following as an HTML
page's. A PDF that cannot be read (encrypted, malformed, cut short, a
decompression bomb, over its time or memory) is an error record whose
``error`` says why (``pdf: PDF is encrypted ...``), not a retry: fetched
again it would be the same bytes.

Settings: ``PDF_TIMEOUT``, ``PDF_MEMORY_MB``, ``PDF_MAX_PAGES``,
``PDF_PROCESSES`` (``crawler/settings.py``). Stats: ``pdf/documents``,
``pdf/pages`` (pages read), ``pdf/cut`` (documents with more pages than
``PDF_MAX_PAGES``), ``pdf/no_text``, ``pdf/error/<reason>``,
``response/skipped_type/<media type>`` (neither HTML, text nor PDF: stored
as a record with no text).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals

from crawler.duplicates.fingerprint import content_hash
from crawler.reading.pdf import PdfError, PdfText, is_pdf
from crawler.reading.pdfworker import PdfWorker

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from crawler.items import PageItem
    from crawler.scope.urls import LinkResolver

logger = logging.getLogger(__name__)

__all__ = ["Documents"]


class Documents:
    """This worker's document reading: ``is_pdf``, ``read``, ``skipped``."""

    def __init__(self, crawler: Crawler) -> None:
        s = crawler.settings
        self.crawler = crawler
        self.timeout = s.getfloat("PDF_TIMEOUT")
        self.memory_mb = s.getint("PDF_MEMORY_MB")
        self.max_pages = s.getint("PDF_MAX_PAGES")
        self.processes = s.getint("PDF_PROCESSES")
        self._worker: PdfWorker | None = None
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @staticmethod
    def is_pdf(response: Response, media_type: str | None) -> bool:
        return is_pdf(response.body, media_type)

    async def read_pdf(self, response: Response, item: PageItem, resolver: LinkResolver,
                       max_text_chars: int) -> dict[str, str] | None:
        """Read a PDF into ``item`` (title, text, abstract, links): its links
        (normalised URL -> anchor), or None when it cannot be read (``item``
        is then an error record with the reason)."""
        item.content_hash = content_hash(response.body.decode("latin-1"))  # until its text sets it
        doc = await self.read(response, item)
        if doc is None:
            return None
        item.title, item.text = doc.title, doc.text[:max_text_chars]
        item.abstract = " ".join(doc.text[:600].split())[:300]
        links: dict[str, str] = {}
        for uri, anchor in doc.links:
            target = resolver.resolve(item.url, uri)
            if target is not None:
                links.setdefault(target, anchor[:200])
        item.links = [{"url": u, "anchor": a} for u, a in links.items()]
        self.crawler.stats.inc_value("frontier/links_found", len(links))
        return links

    async def read(self, response: Response, item: PageItem) -> PdfText | None:
        """The PDF's text, title and links; None when it cannot be read
        (``item`` is then an error record with the reason)."""
        stats = self.crawler.stats
        if self._worker is None:  # children start on the first PDF, not before
            self._worker = PdfWorker(timeout=self.timeout, memory_mb=self.memory_mb, max_pages=self.max_pages,
                                     processes=self.processes)
        try:
            doc = await self._worker.extract(response.body)
        except PdfError as exc:
            stats.inc_value(f"pdf/error/{exc.reason}")
            item.state, item.error = "E", f"pdf: {exc}"[:1000]
            logger.info("PDF %(url)s not read: %(exc)s", {"url": item.url, "exc": exc})
            return None
        stats.inc_value("pdf/documents")
        stats.inc_value("pdf/pages", doc.pages_read)
        if doc.pages_read < doc.pages:
            stats.inc_value("pdf/cut")
        if not doc.text:
            stats.inc_value("pdf/no_text")
        return doc

    def skipped(self, media_type: str | None) -> None:
        """A response of a type the crawl does not read (an image, an archive)."""
        self.crawler.stats.inc_value(f"response/skipped_type/{media_type or 'unknown'}")

    def _closed(self, spider: Any) -> None:
        if self._worker is not None:
            self._worker.close()
