"""Page typing: index (navigation) or information (content) page, and the
re-typing of a site's first pages once its template is known.

Each HTML page is typed by ``crawler.pagetypes.classify`` against its site's template
(``CLASSIFIER_TEMPLATE``; the page check counts it: ``crawler/duplicates/check.py``),
or alone while the site has too few pages counted (by its kind's
probabilities: ``crawler.pagetypes.kind``). ``CLASSIFIER_THRESHOLD``
overrides the models' thresholds. With the template known, the model's close
calls go to the link-density rule on a site where it has held
(``pagerules.RuleTrust``: this worker's count, at most 4,096 sites); a page
with next to nothing of its own, a contents list and an index of terms are
index pages (``pagerules.bare_navigation``, ``template.contents_list``,
``pagerules.term_index``).

A site's first pages, typed alone for want of its template, are kept by the
worker that typed them (``template.FirstPages``, bounded: the item as
stored, its template-free features and its blocks' figures, not its
markup) and typed again when that worker next types a page of the site with
its template known (one more Redis round trip, once a site; kept for the
next page if Redis cannot answer). A page whose type changes is stored
again with its new type; one that becomes an index page has its links
followed then (``follow=index``). An index of terms is typed once: it is
not kept. A kept page counts in its item's ``pending`` (the spider adds it
before the item is yielded) until its type is final: typed again, not kept
after all, or dropped for the bound (``crawler/operations/feeds.py`` waits for it).

Stats: ``classifier/page_type/<type>``, ``classifier/retype/checked``,
``classifier/retype/<type>`` (pages whose type changed, by new type),
``classifier/retype/redis_error``, ``classifier/retype/malformed``,
``classifier/retype/evicted`` (first pages no longer kept: the bound),
``classifier/retype/unchecked`` (still kept when the spider closed),
``classifier/rule/decided``, ``classifier/rule/overruled``,
``classifier/bare_index``, ``classifier/contents_index``,
``classifier/terms_index``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crawler.pagetypes.classify import classify_stats
from crawler.duplicates.check import template_evidence
from crawler.pagetypes.features import page_features
from crawler.pagetypes.kind import kind_scores
from crawler.pagetypes.rules import INFO, RuleTrust, term_index, thin_navigation
from crawler.requestmeta import SHAPE_RUN, TRAP_EVIDENCE
from crawler.pagetypes.template import BlockStat, FirstPages, block_stats, stat_keys, template_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from crawler.reading.extract import Page
    from crawler.frontier.faces import SpiderFace
    from crawler.items import PageItem

logger = logging.getLogger(__name__)

__all__ = ["FirstPage", "PageTyper", "Retyped", "Typed"]


@dataclass(slots=True)
class FirstPage:
    """A page typed alone, kept until its site's template is known."""

    item: PageItem | None  # what was stored (None: noindex, not stored)
    url: str
    depth: int
    page_type: str
    base: list[float]  # pagefeatures.page_features
    blocks: list[BlockStat]
    keys: list[str]
    links: list[str]  # to follow if it turns out to be an index page
    trap_meta: dict[str, Any]  # its response's trap-guard evidence, which its links are judged by


@dataclass(slots=True)
class Typed:
    """A page as the typer saw it: its type, and what keeping it for a
    second look needs (``blocks``, ``keys``: the page check's; ``base``:
    its template-free features; ``terms``: an index of terms, never kept)."""

    page_type: str
    blocks: list[BlockStat]
    keys: list[str] | None
    base: list[float]
    terms: bool


@dataclass(slots=True)
class Retyped:
    """A first page whose type changed once its site's template was known."""

    item: PageItem | None  # to store again (None: it was not stored)
    page: FirstPage
    page_type: str


