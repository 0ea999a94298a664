"""Spider ``site``: crawl breadth-first inside each seed's site.

Arguments (``-a``):

- ``seeds``: comma-separated URLs; ``seeds_file``: a file of URLs, one a
  line, ``#`` starts a comment. A bad seed is reported on one line and
  skipped; seeds given but none valid stop the crawl with an error. Without
  any seed the worker joins the crawl already in the frontier. A seed the
  store holds as an error is tried again (by one worker of the crawl).
- ``scope``: ``site`` (default: the seed's registrable domain), ``host``
  (the seed's host only) or ``any`` (follow links anywhere).
- ``follow``: ``index`` (follow the links of index pages only) or ``all``
  (the links of information pages too); default: the crawl's, recorded by
  the worker that started it, else ``index``.
- ``topic``: a topic file (JSON or YAML, ``crawler/topic.py``): a focused
  crawl, whose pages are scored and whose links are followed by topic.
- ``allow``, ``deny``, ``rules``: URL rules (``crawler/rules.py``);
  ``sitemaps``: ``1`` (default) or ``0``, whether the crawl reads sitemaps
  (``crawler/sitemaps.py``); ``languages``: ``en,de``, the languages whose
  pages' links are followed (``crawler/variants.py``); ``order``: ``bfs``
  (default), ``dfs`` or ``importance`` (``crawler/importance.py``);
  ``render``: ``never`` (default), ``auto`` or ``always``, whether pages
  are rendered in a browser (``crawler/render/``). All are the crawl's,
  recorded like ``follow``.

Any other argument is an error that lists these (``check_arguments``, which
``scrapy crawl`` runs before anything starts: ``crawler/spiders/arguments.py``).

This module is the glue: ``parse`` calls the steps of a page's life in the
order the page lives, each in the module named for it::

    decode and extract      crawler/encoding.py, crawler/extract.py (a PDF: crawler/pdf.py)
    render (-a render)      crawler/render/: the DOM after the page's scripts ran, extracted again
    redirect or refresh?    crawler/redirects.py
    topic score             crawler/topic.py (-a topic)
    page check              crawler/pagecheck.py: duplicate check + template count, one Redis round trip
    page type               crawler/pagetype.py: index or info, and the site's first pages typed again
    canonical, language     crawler/variants.py: a copy of its canonical URL? its language, hreflang alternates
    store                   yield the item (crawler/pipelines.py); robots noindex: not stored
    follow                  crawler/follow.py: scope, follow policy, URL cache, depth, topic priorities

and the frontier acknowledges the page once its items are stored and its
links queued (``crawler/frontier/scheduler.py``). Each module's docstring
names its settings and stats. Here: ``STORE_MAX_TEXT_CHARS`` (text kept a
page), ``REDIRECT_MAX_TIMES``; pages are decoded with
``crawler.encoding.decode_html``, the site's last legacy encoding as the
hint for pages that declare none.

Every failed request is an error record with its reason, except one that
robots.txt forbids (not a page of the site: ``robotstxt/forbidden``).

Stats: ``robots/noindex``, ``robots/nofollow``, ``topic/pages_scored``,
``topic/on_topic``, ``topic/off_topic``, ``topic/tunnel_pages``,
``topic/tunnel_on_topic``, ``redirect/followed``, ``redirect/off_scope``,
``redirect/loop``, ``redirect/limit``, ``redirect/bad_location``,
``frontier/hrefs_found`` (every ``<a href>``), ``frontier/links_found``
(distinct valid links per page).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider
from scrapy.exceptions import CloseSpider
from scrapy.http import Response, TextResponse

from crawler import fingerprint
from crawler.config import ConfigError, check_settings
from crawler.crawldir import crawl_name
from crawler.documents import Documents
from crawler.encoding import EncodingHints, decode_html
from crawler.extract import analyze
from crawler.failures import failure_reason, robots_forbidden
from crawler.fingerprint import content_hash
from crawler.follow import FOLLOW_MODES, Follower, meta_int
from crawler.linkresolve import resolve_links, resolve_navigation
from crawler.frontier.meta import ORDERS
from crawler.frontier.signals import ROBOTS_READ
from crawler.frontier.tracking import AGAIN_META
from crawler.htmlparse import parse_html
from crawler.items import PageItem
from crawler.language import warm_up
from crawler.middlewares import TRAP_PARENT
from crawler.pagecheck import PageCheck
from crawler.pagehead import parse_robots_directives
from crawler.pagerules import INDEX
from crawler.pagetype import PageTyper
from crawler.responses import content_length, dup_order_of, header, is_html, media_type, revisit_due
from crawler.render.browser import BrowserUnavailable, find_browser
from crawler.render.service import Renderer
from crawler.redirects import REDIRECT_STATUSES, hop, location_target, meta_refresh
from crawler.seeds import read_seeds, seeds_again
from crawler.sitemaps import Sitemaps
from crawler.spiders import arguments as checks
from crawler.topic import Topic
from crawler.urls import LinkResolver, normalize, url_site
from crawler.variants import Variants
from crawler.warc.service import WarcService

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = ["FOLLOW_MODES", "SiteSpider", "content_length", "read_seeds"]

_TOPIC_META = ("topic_hops", "topic_parent", "topic_priority")

class SiteSpider(Spider):
    name = "site"
    # The only callbacks a frontier entry may name (crawler.frontier.serialize).
    frontier_callbacks = frozenset({"parse", "parse_sitemap"})
    frontier_errbacks = frozenset({"errback", "sitemap_failed"})
    arguments: tuple[str, ...] = ("seeds", "seeds_file", "scope", "follow", "topic", "allow", "deny", "rules",
                                  "sitemaps", "languages", "order", "render")
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
        self.asked_render = render
        self.rules = self.url_rules(allow, deny, rules)
        self.topic: Topic | None = self.read_topic(topic) if topic is not None else None
        super().__init__(**{k: v for k, v in kwargs.items() if k in checks.RUNNER_ARGUMENTS})
        for seed, reason in bad:
            logger.error("Ignoring seed %(seed)r: %(reason)s", {"seed": seed, "reason": reason})
        self.scope = scope
        self.follow = follow
        self._resolver = LinkResolver()
        self._encodings = EncodingHints()
        # The steps of a page's life, built from the crawler's settings
        # (from_crawler): a spider made without a crawler only makes requests.
        self.follower: Follower
        self.pagecheck: PageCheck
        self.typer: PageTyper
        self.max_text_chars: int
        self.max_redirects: int
        self.sitemaps: Sitemaps
        self.variants: Variants
        self.renderer: Renderer
        self.documents: Documents

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        # Scrapy builds the spider before the extensions (SettingsCheck): check
        # here too, so that a bad value is one ConfigError whoever runs us.
        check_settings(crawler.settings)
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        spider.follower = Follower(crawler, spider._request, scope=spider.scope, follow=spider.follow,
                                   seed_urls=spider.seed_urls, topic=spider.topic, rules=spider.rules,
                                   records_policy=cls.records_follow,
                                   choices={"sitemaps": spider.asked_sitemaps, "languages": spider.asked_languages,
                                            "render": spider.asked_render})
        spider.sitemaps = Sitemaps(crawler, spider.follower, spider)
        spider.variants = Variants(crawler, spider.follower)
        crawler.signals.connect(spider.sitemaps.robots_read, signal=ROBOTS_READ)
        spider.pagecheck = PageCheck(crawler)
        spider.renderer = Renderer(crawler, spider.follower, spider._resolver)
        spider.documents = Documents(crawler)
        if spider.asked_render not in (None, "never"):
            try:  # asked to render with no browser: stopped before anything starts
                find_browser(settings.get("RENDER_BROWSER") or None)
            except BrowserUnavailable as exc:
                raise ConfigError(str(exc)) from None
        spider.typer = PageTyper(crawler)
        spider.max_text_chars = settings.getint("STORE_MAX_TEXT_CHARS")
        spider.max_redirects = settings.getint("REDIRECT_MAX_TIMES")
        if not fingerprint.COMPILED:
            # Same fingerprints, only slower: said once at start, not hidden.
            logger.warning("crawler._fpcore was not built (no C compiler at install?): fingerprints are "
                           "computed with numpy, about 2 ms a page slower; install gcc and reinstall",
                           extra={"spider": spider})
        return spider

    def _request(self, url: str, referer: str | None = None) -> Request:
        return Request(url, callback=self.parse, errback=self.errback,
                       meta={"referer_url": referer} if referer else None)

    async def start(self) -> AsyncIterator[Any]:
        warm_up()  # the language model, off the reactor while the crawl starts
        follower = self.follower
        follower.load_scope()
        if not self.seed_urls:
            logger.info("No seeds: joining crawl %(crawl)s (scope: %(sites)s)",
                        {"crawl": crawl_name(self.crawler.settings, self.name),
                         "sites": ", ".join(sorted(follower.seed_sites))}, extra={"spider": self})
        self.follow = follower.settle_policy()
        self.sitemaps.enabled = follower.choices.get("sitemaps") != "0"
        self.settle_rendering()
        again = seeds_again(self.crawler, crawl_name(self.crawler.settings, self.name), self.seed_urls)
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
                request.meta[AGAIN_META] = again[url]
            if self.topic is not None:
                request.meta["topic_priority"] = 1000  # where the crawl starts
            elif follower.importance.enabled:
                follower.importance.mark(request, 0, seed=True)
            yield request

    def settle_rendering(self) -> None:
        """Render as the crawl does (its meta's ``-a render``); a machine that cannot: closed."""
        mode = self.follower.choices.get("render")
        try:
            self.renderer.configure(mode)
        except BrowserUnavailable as exc:
            # The crawl renders (recorded by the worker that started it) and this machine cannot.
            logger.error("Crawl %(crawl)s renders pages (-a render=%(mode)s) and this worker cannot: %(exc)s",
                         {"crawl": crawl_name(self.crawler.settings, self.name), "mode": mode, "exc": exc},
                         extra={"spider": self})
            raise CloseSpider("render_unavailable") from None

    # -- a page's life ----------------------------------------------------------------------
    async def parse(self, response: Response, **kwargs: Any) -> AsyncIterator[Any]:
        # Asynchronous for one step: the page check waits while Redis is full.
        url = normalize(response.url)
        self.follower.seen.add(url)  # fetched: never worth sending to the frontier again
        self.follower.learn_scope_from(url)
        self.sitemaps.page_seen(url)
        item = PageItem(
            url=url, site=url_site(url), depth=int(response.meta.get("depth", 0)), status=response.status,
            fetched_at=time.time(),
            etag=header(response, b"ETag"), last_modified=header(response, b"Last-Modified"),
            referer=response.meta.get("referer_url"), revisit=revisit_due(response.meta),
            content_length=content_length(response), importance=response.meta.get("importance"),
            dup_order=dup_order_of(response.meta), content_type=media_type(response),
            warc=WarcService.record_of(self.crawler, response.request),
        )
        if response.status in REDIRECT_STATUSES:
            for out in self._redirect(response, item):
                yield out
            return
        robots = parse_robots_directives(
            ",".join(v.decode("latin-1") for v in response.headers.getlist(b"X-Robots-Tag")))
        if self.documents.is_pdf(response, item.content_type):
            async for out in self._pdf(response, item, robots):
                yield out
            return
        if not isinstance(response, TextResponse) or not is_html(response):
            self.documents.skipped(item.content_type)
            item.page_type = self.typer.other_type()
            item.encoding = getattr(response, "encoding", None)
            # What a re-crawl compares: the bytes, as they came.
            item.content_hash = content_hash(response.body.decode("latin-1"))
            if "noindex" not in robots:
                yield item
            return
        async for out in self._html(response, item, robots):
            yield out

    async def _html(self, response: Response, item: PageItem, robots: frozenset[str]) -> AsyncIterator[Any]:
        url, stats, topic = item.url, self.crawler.stats, self.topic
        # Decode and extract.
        text, item.encoding = decode_html(response.body, header(response, b"Content-Type"),
                                          self._encodings.get(item.site))
        self._encodings.remember(item.site, item.encoding)
        page = analyze(parse_html(text), url, link_context=topic is not None)
        navigations: list[str] = []
        if self.renderer.mode != "never":
            rendered = await self.renderer.page_step(self, response, item, page, lambda html: analyze(
                parse_html(html), url, link_context=topic is not None))
            if isinstance(rendered, Request):
                yield rendered  # the browser failed it: a retry
                return
            if rendered is not None:
                text, page, navigations = rendered
        robots |= page.robots
        item.title, item.text, item.abstract = page.title, page.text[: self.max_text_chars], page.abstract
        if topic is not None:
            self._score(topic, response, item, page.title, page.own_text)
        out, contexts = resolve_links(self._resolver, url, page, with_contexts=topic is not None)
        refresh = meta_refresh(text, url)
        if refresh is not None:
            out.setdefault(refresh, "[meta refresh]")
        for target in navigations:
            moved = self._resolver.resolve(url, target)
            if moved is not None:
                out.setdefault(moved, "[script navigation]")
        item.links = [{"url": u, "anchor": a} for u, a in out.items()]
        stats.inc_value("frontier/hrefs_found", len(page.links))
        stats.inc_value("frontier/links_found", len(out))

        # The page check (duplicate + template count, one round trip), then its type.
        blocks, keys = self.typer.blocks(page)
        checked = await self.pagecheck.check(item, keys)
        typed = self.typer.type_page(url, page, blocks, keys, checked.template, item.site)
        item.page_type = typed.page_type
        stored = "noindex" not in robots
        canonical, canonical_copy = self.variants.canonical(response, page, item, stored)
        language_followed = self.variants.language(response, page, item, page.text)
        kept = checked.young and keys is not None and item.revisit is None and not typed.terms
        item.pending += kept and stored  # before the yield: feeds wait for it (crawler/feeds.py)

        # Store it, and earlier pages a second look has put right.
        if stored:
            yield item
        else:
            stats.inc_value("robots/noindex")
        if canonical is not None:
            yield canonical
        retyped = self._retyped(item.site) if checked.template is not None else ()
        for again in (*retyped, *self.variants.put_right()):
            yield again
        if kept:
            # Typed alone for want of the site's template: kept to be typed
            # again once it is known; its links with it, to follow then if
            # it turns out to be an index page.
            later = (not self.follower.follow_all and topic is None and item.page_type != INDEX and language_followed
                     and not checked.duplicate and not canonical_copy and "nofollow" not in robots)
            self.typer.keep_first_page(item, typed, stored, [u for u in out if u != refresh] if later else [],
                                       response.meta)

        # Follow its links.
        if "nofollow" in robots:
            stats.inc_value("robots/nofollow")
            return
        for alternate in self.variants.alternates(item):
            yield alternate
        if refresh is not None and not checked.duplicate:
            # A meta refresh is a redirect: followed whatever the page's type,
            # under the same loop and hop limits. The page itself, which has
            # content, stays a page whatever becomes of its refresh.
            follow, _ = self._hop(response, item, refresh)
            if follow is not None:
                yield follow
        if checked.duplicate or canonical_copy or not language_followed:
            return  # a copy's links only repeat work (the textbook's reason); another language's are not wanted
        links = (u for u in out if u != refresh)  # the refresh target was judged as a hop above
        if topic is not None and item.topic_score is not None:
            requests = self.follower.follow_topic(topic, url, item.depth, item.topic_score, bool(item.on_topic),
                                                  meta_int(response.meta, "topic_hops"), links, out, contexts)
        else:
            requests = self.follower.page_links(item.page_type == INDEX, url, item.depth, links, item.importance,
                                                resolve_navigation(self._resolver, url, page))
        for request in requests:
            yield request

    async def _pdf(self, response: Response, item: PageItem, robots: frozenset[str]) -> AsyncIterator[Any]:
        """A PDF (``crawler/documents.py``): an information page, checked, stored, followed as one."""
        item.page_type = self.typer.other_type()
        links = await self.documents.read_pdf(response, item, self._resolver, self.max_text_chars)
        if links is None:  # an error record with the reason
            yield item
            return
        checked = await self.pagecheck.check(item, None)
        if "noindex" in robots:
            self.crawler.stats.inc_value("robots/noindex")
        else:
            yield item
        if checked.duplicate or "nofollow" in robots:
            return
        for request in self.follower.page_links(False, item.url, item.depth, iter(links), item.importance):
            yield request

    def _score(self, topic: Topic, response: Response, item: PageItem, title: str, own_text: str) -> None:
        """A focused crawl's page: its topic score, and the tunnel figures."""
        stats = self.crawler.stats
        item.topic_score = topic.score(title, own_text)
        item.on_topic = topic.on_topic(item.topic_score)
        self.follower.siblings.record(item.url, item.on_topic)
        stats.inc_value("topic/pages_scored")
        stats.inc_value("topic/on_topic" if item.on_topic else "topic/off_topic")
        if meta_int(response.meta, "topic_hops") > 0:
            stats.inc_value("topic/tunnel_pages")
            if item.on_topic:
                stats.inc_value("topic/tunnel_on_topic")

    def _retyped(self, site: str) -> Iterator[Any]:
        """The site's first pages typed again now that its template is known:
        a page whose type changed is stored again, and followed if it is now
        an index page (its links judged as its own response's)."""
        for again in self.typer.retype(site):
            if again.item is not None:
                yield again.item
            first = again.page
            if again.page_type == INDEX and first.links:
                yield from self.follower.follow(first.links, first.url, first.depth + 1,
                                                meta={TRAP_PARENT: (first.url, first.trap_meta)})

    # -- redirects ---------------------------------------------------------------------------
    def _redirect(self, response: Response, item: PageItem) -> Iterator[Any]:
        """A 3xx answer: the source is stored (status, and its target as its
        one link); the target is judged by ``_hop``. A missing Location, a
        loop and the hop limit make the source an error record."""
        location = header(response, b"Location")
        target = location_target(location, item.url)
        if target is None:
            item.state = "E"
            item.error = f"HTTP {response.status} redirect without a valid Location ({location!r:.200})"
            self.crawler.stats.inc_value("redirect/bad_location")
            yield item
            return
        item.links = [{"url": target, "anchor": f"[redirect {response.status}]"}]
        follow, error = self._hop(response, item, target)
        if error:
            item.state, item.error = "E", error
        yield item
        if follow is not None:
            yield follow

    def _hop(self, response: Response, item: PageItem, target: str) -> tuple[Request | None, str | None]:
        """One redirect hop (3xx or meta refresh) from ``item`` to ``target``:
        the request for the target, queued through the frontier like any link
        (deduplicated, in scope, polite, robots.txt, the address guard), first
        in its site queue, at the source's depth; or None with the error (a
        loop, over ``REDIRECT_MAX_TIMES``), or None alone (off-scope: the
        target stays an edge; or already sent)."""
        stats = self.crawler.stats
        verdict = hop(item.url, target, response.meta, self.max_redirects)
        if verdict.error is not None:
            stats.inc_value(str(verdict.stat))
            return None, verdict.error
        if not self.follower.in_scope(target):
            stats.inc_value("redirect/off_scope")
            return None, None
        meta = verdict.meta
        # A focused crawl's standing goes with the hop: the target is the link it was.
        meta.update({k: response.meta[k] for k in _TOPIC_META if meta_int(response.meta, k)})
        follow = list(self.follower.follow([target], item.url, item.depth, priority=1, meta=meta))
        if follow:
            stats.inc_value("redirect/followed")
        return (follow[0] if follow else None), None

    def parse_sitemap(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield from self.sitemaps.parse(response)

    def sitemap_failed(self, failure: Failure) -> Iterator[Any]:
        yield from self.sitemaps.failed(failure)

    # Its own output says whether the sitemap failed (a SitemapItem in state
    # "E"): an absent /sitemap.xml robots.txt did not name is no error.
    sitemap_failed.recovers = True  # type: ignore[attr-defined]

    def closed(self, reason: str) -> None:
        """Scrapy's call at the spider's close: first pages still kept keep
        the type they were given alone (counted)."""
        typer = getattr(self, "typer", None)
        if typer is not None:
            typer.closed()

    def errback(self, failure: Failure) -> Iterator[PageItem]:
        """A failed request: an error record with its reason
        (``crawler/failures.py``), unless robots.txt forbade it."""
        if robots_forbidden(failure):
            return
        request: Request = failure.request  # type: ignore[attr-defined]
        url = normalize(request.url)
        response = getattr(failure.value, "response", None)
        yield PageItem(
            url=url, site=url_site(url), depth=int(request.meta.get("depth", 0)),
            state="E", status=response.status if response is not None else None,
            fetched_at=time.time(), error=failure_reason(failure),
            referer=request.meta.get("referer_url"), revisit=revisit_due(request.meta),
            etag=header(response, b"ETag"), last_modified=header(response, b"Last-Modified"),
            warc=WarcService.record_of(self.crawler, request) if response is not None else None,
            dup_order=dup_order_of(request.meta),
        )
