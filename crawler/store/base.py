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

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any

from crawler.recrawl.change import sitemap_interval

__all__ = ["DEGREE_FIELDS", "KEPT_FIELDS", "OUTCOME_KEY", "PAGE_FIELDS", "REVISIT_FIELDS", "SITEMAP_FIELDS", "SITEMAP_KEY", "SITE_FIELDS", "Store", "StoreUnavailable", "short_error",
           "sitemap_entries", "sitemap_update"]

# Stored fields of a page, in column order. ``links`` (out-links) is written
# to the links table; ``inlinks`` is derived on read.
PAGE_FIELDS = (
    "url", "site", "depth", "state", "status", "page_type", "title", "text",
    "abstract", "simhash", "content_hash", "dup_of", "fetched_at", "etag",
    "last_modified", "next_fetch_at", "revisit_interval", "error", "encoding",
    "referer", "change_rate", "changed_at", "history", "gone_count", "content_length", "evidence",
    "topic_score", "on_topic", "canonical", "in_sitemap", "lastmod", "changefreq", "lang", "alternates",
    "importance", "indegree", "mirror_degree", "warc_file", "warc_offset", "warc_date", "warc_digest",
    "dup_order", "content_type", "rendered", "extra", "markdown", "metadata", "kind",
)
# Fields the stores set from the sitemaps' listings, not from the page.
SITEMAP_FIELDS = ("in_sitemap", "lastmod", "changefreq")
# Fields the store computes for every page before a re-collection
# (``compute_degrees``): the links to it and the copies of it (dup_of).
DEGREE_FIELDS = ("indegree", "mirror_degree")
# Fields a page's write leaves as they are stored.
KEPT_FIELDS = SITEMAP_FIELDS + DEGREE_FIELDS
# A record of the write batch that is a sitemap's listing (crawler/sitemaps/crawl.py):
# {"_sitemap": its URL, "entries": [[url, lastmod, changefreq], ...]}.
SITEMAP_KEY = "_sitemap"
# The outcome of a re-fetched page (crawler/recrawl/merge.py), a list of stat
# names, travels with it to the write buffer, which counts each as
# ``recrawl/<name>`` once the batch is written. Stores ignore it.
OUTCOME_KEY = "_revisit_outcome"

# What a re-crawl reads of a page before it writes the new version
# (crawler/recrawl/merge.py): the fingerprints, validators and schedule.
REVISIT_FIELDS = (
    "url", "site", "depth", "state", "status", "page_type", "title", "text", "abstract",
    "simhash", "content_hash", "dup_of", "fetched_at", "etag", "last_modified", "next_fetch_at",
    "revisit_interval", "encoding", "referer", "change_rate", "changed_at", "history", "gone_count",
    "content_length", "evidence", "topic_score", "on_topic", "canonical", "in_sitemap", "lastmod", "changefreq",
    "lang", "alternates", "importance", "indegree", "mirror_degree",
    "warc_file", "warc_offset", "warc_date", "warc_digest", "dup_order", "content_type", "rendered",
    "markdown",  # what a changed page's Markdown is diffed against (crawler/recrawl/diff.py)
)

# The sites table: ``mirror_of`` names the site whose copy this site is (most
# of its pages are copies of that site's), null otherwise.
SITE_FIELDS = ("site", "pages", "links", "errors", "first_seen", "discovered_from", "mirror_of")


def sitemap_entries(listings: Sequence[dict[str, Any]]) -> list[tuple[str, float | None, str | None, str]]:
    """(url, lastmod, changefreq, sitemap) of each well-formed entry of the
    batch's sitemap listings (the spill file may have been edited)."""
    out = []
    for rec in listings:
        sitemap = str(rec.get(SITEMAP_KEY) or "")
        for e in rec.get("entries") or ():
            if not isinstance(e, (list, tuple)) or len(e) != 3 or not isinstance(e[0], str):
                continue
            lastmod = float(e[1]) if isinstance(e[1], (int, float)) and not isinstance(e[1], bool) else None
            out.append((e[0], lastmod, e[2] if isinstance(e[2], str) else None, sitemap))
    return out


