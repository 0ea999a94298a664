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
(``crawler/recrawl/merge.py``): unchanged, trivially changed, changed, gone or
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

import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider
from scrapy.http import Response
from twisted.internet.task import LoopingCall

from crawler.chain import record
from crawler.config import ConfigError
from crawler.requestmeta import DEPTH, HEAD_LENGTH, HEAD_SINCE, REFERER_URL, REVISIT
from crawler.reading.responses import content_length
from crawler.recrawl.due import DueVisits, modified_since
from crawler.spiders.arguments import RUNNER_ARGUMENTS
from crawler.spiders.site import SiteSpider
from crawler.warc.service import WarcService

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure
    from typing_extensions import Self

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
        self.due: DueVisits
        self._poll: LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        spider = super().from_crawler(crawler, *args, **kwargs)
        s = crawler.settings
        spider.continuous = s.getbool("RECRAWL_CONTINUOUS")
        spider.poll_interval = s.getfloat("RECRAWL_POLL_INTERVAL")
        spider.due = DueVisits(spider, spider.follower, spider.only_site,
                               (spider.parse, spider.errback, spider.parse_head, spider.head_failed))
        # A 304 reaches parse (a visit that succeeded), not the errback.
        spider.handle_httpstatus_list = [*s.getlist("HTTPERROR_ALLOWED_CODES"), 304]
        crawler.signals.connect(spider._idle, signal=signals.spider_idle)
        crawler.signals.connect(spider._closed, signal=signals.spider_closed)
        return spider

    def parse_head(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        """A HEAD's answer: the same Content-Length as stored (and no
        Last-Modified after the stored fetch) is taken as a 304 would be;
        anything else sends the GET."""
        request = response.request
        assert request is not None
        stats = self.crawler.stats
        if (200 <= response.status < 300 and content_length(response) == request.meta.get(HEAD_LENGTH)
                and not modified_since(response, request.meta.get(HEAD_SINCE))):
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
        self.due.announce(now, self.every, self.limit, self.follow, self.poll_interval if self.continuous else None)
        # The scope first: links on revisited pages are judged against it.
        requests = list(self.due.requests(now, self.every, self.limit))
        for request in requests:
            yield request
        if self.continuous:
            self._poll = LoopingCall(self._poll_due)
            self._poll.start(self.poll_interval, now=False)

    def _poll_due(self) -> None:
        engine = self.crawler.engine
        if engine is None:
            return
        for request in self.due.requests(time.time()):
            engine.crawl(request)

    def _idle(self) -> None:
        if self.continuous:
            raise DontCloseSpider("RECRAWL_CONTINUOUS: waiting for pages to fall due")

    def _closed(self) -> None:
        if self._poll is not None and self._poll.running:
            self._poll.stop()
        self.due.close()
