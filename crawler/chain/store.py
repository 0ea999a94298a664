"""Step ``store``: the page's record yielded to the pipelines, and earlier pages put right.

The page is yielded (``crawler/pipelines.py`` stores it) unless robots
``noindex`` keeps it out; then the request for its canonical URL when it is
a copy, the site's first pages typed again now that its template is known
(each whose type changed, written again, and followed if it is now an
index page), and copies by canonical whose site's verdict came. A page
typed alone (its site too young for a template) is kept to be typed again,
with its links to follow then if it turns out to be an index page; such a
page waits for that second look before a feed writes it (``pending``).
Users' fields (``page.fields``) are stored as the page's ``extra``.

Stats: ``robots/noindex``.
"""

from __future__ import annotations

from crawler.chain.page import HTML, OTHER, Page
from crawler.chain.parts import PartStep
from crawler.pagetypes.rules import INDEX
from crawler.requestmeta import TRAP_PARENT

__all__ = ["Store"]


class Store(PartStep):
    def process_page(self, page: Page) -> None:
        item = page.item
        if page.fields:
            item.extra = dict(page.fields)
        if page.kind != HTML:
            if page.stored:
                page.emit(item)
            elif page.kind != OTHER:
                self.parts.stats.inc_value("robots/noindex")
            return
        checked, typed = page.checked, page.typed
        assert checked is not None and typed is not None
        kept = checked.young and page.keys is not None and item.revisit is None and not typed.terms
        item.pending += kept and page.stored  # before the yield: feeds wait for it (crawler/operations/feeds.py)
        if page.stored:
            page.emit(item)
        else:
            self.parts.stats.inc_value("robots/noindex")
        if page.canonical_request is not None:
            page.emit(page.canonical_request)
        if checked.template is not None:
            self._retyped(page, item.site)
        page.emit(*self.parts.variants.put_right())
        if kept:
            self._keep(page)

    def _retyped(self, page: Page, site: str) -> None:
        """The site's first pages typed again now that its template is known:
        a page whose type changed is stored again, and followed if it is now
        an index page (its links judged as its own response's)."""
        for again in self.parts.typer.retype(site):
            if again.item is not None:
                page.emit(again.item)
            first = again.page
            if again.page_type == INDEX and first.links:
                page.emit(*self.parts.follower.follow(first.links, first.url, first.depth + 1,
                                                      meta={TRAP_PARENT: (first.url, first.trap_meta)}))

    def _keep(self, page: Page) -> None:
        """Typed alone for want of the site's template: kept to be typed
        again once it is known; its links with it, to follow then if it
        turns out to be an index page."""
        item, parts = page.item, self.parts
        assert page.typed is not None
        later = (not parts.follower.follow_all and parts.topic is None and item.page_type != INDEX
                 and page.language_followed and not page.duplicate and not page.canonical_copy and page.followed)
        parts.typer.keep_first_page(item, page.typed, page.stored,
                                    [u for u in page.links if u != page.refresh] if later else [], page.meta)
