"""Spider ``site``: crawl breadth-first inside each seed's site.

Arguments (``-a``):

- ``seeds``: comma-separated URLs; ``seeds_file``: a file of URLs, one a
  line, ``#`` starts a comment. A bad seed is reported on one line and
  skipped; seeds given but none valid stop the crawl with an error. Without
  any seed the worker joins the crawl already in the frontier.
- ``scope``: ``site`` (default: the seed's registrable domain), ``host``
  (the seed's host only) or ``any`` (follow links anywhere).
- ``follow``: ``index`` (default: follow the links of index pages only) or
  ``all`` (follow the links of information pages too).

Settings: ``CLASSIFIER_THRESHOLD``, ``STORE_MAX_TEXT_CHARS``; Scrapy's
``DEPTH_LIMIT`` as usual. Queueing, dedup, politeness and the per-site cap
belong to the frontier (``crawler.frontier.scheduler``).

Duplicates: the main text's SimHash and content hash are checked against
the cluster's index (``SIMHASH_MAX_DISTANCE``, texts shorter than
``SIMHASH_MIN_CHARS`` are not fingerprinted); a copy is stored with
``dup_of`` and its links are not followed.

Stats: ``classifier/page_type/<type>``, ``robots/noindex``,
``simhash/exact_duplicate``, ``simhash/near_duplicate``, ``simhash/skipped_short``,
``robots/nofollow``, ``frontier/hrefs_found``
(every ``<a href>``), ``frontier/links_found`` (distinct valid links per
page), ``frontier/links_new`` (links never seen before: Requests built).

Why links are deduplicated here: a documentation page carries ~180 links,
almost all seen before. Building a Request, running it through the spider
middlewares and fingerprinting it only for the dupefilter to drop it is most
of plain Scrapy's CPU time. The spider keeps the normalised URLs it has
scheduled (T-spider's URL cache, per worker) and builds Requests for new ones
only; the frontier's shared dedup in Redis stays behind it as the record for
the whole cluster, across restarts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import IGNORED_EXTENSIONS
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    ResponseDataLossError,
)
from twisted.internet.error import ConnectionRefusedError, DNSLookupError, TCPTimedOutError, TimeoutError

import redis

from crawler.classify import INDEX, INFO, classify
from crawler.crawldir import crawl_dir, crawl_name
from crawler.fingerprint import content_hash, signed, simhash
from crawler.frontier.connection import get_redis
from crawler.frontier.scheduler import frontier_of
from crawler.extract import analyze, parse_html, parse_robots_directives
from crawler.items import PageItem
from crawler.urls import SCOPES, InvalidURL, LinkResolver, host_of, normalize, site_of, url_site

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from typing_extensions import Self

logger = logging.getLogger(__name__)

FOLLOW_MODES = ("index", "all")
_IGNORED_SUFFIXES = tuple("." + ext for ext in IGNORED_EXTENSIONS)


def read_seeds(seeds: str | None, seeds_file: str | None) -> list[str]:
    raw: list[str] = []
    if seeds:
        raw += [s for s in seeds.split(",") if s.strip()]
    if seeds_file:
        for line in Path(seeds_file).read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                raw.append(line)
    return raw


class SiteSpider(Spider):
    name = "site"
    # The only callbacks a frontier entry may name (crawler.frontier.serialize).
    frontier_callbacks = frozenset({"parse", "errback"})

    def __init__(
        self,
        seeds: str | None = None,
        seeds_file: str | None = None,
        scope: str = "site",
        follow: str = "index",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if scope not in SCOPES:
            raise ValueError(f"-a scope={scope!r} is not one of {', '.join(SCOPES)}")
        if follow not in FOLLOW_MODES:
            raise ValueError(f"-a follow={follow!r} is not one of {', '.join(FOLLOW_MODES)}")
        self.scope = scope
        self.follow_all = follow == "all"
        self.seed_urls: list[str] = []
        raw_seeds = read_seeds(seeds, seeds_file)
        for raw in raw_seeds:
            try:
                self.seed_urls.append(normalize(raw))
            except InvalidURL as exc:
                logger.error("Ignoring seed %(seed)r: %(reason)s", {"seed": raw.strip(), "reason": exc})
        if raw_seeds and not self.seed_urls:
            raise ValueError(
                "no valid seed: give -a seeds=URL[,URL...] or -a seeds_file=PATH "
                "with absolute http:// or https:// URLs (or no seed at all, to join a running crawl)"
            )
        self.seed_urls = list(dict.fromkeys(self.seed_urls))
        self.seed_hosts = frozenset(host_of(u) for u in self.seed_urls)
        self.seed_sites = frozenset(site_of(h) for h in self.seed_hosts)
        self._resolver = LinkResolver()
        self.classifier_threshold: float | None = None
        self.max_text_chars = 1_000_000
        self.simhash_max_distance = 3
        self.simhash_min_chars = 200
        self._seen: set[str] = set()
        self._scope_client: redis.Redis | None = None
        self._scope_checked = 0.0
        self._scope_reloaded_for: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        threshold = settings.get("CLASSIFIER_THRESHOLD")
        spider.classifier_threshold = None if threshold in (None, "") else float(threshold)
        spider.max_text_chars = settings.getint("STORE_MAX_TEXT_CHARS")
        spider.simhash_max_distance = settings.getint("SIMHASH_MAX_DISTANCE")
        spider.simhash_min_chars = settings.getint("SIMHASH_MIN_CHARS")
        return spider

    def _in_scope(self, url: str) -> bool:
        if self.scope == "any" or self._in_scope_local(url):
            return True
        # Seeds given to other workers widen the scope of the whole crawl.
        if time.monotonic() - self._scope_checked > 5.0:
            self._load_scope()
            return self._in_scope_local(url)
        return False

    def _learn_scope_from(self, url: str) -> None:
        """A page the frontier handed us belongs to the crawl's scope: when its
        site is new to this worker (seeds another worker brought), reload the
        scope now, before its links are judged; waiting for the periodic
        refresh would drop them, and with them URLs nobody else may find."""
        if self.scope == "any" or self._in_scope_local(url):
            return
        key = host_of(url) if self.scope == "host" else url_site(url)
        if key not in self._scope_reloaded_for:
            self._scope_reloaded_for.add(key)
            self._load_scope()

    def _in_scope_local(self, url: str) -> bool:
        if self.scope == "host":
            return host_of(url) in self.seed_hosts
        return url_site(url) in self.seed_sites

    def _load_scope(self) -> None:
        """Share this worker's seed sites and hosts with the crawl, and learn
        those of the others (a worker without seeds joins with theirs)."""
        self._scope_checked = time.monotonic()
        client = self._scope_client
        if client is None:
            return
        prefix = "{" + crawl_name(self.crawler.settings, self.name) + "}:"
        try:
            pipe = client.pipeline(transaction=False)
            if self.seed_sites:
                pipe.sadd(prefix + "scope:sites", *self.seed_sites)
                pipe.sadd(prefix + "scope:hosts", *self.seed_hosts)
            pipe.smembers(prefix + "scope:sites")
            pipe.smembers(prefix + "scope:hosts")
            *_, sites, hosts = pipe.execute()
        except redis.RedisError as exc:
            logger.warning("Could not read the crawl's scope from Redis: %(exc)s", {"exc": exc},
                           extra={"spider": self})
            return
        self.seed_sites = self.seed_sites | {v.decode() for v in sites}
        self.seed_hosts = self.seed_hosts | {v.decode() for v in hosts}

    def _request(self, url: str, referer: str | None = None) -> Request:
        return Request(url, callback=self.parse, errback=self.errback,
                       meta={"referer_url": referer} if referer else None)

    async def start(self) -> AsyncIterator[Any]:
        settings = self.crawler.settings
        self._scope_client = get_redis(settings, crawl_dir(settings))
        self._load_scope()
        if not self.seed_urls:
            logger.info("No seeds: joining crawl %(crawl)s (scope: %(sites)s)",
                        {"crawl": crawl_name(settings, self.name), "sites": ", ".join(sorted(self.seed_sites))},
                        extra={"spider": self})
        for url in self.seed_urls:
            if url in self._seen:
                continue
            self._seen.add(url)
            yield self._request(url)

    # -- responses
    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        url = normalize(response.url)
        self._seen.add(url)
        self._learn_scope_from(url)
        depth = int(response.meta.get("depth", 0))
        item = PageItem(
            url=url, site=url_site(url), depth=depth, status=response.status,
            fetched_at=time.time(),
            etag=_header(response, b"ETag"), last_modified=_header(response, b"Last-Modified"),
            referer=response.meta.get("referer_url"),
        )
        robots = parse_robots_directives(
            ",".join(v.decode("latin-1") for v in response.headers.getlist(b"X-Robots-Tag"))
        )
        stats = self.crawler.stats
        if not isinstance(response, TextResponse) or not _is_html(response):
            item.page_type = INFO
            item.encoding = getattr(response, "encoding", None)
            stats.inc_value(f"classifier/page_type/{INFO}")
            if "noindex" not in robots:
                yield item
            return

        try:
            text = response.text
        except (UnicodeError, LookupError) as exc:
            item.state, item.error = "E", f"undecodable body: {exc}"
            yield item
            return
        page = analyze(parse_html(text))
        robots |= page.robots
        item.encoding = response.encoding
        item.title = page.title
        item.text = page.text[: self.max_text_chars]
        item.abstract = page.abstract
        item.page_type = (
            classify(url, page, self.classifier_threshold) if page.features else INFO
        )
        stats.inc_value(f"classifier/page_type/{item.page_type}")

        base = url
        if page.base_href:
            try:
                base = normalize(page.base_href, url)
            except InvalidURL:
                pass  # a broken <base href> is ignored, as browsers do
        resolve = self._resolver.resolve
        out: dict[str, str] = {}
        for href, anchor in page.links:
            link = resolve(base, href)
            if link is not None and link not in out and link != url:
                out[link] = anchor
        item.links = [{"url": u, "anchor": a} for u, a in out.items()]
        stats.inc_value("frontier/hrefs_found", len(page.links))
        stats.inc_value("frontier/links_found", len(out))

        duplicate = self._check_duplicate(item)
        if "noindex" in robots:
            stats.inc_value("robots/noindex")
        else:
            yield item
        if duplicate:
            return  # a copy's links only repeat work (the textbook's reason)
        if "nofollow" in robots:
            stats.inc_value("robots/nofollow")
            return
        if item.page_type != INDEX and not self.follow_all:
            return
        yield from self._follow(out, url)

    def _check_duplicate(self, item: PageItem) -> bool:
        """Fingerprint the page and ask the cluster's index whether it is a
        copy, before any of its links reach the frontier."""
        if len(item.text) < self.simhash_min_chars:
            self.crawler.stats.inc_value("simhash/skipped_short")
            return False
        fp = simhash(item.text)
        item.simhash = signed(fp)
        item.content_hash = content_hash(item.text)
        frontier = frontier_of(self.crawler)
        if frontier is None:
            return False
        try:
            kind, first, distance = frontier.near_duplicate(
                item.url, item.content_hash, fp, self.simhash_max_distance)
        except redis.RedisError as exc:
            logger.warning("Duplicate check failed for %(url)s: %(exc)s", {"url": item.url, "exc": exc},
                           extra={"spider": self})
            return False
        if kind == "new":
            return False
        item.dup_of = first
        self.crawler.stats.inc_value(f"simhash/{kind}_duplicate")
        logger.debug("%(url)s is a%(n)s %(kind)s duplicate of %(first)s (distance %(d)d)",
                     {"url": item.url, "n": "n" if kind == "exact" else "", "kind": kind,
                      "first": first, "d": distance}, extra={"spider": self})
        return True

    def _follow(self, links: Iterable[str], referer: str) -> Iterator[Request]:
        seen = self._seen
        new = 0
        for link in links:
            if link in seen:
                continue
            seen.add(link)
            if not self._in_scope(link) or link.lower().split("?", 1)[0].endswith(_IGNORED_SUFFIXES):
                continue
            new += 1
            yield self._request(link, referer)
        self.crawler.stats.inc_value("frontier/links_new", new)

    def errback(self, failure: Failure) -> Iterator[PageItem]:
        request: Request = failure.request  # type: ignore[attr-defined]
        exc = failure.value
        if isinstance(exc, IgnoreRequest) and not isinstance(exc, HttpError):
            # Not fetched at all (robots.txt, offsite, ...): not a page, not an
            # error of the site; the middleware that dropped it counted it.
            return
        url = normalize(request.url)
        response = getattr(failure.value, "response", None)
        yield PageItem(
            url=url, site=url_site(url), depth=int(request.meta.get("depth", 0)),
            state="E", status=response.status if response is not None else None,
            fetched_at=time.time(), error=_reason(failure),
            referer=request.meta.get("referer_url"),
        )


def _header(response: Response, name: bytes) -> str | None:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None


def _is_html(response: TextResponse) -> bool:
    ctype = (response.headers.get(b"Content-Type") or b"text/html").split(b";")[0].strip().lower()
    return ctype in (b"text/html", b"application/xhtml+xml", b"text/plain") or not ctype


def _reason(failure: Failure) -> str:
    exc = failure.value
    if isinstance(exc, HttpError):
        return f"HTTP {exc.response.status}"
    if isinstance(exc, (DNSLookupError, CannotResolveHostError)):
        return "DNS lookup failed"
    if isinstance(exc, (TimeoutError, TCPTimedOutError, DownloadTimeoutError)):
        return "timeout"
    if isinstance(exc, (ConnectionRefusedError, DownloadConnectionRefusedError)):
        return "connection refused"
    if isinstance(exc, DownloadCancelledError):
        # Scrapy cancels a download that exceeds DOWNLOAD_MAXSIZE (and those
        # still running when a crawl is stopped hard).
        return "download cancelled (over DOWNLOAD_MAXSIZE, or crawl stopped)"
    if isinstance(exc, (DownloadFailedError, ResponseDataLossError)):
        return f"connection lost ({type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"[:500]
