"""The page check: is this page a copy, and what is its site's template?
One Redis round trip a page, asked before any of its links reach the
frontier.

- **Duplicates.** The main text's content hash (with the links, for texts
  shorter than ``SIMHASH_MIN_CHARS``: short texts such as "Archive" are
  shared by pages that differ by their links alone), its 64-bit SimHash and
  the sketch of its word 3-shingles (``NEARDUP_SKETCH_BITS``) go to the
  cluster's duplicate index (``crawler/frontier/dupindex.py``): an exact copy
  by content hash, a near copy by shingle resemblance of at least
  ``NEARDUP_RESEMBLANCE``. A copy is stored with ``dup_of`` (and
  ``mirror_of`` when its site mirrors another: ``SIMHASH_MIRROR_SHARE`` of
  at least ``SIMHASH_MIRROR_MIN_PAGES`` pages are copies of one other
  site's). Its links are not followed when it copies a page of its own
  site, or its site mirrors another (the textbook's reason: they only
  repeat work); a copy of another site's page is followed.
- **The template count** (``CLASSIFIER_TEMPLATE``): the page's block keys
  are counted in its site's template evidence in the same round trip
  (``crawler/frontier/templates.py``); the answer says which of its blocks
  recur on the site's pages (its template), or that the site has too few
  pages counted yet (the page is typed alone, and kept to be typed again).
- **A full Redis** (``maxmemory`` reached): a page is never stored as
  checked when it was not. Its check waits until Redis takes writes again
  (``FrontierService.writable``, ``crawler/frontier/fullness.py``), then
  is sent again; a template count that went through is not sent twice.
  Any other Redis error is said and the page passes unchecked, as before.

Stats: ``simhash/exact_duplicate``, ``simhash/near_duplicate``,
``simhash/cross_site_copy``, ``simhash/skipped_short``,
``classifier/template/used``, ``classifier/template/page_only``,
``classifier/template/malformed``, ``classifier/template/redis_error``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater
from twisted.internet.threads import deferToThread

from crawler import compat
from crawler.duplicates.fingerprint import Sketch, content_hash, fingerprints, signed, simhash
from crawler.redis.memory import is_oom

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from crawler.frontier.dupentries import Duplicate
    from crawler.frontier.faces import SpiderFace
    from crawler.items import PageItem
    from crawler.pagetypes.template import TemplateEvidence

logger = logging.getLogger(__name__)

__all__ = ["Checked", "PageCheck", "template_evidence"]


@dataclass(slots=True)
class Checked:
    """What the page check found: whether the page's links are not to be
    followed (``duplicate``: a copy of a page of its own site, or its site
    mirrors another), its site's template (None: type it alone) and whether
    the site had too few pages counted (``young``: its template will be
    known later)."""

    duplicate: bool = False
    template: frozenset[str] | None = None
    young: bool = False


def template_evidence(crawler: Crawler, site: str, ask: Callable[[], TemplateEvidence | None],
                      stat: str) -> TemplateEvidence | None:
    """What ``ask`` says of the site's template evidence; None (counted in
    ``<stat>/redis_error`` or ``<stat>/malformed``) without it."""
    try:
        evidence = ask()
    except redis.RedisError as exc:
        crawler.stats.inc_value(f"{stat}/redis_error")
        logger.debug("Template evidence unavailable for %(site)s: %(exc)s", {"site": site, "exc": exc},
                     extra={"spider": crawler.spider})
        return None
    if evidence is None:
        crawler.stats.inc_value(f"{stat}/malformed")
    return evidence


def _reactor_running() -> bool:
    from twisted.internet import reactor

    return bool(getattr(reactor, "running", False))


class PageCheck:
    def __init__(self, crawler: Crawler, frontier: SpiderFace) -> None:
        settings = crawler.settings
        self.crawler = crawler
        self.frontier = frontier
        self.min_chars = settings.getint("SIMHASH_MIN_CHARS")
        self.resemblance = settings.getfloat("NEARDUP_RESEMBLANCE")
        self.sketch_bits = settings.getint("NEARDUP_SKETCH_BITS")
        self.mirror_min_pages = settings.getint("SIMHASH_MIRROR_MIN_PAGES")
        self.mirror_share = settings.getfloat("SIMHASH_MIRROR_SHARE")

    @property
    def stats(self) -> StatsCollector:
        # Not read in __init__: Scrapy sets crawler.stats when the crawl starts.
        return self.crawler.stats

    async def check(self, item: PageItem, keys: list[str] | None, text: str | None = None) -> Checked:
        """Fingerprint ``item``'s ``text`` (or the given ``text``: an HTML
        page's every block but navigation, crawler/chain/check.py) (its
        ``content_hash`` and ``simhash`` set),
        ask the cluster whether it is a copy (``dup_of``, ``mirror_of`` set),
        and count its block ``keys`` (None: no template count) in its
        site's evidence in the same round trip; while Redis is full, once
        it takes writes again."""
        service = self.frontier
        answer: list[Any] = []  # the template count's answer, once it went through
        text = item.text if text is None else text
        prepared = self._fingerprint(item, text)
        duplicate = False
        away = 0
        while prepared is not None:
            await service.writable()
            sent: list[Any] = []
            try:
                verdict = await self._ask(item, *prepared, (item.site, keys) if keys is not None and not answer
                                          else None, sent)
                duplicate = self._judge(item, verdict)
                break
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                # Redis away: the page waits for its verdict (its lease held), so
                # that a failover does not store a copy as an original.
                if not away:
                    logger.warning("Duplicate check of %(url)s waits for Redis: %(exc)s", {"url": item.url, "exc": exc},
                                   extra={"spider": self.crawler.spider})
                away += 1
                self.crawler.stats.inc_value("duplicates/redis_waits")
                await maybe_deferred_to_future(deferLater(compat.reactor(), min(0.5 * away, 5.0), lambda: None))
            except redis.RedisError as exc:  # Redis is full: _ask passes over any other error
                service.refused_for_memory(exc)
            finally:
                if sent and not isinstance(sent[0], Exception):
                    answer = sent
        while keys is not None and (not answer or is_oom(answer[0])):
            if answer:
                service.refused_for_memory(answer[0])
            await service.writable()
            answer = self.frontier.run_many([self.frontier.templates.call(item.site, keys)], raise_on_error=False)
        template, young = self._template(item.site, keys, answer)
        return Checked(duplicate, template, young)

    def _fingerprint(self, item: PageItem, text: str) -> tuple[str, Sketch | None] | None:
        """The page's content hash and SimHash onto ``item``; the key and
        sketch it is checked by (None: nothing to check)."""
        if not text and not item.links:
            return None
        item.content_hash = content_hash(text)
        key = item.content_hash
        sketch: Sketch | None = None
        if len(text) >= self.min_chars:
            fp, sketch = fingerprints(text, self.sketch_bits)
            item.simhash = signed(fp)
        else:
            self.stats.inc_value("simhash/skipped_short")
            key = content_hash(item.content_hash + "\n" + "\n".join(sorted(x["url"] for x in item.links)))
            if text:
                # Stored for the re-crawl's change detection; too short to
                # decide near duplicates by.
                item.simhash = signed(simhash(text))
        return key, sketch

    async def _ask(self, item: PageItem, key: str, sketch: Sketch | None, template: tuple[str, list[str]] | None,
                   answer: list[Any]) -> Duplicate | None:
        """The duplicate index's verdict, asked on a thread of the reactor's
        pool: the worker goes on with its other pages while Redis answers
        (issue 51: the reactor waited 1.2-3.8 ms a page in this call). None
        when Redis failed otherwise than by being full (said)."""
        frontier = self.frontier
        also = [frontier.templates.call(*template)] if template is not None else []
        call = partial(frontier.duplicates.check, item.url, item.site, key, sketch, self.resemblance,
                       first=item.dup_order, mirror_min_pages=self.mirror_min_pages, mirror_share=self.mirror_share,
                       also=also, also_results=answer)
        try:
            if _reactor_running():
                return await maybe_deferred_to_future(deferToThread(call))
            return call()  # no reactor (a step run alone): here
        except redis.RedisError as exc:
            if is_oom(exc):
                raise  # checked again once Redis takes writes (check)
            if isinstance(exc, (redis.ConnectionError, redis.TimeoutError)) and _reactor_running():
                raise  # Redis away (a failover): asked again once it is back (check)
            logger.warning("Duplicate check failed for %(url)s: %(exc)s", {"url": item.url, "exc": exc},
                           extra={"spider": self.crawler.spider})
            return None

    def _judge(self, item: PageItem, verdict: Duplicate | None) -> bool:
        """Whether the page's links are not to be followed, by ``verdict``
        (its ``dup_of``, ``mirror_of`` and ``dup_order`` set)."""
        if verdict is None:
            return False
        if verdict.order:
            item.dup_order = verdict.order  # stored: its re-crawls keep this place in time
        if verdict.kind == "new":
            return False
        item.dup_of = verdict.first
        item.mirror_of = verdict.mirror_of
        self.stats.inc_value(f"simhash/{verdict.kind}_duplicate")
        if not verdict.same_site:
            self.stats.inc_value("simhash/cross_site_copy")
        logger.debug("%(url)s is a%(n)s %(kind)s duplicate of %(first)s (resemblance %(r).3f)",
                     {"url": item.url, "n": "n" if verdict.kind == "exact" else "", "kind": verdict.kind,
                      "first": verdict.first, "r": verdict.resemblance}, extra={"spider": self.crawler.spider})
        return verdict.same_site or verdict.mirror_of is not None

    def _template(self, site: str, keys: list[str] | None, answer: list[Any]) -> tuple[frozenset[str] | None, bool]:
        """The page's block ``keys`` that are its site's template, after
        counting the page in the cluster's evidence (``answer``: what the
        count answered in the duplicate check's round trip; empty: it was
        not sent, and is sent now); None (type the page alone) while the
        site has too few pages, or without evidence. And whether the site
        had too few pages (its template will be known later)."""
        if keys is None:
            return None, False
        templates = self.frontier.templates

        def counted() -> TemplateEvidence | None:
            if not answer:
                return templates.observe(site, keys)
            if isinstance(answer[0], Exception):
                raise answer[0]
            return templates.evidence(answer[0], keys)

        evidence = template_evidence(self.crawler, site, counted, "classifier/template")
        if evidence is None:
            return None, False
        template = evidence.template(keys, templates.policy)
        self.stats.inc_value("classifier/template/page_only" if template is None else "classifier/template/used")
        return template, template is None
