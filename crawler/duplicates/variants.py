"""A page's other URLs and its language, in a crawl: its canonical link
(``crawler/duplicates/canonical.py``) and its language alternates (``hreflang``), and
whether the crawl's languages let its links be followed.

- **Canonical**: the ``Link`` header's, else the markup's, stored as
  ``canonical``. Another URL in scope that the rules allow, on a site whose
  canonicals are not untrusted, makes the page a copy of it (``dup_of``,
  unless it copies another page already) and is queued; a copy of a page of
  its own site, the site's canonicals trusted, has its links left alone.
  The pages made copies while their site's canonicals were being judged
  (``crawler/duplicates/canonical.py``: this worker's count) are kept until its
  verdict (bounded: at most ``MIN_PAGES`` a site, 1,024 sites, about 16 MB
  of items); a site found to misuse its canonicals has them stored again
  without that ``dup_of`` (``put_right``: the worker that judged a page
  puts it right, once; through the store pipeline, after the page's own
  write). Their links were followed already, as any page's while its site
  is judged.
- **Language** (``crawler/reading/language.py``): ``lang``, the declared language
  checked against the text (every page of a site until its first 20
  declarations stood, then one in 16: this worker's count; a site that
  declares nothing takes the language its first 20 pages were all
  identified as, one page in 16 identified again, except in a crawl kept to
  languages), and ``alternates`` (hreflang -> URL, from the
  markup and the ``Link`` header; values that are no URL are dropped and
  counted). Alternates in scope, allowed by the rules and, with ``-a
  languages``, in one of the crawl's languages (or ``x-default``) are
  queued, one level deeper than the page.
- **-a languages=en,de**: the crawl's languages (recorded in its meta like
  its rules): a page in another language is stored, its links are not
  followed (a page whose language is unknown is followed).

Stats: ``canonical/copy``, ``canonical/untrusted``, ``canonical/ignored``,
``canonical/invalid``, ``canonical/put_right`` (copies stored again as
pages of their own once their site's canonicals were not trusted),
``canonical/unsettled`` (copies no longer kept for the verdict: the bound;
they keep their ``dup_of``); ``lang/declared``, ``lang/overruled``,
``lang/identified``, ``lang/unknown``, ``lang/alternates_invalid``,
``lang/alternates_queued``, ``lang/not_followed`` (pages in another
language whose links were not followed).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from crawler.duplicates.canonical import LEARNING, MIN_PAGES, UNTRUSTED, TRUSTED, CanonicalTrust, link_header_canonical
from crawler.reading.language import (MIN_GUESS_CHARS, SAMPLE_CHARS, DeclarationTrust, IdentificationTrust,
                                      link_header_alternates, page_language, primary, tag)
from crawler.reading.resolve import page_base
from crawler.reading.responses import header
from crawler.pagetypes.template import FirstPages
from crawler.scope.urls import InvalidURL, normalize, url_site

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from crawler.reading.extract import Page
    from crawler.following.follow import Follower
    from crawler.items import PageItem

__all__ = ["Variants"]


class Variants:
    def __init__(self, crawler: Crawler, follower: Follower) -> None:
        self.crawler = crawler
        self.follower = follower
        self.trust = CanonicalTrust()
        self.declarations = DeclarationTrust()
        self.identified = IdentificationTrust()
        # The copies made while their site was judged, until its verdict.
        self.judged: FirstPages[PageItem] = FirstPages(max_sites=1024, per_site=MIN_PAGES, max_cost=16 << 20,
                                                       on_evict=self._unsettled)
        self._right: list[PageItem] = []

    @property
    def languages(self) -> frozenset[str]:
        """The crawl's languages (empty: any), as settled at start."""
        raw = self.follower.choices.get("languages") or ""
        return frozenset(x for x in raw.split(",") if x)

    # -- canonical -----------------------------------------------------------------------
    def canonical(self, response: Response, page: Page, item: PageItem,
                  stored: bool = True) -> tuple[Request | None, bool]:
        """The page's canonical link (see the module): the request for it
        when it is queued, and whether the page's links are to be left alone.
        ``stored``: whether the page is stored (robots noindex: not)."""
        raw = link_header_canonical(v.decode("latin-1") for v in response.headers.getlist(b"Link")) \
            or page.canonical
        if raw is None:
            return None, False
        stats = self.crawler.stats
        try:
            target = normalize(raw, page_base(item.url, page))
        except InvalidURL:
            stats.inc_value("canonical/invalid")
            return None, False
        item.canonical = target
        if target == item.url:
            return None, False
        if not self.follower.in_scope(target) or self.follower.allows(target) is not None:
            stats.inc_value("canonical/ignored")
            return None, False
        verdict = self.trust.record(item.site, target)
        if verdict != LEARNING and item.site in self.judged:
            self._judged(item.site, verdict)
        if verdict == UNTRUSTED:
            stats.inc_value("canonical/untrusted")
            return None, False
        stats.inc_value("canonical/copy")
        if verdict == LEARNING and item.dup_of is None and stored and item.revisit is None:
            # A copy by its canonical alone, while its site is judged: kept
            # for the verdict (a re-crawl's page is merged with its stored
            # version: not written twice).
            item.pending += 1
            cost = 1024 + len(item.text) + len(item.abstract) + sum(160 + len(x["url"]) + len(x["anchor"])
                                                                     for x in item.links)
            if not self.judged.add(item.site, item, cost):
                self._unsettled(item)
        item.dup_of = item.dup_of or target
        follow = list(self.follower.follow([target], item.url, item.depth, priority=1))
        return (follow[0] if follow else None), verdict == TRUSTED and url_site(target) == item.site

    def _judged(self, site: str, verdict: str) -> None:
        """The site's verdict is reached: its copies judged before it are
        final (trusted), or put right (untrusted: no ``dup_of`` from their
        canonical), on the items as yielded and as copies to store again."""
        for item in self.judged.take(site):
            item.pending -= 1
            if verdict == UNTRUSTED:
                item.dup_of = None
                self._right.append(item.again())
                self.crawler.stats.inc_value("canonical/put_right")

    def _unsettled(self, item: PageItem) -> None:
        """A copy no longer kept for its site's verdict: it stays a copy."""
        item.pending -= 1
        self.crawler.stats.inc_value("canonical/unsettled")

    def put_right(self) -> Iterator[PageItem]:
        """The pages to store again that a verdict has put right (see the
        module): yielded by the spider as an earlier page's, like a page
        typed again (``typed_again``)."""
        right, self._right = self._right, []
        yield from right

    # -- language ------------------------------------------------------------------------
    def language(self, response: Response, page: Page, item: PageItem, text: str) -> bool:
        """Set the page's ``lang`` and ``alternates``; whether the crawl's
        languages let its links be followed."""
        stats = self.crawler.stats
        declared = page.lang or header(response, b"Content-Language")
        # A site that declares nothing, its pages identified alike: its
        # language (not in a crawl kept to languages: each page is told).
        site_lang = None if primary(declared) is not None or self.languages else self.identified.language(item.site)
        if site_lang is not None and len(text[:SAMPLE_CHARS].strip()) >= MIN_GUESS_CHARS:
            item.lang, how = site_lang, "site"
        else:
            check = self.declarations.should_check(item.site)
            item.lang, how = page_language(declared, text, check)
            if check and how in ("declared", "overruled"):
                self.declarations.record(item.site, how == "declared")
            elif how == "identified" and item.lang is not None:
                self.identified.record(item.site, item.lang)
        stats.inc_value(f"lang/{how}")
        raw = [*page.alternates,
               *link_header_alternates(v.decode("latin-1") for v in response.headers.getlist(b"Link"))]
        alternates: dict[str, str] = {}
        base = page_base(item.url, page)
        for hreflang, href in raw:
            lang = tag(hreflang)
            try:
                url = normalize(href, base) if lang is not None else None
            except InvalidURL:
                url = None
            if lang is None or url is None:
                stats.inc_value("lang/alternates_invalid")
                continue
            alternates.setdefault(lang, url)
        item.alternates = alternates or None
        wanted = self.languages
        followed = not wanted or item.lang is None or item.lang in wanted
        if not followed:
            stats.inc_value("lang/not_followed")
        return followed

    def alternates(self, item: PageItem) -> Iterator[Request]:
        """Requests for the page's alternates the crawl wants (see the module)."""
        wanted = self.languages
        urls = [url for lang, url in (item.alternates or {}).items()
                if url != item.url and (not wanted or lang == "x-default" or lang.split("-", 1)[0] in wanted)]
        for request in self.follower.follow(urls, item.url, item.depth + 1):
            self.crawler.stats.inc_value("lang/alternates_queued")
            yield request

