"""Following: which links of a page become requests, and the crawl's scope.

A page's links are all recorded (its item's ``links``); which of them are
followed is decided here, per worker, for the spiders:

- **Scope** (``-a scope=site|host|any``): a link is followed when its site
  (registrable domain) or, with ``host``, its host is one the crawl's seeds
  opened (``urls.in_scope``). The seeds' sites and hosts are shared through
  the frontier: each worker adds its own and reads the others' (every 5 s,
  and at once when the frontier hands it a page of a site it did not know).
- **The follow policy** (``-a follow=index|all``): the crawl's, recorded in
  its meta by the worker that starts it; later workers and the re-crawl
  follow it (``settle_policy``).
- **The URL cache** (``FRONTIER_URL_CACHE``): the normalised URLs this
  worker has sent to the frontier, bounded (T-spider's URL cache). A
  documentation page carries ~180 links, almost all seen before; building a
  Request for each only for the frontier's dedup to drop it was most of
  plain Scrapy's CPU time. The frontier's shared dedup in Redis stays
  behind it as the record for the whole cluster.
- **Navigation links** (``<link rel="next">``, ``<a rel="up">`` ...:
  ``crawler.reading.links.is_navigation``): followed from every page, whatever
  its type and the follow policy. The author declares them the way through
  the document; under ``follow=index`` they reach a section whose contents
  page no page typed index links to (``page_links``). A page gives a few,
  almost all seen before: the crawl stays one of index pages' links.
- **Depth** (``DEPTH_LIMIT``): kept here rather than by Scrapy's
  ``DepthMiddleware``, which counts a redirect the spider follows as one
  more level (a redirect keeps its source's depth).
- **Focused crawls** (``-a topic``): which links go on, and their
  priorities, are ``crawler/following/topiclinks.py``'s (its settings and stats);
  they are queued here (``follow_topic``, ``listed_links``).

``request.meta`` keys set: ``depth``, and the meta the caller gives.

Stats: ``depth/request_ignored_count``, ``request_depth_max``,
``frontier/links_new`` (links never sent before: Requests built),
``frontier/navigation_new`` (of those, navigation links of pages whose
other links were not followed),
``frontier/links_parsed``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any

import redis
from scrapy.linkextractors import IGNORED_EXTENSIONS

from crawler.following.importance import Importance
from crawler.requestmeta import DEPTH
from crawler.scope.rules import RulesError, UrlRules
from crawler.following.topiclinks import TopicLinks
from crawler.following.urlcache import UrlCache
from crawler.scope.urls import SCOPES, host_of, in_scope, on_prefix_host, url_prefix, url_site

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from crawler.following.topic import Topic
    from crawler.frontier.faces import SpiderFace

logger = logging.getLogger(__name__)

__all__ = ["FOLLOW_MODES", "Follower", "UrlCache", "meta_int", "policy_conflict"]

FOLLOW_MODES = ("index", "all")
# The crawl's other choices, and what a crawl started without them records
# (sitemaps: SITEMAP_ENABLED's).
CHOICE_DEFAULTS = {"sitemaps": "1", "languages": "", "render": "never"}

# Links to files the crawl does not read (Scrapy's list: images, archives,
# office files ...) are not followed; PDFs are read (crawler/reading/documents.py).
_IGNORED_SUFFIXES = tuple("." + ext for ext in IGNORED_EXTENSIONS if ext != "pdf")

# How often a worker reads the seeds other workers brought (seconds).
SCOPE_REFRESH = 5.0


def _recorded_rules(raw: str | None) -> UrlRules | None:
    """The URL rules a crawl recorded (None: none recorded, or unreadable:
    then this worker's own, which it recorded or will)."""
    if raw is None:
        return None
    try:
        return UrlRules.from_json(raw)
    except RulesError as exc:
        logger.error("The crawl's recorded URL rules are unusable (%(exc)s): keeping this worker's", {"exc": exc})
        return None


def policy_conflict(meta: Any, crawl: str, follow: str | None, scope: str | None, rules: UrlRules,
                    choices: dict[str, str | None] | None = None) -> str | None:
    """Why a site worker that asks for ``follow``, ``scope``, ``rules`` and
    other ``choices`` (``sitemaps``, ``languages``, ``render``; None, empty: whatever
    the crawl recorded) may not join crawl ``crawl`` (``meta``: its
    ``CrawlMeta``), in one line; None when it may."""
    asked = {"follow": follow, "scope": scope, **(choices or {})}
    for name, mine in asked.items():
        recorded = meta.crawl_policy(name)
        if mine is not None and recorded is not None and recorded != mine:
            return (f"crawl {crawl!r} has -a {name}={recorded} (recorded when it started); this worker asks "
                    f"-a {name}={mine}: join it with -a {name}={recorded} (or without -a {name}), or start another "
                    "crawl (-s CRAWL_NAME=...)")
    recorded_rules = _recorded_rules(meta.crawl_policy("rules"))
    if rules and recorded_rules is not None and recorded_rules != rules:
        return (f"crawl {crawl!r} has other URL rules (recorded when it started: {recorded_rules.to_json()}); this "
                f"worker asks {rules.to_json()}: join it with the same rules (or none), or start another crawl "
                "(-s CRAWL_NAME=...)")
    return None


def meta_int(meta: dict[str, Any], key: str) -> int:
    """A non-negative integer the crawler put in ``meta`` (0 when absent or
    not one: the frontier checks entries, a request built by hand may not)."""
    value = meta.get(key, 0)
    return value if type(value) is int and value >= 0 else 0


class Follower:
    """One worker's following: scope, policy, URL cache, depth, topic."""

    def __init__(self, crawler: Crawler, make_request: Callable[[str, str | None], Request], *, frontier: SpiderFace,
                 scope: str | None,
                 follow: str | None, seed_urls: Iterable[str], topic: Topic | None,
                 rules: UrlRules | None = None, records_policy: bool = True,
                 choices: dict[str, str | None] | None = None) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.make_request = make_request
        self.frontier = frontier  # the crawl's frontier, as the spider's parts see it
        # The crawl's scope, follow policy and URL rules: this worker's until
        # settled against those recorded in the crawl's meta (settle_policy).
        self.scope = scope or "site"
        self.asked_scope = scope
        self.policy = follow
        self.rules = rules or UrlRules()
        self.brought_rules = bool(self.rules)
        self.records_policy = records_policy
        # The crawl's other choices (-a sitemaps, -a languages): this
        # worker's (None: not asked) until settled like the follow policy.
        self.asked_choices = dict(choices or {})
        self.choices: dict[str, str | None] = dict(self.asked_choices)
        self.choice_defaults = {**CHOICE_DEFAULTS, "sitemaps": "1" if settings.getbool("SITEMAP_ENABLED", True) else "0"}
        self.topic = topic
        seeds = list(seed_urls)
        self.seed_urls = seeds
        self.seed_hosts = frozenset(host_of(u) for u in seeds)
        self.seed_sites = frozenset(url_site(u) for u in seeds)
        self.seed_prefixes = frozenset(url_prefix(u) for u in seeds)
        self.seen = UrlCache(settings.getint("FRONTIER_URL_CACHE"))
        self.importance = Importance(crawler, frontier, 2 * settings.getint("FRONTIER_URL_CACHE"))
        self.depth_limit = settings.getint("DEPTH_LIMIT")
        self.topic_links = TopicLinks(crawler, self.seen)
        self.siblings = self.topic_links.siblings
        self._scope_checked = 0.0
        self._scope_reloaded_for: set[str] = set()

    @property
    def stats(self) -> StatsCollector:
        # Not read in __init__: Scrapy sets crawler.stats when the crawl starts.
        return self.crawler.stats

    @property
    def follow_all(self) -> bool:
        return self.policy == "all"

    # -- the crawl's policy --------------------------------------------------------------
    def settle_policy(self) -> str:
        """Follow links as the crawl does: its follow policy, scope and URL
        rules are recorded in its meta by the worker that starts it (``-a
        follow``, default ``index``; ``-a scope``, default ``site``; ``-a
        allow/deny/rules``) and read by every other, and by the re-crawl
        (``records_policy`` False), which follows the links of changed pages
        as the crawl did unless it was asked another policy for its pass.
        ``scrapy crawl`` refuses a site worker that asks for others
        (``policy_conflict``, commands/crawl.py); started otherwise
        (scrapyd), such a worker says so and follows the crawl's. Returns
        the follow policy."""
        meta = self.frontier.meta
        # What this worker asked for is recorded if it asked, or if it brings
        # seeds (it starts the crawl: its defaults are the crawl's); a worker
        # that only joins records nothing and takes what the crawl recorded,
        # even if it came first (its rules are read again with the scope).
        starts = self.records_policy and bool(self.seed_urls)
        follow = meta.crawl_policy("follow", self.policy or "index" if self.records_policy and (
            self.policy is not None or starts) else None)
        scope = meta.crawl_policy("scope", self.scope if self.records_policy and (
            self.asked_scope is not None or starts) else None)
        rules_raw = meta.crawl_policy("rules", self.rules.to_json() if self.records_policy and (
            self.rules or starts) else None)
        self.policy = self._adopt("follow", self.policy, follow if follow in FOLLOW_MODES else None) or "index"
        for name, mine in self.asked_choices.items():
            default = self.choice_defaults.get(name, "")
            recorded = meta.crawl_policy(name, (mine if mine is not None else default) if self.records_policy and (
                mine is not None or starts) else None)
            self.choices[name] = self._adopt(name, mine, recorded) if recorded is not None or mine is not None \
                else default
        self.scope = self._adopt("scope", self.asked_scope, scope if scope in SCOPES else None) or "site"
        self._adopt_rules(rules_raw)
        return self.policy

    def _adopt_rules(self, raw: str | None) -> None:
        recorded = _recorded_rules(raw)
        if recorded is None or recorded == self.rules:
            return
        if self.brought_rules and self.records_policy:
            logger.error("Crawl %(crawl)s has other URL rules (recorded when it started: %(recorded)s), not "
                         "%(mine)s: following the crawl's",
                         {"crawl": self.frontier.crawl, "recorded": recorded.to_json(),
                          "mine": self.rules.to_json()}, extra={"spider": self.crawler.spider})
        self.rules = recorded

    def _adopt(self, name: str, mine: str | None, recorded: str | None) -> str | None:
        if mine is None or recorded is None or mine == recorded:
            return recorded or mine
        if self.records_policy:
            logger.error("Crawl %(crawl)s has -a %(name)s=%(recorded)s (recorded when it started), not "
                         "-a %(name)s=%(mine)s: following the crawl's",
                         {"crawl": self.frontier.crawl, "name": name,
                          "recorded": recorded, "mine": mine}, extra={"spider": self.crawler.spider})
            return recorded
        return mine  # the re-crawl asked for another policy for its pass

    def allows(self, url: str) -> str | None:
        """Why the URL rules keep ``url`` out (None: they do not)."""
        return self.rules.verdict(url) if self.rules else None

    # -- scope -----------------------------------------------------------------------------
    def in_scope(self, url: str) -> bool:
        if self.covers(url):
            return True
        # Seeds given to other workers widen the scope of the whole crawl.
        if time.monotonic() - self._scope_checked > SCOPE_REFRESH:
            self.load_scope()
            return self.covers(url)
        return False

    def sitemap_in_scope(self, url: str) -> bool:
        """Whether the sitemap file at ``url`` is read: in scope, or under
        ``-a scope=prefix`` on a host of the crawl's prefixes. A site's
        sitemaps sit at its root, outside any prefix; the scope filters the
        URLs they list. Not wider: a sitemap lists URLs of its own host only
        (``sitemapparse.location_base``), so one elsewhere brings nothing."""
        return self.in_scope(url) or self.scope == "prefix" and on_prefix_host(url, self.seed_prefixes)

    def covers(self, url: str) -> bool:
        """Whether ``url`` is in the scope this worker knows (no Redis)."""
        return in_scope(self.scope, url, self.seed_sites, self.seed_hosts, self.seed_prefixes)

    def widen(self, urls: Iterable[str]) -> None:
        """Pages the crawl covers though no seed of this worker opened them
        (the re-crawl's stored pages): their sites, hosts and directories
        shared with the crawl."""
        urls = list(urls)
        self.seed_sites |= frozenset(url_site(u) for u in urls)
        self.seed_hosts |= frozenset(host_of(u) for u in urls)
        self.seed_prefixes |= frozenset(url_prefix(u) for u in urls)
        self.load_scope()

    def learn_scope_from(self, url: str) -> None:
        """A page the frontier handed us belongs to the crawl's scope: when its
        site is new to this worker (seeds another worker brought), reload the
        scope now, before its links are judged; waiting for the periodic
        refresh would drop them, and with them URLs nobody else may find."""
        if self.covers(url):
            return
        key = {"host": host_of, "prefix": url_prefix}.get(self.scope, url_site)(url)
        if key not in self._scope_reloaded_for:
            self._scope_reloaded_for.add(key)
            self.load_scope()

    def load_scope(self) -> None:
        """Share this worker's seed sites and hosts with the crawl, and learn
        those of the others (a worker without seeds joins with theirs)."""
        self._scope_checked = time.monotonic()
        frontier = self.frontier
        if not frontier.is_open:
            return
        try:
            sites, hosts, prefixes = frontier.scope.share(
                sorted(self.seed_sites), sorted(self.seed_hosts), sorted(self.seed_prefixes))
        except redis.RedisError as exc:
            logger.warning("Could not read the crawl's scope from Redis: %(exc)s", {"exc": exc},
                           extra={"spider": self.crawler.spider})
            return
        self.seed_sites = self.seed_sites | sites
        self.seed_hosts = self.seed_hosts | hosts
        self.seed_prefixes = self.seed_prefixes | prefixes
        if not self.brought_rules:
            try:  # the crawl's rules, recorded by the worker that started it, perhaps after this one came
                self._adopt_rules(frontier.meta.crawl_policy("rules"))
            except redis.RedisError as exc:
                logger.warning("Could not read the crawl's URL rules from Redis: %(exc)s", {"exc": exc},
                               extra={"spider": self.crawler.spider})

    # -- following ---------------------------------------------------------------------------
    def page_links(self, is_index: bool, url: str, depth: int, links: Iterable[str],
                   importance: Any = None, navigation: Iterable[str] = ()) -> Iterator[Request]:
        """The links of a page of a crawl without a topic: followed from an
        index page, or from any page under ``follow=all``; its
        ``navigation`` links (``resolve_navigation``) from every page
        (``importance``: the page's, in an importance crawl)."""
        if is_index or self.follow_all:
            yield from self.follow(chain(links, navigation), url, depth + 1, importance=importance)
            return
        # An information page's navigation links count as in-links, but
        # none takes a share of its importance: split over its 2-5
        # navigation links alone, it would outrank what index pages link.
        new = 0
        for request in self.follow(navigation, url, depth + 1):
            new += 1
            yield request
        if new:
            self.stats.inc_value("frontier/navigation_new", new)

    def follow(self, links: Iterable[str], referer: str, depth: int, priority: int = 0,
               meta: dict[str, Any] | None = None,
               link_meta: Callable[[str], dict[str, Any]] | None = None, importance: Any = None) -> Iterator[Request]:
        """Requests for the links not sent before, at ``depth`` (the number of
        links from a seed: a redirect keeps its source's depth). In an
        importance crawl each link gains a share of ``importance`` (the
        page's), those sent before too (``crawler/following/importance.py``)."""
        stats = self.stats
        if self.depth_limit and depth > self.depth_limit:
            stats.inc_value("depth/request_ignored_count")
            return
        stats.max_value("request_depth_max", depth)
        seen = self.seen
        new = parsed = 0
        ranked = self.importance.enabled
        cash = 0
        if ranked:
            links = [u for u in links if self.covers(u) or u in seen]
            cash = self.importance.cash(importance, len(links), referer)
        for link in links:
            parsed += 1
            if link in seen:
                if ranked:
                    self.importance.raise_sent(link, cash)
                continue
            # Judged before it is remembered: a link out of scope now may be in
            # scope once another worker's seeds widen it.
            if not self.in_scope(link) or link.lower().split("?", 1)[0].endswith(_IGNORED_SUFFIXES):
                continue
            seen.add(link)  # the rules' answer does not change: judged once
            excluded = self.allows(link)
            if excluded is not None:
                stats.inc_value(f"rules/{excluded}")
                continue
            new += 1
            request = self.make_request(link, referer)
            request.meta[DEPTH] = depth
            if priority:
                request.priority = priority
            if meta:
                request.meta.update(meta)
            if link_meta is not None:
                request.meta.update(link_meta(link))
            if ranked:
                self.importance.mark(request, cash)
            yield request
        stats.inc_value("frontier/links_new", new)
        stats.inc_value("frontier/links_parsed", parsed)

    def listed_links(self, links: list[str], referer: str) -> Iterator[Request]:
        """URLs a sitemap lists (``crawler/sitemaps/crawl.py``), at depth 1; in a
        focused crawl those ``TopicLinks.listed`` chooses."""
        if self.topic is None:
            yield from self.follow(links, referer, 1)
            return
        chosen, link_meta = self.topic_links.listed(self.topic, links)
        yield from self.follow(chosen, referer, 1, link_meta=link_meta)

    def follow_topic(self, topic: Topic, url: str, depth: int, score: float, on_topic: bool,
                     hops_so_far: int, links: Iterable[str], anchors: dict[str, str],
                     contexts: dict[str, str]) -> Iterator[Request]:
        """A focused crawl's links: followed after an on-topic page and
        through the tunnel, each with its priority (``TopicLinks.page``)."""
        plan = self.topic_links.page(topic, depth, score, on_topic, hops_so_far, links, anchors, contexts)
        if plan is not None:
            yield from self.follow(plan[0], url, depth + 1, link_meta=plan[1])
