"""The re-crawl's visits: a request for each stored page that is due.

The ``recrawl`` spider (``crawler/spiders/recrawl.py``) asks ``DueVisits``
for the pages of its crawl's store whose ``next_fetch_at`` has passed,
soonest due first, each with the validators it was stored with
(``If-None-Match``, ``If-Modified-Since``), or as a HEAD first
(``RECRAWL_HEAD``) when it has none but a ``Content-Length`` and is likely
enough unchanged. It also says, as the pass starts, what is due and, when
nothing is, when the next page falls due.
"""

from __future__ import annotations

import email.utils
import logging
import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

from crawler.config import ConfigError
from crawler.crawldir import crawl_name
from crawler.operations.progress import duration
from crawler.requestmeta import DEPTH, DUP_ORDER, HEAD_LENGTH, HEAD_SINCE, REVISIT, WARC_ORIGINAL
from crawler.store import StoreNotFound, open_store
from crawler.scope.urls import InvalidURL, normalize

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.http import Response

    from crawler.following.follow import Follower
    from crawler.store import Store

logger = logging.getLogger(__name__)

__all__ = ["DueVisits", "modified_since"]


class DueVisits:
    """The pages due of the spider's crawl (``-a site``: of one site)."""

    def __init__(self, spider: Spider, follower: Follower, only_site: str | None,
                 callbacks: tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any], Callable[..., Any]]) -> None:
        settings = spider.crawler.settings
        self.spider, self.crawler, self.follower, self.only_site = spider, spider.crawler, follower, only_site
        # parse, errback, parse_head, head_failed
        self.callbacks = callbacks
        self.default_interval = settings.getfloat("REVISIT_DEFAULT_INTERVAL")
        self.head = settings.getbool("RECRAWL_HEAD")
        self.head_min_unchanged = settings.getfloat("RECRAWL_HEAD_MIN_UNCHANGED")
        self._store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            name = crawl_name(self.crawler.settings, self.spider.name)
            try:
                self._store = open_store(self.crawler.settings, name, create=False)
            except StoreNotFound as exc:
                raise ConfigError(f"nothing to revisit: {exc}. `scrapy crawl site -a seeds=...` "
                                  "makes the crawl first (same CRAWL_NAME, CRAWL_DIR or MONGO_URI)") from None
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def requests(self, now: float, every: bool = False, limit: int = 0) -> Iterator[Request]:
        """A request for each page due at ``now``, soonest due first."""
        parse, errback, parse_head, head_failed = self.callbacks
        outside: list[str] = []  # stored pages of sites this worker's scope does not know yet
        n = 0
        for page in self.store.due(now, self.default_interval, self.only_site, limit, every):
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
            if not headers and self.head and isinstance(length, int) and self.head_pays(page, now):
                self.crawler.stats.inc_value("recrawl/head")
                yield Request(url, method="HEAD", callback=parse_head, errback=head_failed,
                              meta={**meta, HEAD_LENGTH: length, HEAD_SINCE: int(page.get("fetched_at") or 0)})
                continue
            yield Request(url, callback=parse, errback=errback, headers=headers or None, meta=meta)
        if outside:
            self.follower.widen(outside)
        self.crawler.stats.inc_value("recrawl/due", n)

    def head_pays(self, page: dict[str, Any], now: float) -> bool:
        """Whether the page is likely enough unchanged since it was fetched
        (Poisson changes at its estimated rate; a page of unknown rate at one
        change a REVISIT_DEFAULT_INTERVAL) for a HEAD to be worth its slot."""
        rate = page.get("change_rate")
        if not isinstance(rate, (int, float)) or rate < 0:
            rate = 1.0 / self.default_interval
        elapsed = max(0.0, now - float(page.get("fetched_at") or now))
        return math.exp(-rate * elapsed) >= self.head_min_unchanged

    def announce(self, now: float, every: bool, limit: int, follow: str, poll: float | None) -> None:
        """Say what this pass revisits (``poll``: RECRAWL_CONTINUOUS's interval)."""
        store, spider, site = self.store, self.spider, self.only_site
        if self.crawler.settings.getbool("REVISIT_IMPORTANCE"):
            # The textbook's order: in-degree and mirror degree of every
            # stored page, before the re-collection they weigh.
            began = time.monotonic()
            store.compute_degrees()
            logger.info("In-degree and mirror degree of the stored pages computed in %(s).1fs",
                        {"s": time.monotonic() - began}, extra={"spider": spider})
        total = store.count_pages(site=site, state="C")
        where = f" on {site}" if site else ""
        cont = "; polling for more every %gs (RECRAWL_CONTINUOUS)" % poll if poll is not None else ""
        name = crawl_name(self.crawler.settings, spider.name)
        follows = f"; links of changed pages followed as -a follow={follow}"
        if every:
            n = min(total, limit) if limit else total
            logger.info("Revisiting crawl %(crawl)s: all %(n)d of its %(total)d stored pages%(what)s, due or not "
                        "(-a all=1)%(follows)s%(cont)s",
                        {"crawl": name, "n": n, "total": total, "what": where, "follows": follows, "cont": cont},
                        extra={"spider": spider})
            return
        due = store.count_due(now, self.default_interval, site)
        logger.info("Revisiting crawl %(crawl)s: %(due)d of %(total)d stored pages due%(what)s%(follows)s"
                    "%(cont)s", {"crawl": name, "due": due, "total": total, "what": where, "follows": follows,
                                 "cont": cont}, extra={"spider": spider})
        if not due and poll is None:
            self._say_when_next(now)

    def _say_when_next(self, now: float) -> None:
        """Nothing is due: when the next page falls due, and how to revisit
        now anyway."""
        soonest = next(iter(self.store.due(now, self.default_interval, self.only_site, 1, every=True)), None)
        if soonest is None:
            logger.info("Nothing to revisit: the crawl holds no page done%(what)s",
                        {"what": f" on {self.only_site}" if self.only_site else ""}, extra={"spider": self.spider})
            return
        at = float(soonest["next_fetch_at"] or now)
        logger.info("Nothing is due: the next page (%(url)s) falls due at %(when)s, in %(wait)s; "
                    "`scrapy crawl recrawl -a all=1` revisits every stored page now",
                    {"url": soonest["url"], "when": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(at)),
                     "wait": duration(at - now)}, extra={"spider": self.spider})


def modified_since(response: Response, since: Any) -> bool:
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
