"""Canonical links: the URL a page names as its own preferred address.
Pure logic, no Scrapy.

A page names it with ``<link rel="canonical" href>`` in its head
(``crawler/reading/head.py``) or an HTTP ``Link: <URL>; rel="canonical"``
header (``link_header_canonical``; the header wins, as it is the server's
word). The spider stores it as ``canonical``; when it is another URL of
the crawl's scope that its rules allow, the page is stored as a copy of it
(``dup_of``) and the URL is queued (``crawler/spiders/site.py``).

Sites misuse canonical links: a template that names the home page as every
page's canonical would make every page a copy of the home page and stop
the crawl there. So each worker judges each site's canonicals
(``CanonicalTrust``): while fewer than ``MIN_PAGES`` of a site's pages
have named another URL, the site is being learned (its copies' links are
still followed, so no site is lost while it is judged); then, where one
URL is the canonical of at least ``SHARE`` of them, the site's canonicals
are not trusted (stored, not acted on), else they are.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["LEARNING", "MIN_PAGES", "SHARE", "TRUSTED", "UNTRUSTED", "CanonicalTrust", "link_header_canonical"]

MIN_PAGES = 20
SHARE = 0.5
LEARNING, TRUSTED, UNTRUSTED = "learning", "trusted", "untrusted"

# One link of a Link header (RFC 8288): <URI-reference> then parameters.
_LINK = re.compile(r'<([^>]*)>\s*((?:;\s*[^;,]*)*)')
_REL = re.compile(r';\s*rel\s*=\s*(?:"([^"]*)"|([^\s;,]+))', re.I)


def link_header_canonical(values: Iterable[str]) -> str | None:
    """The target of the first ``rel="canonical"`` link in ``Link`` header
    values, as written (None: none)."""
    for value in values:
        for m in _LINK.finditer(value[:8192]):
            for rel in _REL.finditer(m.group(2)):
                if "canonical" in (rel.group(1) or rel.group(2) or "").lower().split():
                    target = m.group(1).strip()
                    return target[:2000] if target else None
    return None


class _Site:
    __slots__ = ("pages", "targets", "verdict")

    def __init__(self) -> None:
        self.pages = 0
        self.targets: dict[str, int] = {}
        self.verdict = LEARNING


class CanonicalTrust:
    """This worker's judgement of each site's canonical links (at most
    ``max_sites`` sites, least recently seen out first)."""

    def __init__(self, max_sites: int = 4096) -> None:
        self.max_sites = max_sites
        self._sites: OrderedDict[str, _Site] = OrderedDict()

    def record(self, site: str, target: str) -> str:
        """A page of ``site`` names ``target`` (another URL) as its
        canonical: the site's verdict with it counted (``LEARNING``,
        ``TRUSTED`` or ``UNTRUSTED``; a verdict, once reached, stands)."""
        s = self._sites.get(site)
        if s is None:
            s = self._sites[site] = _Site()
            if len(self._sites) > self.max_sites:
                self._sites.popitem(last=False)
        self._sites.move_to_end(site)
        if s.verdict != LEARNING:
            return s.verdict
        s.pages += 1
        s.targets[target] = s.targets.get(target, 0) + 1
        if s.pages >= MIN_PAGES:
            s.verdict = UNTRUSTED if max(s.targets.values()) >= SHARE * s.pages else TRUSTED
            s.targets = {}
        return s.verdict
