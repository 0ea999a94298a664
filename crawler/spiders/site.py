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
- ``topic``: a topic file (JSON or YAML, ``crawler/topic.py``): a focused
  crawl. Each page gets ``topic_score`` and ``on_topic``; the links of
  on-topic pages (and seeds) are followed whatever the page's type, those
  of off-topic pages while the page is at most ``TOPIC_TUNNEL`` hops from
  the last on-topic page on its path (so an on-topic region behind up to
  ``TOPIC_TUNNEL`` off-topic pages in a row is reached); each link carries its priority
  (``topic_priority``, thousandths) from its anchor and surroundings, URL,
  parent's score and siblings' outcomes (``TOPIC_SIBLINGS`` directories
  remembered per worker).

Any other argument is an error that lists these (``check_arguments``, which
``scrapy crawl`` runs before anything starts).

Settings: ``CLASSIFIER_THRESHOLD``, ``CLASSIFIER_TEMPLATE``, ``TOPIC_TUNNEL``,
``TOPIC_SIBLINGS``, ``STORE_MAX_TEXT_CHARS``,
``FRONTIER_URL_CACHE``, ``REDIRECT_MAX_TIMES``, ``DEPTH_LIMIT`` (depth is
kept here: a redirect keeps its source's depth). Queueing, dedup,
politeness and the per-site cap belong to the frontier.

Pages are decoded with ``crawler.encoding.decode_html``, the site's last
legacy encoding as the hint for pages that declare none.

Redirects (3xx reach the spider: ``HTTPERROR_ALLOWED_CODES``) and meta
refreshes are followed through the frontier: the source is stored with its
status and its target as its one link, the target queued as a new URL
(meta ``redirect_times``, ``redirect_urls``). A loop, the hop limit and a
missing Location are error records; an off-scope target is an edge only.

Duplicates: the main text's content hash (with the links, for texts shorter
than ``SIMHASH_MIN_CHARS``) and SimHash are checked against the cluster's
index (``SIMHASH_MAX_DISTANCE``); a copy is stored with ``dup_of``. Its links
are not followed when the copy is of a page of its own site, or its site
mirrors another (``SIMHASH_MIRROR_SHARE``, ``SIMHASH_MIRROR_MIN_PAGES``;
``mirror_of``); a copy of another site's page is followed.

Every failed request is an error record with its reason, except one that
robots.txt forbids (not a page of the site: ``robotstxt/forbidden``).

