"""The store interface shared by the embedded (SQLite) and MongoDB stores.

A store keeps three tables or collections (DESIGN.md, "Stored data"):

- ``pages``: one row per normalised URL (``url`` unique);
- ``links``: one row per (``src``, ``dst``) edge with its ``anchor``;
- ``sites``: one row per site with ``pages`` (stored, state C), ``links``
  (edges out of its stored pages), ``errors`` (state E), ``first_seen`` and
  ``discovered_from`` (the page whose link first led to it).

Writes come in batches from the pipeline (``write``) and are idempotent:
writing the same pages again leaves the same data. A page's out-links are
replaced when the page is written again, so a re-crawl that drops a link
drops its edge. A page's in-links are derived from ``links``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

__all__ = ["PAGE_FIELDS", "SITE_FIELDS", "Store", "StoreUnavailable", "short_error"]

# Stored fields of a page, in column order. ``links`` (out-links) is written
# to the links table; ``inlinks`` is derived on read.
PAGE_FIELDS = (
    "url", "site", "depth", "state", "status", "page_type", "title", "text",
    "abstract", "simhash", "content_hash", "dup_of", "fetched_at", "etag",
    "last_modified", "next_fetch_at", "revisit_interval", "error", "encoding",
    "referer",
)

# The sites table: ``mirror_of`` names the site whose copy this site is (most
# of its pages are copies of that site's), null otherwise.
SITE_FIELDS = ("site", "pages", "links", "errors", "first_seen", "discovered_from", "mirror_of")


def short_error(exc: BaseException, limit: int = 200) -> str:
    """The first line of an error, cut: pymongo appends its timeouts and
    whole topology to every connection error."""
    text = str(exc).split(", Timeout:", 1)[0].split(" (configured timeouts", 1)[0]
    text = text.splitlines()[0] if text else type(exc).__name__
    return text[:limit]


class StoreUnavailable(Exception):
    """The store could not take a page before the crawl stopped: the page was
    saved to the crawl's spill file (written to the store when the crawl next
    starts) and its URL goes back to the frontier."""


class Store(ABC):
    """Where crawled pages, their links and the site table are kept."""

    def transient(self, exc: BaseException) -> bool:
        """Is ``exc`` (raised by ``write``) worth retrying: the store away or
        busy, rather than a page it will never take?"""
        return isinstance(exc, (OSError, TimeoutError))

    @abstractmethod
    def write(self, pages: Sequence[dict[str, Any]]) -> None:
        """Upsert ``pages`` (dicts with ``PAGE_FIELDS`` and ``links``, a list of
        ``{"url", "anchor"}``) in one batch, with their links and site counts."""

    @abstractmethod
    def get_page(self, url: str) -> dict[str, Any] | None:
        """The stored page, with ``inlinks`` (parent URLs), or None."""

    @abstractmethod
    def iter_pages(self, site: str | None = None) -> Iterator[dict[str, Any]]:
        """Every stored page (without ``inlinks``), optionally of one site."""

    @abstractmethod
    def inlinks(self, url: str) -> list[str]:
        """URLs of the pages that link to ``url``, sorted."""

    @abstractmethod
    def outlinks(self, url: str) -> list[dict[str, str]]:
        """``{"url", "anchor"}`` for each link found on ``url``, sorted by URL."""

    @abstractmethod
    def iter_links(self, site: str | None = None) -> Iterator[dict[str, str]]:
        """Every edge (``src``, ``dst``, ``anchor``), optionally from one site."""

    @abstractmethod
    def sites(self) -> list[dict[str, Any]]:
        """The site table, sorted by site."""

    @abstractmethod
    def count_pages(self, site: str | None = None, state: str | None = None) -> int:
        """How many pages are stored (of a site, in a state)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections. Idempotent."""

    def describe(self) -> str:
        """Where the pages go, for the log (no password)."""
        return type(self).__name__

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