def sitemap_update(state: Any, history: Any, fetched_at: Any, lastmod: float | None,
                   changefreq: str | None) -> float | None:
    """The first revisit interval a listing gives a stored page: for a page
    in state C fetched once (one visit in its history), else None."""
    if isinstance(history, str):
        try:
            history = json.loads(history)
        except ValueError:
            return None
    if state != "C" or not isinstance(history, list) or len(history) != 1 or not isinstance(fetched_at, (int, float)):
        return None
    return sitemap_interval(changefreq, lastmod, float(fetched_at))


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
        ``{"url", "anchor"}``) in one batch, with their links and site counts.
        Records with ``SITEMAP_KEY`` are sitemap listings: kept apart, and
        the ``SITEMAP_FIELDS`` of the pages they list (stored before or
        after) set from them, with the first revisit interval of a page
        fetched once (``crawler.recrawl.change.sitemap_interval``)."""

    @abstractmethod
    def get_page(self, url: str) -> dict[str, Any] | None:
        """The stored page, with ``inlinks`` (parent URLs), or None."""

    @abstractmethod
    def iter_pages(self, site: str | None = None) -> Iterator[dict[str, Any]]:
        """Every stored page (without ``inlinks``), optionally of one site."""

    @abstractmethod
    def stored_urls(self, statuses: tuple[int, int] = (200, 299), since: float | None = None) -> list[str]:
        """The URLs of the pages stored as done (state C) with a status in
        ``statuses`` (inclusive), in the order they were first stored; with
        ``since``, those fetched then or later."""

    @abstractmethod
    def changes(self, since: float, until: float | None = None, site: str | None = None) -> list[dict[str, Any]]:
        """The changes (``crawler/recrawl/diff.py``) of versions fetched at
        ``since`` or later (before ``until``), oldest first."""

    @abstractmethod
    def listed_urls(self) -> list[str]:
        """The URLs the crawl's sitemaps listed, sorted."""

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
    def revisit_state(self, urls: Sequence[str]) -> dict[str, dict[str, Any]]:
        """``REVISIT_FIELDS`` and ``links`` (out-link URLs) of the stored pages
        among ``urls``, by URL; ``history`` a list (possibly malformed: it is
        checked where it is read)."""

    @abstractmethod
    def due(self, now: float, default_interval: float, site: str | None = None, limit: int = 0,
            every: bool = False) -> Iterator[dict[str, Any]]:
        """Stored pages (state C) whose ``next_fetch_at`` has passed (pages
        stored before it existed: ``fetched_at + default_interval``), soonest
        first, as ``url``, ``site``, ``depth``, ``etag``, ``last_modified``,
        ``next_fetch_at`` (the due time, as computed); ``every``: all pages
        in state C, due or not; ``limit`` 0: no limit."""

    @abstractmethod
    def revisit_sample(self, size: int) -> tuple[int, list[dict[str, Any]]]:
        """How many pages are in state C, and the ``evidence``, ``history``,
        ``indegree`` and ``mirror_degree`` of at most ``size`` of them drawn at random (each as
        stored: possibly malformed or absent, checked where it is read):
        what the re-crawl learns the crawl's change rates and spreads its
        budget from."""

    @abstractmethod
    def compute_degrees(self) -> None:
        """Set every stored page's ``indegree`` (links to it from stored
        pages) and ``mirror_degree`` (pages stored as copies of it,
        ``dup_of``): what the re-crawl's budget weighs pages by
        (``crawler.recrawl.plan.importance_weight``), computed before each
        re-collection."""

    @abstractmethod
    def count_due(self, now: float, default_interval: float, site: str | None = None) -> int:
        """How many pages ``due`` would give."""

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