Page types: with ``CLASSIFIER_TEMPLATE`` (the default) each HTML page's
block keys are counted in its site's template evidence in Redis (one
script call, ``crawler/frontier/templates.py``) and the page is typed
without the blocks that recur on the site's pages; while the site has fewer
than 5 pages counted, its entry is malformed or Redis cannot be reached,
the page is typed alone (its blocks outside navigation markup). A site's
first pages, typed alone because the site had too few pages counted, are
kept by the worker that typed them (``template.FirstPages``, bounded: the
item as stored, its template-free features and its blocks' figures, not
its markup) and typed again, with the template, when that worker next
types a page of the site with its template known (one more Redis round
trip, once a site; kept for the next page if Redis cannot answer). A page whose type changes
is stored again with its new type; one that becomes an index page has its
links followed then (``follow=index``). With the template known, the
model's close calls (its score within 0.35 of its threshold) are the
link-density rule's on a site where the rule typed at least 95 % of the
pages the model was sure of (0.25 or more from the threshold) as the
model did, once 10 are counted (this
worker's count: ``classify.RuleTrust``, at most 4,096 sites). A page
with next to nothing of its own once its site's template is set aside
(under 200 characters of text outside links, and link text over 35 % of
its text outside navigation markup: ``classify.bare_navigation``) is an index page
where the model is unsure of it (its score within 0.35 of the threshold),
the rule trusted on the site or not.

Stats: ``classifier/page_type/<type>``, ``classifier/template/used``,
``classifier/template/page_only`` (too few pages of the site yet),
``classifier/template/malformed``, ``classifier/template/redis_error``,
``classifier/retype/checked`` (first pages typed again),
``classifier/retype/<type>`` (of them, those whose type changed, by new
type), ``classifier/retype/redis_error``, ``classifier/retype/malformed``,
``classifier/retype/evicted`` (first pages no longer kept: the bound),
``classifier/retype/not_stored`` (a page typed again the store refused),
``classifier/retype/unchecked`` (first pages still kept when the spider
closed: the site had no page typed with its template by this worker),
``classifier/rule/decided`` (pages the link-density rule typed),
``classifier/rule/overruled`` (of them, those the model would have typed
the other way), ``classifier/bare_index`` (pages with nothing of their
own typed index where the model said info), ``robots/noindex``, ``topic/pages_scored``, ``topic/on_topic``,
``topic/off_topic``, ``topic/tunnel_pages`` (pages reached through an
off-topic parent), ``topic/tunnel_on_topic`` (on-topic among them),
``topic/tunnel_stopped`` (off-topic pages whose links were not followed:
beyond the tunnel), ``robots/nofollow``, ``simhash/exact_duplicate``, ``simhash/near_duplicate``,
``simhash/cross_site_copy``, ``simhash/skipped_short``,
``redirect/followed``, ``redirect/off_scope``, ``redirect/loop``,
``redirect/limit``, ``redirect/bad_location``,
``depth/request_ignored_count``, ``request_depth_max``,
``frontier/hrefs_found`` (every ``<a href>``), ``frontier/links_found``
(distinct valid links per page), ``frontier/links_new`` (links never seen
before: Requests built).

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
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, replace
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

from crawler.classify import INDEX, INFO, RuleTrust, classify_stats, page_features, term_index, thin_navigation
from crawler.config import ConfigError, check_settings
from crawler.crawldir import crawl_name
from crawler import fingerprint
from crawler.fingerprint import Sketch, content_hash, fingerprints, signed, simhash
from crawler.frontier.scheduler import AGAIN_META
from crawler.frontier.service import FrontierService
from crawler.encoding import decode_html
from crawler.extract import Page, analyze, parse_html, parse_robots_directives
from crawler.items import PageItem
from crawler.middlewares import TRAP_PARENT
from crawler.traps import META_KEYS as TRAP_META_KEYS
from crawler.template import BlockStat, Evidence, FirstPages, block_stats, stat_keys, template_of
from crawler.topic import Siblings, Topic, TopicError, follow_links, load_topic
from crawler.urls import SCOPES, InvalidURL, LinkResolver, host_of, normalize, site_of, url_site

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from typing_extensions import Self

logger = logging.getLogger(__name__)

FOLLOW_MODES = ("index", "all")


@dataclass(slots=True)
class _FirstPage:
    """A page typed alone, kept until its site's template is known."""

    item: PageItem | None  # what was stored (None: noindex, not stored)
    url: str
    depth: int
    page_type: str
    base: list[float]  # classify.page_features
    blocks: list[BlockStat]
    keys: list[str]
    links: list[str]  # to follow if it turns out to be an index page
    trap_meta: dict[str, Any]  # its response's trap-guard evidence, which its links are judged by


_IGNORED_SUFFIXES = tuple("." + ext for ext in IGNORED_EXTENSIONS)


_TOPIC_META = ("topic_hops", "topic_parent", "topic_priority")
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ROBOTS_FORBIDDEN = "Forbidden by robots.txt"  # Scrapy's RobotsTxtMiddleware's IgnoreRequest


class UrlCache:
    """The normalised URLs this worker has sent to the frontier (T-spider's
    URL cache), bounded: two generations of at most ``size`` URLs each; when
    the newer one fills, the older is dropped. A URL forgotten this way is
    sent again and the frontier's shared dedup drops it: work, not a loss."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._new: set[str] = set()
        self._old: set[str] = set()

    def __contains__(self, url: object) -> bool:
        return url in self._new or url in self._old

    def add(self, url: str) -> None:
        if len(self._new) >= self.size:
            self._old, self._new = self._new, set()
        self._new.add(url)

    def __len__(self) -> int:
        return len(self._new) + len(self._old)


# scrapyd passes its job id to every spider as an argument.
# scrapyd passes its job id and, when the project was deployed with one, the
# version: neither is the spider's to read.
_RUNNER_ARGUMENTS = frozenset({"_job", "_version"})


def read_seeds(seeds: str | None, seeds_file: str | None) -> list[str]:
    raw: list[str] = []
    if seeds:
        raw += [s for s in seeds.split(",") if s.strip()]
    if seeds_file:
        try:
            text = Path(seeds_file).read_text(encoding="utf-8")
        except (OSError, UnicodeError) as exc:
            raise ConfigError(f"-a seeds_file={seeds_file}: cannot read it ({exc})") from None
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                raw.append(line)
    return raw


class SiteSpider(Spider):
    name = "site"
    # The only callbacks a frontier entry may name (crawler.frontier.serialize).
    frontier_callbacks = frozenset({"parse"})
    frontier_errbacks = frozenset({"errback"})
    arguments: tuple[str, ...] = ("seeds", "seeds_file", "scope", "follow", "topic")

    @classmethod
    def check_arguments(cls, seeds: str | None = None, seeds_file: str | None = None,
                        scope: str = "site", follow: str | None = None, topic: str | None = None,
                        **kwargs: Any) -> tuple[list[str], list[tuple[str, str]]]:
        """The seeds (normal form) and the bad seeds with their reasons;
        ``ConfigError`` for an argument the spider cannot run with."""
        unknown = sorted(set(kwargs) - _RUNNER_ARGUMENTS)
        if unknown:
            raise ConfigError(
                f"unknown spider argument{'s' if len(unknown) > 1 else ''} "
                f"{', '.join('-a ' + k for k in unknown)}; spider {cls.name!r} takes "
                f"{', '.join('-a ' + a for a in cls.arguments)}")
        if scope not in SCOPES:
            raise ConfigError(f"-a scope={scope!r} is not one of {', '.join(SCOPES)}")
        if follow is not None and follow not in FOLLOW_MODES:
            raise ConfigError(f"-a follow={follow!r} is not one of {', '.join(FOLLOW_MODES)}")
        if topic is not None:
            cls.read_topic(topic)
        raw_seeds = read_seeds(seeds, seeds_file)
        good: list[str] = []
        bad: list[tuple[str, str]] = []
        for raw in raw_seeds:
            try:
                good.append(normalize(raw))
            except InvalidURL as exc:
                bad.append((raw.strip(), str(exc)))
        if raw_seeds and not good:
            raise ConfigError(
                f"no valid seed ({bad[0][1]}{' ...' if len(bad) > 1 else ''}): give -a seeds=URL[,URL...] "
                "or -a seeds_file=PATH with absolute http:// or https:// URLs (or no seed at all, "
                "to join a running crawl)"
            )
        return list(dict.fromkeys(good)), bad

    @property
    def frontier_order(self) -> str | None:
        """How this crawl's queues are ordered (``Frontier.check_layout``):
        first in, first out, or by priority under a topic."""
        return "fifo" if self.topic is None else "topic:" + self.topic.digest

    @staticmethod
    def read_topic(path: str) -> Topic:
        if not path.strip():
            raise ConfigError("-a topic= names no file: give the path of a topic file (JSON or YAML)")
        try:
            return load_topic(path)
        except TopicError as exc:
            raise ConfigError(f"-a topic: {exc}") from None

    def __init__(
        self,
        seeds: str | None = None,
        seeds_file: str | None = None,
        scope: str = "site",
        follow: str | None = None,
        topic: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.seed_urls, bad = SiteSpider.check_arguments(seeds, seeds_file, scope, follow, **kwargs)
        self.topic: Topic | None = self.read_topic(topic) if topic is not None else None
        self.topic_tunnel = 2
        self._siblings = Siblings()
        super().__init__(**{k: v for k, v in kwargs.items() if k in _RUNNER_ARGUMENTS})
        for seed, reason in bad:
            logger.error("Ignoring seed %(seed)r: %(reason)s", {"seed": seed, "reason": reason})
        self.scope = scope
        # The follow policy: the crawl's, recorded when it started (start());
        # -a follow when the crawl has none yet.
        self.follow = follow
        self.follow_all = follow == "all"
        self.seed_hosts = frozenset(host_of(u) for u in self.seed_urls)
        self.seed_sites = frozenset(site_of(h) for h in self.seed_hosts)
        self._resolver = LinkResolver()
        self.classifier_threshold: float | None = None
        # Per site, whether the link-density rule may decide the model's
        # close calls (crawler/classify.py, RuleTrust): this worker's count.
        self._rule_trust = RuleTrust()
        self.classifier_template = True
        self.max_text_chars = 1_000_000
        self.neardup_resemblance = 0.9
        self.neardup_sample = 512
        self.simhash_min_chars = 200
        self.mirror_min_pages = 20
        self.mirror_share = 0.5
        self.max_redirects = 10
        self.depth_limit = 0
        self._seen = UrlCache(100_000)
        self._site_encodings: OrderedDict[str, str] = OrderedDict()
        self._first_pages: FirstPages[_FirstPage] = FirstPages()
        self._scope_checked = 0.0
        self._scope_reloaded_for: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> Self:
        # Scrapy builds the spider before the extensions (SettingsCheck): check
        # here too, so that a bad value is one ConfigError whoever runs us.
        check_settings(crawler.settings)
        spider = super().from_crawler(crawler, *args, **kwargs)
        settings = crawler.settings
        threshold = settings.get("CLASSIFIER_THRESHOLD")
        spider.classifier_threshold = None if threshold in (None, "") else float(threshold)
        spider.classifier_template = settings.getbool("CLASSIFIER_TEMPLATE")
        spider.max_text_chars = settings.getint("STORE_MAX_TEXT_CHARS")
        spider.neardup_resemblance = settings.getfloat("NEARDUP_RESEMBLANCE")
        spider.neardup_sample = settings.getint("NEARDUP_SAMPLE")
        spider.simhash_min_chars = settings.getint("SIMHASH_MIN_CHARS")
        spider.mirror_min_pages = settings.getint("SIMHASH_MIRROR_MIN_PAGES")
        spider.mirror_share = settings.getfloat("SIMHASH_MIRROR_SHARE")
        spider.max_redirects = settings.getint("REDIRECT_MAX_TIMES")
        spider.depth_limit = settings.getint("DEPTH_LIMIT")
        spider._seen = UrlCache(settings.getint("FRONTIER_URL_CACHE"))
        spider.topic_tunnel = settings.getint("TOPIC_TUNNEL")
        spider._siblings = Siblings(settings.getint("TOPIC_SIBLINGS"))
        if not fingerprint.COMPILED:
            # Same fingerprints, only slower: said once at start, not hidden.
            logger.warning("crawler._fpcore was not built (no C compiler at install?): fingerprints are "
                           "computed with numpy, about 2 ms a page slower; install gcc and reinstall",
                           extra={"spider": spider})
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
        service = FrontierService.of(self.crawler)
        if not service.is_open:
            return
        try:
            sites, hosts = service.frontier.scope(sorted(self.seed_sites), sorted(self.seed_hosts))
        except redis.RedisError as exc:
            logger.warning("Could not read the crawl's scope from Redis: %(exc)s", {"exc": exc},
                           extra={"spider": self})
            return
        self.seed_sites = self.seed_sites | sites
        self.seed_hosts = self.seed_hosts | hosts

    def _request(self, url: str, referer: str | None = None) -> Request:
        return Request(url, callback=self.parse, errback=self.errback,
                       meta={"referer_url": referer} if referer else None)

    def _settle_follow(self) -> None:
        """Follow the links the crawl follows: its policy is recorded in its
        meta by the worker that starts it (``-a follow``, default ``index``)
        and read by every other, and by the re-crawl, which follows the
        links of changed pages as the crawl did. ``scrapy crawl`` refuses a
        worker that asks for another policy (commands/crawl.py); started
        otherwise (scrapyd), such a worker says so and follows the crawl's."""
        frontier = FrontierService.of(self.crawler).frontier
        recorded = frontier.crawl_policy("follow", self.follow or "index" if self.records_follow else None)
        if recorded not in FOLLOW_MODES:
            recorded = None  # not recorded (a crawl started before it was), or not ours to read
        if self.follow is None:
            self.follow = recorded or "index"
        elif recorded is not None and recorded != self.follow and self.records_follow:
            logger.error("Crawl %(crawl)s follows -a follow=%(recorded)s (recorded when it started), not "
                         "-a follow=%(mine)s: following the crawl's",
                         {"crawl": frontier.crawl, "recorded": recorded, "mine": self.follow}, extra={"spider": self})
            self.follow = recorded
        self.follow_all = self.follow == "all"

    # Whether this spider records its -a follow as the crawl's policy (the
    # re-crawl reads the crawl's, and may be asked another for one pass).
    records_follow = True

    def _seeds_again(self) -> set[str]:
        """The seeds the store holds as errors (or gone), not as done: a seed
        refused by the run before (a private address before
        ``NETWORK_ALLOWLIST`` was set, a server that was down) is tried again
        by this run, with its settings, instead of being deduplicated away
        for good. Each is queued by one worker of the crawl only."""
        from crawler.store import StoreNotFound, open_store

        if not self.seed_urls:
            return set()
        try:
            store = open_store(self.crawler.settings, crawl_name(self.crawler.settings, self.name), create=False)
        except StoreNotFound:
            return set()  # a new crawl: nothing stored yet
        try:
            stored = store.revisit_state(self.seed_urls)
            # The reason, for the few not done (revisit_state reads no error).
            not_done = {url: store.get_page(url) or page for url, page in stored.items() if page.get("state") != "C"}
        finally:
            store.close()
        frontier = FrontierService.of(self.crawler).frontier
        again = set()
        for url, page in not_done.items():
            stamp = f"{page.get('fetched_at')}\t{page.get('state')}\t{str(page.get('error') or '')[:100]}"
            if frontier.claim_again(url, stamp):
                again.add(url)
                logger.info("Seed %(url)s is stored as %(state)s (%(error)s): trying it again",
                            {"url": url, "state": page.get("state"), "error": page.get("error") or "no reason"},
                            extra={"spider": self})
        return again

    async def start(self) -> AsyncIterator[Any]:
        settings = self.crawler.settings
        self._load_scope()
        if not self.seed_urls:
            logger.info("No seeds: joining crawl %(crawl)s (scope: %(sites)s)",
                        {"crawl": crawl_name(settings, self.name), "sites": ", ".join(sorted(self.seed_sites))},
                        extra={"spider": self})
        self._settle_follow()
        again = self._seeds_again()
        for url in self.seed_urls:
            if url in self._seen:
                continue
            self._seen.add(url)
            request = self._request(url)
            if url in again:
                request.dont_filter = True  # seen already: queued again past the dedup
                request.meta[AGAIN_META] = 1
            if self.topic is not None:
                request.meta["topic_priority"] = 1000  # where the crawl starts
            yield request

    # -- responses
    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        url = normalize(response.url)
        self._seen.add(url)  # fetched: never worth sending to the frontier again
        self._learn_scope_from(url)
        item = PageItem(
            url=url, site=url_site(url), depth=int(response.meta.get("depth", 0)), status=response.status,
            fetched_at=time.time(),
            etag=_header(response, b"ETag"), last_modified=_header(response, b"Last-Modified"),
            referer=response.meta.get("referer_url"), revisit=_revisit(response.meta),
            content_length=content_length(response),
        )
        if response.status in REDIRECT_STATUSES:
            yield from self._redirect(response, item)
            return
        robots = parse_robots_directives(
            ",".join(v.decode("latin-1") for v in response.headers.getlist(b"X-Robots-Tag"))
        )
        stats = self.crawler.stats
        if not isinstance(response, TextResponse) or not _is_html(response):
            item.page_type = INFO
            item.encoding = getattr(response, "encoding", None)
            # What a re-crawl compares: the bytes, as they came.
            item.content_hash = content_hash(response.body.decode("latin-1"))
            stats.inc_value(f"classifier/page_type/{INFO}")
            if "noindex" not in robots:
                yield item
            return

        text, item.encoding = decode_html(response.body, _header(response, b"Content-Type"),
                                          self._site_encodings.get(item.site))
        self._remember_encoding(item.site, item.encoding)
        topic = self.topic
        page = analyze(parse_html(text), url, link_context=topic is not None)
        robots |= page.robots
        item.title = page.title
        item.text = page.text[: self.max_text_chars]
        item.abstract = page.abstract
        if topic is not None:
            item.topic_score = topic.score(page.title, page.own_text)
            item.on_topic = topic.on_topic(item.topic_score)
            self._siblings.record(url, item.on_topic)
            stats.inc_value("topic/pages_scored")
            stats.inc_value("topic/on_topic" if item.on_topic else "topic/off_topic")
            if _meta_int(response.meta, "topic_hops") > 0:
                stats.inc_value("topic/tunnel_pages")
                if item.on_topic:
                    stats.inc_value("topic/tunnel_on_topic")

        base = url
        if page.base_href:
            try:
                base = normalize(page.base_href, url)
            except InvalidURL:
                pass  # a broken <base href> is ignored, as browsers do
        resolve = self._resolver.resolve
        out: dict[str, str] = {}
        contexts: dict[str, str] = {}
        for i, (href, anchor) in enumerate(page.links):
            link = resolve(base, href)
            if link is not None and link not in out and link != url:
                out[link] = anchor
                if topic is not None:
                    contexts[link] = page.link_contexts[i]
        refresh = self._meta_refresh(text, url)
        if refresh is not None:
            out.setdefault(refresh, "[meta refresh]")
        item.links = [{"url": u, "anchor": a} for u, a in out.items()]
        stats.inc_value("frontier/hrefs_found", len(page.links))
        stats.inc_value("frontier/links_found", len(out))

        # The page's template evidence is counted in the same round trip as
        # its duplicate check; the page is typed with it.
        # Keys only for the site's template (CLASSIFIER_TEMPLATE): hashing
        # every block is work a page typed alone does not need.
        blocks = block_stats(page.blocks, keyed=self.classifier_template) if page.features else []
        keys = stat_keys(blocks) if self.classifier_template and blocks else None
        template_answer: list[Any] = []
        duplicate = self._check_duplicate(item, (item.site, keys) if keys is not None else None, template_answer)
        template, young = self._site_template(item.site, keys, template_answer)
        features: list[float] = []
        # An index of terms (A ... Z, each entry a link) is an index page,
        # template or not; typed so, it is not typed again.
        terms = bool(page.features) and term_index(page.blocks)
        if page.features:
            features = page_features(url, page)
            item.page_type = classify_stats(features, blocks, template, self.classifier_threshold,
                                            thin_navigation(page), self._rule_trust, item.site, terms)
            self._count_rule()
        else:
            item.page_type = INFO
        stats.inc_value(f"classifier/page_type/{item.page_type}")
        if "noindex" in robots:
            stats.inc_value("robots/noindex")
        else:
            yield item
        if template is not None and item.site in self._first_pages:
            yield from self._retype(item.site)
        if young and keys is not None and item.revisit is None and not terms:
            # Typed alone for want of the site's template: kept to be typed
            # again once it is known; its links with it, to follow then if
            # it turns out to be an index page.
            later = (not self.follow_all and self.topic is None and item.page_type != INDEX and not duplicate
                     and "nofollow" not in robots)
            self._keep_first_page(item, features, blocks, keys, "noindex" not in robots,
                                  [u for u in out if u != refresh] if later else [], response.meta)
        if "nofollow" in robots:
            stats.inc_value("robots/nofollow")
            return
        if refresh is not None and not duplicate:
            # A meta refresh is a redirect: followed whatever the page's type,
            # under the same loop and hop limits. The page itself, which has
            # content, stays a page whatever becomes of its refresh.
            follow, _ = self._hop(response, item, refresh)
            if follow is not None:
                yield follow
        if duplicate:
            return  # a copy's links only repeat work (the textbook's reason)
        links = (u for u in out if u != refresh)  # the refresh target was judged as a hop above
        if topic is not None and item.topic_score is not None:
            yield from self._follow_topic(topic, response, item, links, out, contexts)
            return
        if item.page_type != INDEX and not self.follow_all:
            return
        yield from self._follow(links, url, item.depth + 1)

    def _follow_topic(self, topic: Topic, response: Response, item: PageItem, links: Iterable[str],
                      anchors: dict[str, str], contexts: dict[str, str]) -> Iterator[Request]:
        """A focused crawl's links: followed after an on-topic page and
        through the tunnel, each with its priority."""
        score = item.topic_score or 0.0
        # A seed's links are followed whatever its score: the crawl starts there.
        origin = bool(item.on_topic) or item.depth == 0
        follow, hops = follow_links(origin, _meta_int(response.meta, "topic_hops"), self.topic_tunnel)
        if not follow:
            self.crawler.stats.inc_value("topic/tunnel_stopped")
            return
        siblings = self._siblings

        def meta(link: str) -> dict[str, Any]:
            priority = topic.link_priority(link, anchors.get(link, ""), contexts.get(link, ""), score,
                                           siblings.rate(link, score))
            return {"topic_hops": hops, "topic_parent": round(score * 1000),
                    "topic_priority": round(priority * 1000)}

        yield from self._follow(links, item.url, item.depth + 1, link_meta=meta)

    def _count_rule(self) -> None:
        trust = self._rule_trust
        if trust.decided:
            self.crawler.stats.set_value("classifier/rule/decided", trust.decided)
            self.crawler.stats.set_value("classifier/rule/overruled", trust.overruled)
        if trust.bare:
            self.crawler.stats.set_value("classifier/bare_index", trust.bare)
        if trust.contents:
            self.crawler.stats.set_value("classifier/contents_index", trust.contents)
        if trust.terms:
            self.crawler.stats.set_value("classifier/terms_index", trust.terms)

    def _site_template(self, site: str, keys: list[str] | None,
                       answer: list[Any]) -> tuple[frozenset[str] | None, bool]:
        """The page's block ``keys`` that are its site's template, after
        counting the page in the cluster's evidence (``answer``: what the
        count answered in the duplicate check's round trip; empty: it was
        not sent, and is sent now); None (type the page alone) while the
        site has too few pages, or without evidence. And whether the site
        had too few pages (its template will be known later)."""
        if keys is None:
            return None, False
        stats = self.crawler.stats
        templates = FrontierService.of(self.crawler).frontier.templates

        def counted() -> Evidence | None:
            if not answer:
                return templates.observe(site, keys)
            if isinstance(answer[0], Exception):
                raise answer[0]
            return templates.evidence(answer[0], keys)

        evidence = self._evidence(site, counted, "classifier/template")
        if evidence is None:
            return None, False
        template = evidence.template(keys, templates.policy)
        stats.inc_value("classifier/template/page_only" if template is None else "classifier/template/used")
        return template, template is None

    def _evidence(self, site: str, ask: Callable[[], Evidence | None], stat: str) -> Evidence | None:
        """What ``ask`` says of the site's evidence; None (counted in
        ``<stat>/redis_error`` or ``<stat>/malformed``) without it."""
        try:
            evidence = ask()
        except redis.RedisError as exc:
            self.crawler.stats.inc_value(f"{stat}/redis_error")
            logger.debug("Template evidence unavailable for %(site)s: %(exc)s", {"site": site, "exc": exc},
                         extra={"spider": self})
            return None
        if evidence is None:
            self.crawler.stats.inc_value(f"{stat}/malformed")
        return evidence

    def _keep_first_page(self, item: PageItem, base: list[float], blocks: list[BlockStat], keys: list[str],
                         stored: bool, links: list[str], meta: dict[str, Any]) -> None:
        trap_meta = {k: meta[k] for k in (*TRAP_META_KEYS, "shape_run") if k in meta} if links else {}
        entry = _FirstPage(item if stored else None, item.url, item.depth, item.page_type or INFO, base, blocks,
                           keys, links, trap_meta)
        cost = (1024 + 96 * len(blocks) + 64 * len(keys) + sum(96 + len(u) for u in links)
                + (len(item.text) + len(item.abstract) + sum(160 + len(ln["url"]) + len(ln["anchor"])
                                                             for ln in item.links) if stored else 0))
        evicted = self._first_pages.evicted
        self._first_pages.add(item.site, entry, cost)
        if self._first_pages.evicted != evicted:
            self.crawler.stats.inc_value("classifier/retype/evicted", self._first_pages.evicted - evicted)

    def _retype(self, site: str) -> Iterator[Any]:
        """Type the site's first pages kept by this worker again, with the
        site's template as the cluster's evidence now says: a page whose
        type changes is stored again, and its links followed if it is now
        an index page."""
        entries = self._first_pages.peek(site)
        stats = self.crawler.stats
        templates = FrontierService.of(self.crawler).frontier.templates
        keys = list(dict.fromkeys(k for e in entries for k in e.keys))
        evidence = self._evidence(site, lambda: templates.read(site, keys), "classifier/retype")
        if evidence is None or evidence.pages < templates.policy.min_pages:
            # Kept: typed again with the site's next page. Too few pages
            # counted: the site's evidence has gone since this page's count
            # (it expired, or was cleared) and is being learned again.
            return
        self._first_pages.take(site)
        counts = dict(zip(keys, evidence.counts))
        for e in entries:
            template = template_of(e.keys, counts, evidence.pages, templates.policy)
            if template is None:
                continue
            stats.inc_value("classifier/retype/checked")
            new = classify_stats(e.base, e.blocks, template, self.classifier_threshold,
                                 trust=self._rule_trust, site=site)
            self._count_rule()
            if new == e.page_type:
                continue
            stats.inc_value(f"classifier/retype/{new}")
            stats.inc_value(f"classifier/page_type/{e.page_type}", -1)
            stats.inc_value(f"classifier/page_type/{new}")
            logger.debug("Typed again with its site's template: %(url)s is an %(new)s page",
                         {"url": e.url, "new": new}, extra={"spider": self})
            if e.item is not None:
                yield replace(e.item, page_type=new, typed_again=True)
            if new == INDEX and e.links:
                yield from self._follow(e.links, e.url, e.depth + 1, meta={TRAP_PARENT: (e.url, e.trap_meta)})

    def _remember_encoding(self, site: str, encoding: str) -> None:
        """The site's last legacy encoding: the hint for its pages that declare
        none (a hint is used only when a page's bytes read well in it).
        Bounded, least recently used sites first out."""
        if encoding in ("utf-8", "utf-16le", "utf-16be"):
            return
        hints = self._site_encodings
        hints[site] = encoding
        hints.move_to_end(site)
        if len(hints) > 10_000:
            hints.popitem(last=False)

    def _meta_refresh(self, text: str, url: str) -> str | None:
        """The target of a ``<meta http-equiv="refresh">`` in the page's head
        that sends the reader elsewhere within 100 s (Scrapy's
        ``METAREFRESH_MAXDELAY``); a page that only reloads itself has none."""
        head = text[:8192]
        if "refresh" not in head.lower():
            return None
        from w3lib.html import get_meta_refresh

        try:
            interval, target = get_meta_refresh(head, url)
            target = normalize(target, url) if target and interval is not None and interval <= 100 else None
        except (InvalidURL, ValueError):
            return None
        return target if target != url else None

    def _redirect(self, response: Response, item: PageItem) -> Iterator[Any]:
        """A 3xx answer: the source is stored (status, and its target as its
        one link); the target is judged by ``_hop``. A missing Location, a
        loop and the hop limit make the source an error record."""
        location = _header(response, b"Location")
        try:
            target = normalize(location, item.url) if location else None
        except InvalidURL:
            target = None
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
        chain = [u for u in response.meta.get("redirect_urls", ()) if isinstance(u, str)]
        hops = int(response.meta.get("redirect_times", 0))
        if target == item.url or target in chain:
            stats.inc_value("redirect/loop")
            return None, "redirect loop: " + " -> ".join([*chain, item.url, target])[:500]
        if hops >= self.max_redirects:
            stats.inc_value("redirect/limit")
            return None, f"too many redirects: {hops + 1} hops (REDIRECT_MAX_TIMES = {self.max_redirects})"
        if not self._in_scope(target):
            stats.inc_value("redirect/off_scope")
            return None, None
        meta: dict[str, Any] = {"redirect_times": hops + 1, "redirect_urls": [*chain, item.url][-self.max_redirects:]}
        # A focused crawl's standing goes with the hop: the target is the link it was.
        meta.update({k: response.meta[k] for k in _TOPIC_META if _meta_int(response.meta, k)})
        follow = list(self._follow([target], item.url, item.depth, priority=1, meta=meta))
        if follow:
            stats.inc_value("redirect/followed")
        return (follow[0] if follow else None), None

    def _check_duplicate(self, item: PageItem, template: tuple[str, list[str]] | None = None,
                         template_answer: list[Any] | None = None) -> bool:
        """Fingerprint the page and ask the cluster's index whether it is a
        copy, before any of its links reach the frontier. True: its links are
        not to be followed (a copy of a page of its own site, or its site
        mirrors another). ``template``: the page's (site, block keys), counted
        in the same round trip, the answer put in ``template_answer``."""
        if not item.text and not item.links:
            return False
        item.content_hash = content_hash(item.text)
        # Exact copies of short pages are found too, but only with the same
        # links: short texts ("Archive", a title) are shared by pages that
        # differ by their links alone.
        key = item.content_hash
        fp: int | None = None
        sketch: Sketch | None = None
        if len(item.text) >= self.simhash_min_chars:
            fp, sketch = fingerprints(item.text, self.neardup_sample)
            item.simhash = signed(fp)
        else:
            self.crawler.stats.inc_value("simhash/skipped_short")
            key = content_hash(item.content_hash + "\n" + "\n".join(sorted(x["url"] for x in item.links)))
            if item.text:
                # Stored for the re-crawl's change detection; too short to
                # decide near duplicates by (fp stays None).
                item.simhash = signed(simhash(item.text))
        frontier = FrontierService.of(self.crawler).frontier
        also = [frontier.templates.call(*template)] if template is not None else []
        try:
            verdict = frontier.near_duplicate(
                item.url, item.site, key, fp, sketch, self.neardup_resemblance,
                mirror_min_pages=self.mirror_min_pages, mirror_share=self.mirror_share,
                also=also, also_results=template_answer)
        except redis.RedisError as exc:
            logger.warning("Duplicate check failed for %(url)s: %(exc)s", {"url": item.url, "exc": exc},
                           extra={"spider": self})
            return False
        if verdict.kind == "new":
            return False
        item.dup_of = verdict.first
        item.mirror_of = verdict.mirror_of
        stats = self.crawler.stats
        stats.inc_value(f"simhash/{verdict.kind}_duplicate")
        if not verdict.same_site:
            stats.inc_value("simhash/cross_site_copy")
        logger.debug("%(url)s is a%(n)s %(kind)s duplicate of %(first)s (resemblance %(r).3f)",
                     {"url": item.url, "n": "n" if verdict.kind == "exact" else "", "kind": verdict.kind,
                      "first": verdict.first, "r": verdict.resemblance}, extra={"spider": self})
        return verdict.same_site or verdict.mirror_of is not None

    def _follow(self, links: Iterable[str], referer: str, depth: int, priority: int = 0,
                meta: dict[str, Any] | None = None,
                link_meta: Callable[[str], dict[str, Any]] | None = None) -> Iterator[Request]:
        """Requests for the links not sent before, at ``depth`` (the number of
        links from a seed: a redirect keeps its source's depth). Depth is kept
        here rather than by Scrapy's DepthMiddleware, which counts a redirect
        the spider follows as one more level."""
        stats = self.crawler.stats
        if self.depth_limit and depth > self.depth_limit:
            stats.inc_value("depth/request_ignored_count")
            return
        stats.max_value("request_depth_max", depth)
        seen = self._seen
        new = parsed = 0
        for link in links:
            parsed += 1
            if link in seen:
                continue
            # Judged before it is remembered: a link out of scope now may be in
            # scope once another worker's seeds widen it.
            if not self._in_scope(link) or link.lower().split("?", 1)[0].endswith(_IGNORED_SUFFIXES):
                continue
            seen.add(link)
            new += 1
            request = self._request(link, referer)
            request.meta["depth"] = depth
            if priority:
                request.priority = priority
            if meta:
                request.meta.update(meta)
            if link_meta is not None:
                request.meta.update(link_meta(link))
            yield request
        stats.inc_value("frontier/links_new", new)
        stats.inc_value("frontier/links_parsed", parsed)

    def closed(self, reason: str) -> None:
        """Scrapy's call at the spider's close: first pages still kept keep
        the type they were given alone (counted)."""
        left = len(self._first_pages)
        if left:
            self.crawler.stats.inc_value("classifier/retype/unchecked", left)

    def errback(self, failure: Failure) -> Iterator[PageItem]:
        request: Request = failure.request  # type: ignore[attr-defined]
        exc = failure.value
        if isinstance(exc, IgnoreRequest) and not isinstance(exc, HttpError) and str(exc) == ROBOTS_FORBIDDEN:
            # Not fetched at all, by the site's wish: not a page, not an error
            # of the site (robotstxt/forbidden counts it). Every other refusal
            # (the address guard, a decompression bomb, ...) is an error record.
            return
        url = normalize(request.url)
        response = getattr(failure.value, "response", None)
        yield PageItem(
            url=url, site=url_site(url), depth=int(request.meta.get("depth", 0)),
            state="E", status=response.status if response is not None else None,
            fetched_at=time.time(), error=_reason(failure),
            referer=request.meta.get("referer_url"), revisit=_revisit(request.meta),
            etag=_header(response, b"ETag") if response is not None else None,
            last_modified=_header(response, b"Last-Modified") if response is not None else None,
        )


def _revisit(meta: dict[str, Any]) -> int | None:
    """The due time of a re-crawl's visit (``recrawl`` spider), else None."""
    due = meta.get("revisit")
    return due if isinstance(due, int) and not isinstance(due, bool) else None


def _meta_int(meta: dict[str, Any], key: str) -> int:
    """A non-negative integer the crawler put in ``meta`` (0 when absent or
    not one: the frontier checks entries, a request built by hand may not)."""
    value = meta.get(key, 0)
    return value if type(value) is int and value >= 0 else 0


def content_length(response: Response) -> int | None:
    """The response's Content-Length header as sent (None: absent or not a
    length). For a HEAD, the length a GET would have had."""
    value = response.headers.get(b"Content-Length")
    if not value or not value.isdigit() or len(value) > 15:
        return None
    return int(value)


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
