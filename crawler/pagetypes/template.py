"""A site's template: the blocks its pages share. Pure logic, no Scrapy.

Navigation repeats: the menu, the sidebar's table of contents, the footer,
"Next" and "Previous" sit on most pages of a site, while what a page is
about is its own. So a page's blocks that recur on many of the site's pages
are set aside before the page is typed: what is left tells an index page (a
table of contents of its own, mostly links to other pages) from an
information page (its own prose), whatever the site's sidebar looks like. A
lone page cannot tell its template from its content; a crawler that has
seen other pages of the site can.

The evidence is the first ``pages`` pages of each site the crawl types:
for each, the set of its blocks' keys (a 48-bit hash of the block's text
and of whether it sits in navigation markup: a contents page lists its
chapters with the words of the sidebar beside it, and its own list is not
the sidebar), counted per site. Once a site has been seen ``pages`` times the counts are
frozen and only the template's keys are kept (the keys on at least
``min_count`` pages and ``share`` of them), so the evidence stays bounded:
at most ``max_keys`` counts per site while it is learned, the template's
keys after. When a page's keys do not fit, the keys that can no longer
reach the share by the freeze, then those seen on one page only, make room
(a site's first pages are often big link lists, whose keys would otherwise
take the room its template needs); in Redis, a site still learned expires
a week after its last page (a small site crawled once does not keep its
counts), frozen evidence stays. The crawler keeps it in Redis for the whole cluster
(``crawler/frontier/templates.py``, the same rule as a Lua script);
``LocalTemplates`` keeps it in memory for the benches and tests.

Until ``min_pages`` pages of a site have been seen, nothing is template
and the page-only view stands: blocks outside navigation markup (``nav``,
``header``, ``footer``, ``aside``, menu and sidebar classes). With the
template known, a page's own blocks are those not in it, but for links in
navigation markup: a sidebar that expands the current section (Sphinx's
Read the Docs theme) differs from section to section, so that part of it
is not template, and it is not the page's own either.

Links to a place on the same page (``Block.frag_chars``: javadoc's method
summaries, rustdoc's method lists, a page's own contents box) are not
counted as links here: they lead to no other page.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from crawler.reading.extract import LONG_BLOCK, Block, Page

__all__ = ["CONTENTS_ROWS", "CONTENTS_SHARE", "OWN_FEATURES", "ROW_CHARS", "BlockStat", "TemplateEvidence", "FirstPages",
           "LocalTemplates", "TemplatePolicy", "block_keys", "block_stats", "contents_list", "contents_rows", "links_out",
           "own_features", "own_stats", "stat_features", "stat_keys", "template_of"]

MAX_PAGE_KEYS = 512  # block keys of one page sent as evidence (a hostile page has millions of blocks)
DESCRIPTION_CHARS = 300  # a row's description after its link: a summary table's second cell


@dataclass(frozen=True)
class TemplatePolicy:
    pages: int = 50  # pages of a site counted; then the template is frozen
    min_pages: int = 5  # pages seen before anything counts as template
    share: float = 0.3  # of the pages seen a block must be on
    min_count: int = 3  # and on at least this many
    max_keys: int = 1024  # counts kept per site while learning

    @property
    def share_permille(self) -> int:
        return round(self.share * 1000)

    def is_template(self, count: int, pages: int) -> bool:
        # In whole numbers, as the Redis script decides it.
        return pages >= self.min_pages and count >= self.min_count and count * 1000 >= self.share_permille * pages


@dataclass(frozen=True)
class TemplateEvidence:
    """How many of the site's counted pages (``pages``) held each of this
    page's block keys (``counts``, in the order of the keys asked)."""

    pages: int = 0
    counts: tuple[int, ...] = ()

    def template(self, keys: Sequence[str], policy: TemplatePolicy) -> frozenset[str] | None:
        """The page's keys that are the site's template; None while the site
        has too few pages to tell (the page-only view stands)."""
        return template_of(keys, dict(zip(keys, self.counts)), self.pages, policy)


