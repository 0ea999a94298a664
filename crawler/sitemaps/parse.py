"""Sitemaps as files: what one sitemap says, within the protocol's limits.
Pure logic, no Scrapy engine, no Redis (``crawler/sitemaps/crawl.py`` crawls them).

The protocol (sitemaps.org, 0.9):

- a sitemap is XML (``<urlset>`` of ``<url><loc>``, with ``<lastmod>`` and
  ``<changefreq>``), a sitemap index (``<sitemapindex>`` of
  ``<sitemap><loc>``) or plain text (one URL a line), any of them gzipped;
- at most 50,000 URLs and 50 MB (uncompressed) a file (``MAX_URLS``,
  ``MAX_BYTES``);
- a sitemap lists URLs under its own directory only (``/docs/sitemap.xml``
  lists ``/docs/...``), on its own host, unless the host's robots.txt names
  it (``location_base``).

What is beyond a limit is not read, and said (``Parsed.problems``): a
gzip body is decompressed up to ``MAX_BYTES`` and no further (a gzip bomb
costs 50 MB, not memory); the first ``MAX_URLS`` entries are taken. A body
that is no sitemap at all (an HTML page, XML of another kind, nothing
readable) is a ``SitemapError`` with its reason. XML is read by Scrapy's
``Sitemap`` (lxml's incremental parser with entities not resolved, as
Scrapy's ``SitemapSpider`` reads it); robots.txt's ``Sitemap:`` lines by
Scrapy's ``sitemap_urls_from_robots``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from datetime import datetime, timezone

from scrapy.utils.sitemap import Sitemap, sitemap_urls_from_robots

from crawler.recrawl.change import CHANGEFREQ_SECONDS
from crawler.scope.urls import InvalidURL, host_of, normalize

__all__ = ["MAX_BYTES", "MAX_URLS", "Entry", "Parsed", "SitemapError", "gunzip_bounded",
           "location_base", "parse_lastmod", "parse_sitemap", "robots_sitemaps", "under"]

MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024
MAX_URL_CHARS = 8192
# robots.txt lines read for Sitemap: (a robots.txt naming more is cut).
MAX_ROBOTS_SITEMAPS = 100


class SitemapError(ValueError):
    """A body that is no sitemap; the message says why."""


@dataclass(frozen=True, slots=True)
class Entry:
    url: str  # normalised
    lastmod: float | None = None  # unix seconds
    changefreq: str | None = None  # one of CHANGEFREQ_SECONDS


@dataclass(slots=True)
class Parsed:
    kind: str  # "urlset", "index" or "text"
    entries: list[Entry] = field(default_factory=list)
    listed: int = 0  # <loc>s (lines) read, within MAX_URLS
    invalid: int = 0  # not a URL, or not http(s)
    off_location: int = 0  # outside the location the sitemap may list
    problems: list[str] = field(default_factory=list)  # limits reached: what was not read


def gunzip_bounded(data: bytes, limit: int = MAX_BYTES) -> tuple[bytes, bool]:
    """``data`` decompressed (gzip) up to ``limit`` bytes, and whether there
    was more. A truncated or corrupt stream gives what decompressed."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out: list[bytes] = []
    size = 0
    pending = data
    try:
        while pending and size <= limit:
            chunk = d.decompress(pending, 1 << 20)
            pending = d.unconsumed_tail
            out.append(chunk)
            size += len(chunk)
            if d.eof:
                break
            if not chunk and not pending:
                break
    except zlib.error:
        if not out:
            raise SitemapError("not a readable gzip file") from None
    body = b"".join(out)
    return body[:limit], size > limit


def parse_lastmod(value: str | None) -> float | None:
    """A W3C datetime (``2024``, ``2024-05``, ``2024-05-01``,
    ``2024-05-01T10:00:00+02:00``, with ``Z``) as unix seconds; None if
    it is none of those (or is past the year 9999)."""
    text = (value or "").strip()
    if not text or len(text) > 40:
        return None
    if len(text) == 4 and text.isdigit():
        text += "-01-01"
    elif len(text) == 7 and text[4] == "-":
        text += "-01"
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def location_base(sitemap_url: str, named: bool) -> str:
    """What a sitemap's URLs must start with (scheme and path aside from
    the host, compared without the scheme): its host's root when robots.txt
    names it, else its own directory."""
    rest = sitemap_url.split("://", 1)[1]
    if named:
        return rest.split("/", 1)[0] + "/"
    return rest.rsplit("/", 1)[0] + "/"


