"""Spider ``recrawl``: revisit the stored pages that are due.

    scrapy crawl recrawl [-a site=SITE] [-a all=1] [-a limit=N] [-s RECRAWL_CONTINUOUS=1]

It revisits the crawl ``CRAWL_NAME`` (default ``site``: the crawl that
``scrapy crawl site`` made) through the same frontier, duplicate index and
store as that crawl: leases, politeness, retries and workers joining work
as they do there. Each stored page (state C) whose ``next_fetch_at`` has
passed is queued once, whichever workers find it due (the frontier
deduplicates a visit by page and due time), with the validators it was
stored with (``If-None-Match``, ``If-Modified-Since``): a 304 costs no body.
What a visit finds is merged with the stored version as it is written
(``crawler/recrawl.py``): unchanged, trivially changed, changed, gone or
moved, and the page's next visit follows from its change history. Links
found on revisited pages are followed as in a crawl: pages not seen before
are new pages of the crawl.

``RECRAWL_HEAD``: a page stored without validators (no ``ETag``, no
``Last-Modified``: a conditional GET is impossible) but with a
``Content-Length`` is first asked with a HEAD, when it is at least
``RECRAWL_HEAD_MIN_UNCHANGED`` likely to be unchanged (``exp(-rate *
elapsed)`` from its estimated change rate); the same length (and no newer
``Last-Modified``) counts as unchanged, anything else (another length, an
error, a server refusing HEAD) sends the GET. Off by default: a HEAD takes
a politeness slot of its own, so it saves bytes but never time
(bench/RESULTS.md, "HEAD before GET").

``-a site=`` revisits one site; ``-a all=1`` every stored page, due or
not; ``-a limit=N`` at most N pages (soonest due first).
``RECRAWL_CONTINUOUS``: the workers keep running, looking for pages that
fall due every ``RECRAWL_POLL_INTERVAL`` seconds, so a cluster keeps a
corpus fresh indefinitely (``scrapy stop`` ends it).
"""

from __future__ import annotations

import email.utils
import logging
import math
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider
from scrapy.http import Response
from twisted.internet.task import LoopingCall

from crawler.chain import record
from crawler.config import ConfigError
from crawler.crawldir import crawl_name
from crawler.progress import duration
from crawler.requestmeta import DEPTH, DUP_ORDER, HEAD_LENGTH, HEAD_SINCE, REFERER_URL, REVISIT, WARC_ORIGINAL
from crawler.responses import content_length
from crawler.spiders.arguments import RUNNER_ARGUMENTS
from crawler.spiders.site import SiteSpider
from crawler.store import StoreNotFound, open_store
from crawler.urls import InvalidURL, normalize
from crawler.warc.service import WarcService

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure
    from typing_extensions import Self

    from crawler.store import Store

logger = logging.getLogger(__name__)

__all__ = ["RecrawlSpider"]

_TRUE = ("1", "true", "yes", "on")