class PageTyper:
    def __init__(self, crawler: Crawler, frontier: SpiderFace) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.frontier = frontier
        threshold = settings.get("CLASSIFIER_THRESHOLD")
        self.threshold = None if threshold in (None, "") else float(threshold)
        self.use_template = settings.getbool("CLASSIFIER_TEMPLATE")
        # Per site, whether the link-density rule may decide the model's
        # close calls (crawler/pagetypes/rules.py, RuleTrust): this worker's count.
        self.trust = RuleTrust()
        self.first_pages: FirstPages[FirstPage] = FirstPages(on_evict=self._final)

    @property
    def stats(self) -> StatsCollector:
        # Not read in __init__: Scrapy sets crawler.stats when the crawl starts.
        return self.crawler.stats

    def blocks(self, page: Page) -> tuple[list[BlockStat], list[str] | None]:
        """The page's blocks' figures and, for the template count, their keys
        (only with ``CLASSIFIER_TEMPLATE``: hashing every block is work a
        page typed alone does not need); None: count nothing."""
        if not page.features:
            return [], None
        blocks = block_stats(page.blocks, keyed=self.use_template)
        return blocks, stat_keys(blocks) if self.use_template and blocks else None

    def type_page(self, url: str, page: Page, blocks: list[BlockStat], keys: list[str] | None,
                  template: frozenset[str] | None, site: str, kind: dict[str, float] | None = None,
                  features: list[float] | None = None) -> Typed:
        """The page's type, with its site's ``template`` (None: alone, by
        the probabilities of its ``kind``: the kind step's, read here when
        that step did not run). ``features``: the page's ``page_features``
        when the kind step read them."""
        base: list[float] = []
        # An index of terms (A ... Z, each entry a link) is an index page,
        # template or not.
        terms = bool(page.features) and term_index(page.blocks)
        if page.features:
            base = page_features(url, page) if features is None else features
            if template is None and kind is None:
                kind = kind_scores(page, url, base)
            page_type = classify_stats(base, blocks, template, self.threshold, thin_navigation(page), self.trust,
                                       site, terms, kind)
            self._count_rule()
        else:
            page_type = INFO
        self.stats.inc_value(f"classifier/page_type/{page_type}")
        return Typed(page_type, blocks, keys, base, terms)

    def other_type(self) -> str:
        """A response that is no HTML page (a PDF, an image): information."""
        self.stats.inc_value(f"classifier/page_type/{INFO}")
        return INFO

    def _count_rule(self) -> None:
        trust, stats = self.trust, self.stats
        if trust.decided:
            stats.set_value("classifier/rule/decided", trust.decided)
            stats.set_value("classifier/rule/overruled", trust.overruled)
        for stat, count in (("classifier/bare_index", trust.bare), ("classifier/contents_index", trust.contents),
                            ("classifier/terms_index", trust.terms)):
            if count:
                stats.set_value(stat, count)

    # -- first pages -------------------------------------------------------------------
    def keep_first_page(self, item: PageItem, typed: Typed, stored: bool, links: list[str],
                        meta: dict[str, Any]) -> None:
        """Keep a page typed alone (its site too young for a template) to
        type it again once the template is known, with ``links`` to follow
        then if it turns out to be an index page."""
        assert typed.keys is not None
        trap_meta = {k: meta[k] for k in (*TRAP_EVIDENCE, SHAPE_RUN) if k in meta} if links else {}
        entry = FirstPage(item if stored else None, item.url, item.depth, item.page_type or INFO, typed.base,
                          typed.blocks, typed.keys, links, trap_meta)
        cost = (1024 + 96 * len(typed.blocks) + 64 * len(typed.keys) + sum(96 + len(u) for u in links)
                + (len(item.text) + len(item.abstract) + sum(160 + len(ln["url"]) + len(ln["anchor"])
                                                             for ln in item.links) if stored else 0))
        evicted = self.first_pages.evicted
        if not self.first_pages.add(item.site, entry, cost):
            self._final(entry)  # not kept: its type stands
        if self.first_pages.evicted != evicted:
            self.stats.inc_value("classifier/retype/evicted", self.first_pages.evicted - evicted)

    def retype(self, site: str) -> Iterator[Retyped]:
        """Type the site's first pages kept by this worker again, with the
        site's template as the cluster's evidence now says: each page whose
        type changes (to store again, and to follow if it is now an index
        page). Nothing while the site's evidence is unreadable or has too
        few pages (kept for the site's next page)."""
        if site not in self.first_pages:
            return
        entries = self.first_pages.peek(site)
        stats = self.stats
        templates = self.frontier.templates
        keys = list(dict.fromkeys(k for e in entries for k in e.keys))
        evidence = template_evidence(self.crawler, site, lambda: templates.read(site, keys), "classifier/retype")
        if evidence is None or evidence.pages < templates.policy.min_pages:
            # Kept: typed again with the site's next page. Too few pages
            # counted: the site's evidence has gone since this page's count
            # (it expired, or was cleared) and is being learned again.
            return
        self.first_pages.take(site)
        counts = dict(zip(keys, evidence.counts))
        for e in entries:
            self._final(e)  # whatever its type now: this is its last look
            template = template_of(e.keys, counts, evidence.pages, templates.policy)
            if template is None:
                continue
            stats.inc_value("classifier/retype/checked")
            new = classify_stats(e.base, e.blocks, template, self.threshold, trust=self.trust, site=site)
            self._count_rule()
            if new == e.page_type:
                continue
            stats.inc_value(f"classifier/retype/{new}")
            stats.inc_value(f"classifier/page_type/{e.page_type}", -1)
            stats.inc_value(f"classifier/page_type/{new}")
            logger.debug("Typed again with its site's template: %(url)s is an %(new)s page",
                         {"url": e.url, "new": new}, extra={"spider": self.crawler.spider})
            if e.item is None:
                yield Retyped(None, e, new)
                continue
            # The page as first yielded takes its final type too (what a
            # feed writes, crawler/operations/feeds.py); a copy is stored again.
            e.item.page_type = new
            yield Retyped(e.item.again(), e, new)

    @staticmethod
    def _final(entry: FirstPage) -> None:
        """The page's type is final: no second look waits (``PageItem.pending``)."""
        if entry.item is not None:
            entry.item.pending -= 1

    def closed(self) -> None:
        """First pages still kept keep the type they were given alone (counted)."""
        left = len(self.first_pages)
        if left:
            self.stats.inc_value("classifier/retype/unchecked", left)


