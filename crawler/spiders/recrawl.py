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

``-a site=`` revisits one site; ``-a all=1`` every stored page, due or
not; ``-a limit=N`` at most N pages (soonest due first).
``RECRAWL_CONTINUOUS``: the workers keep running, looking for pages that
fall due every ``RECRAWL_POLL_INTERVAL`` seconds, so a cluster keeps a
corpus fresh indefinitely (``scrapy stop`` ends it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider
from twisted.internet.task import LoopingCall

from crawler.config import ConfigError
from crawler.crawldir import crawl_name
from crawler.spiders.site import _RUNNER_ARGUMENTS, SiteSpider
from crawler.store import StoreNotFound, open_store
from crawler.urls import InvalidURL, host_of, normalize, url_site

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from crawler.store import Store

logger = logging.getLogger(__name__)

__all__ = ["RecrawlSpider"]

_TRUE = ("1", "true", "yes", "on")


class RecrawlSpider(SiteSpider):
    name = "recrawl"
    arguments = ("site", "all", "limit", "follow")

    @classmethod
    def check_arguments(  # type: ignore[override]  # other arguments: called by keyword (-a NAME=)
            cls, site: str | None = None, all: str | None = None,  # noqa: A002 (-a all=1)
            limit: str | None = None, follow: str = "index",
            **kwargs: Any) -> tuple[list[str], list[tuple[str, str]]]:
        super().check_arguments(None, None, "site", follow, **kwargs)
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

    def __init__(self, site: str | None = None, all: str | None = None,  # noqa: A002
                 limit: str | None = None, follow: str = "index", **kwargs: Any) -> None:
        self.check_arguments(site, all, limit, follow, **kwargs)
        super().__init__(None, None, "site", follow, **{k: v for k, v in kwargs.items() if k in _RUNNER_ARGUMENTS})
        self.only_site = site.strip().lower() if site else None
        self.every = all is not None and all.strip().lower() in _TRUE
        self.limit = int(limit) if limit else 0
        self.continuous = False
        self.poll_interval = 60.0
        self.default_interval = 86400.0
        self._poll: LoopingCall | None = None
        self._store: Store | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        s = crawler.settings
        spider.continuous = s.getbool("RECRAWL_CONTINUOUS")
        spider.poll_interval = s.getfloat("RECRAWL_POLL_INTERVAL")
        spider.default_interval = s.getfloat("REVISIT_DEFAULT_INTERVAL")
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
        sites: set[str] = set()
        hosts: set[str] = set()
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
            site = url_site(url)
            if site not in self.seed_sites:
                sites.add(site)
                hosts.add(host_of(url))
            n += 1
            yield Request(url, callback=self.parse, errback=self.errback, headers=headers or None,
                          meta={"revisit": due, "depth": int(page.get("depth") or 0)})
        if sites:
            self.seed_sites = self.seed_sites | sites
            self.seed_hosts = self.seed_hosts | hosts
            self._load_scope()
        self.crawler.stats.inc_value("recrawl/due", n)

    async def start(self) -> AsyncIterator[Any]:
        self._load_scope()
        now = time.time()
        store = self._open_store()
        due = store.count_due(now, self.default_interval, self.only_site)
        logger.info("Revisiting crawl %(crawl)s: %(due)d of %(total)d stored pages due%(what)s%(cont)s",
                    {"crawl": crawl_name(self.crawler.settings, self.name), "due": due,
                     "total": store.count_pages(site=self.only_site, state="C"),
                     "what": f" on {self.only_site}" if self.only_site else "",
                     "cont": "; polling for more every %gs (RECRAWL_CONTINUOUS)" % self.poll_interval
                     if self.continuous else ""},
                    extra={"spider": self})
        # The scope first: links on revisited pages are judged against it.
        requests = list(self.due_requests(now, self.every, self.limit))
        for request in requests:
            yield request
        if self.continuous:
            self._poll = LoopingCall(self._poll_due)
            self._poll.start(self.poll_interval, now=False)

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
