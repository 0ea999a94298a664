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
for each, the set of its blocks' keys (a 48-bit hash of the block's text),
counted per site. Once a site has been seen ``pages`` times the counts are
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
``header``, ``footer``, ``aside``, menu and sidebar classes).

Links to a place on the same page (``Block.frag_chars``: javadoc's method
summaries, rustdoc's method lists, a page's own contents box) are not
counted as links here: they lead to no other page.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from crawler.extract import LONG_BLOCK, Block, Page

__all__ = ["OWN_FEATURES", "Evidence", "LocalTemplates", "TemplatePolicy", "block_keys", "own_blocks",
           "own_features"]

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
class Evidence:
    """How many of the site's counted pages (``pages``) held each of this
    page's block keys (``counts``, in the order of the keys asked)."""

    pages: int = 0
    counts: tuple[int, ...] = ()

    def template(self, keys: Sequence[str], policy: TemplatePolicy) -> frozenset[str] | None:
        """The page's keys that are the site's template; None while the site
        has too few pages to tell (the page-only view stands)."""
        if self.pages < policy.min_pages:
            return None
        return frozenset(k for k, c in zip(keys, self.counts) if policy.is_template(c, self.pages))


def block_key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def block_keys(blocks: Iterable[Block], limit: int = MAX_PAGE_KEYS) -> list[str]:
    """The distinct keys of a page's blocks, in page order, at most ``limit``."""
    seen: dict[str, None] = {}
    for b in blocks:
        seen.setdefault(block_key(b.text), None)
        if len(seen) >= limit:
            break
    return list(seen)


def own_blocks(blocks: Sequence[Block], template: frozenset[str] | None) -> list[Block]:
    """The page's own blocks: those not in the site's template, or with no
    template known (``None``), those outside navigation markup."""
    if template is None:
        return [b for b in blocks if not b.boiler]
    return [b for b in blocks if block_key(b.text) not in template]


@dataclass
class _Site:
    pages: int = 0
    counts: dict[str, int] = field(default_factory=dict)


class LocalTemplates:
    """Sites' evidence in memory, with the rule of the Redis script."""

    def __init__(self, policy: TemplatePolicy | None = None) -> None:
        self.policy = policy or TemplatePolicy()
        self.sites: dict[str, _Site] = {}

    def observe(self, site: str, keys: Sequence[str]) -> Evidence:
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
        return Evidence(s.pages, tuple(s.counts.get(k, 0) for k in keys))


OWN_FEATURES = ("own_link_density", "own_chars_log", "own_prose_log", "own_linky_share", "own_long_share",
                "own_listed_share", "own_rows_log", "own_share", "template_known", "content_link_density")


def own_features(page: Page, template: frozenset[str] | None) -> list[float]:
    """The page without its site's template (with none known, without its
    navigation markup): how much of it is links to other pages, and how
    much is its own; and the link-density rule's own figure (link text over
    text outside navigation markup), so the model can do what the rule does."""
    own = own_blocks(page.blocks, template)
    chars = nav = linky = prose = long_chars = listed = rows = 0
    n = len(own)
    for i, b in enumerate(own):
        size = len(b.text)
        out = b.link_chars - b.frag_chars
        chars += size
        nav += out
        prose += size - b.link_chars
        if out * 2 >= size:
            linky += 1
        if size - b.link_chars >= LONG_BLOCK and b.link_chars * 3 < size:
            long_chars += size
        if b.lead_link:
            # A row of a link list: a block led by a link to another page,
            # and the short description that follows it (a summary table).
            rows += 1
            listed += size
            if i + 1 < n:
                after = own[i + 1]
                if not after.lead_link and len(after.text) <= DESCRIPTION_CHARS and after.link_chars == after.frag_chars:
                    listed += len(after.text)
    total = sum(len(b.text) for b in page.blocks)
    content = [b for b in page.blocks if not b.boiler] or page.blocks
    content_chars = sum(len(b.text) for b in content)
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
        sum(b.link_chars for b in content) / content_chars if content_chars else 1.0,
    ]