def block_key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


# What the template features read of one block: its key, its size, its link
# characters, those of in-page links, whether it opens with a link, whether
# it sits in navigation markup. A site's first pages are kept with their
# blocks in this form until the site's template is known (``FirstPages``):
# a few dozen bytes a block rather than the parsed page.
BlockStat = tuple[str, int, int, int, bool, bool]


def block_stats(blocks: Iterable[Block], keyed: bool = True) -> list[BlockStat]:
    """Each block's key and the figures ``own_features`` reads, in page
    order (``keyed`` False: no key, for a page typed without templates)."""
    keys: dict[tuple[str, bool], str] = {}
    out = []
    for b in blocks:
        key = keys.get((b.text, b.boiler), "" if not keyed else None)
        if key is None:
            key = keys[(b.text, b.boiler)] = block_key(b.text + "\x00nav" if b.boiler else b.text)
        out.append((key, len(b.text), b.link_chars, b.frag_chars, b.lead_link, b.boiler))
    return out


def stat_keys(stats: Iterable[BlockStat], limit: int = MAX_PAGE_KEYS) -> list[str]:
    """The distinct keys of a page's blocks (``block_stats``), in page order,
    at most ``limit``: what the page adds to its site's evidence."""
    seen: dict[str, None] = {}
    for s in stats:
        seen.setdefault(s[0], None)
        if len(seen) >= limit:
            break
    return list(seen)


def block_keys(blocks: Iterable[Block], limit: int = MAX_PAGE_KEYS) -> list[str]:
    """The distinct keys of a page's blocks, in page order, at most ``limit``."""
    return stat_keys(block_stats(blocks), limit)


def links_out(stat: BlockStat) -> bool:
    """Whether a block (its ``block_stats``) is mostly links to other pages:
    at least half its text (links to a place on the page do not count)."""
    return (stat[2] - stat[3]) * 2 >= stat[1]


def own_stats(stats: Sequence[BlockStat], template: frozenset[str] | None) -> list[BlockStat]:
    """The page's own blocks (their ``block_stats``): those not in the
    site's template but for blocks of navigation markup that are mostly
    links to other pages, or with no template known (``None``), those
    outside navigation markup."""
    if template is None:
        return [s for s in stats if not s[5]]
    return [s for s in stats if s[0] not in template and not (s[5] and links_out(s))]


@dataclass
class _Site:
    pages: int = 0
    counts: dict[str, int] = field(default_factory=dict)


