"""The sitemaps of each site, read one after another (``crawler/sitemaps/crawl.py``).

A site's sitemap files wait in ``sitemaps:<site>`` (a sorted set in the
site's shard) and are fetched one at a time: the next is queued (at the
tail of the site's queue) only when the one before has been read and its
URLs queued, so a site whose index names a million URLs has at most one
file's URLs (50,000) queued at once, behind the links found before them.

The score of a waiting file says its place and how it was found:
``seq * 16 + level * 2 + named`` (``level``: 0 for a file robots.txt names
or ``/sitemap.xml``, one more for each index above it; ``named``: robots.txt
names it or an index it names, so it may list any URL of its host). A file
read (or given up on) scores -1 and is never queued again. Adding is
idempotent (``ZADD NX``) and the next file is always the first waiting
one, so workers that find the same robots.txt, or a worker that reads a
file again after a crash, queue the same next file, which the frontier's
dedup keeps to one request. ``sitemaps:count`` (a hash, site -> files
known) bounds the files of a site (``SITEMAP_MAX_FILES``).

Whatever is read back is checked: a member that is not an http(s) URL in
the crawler's normal form, or whose score is not a finite place, is set
aside as read and counted (``sitemap_refused``): nothing written into Redis
by someone else becomes a request but a URL the crawler could have queued
itself, which the network guard and robots.txt still judge.

Counters in the shard's ``stats``: ``sitemaps_read``, ``sitemap_listed``,
``sitemap_taken`` (``scrapy status``), ``sitemap_refused``; ``sitemap_errors`` is counted with
the acknowledgement of a file that failed (``lua/shard.lua``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawler.scope.urls import InvalidURL, normalize

if TYPE_CHECKING:
    from crawler.redis.gateway import Gateway
    from crawler.redis.keys import Keys

__all__ = ["MAX_LEVEL", "SitemapFile", "SitemapQueue"]

MAX_LEVEL = 7
_DONE = -1


@dataclass(frozen=True, slots=True)
class SitemapFile:
    url: str
    level: int = 0
    named: bool = False


def _file(member: bytes, score: object) -> SitemapFile | None:
    """A waiting file as the crawler wrote it, else None."""
    try:
        url = member.decode("utf-8")
        s = float(score)  # type: ignore[arg-type]
    except (UnicodeDecodeError, TypeError, ValueError):
        return None
    if not math.isfinite(s) or s < 0 or s >= 2 ** 52 or len(url) > 8192:
        return None
    try:
        if normalize(url) != url:
            return None
    except InvalidURL:
        return None
    n = int(s)
    return SitemapFile(url, (n % 16) // 2, bool(n % 2))


def _score(seq: int, f: SitemapFile) -> int:
    return seq * 16 + min(max(f.level, 0), MAX_LEVEL) * 2 + (1 if f.named else 0)


class SitemapQueue:
    def __init__(self, gateway: Gateway, keys: Keys) -> None:
        self.gateway = gateway
        self.keys = keys

    def _key(self, site: str) -> str:
        return self.keys.site(site).prefix + "sitemaps:" + site

    def _count_key(self, site: str) -> str:
        return self.keys.site(site).prefix + "sitemaps:count"

    def add(self, site: str, files: Sequence[SitemapFile], max_files: int) -> int:
        """Add ``files`` to ``site``'s waiting files (those known already are
        left as they are); returns how many were refused for
        ``max_files`` (0: no bound)."""
        if not files:
            return 0
        key = self._key(site)
        known = self.gateway.run_many([("ZMSCORE", [key], [f.url for f in files])])[0] or [None] * len(files)
        new = [f for f, score in zip(files, known, strict=False) if score is None]
        if not new:
            return 0
        end = int(self.gateway.run("HINCRBY", [self._count_key(site)], [site, len(new)]))
        first = end - len(new)
        refused = 0
        args: list[object] = ["NX"]
        for i, f in enumerate(new):
            if max_files and first + i >= max_files:
                refused += 1
                continue
            args += [_score(first + i, f), f.url]
        if len(args) > 1:
            self.gateway.run("ZADD", [key], args)
        return refused

    def next(self, site: str) -> SitemapFile | None:
        """The first file of ``site`` still waiting to be read. A member that
        is not a URL the crawler would have written there (an http(s) URL
        in its normal form, a finite score; written into Redis by someone
        else) is set aside as read, counted, and the next one taken."""
        for _ in range(100):
            row = self.gateway.run("ZRANGEBYSCORE", [self._key(site)], [0, "+inf", "WITHSCORES", "LIMIT", 0, 1])
            if not row:
                return None
            member, score = row[0] if isinstance(row[0], (list, tuple)) else (row[0], row[1])
            raw = member if isinstance(member, bytes) else str(member).encode("utf-8", "surrogateescape")
            found = _file(raw, score)
            if found is not None:
                return found
            self.gateway.run_many([("ZADD", [self._key(site)], ["XX", _DONE, raw]),
                                   ("HINCRBY", [self.keys.site(site).stats], ["sitemap_refused", 1])])
        return None

    def done(self, site: str, url: str) -> None:
        """``url`` is read (or given up on): never queued again."""
        self.gateway.run("ZADD", [self._key(site)], ["XX", _DONE, url])

    def count(self, site: str, read: int = 0, listed: int = 0, taken: int = 0) -> None:
        stats = self.keys.site(site).stats
        calls = [("HINCRBY", [stats], [name, n]) for name, n in
                 (("sitemaps_read", read), ("sitemap_listed", listed), ("sitemap_taken", taken)) if n]
        if calls:
            self.gateway.run_many(calls)
