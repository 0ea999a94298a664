"""Request identity for the frontier's URL dedup: Scrapy's
``REQUEST_FINGERPRINTER_CLASS`` seam (``crawler.request_fingerprinter``),
so the scheduler reads no feature's meta keys to tell two requests apart.

Settings: ``REQUEST_FINGERPRINTER_CLASS`` (``crawler/settings.py`` names this
class).

``request.meta`` keys (``crawler/requestmeta.py``):

- ``sitemap``: a sitemap fetch is one per URL, apart from the page of the
  same URL (a page may link to ``/sitemap.xml``: one of each is fetched);
- ``revisit``: a re-crawl's visit is one per page and due time, so workers
  that find the same page due queue it once, and the next visit (a later
  due time) is new again; a HEAD before the GET (``RECRAWL_HEAD``) is a
  visit of its own, so the GET it sends is new.

Every other request: Scrapy's default fingerprint (``RequestFingerprinter``:
canonical URL, method and body), whose bytes the frontier's dedup sets of
crawls already started hold.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from scrapy.utils.request import RequestFingerprinter

from crawler.requestmeta import REVISIT, SITEMAP

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from typing_extensions import Self

__all__ = ["FrontierFingerprinter"]


def _sha1(key: str) -> bytes:
    return hashlib.sha1(key.encode(), usedforsecurity=False).digest()


class FrontierFingerprinter:
    """Sitemap fetches and re-crawl visits by their own keys; every other
    request by Scrapy's default fingerprinter."""

    def __init__(self, crawler: Crawler | None = None) -> None:
        self.default = RequestFingerprinter(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def fingerprint(self, request: Request) -> bytes:
        meta = request.meta
        if SITEMAP in meta:
            return _sha1(f"sitemap\0{request.url}")
        due = meta.get(REVISIT)
        if isinstance(due, int) and not isinstance(due, bool):
            if request.method == "GET":
                return _sha1(f"revisit\0{due}\0{request.url}")
            return _sha1(f"revisit\0{due}\0{request.method}\0{request.url}")
        return self.default.fingerprint(request)