class LocalTemplates:
    """Sites' evidence in memory, with the rule of the Redis script."""

    def __init__(self, policy: TemplatePolicy | None = None) -> None:
        self.policy = policy or TemplatePolicy()
        self.sites: dict[str, _Site] = {}

    def observe(self, site: str, keys: Sequence[str]) -> TemplateEvidence:
        """Count this page's keys (while the site is still learned) and
        return the evidence for them, this page included."""
        p = self.policy
        s = self.sites.setdefault(site, _Site())
        if s.pages < p.pages:
            s.pages += 1
            counts = s.counts
            if len(counts) + len(keys) > p.max_keys:
                # No room for this page's keys: drop the keys that can no
                # longer be template when the counts freeze, then those seen
                # on one page only (the Redis script does the same).
                need = max(p.min_count, -(-p.share_permille * p.pages // 1000))
                left = p.pages - s.pages
                s.counts = counts = {k: c for k, c in counts.items() if c > 1 and c + left >= need}
            for k in keys:
                if k in counts:
                    counts[k] += 1
                elif len(counts) < p.max_keys:
                    counts[k] = 1
            if s.pages == p.pages:
                s.counts = {k: c for k, c in counts.items() if p.is_template(c, s.pages)}
        return TemplateEvidence(s.pages, tuple(s.counts.get(k, 0) for k in keys))


T = TypeVar("T")


class FirstPages(Generic[T]):
    """A site's first pages, typed alone (its template not known yet), kept
    until its template is known so that they can be typed again with it.

    A lone page cannot tell its site's menu from its own content, and the
    page-only model takes many documentation pages for index pages; the
    first pages of a site are also where its crawl starts. Each entry is
    kept with a cost (about its bytes in memory); the store holds at most
    ``max_sites`` sites, ``per_site`` entries a site and ``max_cost`` in
    all, and drops the sites not added to for longest when full (their
    first pages keep the type they were given: ``evicted`` counts them).
    Per worker: the worker that typed a page keeps it, and types it again
    when it next types a page of that site with the template known."""

    def __init__(self, max_sites: int = 1024, per_site: int = 8, max_cost: int = 32 << 20,
                 on_evict: Callable[[T], None] | None = None) -> None:
        self.max_sites, self.per_site, self.max_cost = max_sites, per_site, max_cost
        self.on_evict = on_evict  # called with each entry dropped for the bound
        self._sites: OrderedDict[str, list[tuple[T, int]]] = OrderedDict()
        self.cost = 0
        self.evicted = 0

    def __contains__(self, site: object) -> bool:
        return site in self._sites

    def __len__(self) -> int:
        return sum(len(v) for v in self._sites.values())

    def add(self, site: str, entry: T, cost: int) -> bool:
        """Keep ``entry`` for ``site``; False when it is not kept (too
        costly alone, or the site holds ``per_site`` already)."""
        if cost > self.max_cost:
            return False
        entries = self._sites.get(site)
        if entries is None:
            entries = self._sites[site] = []
        elif len(entries) >= self.per_site:
            return False
        entries.append((entry, cost))
        self._sites.move_to_end(site)
        self.cost += cost
        while len(self._sites) > self.max_sites or self.cost > self.max_cost:
            _, dropped = self._sites.popitem(last=False)
            self.cost -= sum(c for _, c in dropped)
            self.evicted += len(dropped)
            if self.on_evict is not None:
                for e, _ in dropped:
                    self.on_evict(e)
        return True

    def peek(self, site: str) -> list[T]:
        """The entries kept for ``site``, kept."""
        return [e for e, _ in self._sites.get(site, ())]

    def take(self, site: str) -> list[T]:
        """The entries kept for ``site``, forgotten here."""
        entries = self._sites.pop(site, [])
        self.cost -= sum(c for _, c in entries)
        return [e for e, _ in entries]


OWN_FEATURES = ("own_link_density", "own_chars_log", "own_prose_log", "own_linky_share", "own_long_share",
                "own_listed_share", "own_rows_log", "own_share", "template_known", "content_link_density")


def own_features(page: Page, template: frozenset[str] | None) -> list[float]:
    """``stat_features`` of ``page``'s blocks."""
    return stat_features(block_stats(page.blocks), template)


def template_of(keys: Iterable[str], counts: dict[str, int], pages: int, policy: TemplatePolicy) -> frozenset[str] | None:
    """The keys that are template by ``counts`` over ``pages`` of the site
    (None: too few pages to tell)."""
    if pages < policy.min_pages:
        return None
    return frozenset(k for k in keys if policy.is_template(counts.get(k, 0), pages))


def rule_density(stats: Sequence[BlockStat]) -> float:
    """The link-density rule's figure from a page's ``block_stats``: link
    text over text, outside navigation markup (all of the page when it is
    all navigation markup; 1.0 for a page without text)."""
    own = [s for s in stats if not s[5]] or stats
    chars = sum(s[1] for s in own)
    return sum(s[2] for s in own) / chars if chars else 1.0


def stat_features(stats: Sequence[BlockStat], template: frozenset[str] | None) -> list[float]:
    """The page without its site's template (with none known, without its
    navigation markup): how much of it is links to other pages, and how
    much is its own; and the link-density rule's own figure (link text over
    text outside navigation markup), so the model can do what the rule does.
    ``stats``: the page's ``block_stats``."""
    own = own_stats(stats, template)
    chars = nav = linky = prose = long_chars = listed = rows = 0
    n = len(own)
    for i, stat in enumerate(own):
        _, size, link_chars, frag_chars, lead_link, _ = stat
        chars += size
        nav += link_chars - frag_chars
        prose += size - link_chars
        if links_out(stat):
            linky += 1
        if size - link_chars >= LONG_BLOCK and link_chars * 3 < size:
            long_chars += size
        if lead_link:
            # A row of a link list: a block led by a link to another page,
            # and the short description that follows it (a summary table).
            rows += 1
            listed += size
            if i + 1 < n:
                after = own[i + 1]
                if not after[4] and after[1] <= DESCRIPTION_CHARS and after[2] == after[3]:
                    listed += after[1]
    total = sum(s[1] for s in stats)
    return [
        nav / chars if chars else 1.0,
        math.log1p(chars),
        math.log1p(max(prose, 0)),
        linky / n if n else 1.0,
        long_chars / chars if chars else 0.0,
        min(listed / chars, 1.0) if chars else 0.0,
        math.log1p(rows),
        chars / total if total else 0.0,
        0.0 if template is None else 1.0,
        rule_density(stats),
    ]


# A contents list in the page's own content: a run of short rows, each
# led by a link to another page. A section's table of contents (a DocBook
# ``div.toc`` of refentries, each a name and a line of purpose; a gtk-doc
# chapter's list of its sections; a Doxygen group's list of its classes),
# an index whose entries open with their link (texinfo's, gtk-doc's API
# index, Sphinx's genindex, javadoc's index-all) and a list of pages with
# one-line descriptions are all that, whatever markup the generator gives
# them, and each leads a crawler to pages it may reach from nowhere else.
# Their descriptions keep their link density low, so the link-density
# figures alone take them for prose. A row is a block of at most
# ROW_CHARS characters that opens with a link and holds no link to a place
# on the page itself (a summary of the page's own members, javadoc's and
# Doxygen's, links its names to the page: that is a page of content, and
# a row of it is not a contents row); a page is a contents list when at
# least CONTENTS_ROWS rows hold at least CONTENTS_SHARE of its own text
# (its template set aside). Chosen on the structure-labelled pages of the
# 71 documentation trees of the fit (bench/JOURNAL.md, "Contents lists
# typed index"): of the pages the crawler typed info, 8 of the 13
# labelled index pass (DocBook's refentry contents, Doxygen's file list,
# javadoc's package "Use" pages) and 3 of the labelled information pages
# (two Doxygen source listings, a changelog of links). Rows that do not
# open with their link ("term, link": DocBook's back-of-book index) are
# not counted: API reference pages have too many such rows (a member's
# type linked to its class); DocBook's indexes are link-dense enough for
# the model (0.92-0.97 on gtk-doc's).
ROW_CHARS = 240
CONTENTS_ROWS = 8
CONTENTS_SHARE = 0.6


def contents_rows(stats: Sequence[BlockStat], template: frozenset[str] | None) -> tuple[int, float]:
    """The page's own rows of a contents list (``stats``: its
    ``block_stats``; ``template`` as for ``own_stats``): how many, and
    their share of its own text."""
    own = own_stats(stats, template)
    chars = sum(s[1] for s in own)
    rows = [s for s in own if s[1] <= ROW_CHARS and s[4] and s[2] and not s[3]]
    return len(rows), (sum(s[1] for s in rows) / chars if chars else 0.0)


def contents_list(stats: Sequence[BlockStat], template: frozenset[str] | None) -> bool:
    """Whether the page's own content is mostly a contents list
    (``contents_rows``): a section's table of contents or a book's index."""
    n, share = contents_rows(stats, template)
    return n >= CONTENTS_ROWS and share >= CONTENTS_SHARE