class RecrawlSpider(SiteSpider):
    name = "recrawl"
    arguments = ("site", "all", "limit", "follow")
    frontier_callbacks = frozenset({"parse", "parse_head", "parse_sitemap"})
    frontier_errbacks = frozenset({"errback", "head_failed", "sitemap_failed"})
    frontier_head_callbacks = frozenset({"parse_head"})
    revisits = True
    # Set in from_crawler: HTTPERROR_ALLOWED_CODES and 304.
    handle_httpstatus_list: list[int]

    @classmethod
    def check_arguments(  # other arguments: called by keyword (-a NAME=)
            cls, site: str | None = None, all: str | None = None,  # noqa: A002 (-a all=1)
            limit: str | None = None, follow: str | None = None,
            **kwargs: Any) -> tuple[list[str], list[tuple[str, str]]]:
        # A re-crawl revisits stored pages: no topic, and the crawl's own scope
        # and URL rules (recorded in its meta when it started).
        theirs = sorted(k for k in kwargs if k in ("seeds", "seeds_file", "scope", "topic", "allow", "deny", "rules"))
        if theirs:
            raise ConfigError(f"unknown spider argument -a {theirs[0]}; spider {cls.name!r} takes "
                              f"{', '.join('-a ' + a for a in cls.arguments)}")
        super().check_arguments(None, None, None, follow, **kwargs)
        if all is not None and all.strip().lower() not in (*_TRUE, "0", "false", "no", "off", ""):
            raise ConfigError(f"-a all={all!r}: give 1 (every stored page, due or not) or 0")
        if limit is not None:
            try:
                if int(limit) < 1:
                    raise ValueError
            except ValueError:
                raise ConfigError(f"-a limit={limit!r}: give a whole number of pages, at least 1") from None
        if site is not None and not site.strip():
            raise ConfigError("-a site= names no site: give a site as stored (e.g. example.org)")
        return [], []

    # A re-crawl joins its crawl's frontier as the crawl made it, and follows
    # links as the crawl does unless -a follow asks otherwise for this pass.
    frontier_order = None
    records_follow = False

    def __init__(self, site: str | None = None, all: str | None = None,  # noqa: A002
                 limit: str | None = None, follow: str | None = None, **kwargs: Any) -> None:
        self.check_arguments(site, all, limit, follow, **kwargs)
        super().__init__(None, None, None, follow, **{k: v for k, v in kwargs.items() if k in RUNNER_ARGUMENTS})
        self.only_site = site.strip().lower() if site else None
        self.every = all is not None and all.strip().lower() in _TRUE
        self.limit = int(limit) if limit else 0
        # Read from the crawler's settings in from_crawler (crawler/settings.py).
        self.continuous: bool
        self.poll_interval: float
        self.default_interval: float
        self.head: bool
        self.head_min_unchanged: float
        self._poll: LoopingCall | None = None
        self._store: Store | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        s = crawler.settings
        spider.continuous = s.getbool("RECRAWL_CONTINUOUS")
        spider.poll_interval = s.getfloat("RECRAWL_POLL_INTERVAL")
        spider.default_interval = s.getfloat("REVISIT_DEFAULT_INTERVAL")
        spider.head = s.getbool("RECRAWL_HEAD")
        spider.head_min_unchanged = s.getfloat("RECRAWL_HEAD_MIN_UNCHANGED")
        # A 304 reaches parse (a visit that succeeded), not the errback.
        spider.handle_httpstatus_list = [*s.getlist("HTTPERROR_ALLOWED_CODES"), 304]
        crawler.signals.connect(spider._idle, signal=signals.spider_idle)
        crawler.signals.connect(spider._closed, signal=signals.spider_closed)
        return spider

    # -- the pages due -------------------------------------------------------------
    def _open_store(self) -> Store:
        if self._store is None:
            name = crawl_name(self.crawler.settings, self.name)
            try:
                self._store = open_store(self.crawler.settings, name, create=False)
            except StoreNotFound as exc:
                raise ConfigError(f"nothing to revisit: {exc}. `scrapy crawl site -a seeds=...` "
                                  "makes the crawl first (same CRAWL_NAME, CRAWL_DIR or MONGO_URI)") from None
        return self._store

    def due_requests(self, now: float, every: bool = False, limit: int = 0) -> Iterator[Request]:
        """A request for each page due at ``now``, soonest due first."""
        store = self._open_store()
        outside: list[str] = []  # stored pages of sites this worker's scope does not know yet
        n = 0
        for page in store.due(now, self.default_interval, self.only_site, limit, every):
            try:
                url = normalize(str(page["url"]))
            except InvalidURL:
                continue  # written into the store by hand: not ours to fetch
            due = int(page["next_fetch_at"] or 0)
            if every:
                due = max(due, int(now))  # -a all=1 now: a visit of its own
            headers = {}
            if page.get("etag"):
                headers["If-None-Match"] = str(page["etag"])[:1000]
            if page.get("last_modified"):
                headers["If-Modified-Since"] = str(page["last_modified"])[:200]
            if not self.follower.covers(url):
                outside.append(url)
            n += 1
            meta: dict[str, Any] = {REVISIT: due, DEPTH: int(page.get("depth") or 0)}
            if page.get("dup_order"):
                meta[DUP_ORDER] = page["dup_order"]  # its first duplicate check (validated where read)
            if headers and page.get("warc_date") and page.get("warc_digest"):
                # A 304's revisit record names the stored response (crawler/warc/).
                meta[WARC_ORIGINAL] = [url, str(page["warc_date"]), str(page["warc_digest"])]
            length = page.get("content_length")
            if not headers and self.head and isinstance(length, int) and self._head_pays(page, now):
                self.crawler.stats.inc_value("recrawl/head")
                yield Request(url, method="HEAD", callback=self.parse_head, errback=self.head_failed,
                              meta={**meta, HEAD_LENGTH: length, HEAD_SINCE: int(page.get("fetched_at") or 0)})
                continue
            yield Request(url, callback=self.parse, errback=self.errback, headers=headers or None, meta=meta)
        if outside:
            self.follower.widen(outside)
        self.crawler.stats.inc_value("recrawl/due", n)

    def _head_pays(self, page: dict[str, Any], now: float) -> bool:
        """Whether the page is likely enough unchanged since it was fetched
        (Poisson changes at its estimated rate; a page of unknown rate at one
        change a REVISIT_DEFAULT_INTERVAL) for a HEAD to be worth its slot."""
        rate = page.get("change_rate")
        if not isinstance(rate, (int, float)) or rate < 0:
            rate = 1.0 / self.default_interval
        elapsed = max(0.0, now - float(page.get("fetched_at") or now))
        return math.exp(-rate * elapsed) >= self.head_min_unchanged

    def parse_head(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        """A HEAD's answer: the same Content-Length as stored (and no
        Last-Modified after the stored fetch) is taken as a 304 would be;
        anything else sends the GET."""
        request = response.request
        assert request is not None
        stats = self.crawler.stats
        if (200 <= response.status < 300 and content_length(response) == request.meta.get(HEAD_LENGTH)
                and not _modified_since(response, request.meta.get(HEAD_SINCE))):
            stats.inc_value("recrawl/head_unchanged")
            yield record.not_modified(self.crawler, response, WarcService.record_of(self.crawler, request))
            return
        stats.inc_value("recrawl/head_changed")
        yield self._get_after_head(request)

    def head_failed(self, failure: Failure) -> Iterator[Any]:
        """A HEAD that failed (refused with 405, 404, a timeout, ...): the
        GET decides, as it would have without the HEAD."""
        self.crawler.stats.inc_value("recrawl/head_failed")
        yield self._get_after_head(failure.request)  # type: ignore[attr-defined]

    head_failed.recovers = True  # type: ignore[attr-defined]  # not an error: the GET settles the page

    def _get_after_head(self, request: Request) -> Request:
        meta = {k: v for k, v in request.meta.items() if k in (REVISIT, DEPTH, REFERER_URL)}
        return Request(request.url, callback=self.parse, errback=self.errback, meta=meta)

    async def start(self) -> AsyncIterator[Any]:
        self.follower.load_scope()
        self.follow = self.follower.settle_policy()
        self.settle_rendering()  # a crawl that rendered its pages re-renders them
        now = time.time()
        store = self._open_store()
        if self.crawler.settings.getbool("REVISIT_IMPORTANCE"):
            # The textbook's order: in-degree and mirror degree of every
            # stored page, before the re-collection they weigh.
            began = time.monotonic()
            store.compute_degrees()
            logger.info("In-degree and mirror degree of the stored pages computed in %(s).1fs",
                        {"s": time.monotonic() - began}, extra={"spider": self})
        total = store.count_pages(site=self.only_site, state="C")
        where = f" on {self.only_site}" if self.only_site else ""
        cont = ("; polling for more every %gs (RECRAWL_CONTINUOUS)" % self.poll_interval
                if self.continuous else "")
        name = crawl_name(self.crawler.settings, self.name)
        follows = f"; links of changed pages followed as -a follow={self.follow}"
        if self.every:
            n = min(total, self.limit) if self.limit else total
            logger.info("Revisiting crawl %(crawl)s: all %(n)d of its %(total)d stored pages%(what)s, due or not "
                        "(-a all=1)%(follows)s%(cont)s",
                        {"crawl": name, "n": n, "total": total, "what": where, "follows": follows, "cont": cont},
                        extra={"spider": self})
        else:
            due = store.count_due(now, self.default_interval, self.only_site)
            logger.info("Revisiting crawl %(crawl)s: %(due)d of %(total)d stored pages due%(what)s%(follows)s"
                        "%(cont)s", {"crawl": name, "due": due, "total": total, "what": where, "follows": follows,
                                     "cont": cont}, extra={"spider": self})
            if not due and not self.continuous:
                self._say_when_next(store, now)
        # The scope first: links on revisited pages are judged against it.
        requests = list(self.due_requests(now, self.every, self.limit))
        for request in requests:
            yield request
        if self.continuous:
            self._poll = LoopingCall(self._poll_due)
            self._poll.start(self.poll_interval, now=False)

    def _say_when_next(self, store: Store, now: float) -> None:
        """Nothing is due: when the next page falls due, and how to revisit
        now anyway."""
        soonest = next(iter(store.due(now, self.default_interval, self.only_site, 1, every=True)), None)
        if soonest is None:
            logger.info("Nothing to revisit: the crawl holds no page done%(what)s",
                        {"what": f" on {self.only_site}" if self.only_site else ""}, extra={"spider": self})
            return
        at = float(soonest["next_fetch_at"] or now)
        logger.info("Nothing is due: the next page (%(url)s) falls due at %(when)s, in %(wait)s; "
                    "`scrapy crawl recrawl -a all=1` revisits every stored page now",
                    {"url": soonest["url"], "when": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(at)),
                     "wait": duration(at - now)}, extra={"spider": self})

    def _poll_due(self) -> None:
        engine = self.crawler.engine
        if engine is None:
            return
        for request in self.due_requests(time.time()):
            engine.crawl(request)

    def _idle(self) -> None:
        if self.continuous:
            raise DontCloseSpider("RECRAWL_CONTINUOUS: waiting for pages to fall due")

    def _closed(self) -> None:
        if self._poll is not None and self._poll.running:
            self._poll.stop()
        if self._store is not None:
            self._store.close()
            self._store = None


def _modified_since(response: Response, since: Any) -> bool:
    """Whether the HEAD names a Last-Modified at or after ``since`` (when the
    stored version was fetched). No header, or one that does not parse: no."""
    value = response.headers.get(b"Last-Modified")
    if not value or not isinstance(since, int):
        return False
    try:
        when = email.utils.parsedate_to_datetime(value.decode("latin-1")).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return False
    return when >= since
