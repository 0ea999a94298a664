"""A site's template: the blocks its pages share (for bench/bench_pagetypes.py
--template; not yet used by the crawler, which would keep the counts per site
in Redis for the cluster). Pure logic.

Navigation repeats: the menu, the sidebar's table of contents, the footer,
"Next" and "Previous" sit on most pages of a site, while what a page is
about is its own. So a page's blocks that recur on many of the site's pages
are set aside before the page is typed: what is left tells an index page (a
table of contents of its own, mostly links) from an information page (its
own prose), whatever the site's sidebar looks like. A lone page cannot tell
its template from its content; a crawler that has seen other pages of the
site can.

The evidence is the first ``pages`` pages of each site the crawl types:
for each, the set of its blocks' keys (a 48-bit hash of the block's text),
counted per site. Once a site has been seen ``pages`` times the counts are
frozen and only the template's keys are kept (the keys on at least
``min_count`` pages and ``share`` of them), so the evidence stays bounded:
at most ``max_keys`` counts per site while it is learned, the template's
keys after. ``LocalTemplates`` keeps it in memory.

Until ``min_pages`` pages of a site have been seen, nothing is template
and the page-only view stands: blocks outside navigation markup (``nav``,
``header``, ``footer``, ``aside``, menu and sidebar classes).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from crawler.classify import _log
from crawler.extract import LONG_BLOCK, Block, Page

__all__ = ["Evidence", "LocalTemplates", "TemplatePolicy", "block_keys", "own_blocks", "own_features"]


@dataclass(frozen=True)
class TemplatePolicy:
    pages: int = 50  # pages of a site counted; then the template is frozen
    min_pages: int = 5  # pages seen before anything counts as template
    share: float = 0.3  # of the pages seen a block must be on
    min_count: int = 3  # and on at least this many
    max_keys: int = 4096  # counts kept per site while learning

    def is_template(self, count: int, pages: int) -> bool:
        return pages >= self.min_pages and count >= max(self.min_count, self.share * pages)


@dataclass(frozen=True)
class Evidence:
    """How many of the site's counted pages (``pages``) held each of this
    page's block keys (``counts``, in the order of the keys asked)."""

    pages: int = 0
    counts: tuple[int, ...] = ()

    def template(self, keys: Sequence[str], policy: TemplatePolicy) -> frozenset[str]:
        return frozenset(k for k, c in zip(keys, self.counts) if policy.is_template(c, self.pages))


def block_key(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


def block_keys(blocks: Iterable[Block]) -> list[str]:
    """The distinct keys of a page's blocks, in page order."""
    seen: dict[str, None] = {}
    for b in blocks:
        seen.setdefault(block_key(b.text), None)
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
            for k in keys:
                if k in counts:
                    counts[k] += 1
                elif len(counts) < p.max_keys:
                    counts[k] = 1
            if s.pages == p.pages:
                s.counts = {k: c for k, c in counts.items() if p.is_template(c, s.pages)}
        return Evidence(s.pages, tuple(s.counts.get(k, 0) for k in keys))


OWN_FEATURES = ("own_link_density", "own_chars_log", "own_prose_log", "own_linky_share", "own_long_share",
                "own_share", "template_known")


def own_features(page: Page, template: frozenset[str] | None) -> list[float]:
    """The page without its site's template (with none known, without its
    navigation markup): how much of it is links, and how much is its own."""
    own = own_blocks(page.blocks, template)
    chars = sum(len(b.text) for b in own)
    links = sum(b.link_chars for b in own)
    linky = sum(1 for b in own if b.link_chars * 2 >= len(b.text))
    long_chars = sum(len(b.text) for b in own
                     if len(b.text) - b.link_chars >= LONG_BLOCK and b.link_chars * 3 < len(b.text))
    total = sum(len(b.text) for b in page.blocks)
    return [
        links / chars if chars else 1.0,
        _log(chars),
        _log(chars - links),
        linky / len(own) if own else 1.0,
        long_chars / chars if chars else 0.0,
        chars / total if total else 0.0,
        0.0 if template is None else 1.0,
    ]
