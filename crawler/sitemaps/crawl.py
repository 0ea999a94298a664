"""Sitemaps in a crawl: found through robots.txt, read one file at a time
per site, their URLs queued like links (on by default; ``-a sitemaps=0``
turns them off for the crawl, recorded in its meta like its rules).

- **Found**: the first time a worker reads a host's robots.txt (fetched or
  from the cluster's cache: ``ROBOTS_READ``), the ``Sitemap:`` lines it
  names, or ``/sitemap.xml`` where it names none (with ``ROBOTSTXT_OBEY``
  off, ``/sitemap.xml`` of each host a page comes from). A sitemap out of
  the crawl's scope is not read (``sitemap/off_scope``); under ``-a
  scope=prefix`` a sitemap on a host of the prefixes is read wherever its
  path (``Follower.sitemap_in_scope``: a site's sitemaps sit at its root),
  and the prefix keeps the URLs it lists to those under it.
- **Read one at a time**: a site's files wait in the frontier
  (``crawler/frontier/sitemapqueue.py``) and the next is queued only once
  the one before is read, behind its URLs: a sitemap of a million URLs
  enters the site's queue a file (at most 50,000 URLs) at a time, and a
  worker holds one file's URLs at most (queued 1,000 at a time). A
  sitemap is fetched like a page: leased, polite, retried, robots.txt
  obeyed; its fetch is not counted as a page.
- **What enters the frontier**: the URLs a file lists within its location
  (``crawler/sitemaps/parse.py``), in the crawl's scope and allowed by its
  URL rules, at depth 1 with the sitemap as referer; the dedup keeps each
  URL to one fetch. In a focused crawl each is judged by its URL and its
  siblings as a link without an anchor (``Follower.listed_links``), so a
  sitemap brings a focused crawl only the URLs that look on topic. Index files add their files (``SITEMAP_MAX_DEPTH``
  levels of indexes at most, ``SITEMAP_MAX_FILES`` files a site).
- **Stored**: each taken URL's ``lastmod`` and ``changefreq``, with the
  sitemap that listed it (``SitemapItem``); the stores mark the pages
  ``in_sitemap`` whichever comes first, the page or the listing, and a
  page fetched once takes its first re-crawl interval from them
  (``crawler.recrawl.change.sitemap_interval``).
- **Errors**: a file that is no sitemap (HTML, other XML, unreadable), a
  limit passed (URLs, size, nesting, files), a fetch that failed: the
  sitemap's acknowledgement is an error with the reason (``scrapy status``
  lists it; counted as ``sitemap_errors``, not as a page error) and what
  was readable is kept. A ``/sitemap.xml`` that robots.txt did not name
  and that is not there (404, 410) is no error anywhere
  (``sitemap/absent``): the errback's own output says whether its lease is
  an error, not the failure Scrapy hands it. A file robots.txt names that
  is not there is a failure; one robots.txt forbids is skipped
  (``sitemap/robots_forbidden``), no error.

Settings: ``SITEMAP_MAX_DEPTH`` (index levels, default 2),
``SITEMAP_MAX_FILES`` (files a site, default 1,000). Stats:
``sitemap/read``, ``sitemap/urls_listed``, ``sitemap/urls_taken``,
``sitemap/urls_off_location``, ``sitemap/urls_invalid``,
``sitemap/urls_out_of_scope``, ``sitemap/off_scope``, ``sitemap/absent``,
``sitemap/failed``, ``sitemap/robots_forbidden``, ``sitemap/refused_files``,
``sitemap/redirected``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis
from scrapy import Request
from scrapy.spidermiddlewares.httperror import HttpError

from crawler.failures import failure_reason, robots_forbidden
from crawler.frontier.sitemapqueue import SitemapFile
from crawler.reading.redirects import REDIRECT_STATUSES, location_target
from crawler.requestmeta import SITEMAP, SITEMAP_NAMED
from crawler.sitemaps.parse import Entry, SitemapError, parse_sitemap, robots_sitemaps
from crawler.scope.urls import InvalidURL, host_of, normalize, queue_key

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

    from crawler.following.follow import Follower

logger = logging.getLogger(__name__)

__all__ = ["SITEMAP_META", "SitemapItem", "Sitemaps", "is_sitemap_request"]

# request.meta keys of a sitemap fetch: its level (0: named by robots.txt or
# /sitemap.xml; one more below each index) and whether robots.txt named it.
SITEMAP_META, NAMED_META = SITEMAP, SITEMAP_NAMED  # the registry's names; these kept for importers
ITEM_ENTRIES = 1000  # taken URLs a SitemapItem carries to the store


def is_sitemap_request(meta: dict[str, Any]) -> bool:
    return SITEMAP in meta


@dataclass(slots=True, repr=False)
class SitemapItem:
    """What a sitemap listed, for the store (``entries``: ``[url, lastmod,
    changefreq]``), or (``state`` "E") why a sitemap failed: its
    acknowledgement carries the reason."""

    sitemap: str
    entries: list[list[Any]] = field(default_factory=list)
    state: str = "C"
    error: str | None = None

    def __repr__(self) -> str:
        return f"<SitemapItem {self.sitemap} entries={len(self.entries)} state={self.state}>"

    def to_dict(self) -> dict[str, Any]:
        return {"_sitemap": self.sitemap, "entries": self.entries}


class Sitemaps:
    """One worker's part in reading the crawl's sitemaps (see the module)."""

    def __init__(self, crawler: Crawler, follower: Follower, spider: Any) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.follower = follower
        self.spider = spider
        self.enabled = False  # the crawl's choice, settled when the site spider starts
        self.max_depth = max(0, settings.getint("SITEMAP_MAX_DEPTH"))
        self.max_files = max(0, settings.getint("SITEMAP_MAX_FILES"))
        self.queue_by = settings.get("FRONTIER_QUEUE_BY")
        self.obey_robots = settings.getbool("ROBOTSTXT_OBEY")
        self._hosts: set[str] = set()

    @property
    def stats(self) -> Any:
        return self.crawler.stats

    def _queue(self) -> Any:
        return self.follower.frontier.sitemaps

    def _site(self, url: str) -> str:
        return queue_key(host_of(url), self.queue_by)

    # -- found -------------------------------------------------------------------------
    def robots_read(self, url: str, body: bytes) -> None:
        """A host's robots.txt (at ``url``) was read by this worker: queue its
        sitemaps (``ROBOTS_READ``'s receiver; once a host a worker)."""
        if not self.enabled:
            return
        try:
            robots_url = normalize(url)
        except InvalidURL:
            return
        host = robots_url.split("/", 3)[2]
        if host in self._hosts:
            return
        self._hosts.add(host)
        named = robots_sitemaps(body, robots_url)
        files = [SitemapFile(u, 0, True) for u in named] or [
            SitemapFile(robots_url.rsplit("/", 1)[0] + "/sitemap.xml", 0, False)]
        by_site: dict[str, list[SitemapFile]] = {}
        for f in files:
            if not self.follower.sitemap_in_scope(f.url):
                self.stats.inc_value("sitemap/off_scope")
                continue
            by_site.setdefault(self._site(f.url), []).append(f)
        engine = self.crawler.engine
        for site, group in by_site.items():
            request = self._add_and_next(site, group)
            if request is not None and engine is not None:
                engine.crawl(request)

    def page_seen(self, url: str) -> None:
        """A page was fetched: without robots.txt (``ROBOTSTXT_OBEY`` off),
        its host's ``/sitemap.xml`` is read once."""
        if not self.obey_robots:
            self.robots_read(url.split("/", 3)[0] + "//" + url.split("/", 3)[2] + "/robots.txt", b"")

    def _add_and_next(self, site: str, files: list[SitemapFile]) -> Request | None:
        queue = self._queue()
        try:
            refused = queue.add(site, files, self.max_files)
            nxt = queue.next(site)
        except redis.RedisError as exc:
            logger.warning("Could not queue the sitemaps of %(site)s: %(exc)s", {"site": site, "exc": exc})
            return None
        if refused:
            self.stats.inc_value("sitemap/refused_files", refused)
            logger.warning("Site %(site)s has more than %(n)d sitemap files (SITEMAP_MAX_FILES): %(refused)d "
                           "not read", {"site": site, "n": self.max_files, "refused": refused})
        return self._request(nxt) if nxt is not None else None

    def _request(self, f: SitemapFile) -> Request:
        return Request(f.url, callback=self.spider.parse_sitemap, errback=self.spider.sitemap_failed,
                       meta={SITEMAP: f.level, SITEMAP_NAMED: int(f.named)})

    def _finish(self, url: str) -> Iterator[Request]:
        """``url`` is read or given up on: the site's next file."""
        site = self._site(url)
        try:
            self._queue().done(site, url)
            nxt = self._queue().next(site)
        except redis.RedisError as exc:
            # Raised: the lease is not acknowledged, the file is read again.
            raise RuntimeError(f"could not mark sitemap {url} read: {exc}") from exc
        if nxt is not None:
            yield self._request(nxt)

    # -- read --------------------------------------------------------------------------
    def parse(self, response: Response) -> Iterator[Any]:
        url = normalize(response.url)
        level = int(response.meta.get(SITEMAP) or 0)
        named = bool(response.meta.get(SITEMAP_NAMED))
        if response.status in REDIRECT_STATUSES:
            yield from self._redirect(response, url, level, named)
            return
        try:
            parsed = parse_sitemap(response.body, url, named)
        except SitemapError as exc:
            yield from self._failed(url, str(exc))
            return
        self.stats.inc_value("sitemap/read")
        listed = parsed.listed if parsed.kind != "index" else 0  # page URLs, not files
        self.stats.inc_value("sitemap/urls_listed", listed)
        self.stats.inc_value("sitemap/urls_off_location", parsed.off_location)
        self.stats.inc_value("sitemap/urls_invalid", parsed.invalid)
        problems = list(parsed.problems)
        taken: list[Entry] = []
        if parsed.kind == "index":
            problems += self._add_children(url, parsed.entries, level, named)
        else:
            for e in parsed.entries:
                if not self.follower.in_scope(e.url):
                    self.stats.inc_value("sitemap/urls_out_of_scope")
                    continue
                excluded = self.follower.allows(e.url)
                if excluded is not None:
                    self.stats.inc_value(f"rules/{excluded}")
                    continue
                taken.append(e)
            self.stats.inc_value("sitemap/urls_taken", len(taken))
            yield from self.follower.listed_links([e.url for e in taken], url)
            for start in range(0, len(taken), ITEM_ENTRIES):
                yield SitemapItem(url, [[e.url, e.lastmod, e.changefreq] for e in taken[start:start + ITEM_ENTRIES]])
        try:
            self._queue().count(self._site(url), read=1, listed=listed, taken=len(taken))
        except redis.RedisError:
            pass  # counters only
        if problems:
            logger.warning("Sitemap %(url)s: %(problems)s", {"url": url, "problems": "; ".join(problems)})
            yield SitemapItem(url, state="E", error=_reason(url, "; ".join(problems)))
        yield from self._finish(url)

    def _add_children(self, url: str, children: list[Entry], level: int, named: bool) -> list[str]:
        if level + 1 > self.max_depth:
            return [f"a sitemap index {level + 1} levels below robots.txt (SITEMAP_MAX_DEPTH is "
                    f"{self.max_depth}): its {len(children)} files not read"]
        by_site: dict[str, list[SitemapFile]] = {}
        for e in children:
            if e.url == url:
                continue  # an index that names itself
            if not self.follower.sitemap_in_scope(e.url):
                self.stats.inc_value("sitemap/off_scope")
                continue
            by_site.setdefault(self._site(e.url), []).append(SitemapFile(e.url, level + 1, named))
        problems = []
        for site, files in by_site.items():
            refused = self._queue().add(site, files, self.max_files)
            if refused:
                self.stats.inc_value("sitemap/refused_files", refused)
                problems.append(f"{refused} files of site {site} not read (more than SITEMAP_MAX_FILES, "
                                f"{self.max_files})")
        return problems

    def _redirect(self, response: Response, url: str, level: int, named: bool) -> Iterator[Any]:
        location = response.headers.get(b"Location")
        target = location_target(location.decode("latin-1") if location else None, url)
        if target is None or not self.follower.sitemap_in_scope(target):
            yield from self._failed(url, "redirected out of the crawl's scope, or nowhere")
            return
        self.stats.inc_value("sitemap/redirected")
        # The target waits with the site's other files.
        site = self._site(target)
        self._queue().add(site, [SitemapFile(target, level, named and host_of(target) == host_of(url))],
                          self.max_files)
        yield from self._finish(url)
        if site != self._site(url):
            request = self._add_and_next(site, [])
            if request is not None:
                yield request

    def _failed(self, url: str, why: str) -> Iterator[Any]:
        self.stats.inc_value("sitemap/failed")
        logger.warning("Sitemap %(url)s: %(why)s", {"url": url, "why": why})
        yield SitemapItem(url, state="E", error=_reason(url, why))
        yield from self._finish(url)

    def failed(self, failure: Failure) -> Iterator[Any]:
        """The errback of a sitemap fetch (after its retries)."""
        request = failure.request  # type: ignore[attr-defined]
        url = normalize(request.url)
        if robots_forbidden(failure):
            self.stats.inc_value("sitemap/robots_forbidden")
            yield from self._finish(url)
            return
        response = getattr(failure.value, "response", None)
        status = response.status if isinstance(failure.value, HttpError) and response is not None else None
        if status in (404, 410) and not request.meta.get(SITEMAP_NAMED) and not request.meta.get(SITEMAP):
            self.stats.inc_value("sitemap/absent")
            yield from self._finish(url)
            return
        yield from self._failed(url, failure_reason(failure))


def _reason(url: str, why: str) -> str:
    """A sitemap's error as its acknowledgement carries it (``scrapy status``
    counts errors by the words before the first colon: "sitemap")."""
    return f"sitemap: {why} ({url})"[:500]