def under(url: str, base: str) -> bool:
    """Whether the normalised ``url`` lies at or below ``base`` (``location_base``)."""
    rest = url.split("://", 1)[1]
    return rest.startswith(base) or rest + "/" == base


def robots_sitemaps(body: bytes, robots_url: str) -> list[str]:
    """The normalised URLs robots.txt names on ``Sitemap:`` lines (relative
    ones against robots.txt's own URL), at most ``MAX_ROBOTS_SITEMAPS``;
    lines that are no http(s) URL are skipped."""
    out: list[str] = []
    for raw in sitemap_urls_from_robots(body, base_url=robots_url):
        try:
            url = normalize(raw)
        except InvalidURL:
            continue
        if url not in out:
            out.append(url)
        if len(out) >= MAX_ROBOTS_SITEMAPS:
            break
    return out


def _looks_html(head: bytes) -> bool:
    h = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    return h.startswith((b"<!doctype html", b"<html")) or b"<html" in h[:512] or b"<body" in h[:1024]


def parse_sitemap(body: bytes, url: str, named: bool, *, max_urls: int = MAX_URLS,
                  max_bytes: int = MAX_BYTES) -> Parsed:
    """What the sitemap at ``url`` (normalised) lists, ``named`` by its
    host's robots.txt or not. ``SitemapError`` when the body is no sitemap."""
    problems: list[str] = []
    if body[:2] == b"\x1f\x8b":
        body, more = gunzip_bounded(body, max_bytes)
        if more:
            problems.append(f"more than {max_bytes // (1024 * 1024)} MB uncompressed: the first "
                            f"{max_bytes // (1024 * 1024)} MB read")
    elif len(body) > max_bytes:
        body = body[:max_bytes]
        problems.append(f"more than {max_bytes // (1024 * 1024)} MB: the first {max_bytes // (1024 * 1024)} MB read")
    head = body[:2048]
    if not head.strip():
        raise SitemapError("empty")
    if _looks_html(head):
        raise SitemapError("an HTML page, not a sitemap")
    base = location_base(url, named)
    host = host_of(url)
    parsed: Parsed
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
        parsed = _parse_xml(body, url, base, host, max_urls)
    else:
        parsed = _parse_text(body, url, base, host, max_urls)
    parsed.problems[:0] = problems
    return parsed


def _take(parsed: Parsed, loc: str, sitemap_url: str, base: str, host: str,
          lastmod: str | None = None, changefreq: str | None = None) -> None:
    loc = loc.strip()
    try:
        if len(loc) > MAX_URL_CHARS:
            raise InvalidURL("too long")
        url = normalize(loc)  # the protocol's URLs are absolute
    except InvalidURL:
        parsed.invalid += 1
        return
    if host_of(url) != host or not under(url, base):
        parsed.off_location += 1
        return
    freq = (changefreq or "").strip().lower()
    parsed.entries.append(Entry(url, parse_lastmod(lastmod), freq if freq in CHANGEFREQ_SECONDS else None))


def _parse_xml(body: bytes, url: str, base: str, host: str, max_urls: int) -> Parsed:
    try:
        sitemap = Sitemap(body)
    except Exception as exc:  # lxml's errors, or no element at all
        raise SitemapError(f"not readable as XML ({type(exc).__name__})") from None
    kind = {"urlset": "urlset", "sitemapindex": "index"}.get(sitemap.type)
    if kind is None:
        raise SitemapError(f"XML whose root is <{str(sitemap.type)[:40]}>, not <urlset> or <sitemapindex>")
    parsed = Parsed(kind)
    try:
        for d in sitemap:
            if parsed.listed >= max_urls:
                parsed.problems.append(f"more than {max_urls:,} URLs: the first {max_urls:,} read")
                break
            parsed.listed += 1
            _take(parsed, str(d.get("loc") or ""), url, base, host, d.get("lastmod"), d.get("changefreq"))
    except Exception as exc:  # a recovering parser that gives up part way: keep what was read
        parsed.problems.append(f"XML unreadable after {parsed.listed} entries ({type(exc).__name__})")
    return parsed


def _parse_text(body: bytes, url: str, base: str, host: str, max_urls: int) -> Parsed:
    parsed = Parsed("text")
    text = body.decode("utf-8", "replace")
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if parsed.listed >= max_urls:
            parsed.problems.append(f"more than {max_urls:,} URLs: the first {max_urls:,} read")
            break
        parsed.listed += 1
        _take(parsed, line, url, base, host)
    if parsed.listed and not parsed.entries and parsed.invalid == parsed.listed:
        raise SitemapError("neither XML nor a list of URLs")
    return parsed
