"""The SQLite store's file: its tables (``pages``, ``links``, ``sites``,
``sitemap_urls``), the columns later versions added and how an older file is
brought up to date (``prepare``), the statement that writes a page, and how a
page's fields are kept in their columns (``column_value``: lists and dicts as
JSON text) and read back (``page_of``). ``crawler/store/sqlite.py`` reads and
writes through them."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from crawler.store.base import KEPT_FIELDS, PAGE_FIELDS

__all__ = ["UPSERT_PAGE", "column_value", "page_of", "prepare"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS pages (
    url TEXT NOT NULL UNIQUE, site TEXT NOT NULL, depth INTEGER, state TEXT,
    status INTEGER, page_type TEXT, title TEXT, text TEXT, abstract TEXT,
    simhash INTEGER, content_hash TEXT, dup_of TEXT, fetched_at REAL, etag TEXT,
    last_modified TEXT, next_fetch_at REAL, revisit_interval REAL, error TEXT,
    encoding TEXT, referer TEXT, change_rate REAL, changed_at REAL, history TEXT,
    gone_count INTEGER, content_length INTEGER, evidence TEXT,
    topic_score REAL, on_topic INTEGER
);
CREATE INDEX IF NOT EXISTS pages_site_state ON pages (site, state);
CREATE TABLE IF NOT EXISTS links (
    src TEXT NOT NULL, dst TEXT NOT NULL, anchor TEXT,
    PRIMARY KEY (src, dst)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS links_dst ON links (dst);
CREATE TABLE IF NOT EXISTS sites (
    site TEXT PRIMARY KEY, pages INTEGER NOT NULL DEFAULT 0,
    errors INTEGER NOT NULL DEFAULT 0, first_seen REAL, discovered_from TEXT,
    links INTEGER NOT NULL DEFAULT 0, mirror_of TEXT
);
CREATE TABLE IF NOT EXISTS sitemap_urls (
    url TEXT PRIMARY KEY, lastmod REAL, changefreq TEXT, sitemap TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS changes (
    url TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL, site TEXT, previous_at REAL,
    added TEXT, removed TEXT, diff TEXT, cut INTEGER, target TEXT,
    PRIMARY KEY (url, at)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS changes_at ON changes (at);
"""

# Stores written before the re-crawl (crawler/recrawl/merge.py) gain its columns;
# their pages are due fetched_at + REVISIT_DEFAULT_INTERVAL (see ``SQLiteStore.due``).
_REVISIT_COLUMNS = {"change_rate": "REAL", "changed_at": "REAL", "history": "TEXT", "gone_count": "INTEGER",
                    "content_length": "INTEGER", "evidence": "TEXT",
                    # and those of focused crawling (crawler/following/topic.py)
                    "topic_score": "REAL", "on_topic": "INTEGER",
                    # and canonical links (crawler/duplicates/canonical.py)
                    "canonical": "TEXT",
                    # and sitemaps (crawler/sitemaps/crawl.py)
                    "in_sitemap": "INTEGER", "lastmod": "REAL", "changefreq": "TEXT",
                    # and languages (crawler/duplicates/variants.py)
                    "lang": "TEXT", "alternates": "TEXT",
                    # and crawl orders (crawler/following/importance.py)
                    "importance": "REAL", "indegree": "INTEGER", "mirror_degree": "INTEGER",
                    # and WARC output (crawler/warc/)
                    "warc_file": "TEXT", "warc_offset": "INTEGER", "warc_date": "TEXT", "warc_digest": "TEXT",
                    # and the duplicate index's first check of the URL (crawler/frontier/dupindex.py)
                    "dup_order": "TEXT",
                    # and what the page was: its media type, rendered or not (crawler/render/)
                    "content_type": "TEXT", "rendered": "INTEGER",
                    # and what users' own page steps extracted (crawler/chain/)
                    "extra": "TEXT",
                    # and what a page yields (issue 50): its main content as Markdown,
                    # its metadata (JSON), its kind (crawler/reading/, crawler/pagetypes/)
                    "markdown": "TEXT", "metadata": "TEXT", "kind": "TEXT"}

# Stores written before sites.links existed gain the column, counted once.
_MIGRATE_SITES_LINKS = """
ALTER TABLE sites ADD COLUMN links INTEGER NOT NULL DEFAULT 0;
UPDATE sites SET links = (SELECT COUNT(*) FROM links l JOIN pages p ON p.url = l.src
                          WHERE p.site = sites.site);
"""

UPSERT_PAGE = (
    f"INSERT INTO pages ({', '.join(PAGE_FIELDS)}) "
    f"VALUES ({', '.join('?' for _ in PAGE_FIELDS)}) "
    f"ON CONFLICT (url) DO UPDATE SET "
    + ", ".join(f"{f} = excluded.{f}" for f in PAGE_FIELDS if f != "url" and f not in KEPT_FIELDS)
)


def prepare(conn: sqlite3.Connection) -> None:
    """The file's mode and schema (a new file's, or an older version's
    brought up to date); every step may be taken again."""
    conn.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode: a power cut may lose the last transactions,
    # never corrupt the file; FULL would fsync every batch.
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.executescript(_SCHEMA)
    page_columns = {r[1] for r in conn.execute("PRAGMA table_info(pages)")}
    for name, kind in _REVISIT_COLUMNS.items():
        if name not in page_columns:
            try:
                conn.execute(f"ALTER TABLE pages ADD COLUMN {name} {kind}")
            except sqlite3.OperationalError as exc:
                # Another worker opening the same store added it first.
                if "duplicate column" not in str(exc):
                    raise
    conn.execute("CREATE INDEX IF NOT EXISTS pages_next_fetch ON pages (next_fetch_at)")
    columns = {r[1] for r in conn.execute("PRAGMA table_info(sites)")}
    if "links" not in columns:
        conn.executescript("BEGIN IMMEDIATE;" + _MIGRATE_SITES_LINKS + "COMMIT;")
    if "mirror_of" not in columns:
        conn.execute("ALTER TABLE sites ADD COLUMN mirror_of TEXT")


def column_value(name: str, value: Any) -> Any:
    """A page field as SQLite keeps it: the change history and evidence as JSON text."""
    if name in _JSON and value is not None and not isinstance(value, str):
        return json.dumps(value, separators=(",", ":"))
    return value


_JSON: dict[str, Any] = {"history": [], "evidence": None, "alternates": None, "extra": None, "metadata": None}  # JSON columns, and what a missing or unreadable one reads as


def page_of(row: sqlite3.Row) -> dict[str, Any]:
    """A stored row as a page: its JSON columns read, its flags as booleans."""
    page = dict(row)
    for name, empty in _JSON.items():
        if name in page:
            try:
                page[name] = json.loads(page[name]) if page[name] else empty
            except (TypeError, ValueError, RecursionError):
                page[name] = empty  # edited by hand: read as none (the evidence is rebuilt from the history)
    for flag in ("on_topic", "rendered"):
        if page.get(flag) is not None:
            page[flag] = bool(page[flag])
    if "in_sitemap" in page:
        page["in_sitemap"] = bool(page["in_sitemap"])
    return page
