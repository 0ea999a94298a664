"""The embedded store: one SQLite file per crawl, WAL mode.

WAL lets the operator's commands read while the crawl writes, and one
transaction per batch keeps a crash from leaving half a batch behind. The
connection is shared by the pipeline's writer thread and readers, so every
use holds a lock. The file's tables, and how a page's fields are kept in
them, are in ``crawler/store/sqlschema.py``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from crawler.store.base import (PAGE_FIELDS, REVISIT_FIELDS, SITE_FIELDS, SITEMAP_KEY, Store, sitemap_entries,
                                sitemap_update)
from crawler.recrawl.diff import CHANGE_KEY
from crawler.store.sqlschema import UPSERT_PAGE, column_value, page_of, prepare
from crawler.scope.urls import url_site

__all__ = ["SQLiteStore"]


class SQLiteStore(Store):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=30.0
        )
        self._conn.row_factory = sqlite3.Row
        # Several workers opening a new store at the same moment: switching
        # it to WAL takes a lock that SQLite's busy timeout does not wait for
        # ("database is locked" at once; one of two workers of a crawl failed
        # to start about once in 40). Every step below may be taken again.
        deadline = time.monotonic() + 30.0
        while True:
            try:
                self._prepare()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    self._conn.close()
                    raise
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                time.sleep(0.02)

    def _prepare(self) -> None:
        """The file's mode and schema (a new file's, or an older version's brought up to date)."""
        assert self._conn is not None
        with self._lock:
            prepare(self._conn)

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError(f"store {self.path} is closed")
        return self._conn

    def transient(self, exc: BaseException) -> bool:
        # Locked, busy, disk full, I/O error: OperationalError. A value SQLite
        # cannot bind (InterfaceError) or a constraint (IntegrityError) is not.
        return isinstance(exc, (sqlite3.OperationalError, OSError))

    def write(self, pages: Sequence[dict[str, Any]]) -> None:
        listed = sitemap_entries([p for p in pages if SITEMAP_KEY in p])
        pages = [p for p in pages if SITEMAP_KEY not in p]
        if not pages and not listed:
            return
        now = time.time()
        page_rows = [tuple(column_value(f, p.get(f)) for f in PAGE_FIELDS) for p in pages]
        link_rows: list[tuple[str, str, str]] = []
        new_sites: dict[str, tuple[float, str | None]] = {}
        for p in pages:
            new_sites.setdefault(p["site"], (p.get("fetched_at") or now, None))
            for link in p.get("links") or ():
                link_rows.append((p["url"], link["url"], link.get("anchor") or ""))
                new_sites.setdefault(url_site(link["url"]), (p.get("fetched_at") or now, p["url"]))
        touched = sorted({p["site"] for p in pages})
        # sites.links moves by each page's new out-link count minus its old
        # (read in the transaction). A page twice in a batch counts once.
        # A page whose ``links`` is None keeps its stored out-links (a re-crawl
        # that found it unchanged).
        latest = {p["url"]: p for p in pages}
        links_delta = dict.fromkeys(touched, 0)
        for p in latest.values():
            links_delta[p["site"]] += len({link["url"] for link in p.get("links") or ()})
        urls = [u for u, p in latest.items() if p.get("links") is not None]
        # sites.pages and sites.errors move by the batch's pages as stored
        # (the last row of a URL given twice) minus the same URLs' rows
        # before it (read in the transaction). Counting the site's pages
        # again each batch scanned them all: 90 ms a batch at 1M pages.
        site_at, state_at = PAGE_FIELDS.index("site"), PAGE_FIELDS.index("state")
        new_rows = {row[0]: (row[site_at], row[state_at]) for row in page_rows}
        states_delta: dict[str, list[int]] = {}

        def count(site: str, state: Any, n: int) -> None:
            if state in ("C", "E"):
                states_delta.setdefault(site, [0, 0])[state == "E"] += n

        with self._lock:
            conn = self.conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                for start in range(0, len(urls), 500):
                    chunk = urls[start:start + 500]
                    for src, n in conn.execute(
                        f"SELECT src, COUNT(*) FROM links WHERE src IN ({', '.join('?' * len(chunk))}) GROUP BY src",
                        chunk,
                    ):
                        links_delta[latest[src]["site"]] -= n
                every = list(new_rows)
                for start in range(0, len(every), 500):
                    chunk = every[start:start + 500]
                    for url, site, state in conn.execute(
                        f"SELECT url, site, state FROM pages WHERE url IN ({', '.join('?' * len(chunk))})", chunk
                    ):
                        count(site, state, -1)
                for site, state in new_rows.values():
                    count(site, state, 1)
                conn.executemany(UPSERT_PAGE, page_rows)
                conn.executemany("DELETE FROM links WHERE src = ?", [(u,) for u in urls])
                conn.executemany(
                    "INSERT OR REPLACE INTO links (src, dst, anchor) VALUES (?, ?, ?)", link_rows
                )
                conn.executemany(
                    "INSERT OR IGNORE INTO sites (site, first_seen, discovered_from) VALUES (?, ?, ?)",
                    [(s, t, src) for s, (t, src) in new_sites.items()],
                )
                conn.executemany(
                    "UPDATE sites SET pages = pages + ?2, errors = errors + ?3, links = links + ?4 WHERE site = ?1",
                    [(s, *states_delta.get(s, (0, 0)), links_delta.get(s, 0))
                     for s in sorted(set(touched) | set(states_delta))],
                )
                conn.executemany("UPDATE sites SET mirror_of = ? WHERE site = ?",
                                 [(p["mirror_of"], p["site"]) for p in pages if p.get("mirror_of")])
                conn.executemany(
                    "INSERT INTO sitemap_urls (url, lastmod, changefreq, sitemap) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (url) DO UPDATE SET lastmod = excluded.lastmod, changefreq = excluded.changefreq, "
                    "sitemap = excluded.sitemap", listed)
                self._apply_sitemaps(conn, list(new_rows) + [e[0] for e in listed])
                conn.executemany(
                    "INSERT OR IGNORE INTO changes (url, at, kind, site, previous_at, added, removed, diff, cut, target) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(c["url"], c["at"], c["kind"], c.get("site"), c.get("previous_at"), json.dumps(c.get("added") or []),
                      json.dumps(c.get("removed") or []), c.get("diff") or "", int(bool(c.get("cut"))), c.get("target"))
                     for c in (p.get(CHANGE_KEY) for p in pages) if c])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    @staticmethod
    def _apply_sitemaps(conn: sqlite3.Connection, urls: list[str]) -> None:
        """The sitemap fields of the stored pages among ``urls`` that a
        listing names (in the write's transaction)."""
        updates = []
        for start in range(0, len(urls), 500):
            chunk = urls[start:start + 500]
            for url, state, history, fetched_at, lastmod, freq in conn.execute(
                "SELECT p.url, p.state, p.history, p.fetched_at, s.lastmod, s.changefreq FROM pages p "
                f"JOIN sitemap_urls s ON s.url = p.url WHERE p.url IN ({', '.join('?' * len(chunk))})", chunk
            ):
                interval = sitemap_update(state, history, fetched_at, lastmod, freq)
                at = fetched_at + interval if interval is not None else None
                updates.append((lastmod, freq, interval, at, url))
        conn.executemany("UPDATE pages SET in_sitemap = 1, lastmod = ?, changefreq = ?, "
                         "revisit_interval = COALESCE(?, revisit_interval), "
                         "next_fetch_at = COALESCE(?, next_fetch_at) WHERE url = ?", updates)

    def _query(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self.conn.execute(sql, args).fetchall()

    def get_page(self, url: str) -> dict[str, Any] | None:
        rows = self._query("SELECT * FROM pages WHERE url = ?", (url,))
        if not rows:
            return None
        page = page_of(rows[0])
        page["inlinks"] = self.inlinks(url)
        return page

    def iter_pages(self, site: str | None = None) -> Iterator[dict[str, Any]]:
        if site is None:
            rows = self._query("SELECT * FROM pages ORDER BY url")
        else:
            rows = self._query("SELECT * FROM pages WHERE site = ? ORDER BY url", (site,))
        for row in rows:
            yield page_of(row)

    def stored_urls(self, statuses: tuple[int, int] = (200, 299), since: float | None = None) -> list[str]:
        after = "" if since is None else " AND fetched_at >= ?"
        rows = self._query(f"SELECT url FROM pages WHERE state = 'C' AND status BETWEEN ? AND ?{after} ORDER BY rowid",
                           (*statuses, *(() if since is None else (since,))))
        return [r[0] for r in rows]

    def changes(self, since: float, until: float | None = None, site: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT * FROM changes WHERE at >= ? AND at < ?" + (" AND site = ?" if site else "") + " ORDER BY at, url"
        rows = self._query(sql, (since, until if until is not None else float("inf"), *([site] if site else [])))
        out = []
        for row in rows:
            c = dict(row)
            c["added"], c["removed"] = json.loads(c["added"] or "[]"), json.loads(c["removed"] or "[]")
            c["cut"] = bool(c["cut"])
            out.append(c)
        return out

    def listed_urls(self) -> list[str]:
        return [r[0] for r in self._query("SELECT url FROM sitemap_urls ORDER BY url")]

    def inlinks(self, url: str) -> list[str]:
        return [r[0] for r in self._query("SELECT src FROM links WHERE dst = ? ORDER BY src", (url,))]

    def outlinks(self, url: str) -> list[dict[str, str]]:
        rows = self._query("SELECT dst, anchor FROM links WHERE src = ? ORDER BY dst", (url,))
        return [{"url": r[0], "anchor": r[1]} for r in rows]

    def iter_links(self, site: str | None = None) -> Iterator[dict[str, str]]:
        if site is None:
            rows = self._query("SELECT src, dst, anchor FROM links ORDER BY src, dst")
        else:
            rows = self._query(
                "SELECT l.src, l.dst, l.anchor FROM links l JOIN pages p ON p.url = l.src "
                "WHERE p.site = ? ORDER BY l.src, l.dst",
                (site,),
            )
        for r in rows:
            yield {"src": r[0], "dst": r[1], "anchor": r[2]}

    def sites(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._query(
            f"SELECT {', '.join(SITE_FIELDS)} FROM sites ORDER BY site")]

    def count_pages(self, site: str | None = None, state: str | None = None) -> int:
        sql = "SELECT COUNT(*) FROM pages WHERE 1"
        args: list[str] = []
        if site is not None:
            sql += " AND site = ?"
            args.append(site)
        if state is not None:
            sql += " AND state = ?"
            args.append(state)
        return int(self._query(sql, args)[0][0])

    def revisit_state(self, urls: Sequence[str]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        unique = list(dict.fromkeys(urls))
        for start in range(0, len(unique), 500):
            chunk = unique[start:start + 500]
            marks = ", ".join("?" * len(chunk))
            for row in self._query(f"SELECT {', '.join(REVISIT_FIELDS)} FROM pages WHERE url IN ({marks})", chunk):
                page = page_of(row)
                page["links"] = []
                out[page["url"]] = page
            for src, dst in self._query(f"SELECT src, dst FROM links WHERE src IN ({marks})", chunk):
                if src in out:
                    out[src]["links"].append(dst)
        return out

    def _due_where(self, now: float, default_interval: float, site: str | None,
                   every: bool) -> tuple[str, list[Any]]:
        sql = " FROM pages WHERE state = 'C'"
        args: list[Any] = []
        if not every:
            sql += " AND COALESCE(next_fetch_at, fetched_at + ?, 0) <= ?"
            args += [default_interval, now]
        if site is not None:
            sql += " AND site = ?"
            args.append(site)
        return sql, args

    def due(self, now: float, default_interval: float, site: str | None = None, limit: int = 0,
            every: bool = False) -> Iterator[dict[str, Any]]:
        where, args = self._due_where(now, default_interval, site, every)
        sql = ("SELECT url, site, depth, etag, last_modified, "
               "COALESCE(next_fetch_at, fetched_at + ?, 0) AS next_fetch_at, "
               "fetched_at, change_rate, content_length, warc_date, warc_digest, dup_order" + where + " ORDER BY 6, url")
        args = [default_interval, *args]
        if limit > 0:
            sql += " LIMIT ?"
            args.append(limit)
        for row in self._query(sql, args):
            yield dict(row)

    def revisit_sample(self, size: int) -> tuple[int, list[dict[str, Any]]]:
        total = int(self._query("SELECT COUNT(*) FROM pages WHERE state = 'C'")[0][0])
        rows = self._query("SELECT evidence, history, indegree, mirror_degree FROM pages WHERE state = 'C' "
                           "ORDER BY random() LIMIT ?",
                           (max(0, size),))
        return total, [page_of(r) for r in rows]

    def compute_degrees(self) -> None:
        with self._lock:
            conn = self.conn
            conn.execute("CREATE INDEX IF NOT EXISTS pages_dup_of ON pages (dup_of)")
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("UPDATE pages SET indegree = (SELECT COUNT(*) FROM links WHERE dst = pages.url), "
                             "mirror_degree = (SELECT COUNT(*) FROM pages c WHERE c.dup_of = pages.url)")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def count_due(self, now: float, default_interval: float, site: str | None = None) -> int:
        where, args = self._due_where(now, default_interval, site, False)
        return int(self._query("SELECT COUNT(*)" + where, args)[0][0])

    def describe(self) -> str:
        return f"SQLite file {self.path}"

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
