"""Spider ``site``: crawl breadth-first inside each seed's site.

Arguments (``-a``, docs/reference.md): ``seeds`` or ``seeds_file`` (none:
join the crawl in the frontier), ``scope``, ``follow``, ``topic``,
``allow``, ``deny``, ``rules``, ``sitemaps``, ``languages``, ``order``,
``render``; all but the seeds are the crawl's, recorded by the worker that
started it. A seed the store holds as an error is tried again.

Any other argument is an error that lists these (``check_arguments``, which
``scrapy crawl`` runs before anything starts: ``crawler/spiders/arguments.py``).

A response's life is the chain of steps of the setting ``PAGE_STEPS``
(``crawler/chain/``): ``parse`` hands each response to it and yields what
its steps emit::

    visit       crawler/chain/visit.py     a re-crawl's 304 ends here; the URL marked fetched
    redirect    crawler/chain/redirect.py  3xx: the source stored, the target queued
    decode      crawler/chain/decode.py    PDF, HTML or another document; HTML decoded
    parse       crawler/chain/parse.py     the tree and its analysis (crawler/reading/extract.py)
    render      crawler/chain/render.py    -a render: the DOM after the page's scripts ran
    read        crawler/chain/read.py      text, links, head onto the record (a PDF's: crawler/reading/documents.py)
    focus       crawler/chain/focus.py     -a topic: the page's score
    check       crawler/chain/check.py     duplicate check + template count, one Redis round trip
    type        crawler/chain/classify.py  index or info, and the site's first pages typed again
    variants    crawler/chain/variants.py  a copy of its canonical URL? its language, hreflang alternates
    store       crawler/chain/store.py     yielded to the pipelines (crawler/pipelines.py); noindex: not
    follow      crawler/chain/follow.py    scope, follow policy, URL cache, depth, topic priorities

and the frontier acknowledges the page once its items are stored and its
links queued (``crawler/frontier/scheduler.py``). Each module's docstring
names its settings and stats.

Every failed request is an error record with its reason, except one that
robots.txt forbids (not a page of the site: ``robotstxt/forbidden``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider
from scrapy.exceptions import CloseSpider
from scrapy.http import Response

from crawler.duplicates import fingerprint
from crawler.chain import Chain, record
from crawler.chain.parts import Parts
from crawler.config import ConfigError, check_settings
from crawler.crawldir import crawl_name
from crawler.failures import robots_forbidden
from crawler.following.follow import FOLLOW_MODES, Follower
from crawler.frontier.faces import FrontierFaces
from crawler.frontier.meta import ORDERS
from crawler.items import PageItem
from crawler.reading.language import warm_up
from crawler.requestmeta import AGAIN, REFERER_URL, TOPIC_PRIORITY
from crawler.reading.responses import content_length
from crawler.redis.waiting import until_answered
from crawler.render.browser import BrowserUnavailable, find_browser
from crawler.scope.seeds import read_seeds, seeds_again
from crawler.spiders import arguments as checks
from crawler.following.topic import Topic

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = ["FOLLOW_MODES", "SiteSpider", "content_length", "read_seeds"]


class SiteSpider(Spider):
    name = "site"
    # What the frontier reads of it: crawler.frontier.spiderface.FrontierSpider.
    frontier_callbacks = frozenset({"parse", "parse_sitemap"})
    frontier_errbacks = frozenset({"errback", "sitemap_failed"})
    frontier_head_callbacks: frozenset[str] = frozenset()
    revisits = False  # the re-crawl's is True: it says itself what was due
    seed_urls: list[str]
    arguments: tuple[str, ...] = ("seeds", "seeds_file", "scope", "follow", "topic", "allow", "deny", "rules",
                                  "sitemaps", "languages", "order", "render", "sites")
    # Whether this spider records its -a follow as the crawl's policy (the
    # re-crawl reads the crawl's, and may be asked another for one pass).
    records_follow = True

    @classmethod
    def check_arguments(cls, *args: Any, **kwargs: Any) -> tuple[list[str], list[tuple[str, str]]]:
        """The seeds and the bad seeds (``crawler/spiders/arguments.py``)."""
        return checks.check_arguments(cls.name, cls.arguments, *args, **kwargs)

    crawl_languages = staticmethod(checks.crawl_languages)
    url_rules = staticmethod(checks.url_rules)
    read_topic = staticmethod(checks.read_topic)

    @property
    def frontier_order(self) -> str | None:
        """How this crawl's queues are ordered (``Frontier.check_layout``):
        first in, first out, or by priority under a topic."""
        if self.topic is not None:
            return "topic:" + self.topic.digest
        return ORDERS[self.order] if self.order is not None else "any"

    def __init__(
        self,
        seeds: str | None = None,
        seeds_file: str | None = None,
        scope: str | None = None,
        follow: str | None = None,
        topic: str | None = None,
        allow: str | None = None,
        deny: str | None = None,
        rules: str | None = None,
        sitemaps: str | None = None,
        languages: str | None = None,
        order: str | None = None,
        render: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.seed_urls, bad = SiteSpider.check_arguments(seeds, seeds_file, scope, follow, None, allow, deny, rules,
                                                         sitemaps, languages, order, render, **kwargs)
        if order is not None and topic is not None:
            raise ConfigError("-a order and -a topic: a focused crawl keeps its topic order; give one of them")
        self.order = order
        self.asked_sitemaps = sitemaps
        self.asked_languages = self.crawl_languages(languages)
        self.asked_render, self.sessions = render, checks.read_sessions(kwargs.get("sites"))
        self.rules = self.url_rules(allow, deny, rules)
        self.topic: Topic | None = self.read_topic(topic) if topic is not None else None
        super().__init__(**{k: v for k, v in kwargs.items() if k in checks.RUNNER_ARGUMENTS})
        for seed, reason in bad:
            logger.error("Ignoring seed %(seed)r: %(reason)s", {"seed": seed, "reason": reason})
        self.scope = scope
        self.follow = follow
        # The parts a page's steps share and the chain of those steps, built
        # from the crawler's settings (from_crawler): a spider made without a
        # crawler only makes requests.
        self.parts: Parts
        self.chain: Chain

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        # Scrapy builds the spider before the extensions (SettingsCheck): check
        # here too, so that a bad value is one ConfigError whoever runs us.
        check_settings(crawler.settings)
        spider = super().from_crawler(crawler, *args, **kwargs)
        follower = Follower(crawler, spider._request, frontier=FrontierFaces(crawler).spider,
                            scope=spider.scope, follow=spider.follow,
                            seed_urls=spider.seed_urls, topic=spider.topic, rules=spider.rules,
                            records_policy=cls.records_follow,
                            choices={"sitemaps": spider.asked_sitemaps, "languages": spider.asked_languages,
                                     "render": spider.asked_render})
        spider.parts = Parts.build(crawler, spider, spider._request, follower, spider.topic)
        if spider.asked_render not in (None, "never"):
            try:  # asked to render with no browser: stopped before anything starts
                find_browser(crawler.settings.get("RENDER_BROWSER") or None)
            except BrowserUnavailable as exc:
                raise ConfigError(str(exc)) from None
        spider.chain = Chain.from_settings(crawler, spider.parts)
        if not fingerprint.COMPILED:
            # Same fingerprints, only slower: said once at start, not hidden.
            logger.warning("crawler._fpcore was not built (no C compiler at install?): fingerprints are "
                           "computed with numpy, about 2 ms a page slower; install gcc and reinstall",
                           extra={"spider": spider})
        return spider

    def _request(self, url: str, referer: str | None = None) -> Request:
        return Request(url, callback=self.parse, errback=self.errback,
                       meta={REFERER_URL: referer} if referer else None)

    async def start(self) -> AsyncIterator[Any]:
        warm_up()  # the language model, off the reactor while the crawl starts
        follower = self.follower
        await until_answered(follower.load_scope, "the crawl's scope", self)
        if not self.seed_urls:
            logger.info("No seeds: joining crawl %(crawl)s (scope: %(sites)s)",
                        {"crawl": crawl_name(self.crawler.settings, self.name),
                         "sites": ", ".join(sorted(follower.seed_sites))}, extra={"spider": self})
        self.follow = await until_answered(follower.settle_policy, "the crawl's choices", self)
        self.parts.sitemaps.enabled = follower.choices.get("sitemaps") != "0"
        self.settle_rendering()
        again = await until_answered(lambda: seeds_again(self.crawler, self.parts.frontier, self.seed_urls),
                                     "the seeds' records", self)
        for url in self.seed_urls:
            if url in follower.seen:
                continue
            if follower.allows(url) is not None:  # the crawl's rules, recorded before this worker came
                logger.error("Seed %(url)s is excluded by the crawl's URL rules: %(why)s",
                             {"url": url, "why": follower.rules.describe(url)}, extra={"spider": self})
                continue
            follower.seen.add(url)
            request = self._request(url)
            if url in again:
                request.dont_filter = True  # seen already: queued again past the dedup
                request.meta[AGAIN] = again[url]
            if self.topic is not None:
                request.meta[TOPIC_PRIORITY] = 1000  # where the crawl starts
            elif follower.importance.enabled:
                follower.importance.mark(request, 0, seed=True)
            yield request

    def settle_rendering(self) -> None:
        """Render as the crawl does (its meta's ``-a render``); a machine that cannot: closed."""
        mode = self.follower.choices.get("render")
        try:
            self.parts.renderer.configure(mode)
        except BrowserUnavailable as exc:
            # The crawl renders (recorded by the worker that started it) and this machine cannot.
            logger.error("Crawl %(crawl)s renders pages (-a render=%(mode)s) and this worker cannot: %(exc)s",
                         {"crawl": crawl_name(self.crawler.settings, self.name), "mode": mode, "exc": exc},
                         extra={"spider": self})
            raise CloseSpider("render_unavailable") from None

    @property
    def follower(self) -> Follower:
        return self.parts.follower

    # -- a page's life: the chain (crawler/chain/) ---------------------------------------------
    async def parse(self, response: Response, **kwargs: Any) -> AsyncIterator[Any]:
        page = self.chain.page(response, lambda: record.fetched(self.crawler, response))
        async for out in self.chain.run(response, page):
            yield out

    def parse_sitemap(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield from self.parts.sitemaps.parse(response)

    def sitemap_failed(self, failure: Failure) -> Iterator[Any]:
        yield from self.parts.sitemaps.failed(failure)

    # Its own output says whether the sitemap failed (a SitemapItem in state
    # "E"): an absent /sitemap.xml robots.txt did not name is no error.
    sitemap_failed.recovers = True  # type: ignore[attr-defined]

    def closed(self, reason: str) -> None:
        """Scrapy's call at the spider's close: first pages still kept keep
        the type they were given alone (counted)."""
        parts = getattr(self, "parts", None)
        if parts is not None:
            parts.typer.closed()

    def errback(self, failure: Failure) -> Iterator[PageItem]:
        """A failed request: an error record with its reason
        (``crawler/failures.py``), unless robots.txt forbade it."""
        if not robots_forbidden(failure):
            yield record.failed(self.crawler, failure)
