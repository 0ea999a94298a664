"""What a page's head says: its title, robots directives, description,
Open Graph and schema.org types, base URL, canonical link, declared
language, language alternates (hreflang) and navigation links (``<link
rel="next">``, ``crawler.reading.links.is_navigation``). Pure logic, no Scrapy.

``read_head`` reads them from the parsed page (``crawler.reading.html``)
before its scripts and head are stripped; ``parse_robots_directives`` reads
a robots meta tag's or an ``X-Robots-Tag`` header's value (``noindex``,
``nofollow``; ``none`` is both).

No settings, no stats.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from crawler.reading.html import clean, scrub
from crawler.reading.language import MAX_ALTERNATES
from crawler.reading.links import MAX_NAVIGATION, is_navigation

__all__ = ["Head", "parse_robots_directives", "read_head"]

_LD_TYPE = re.compile(r'"@type"\s*:\s*\[?\s*"([^"]+)"')


@dataclass(slots=True)
class Head:
    """What ``read_head`` found: the first non-empty ``title`` (at most 500
    characters), the union of the robots and googlebot ``robots``
    directives, the first ``description`` (meta description or
    og:description; None without one), the ``ld_types`` (og:type and
    JSON-LD ``@type``, lowercased), the first usable ``base_href`` and the
    first ``canonical`` link's href."""

    title: str = ""
    robots: frozenset[str] = frozenset()
    description: str | None = None
    ld_types: frozenset[str] = frozenset()
    base_href: str | None = None
    canonical: str | None = None  # the first <link rel="canonical" href>, as written
    lang: str | None = None  # <html lang> (or xml:lang), else <meta http-equiv="Content-Language">, as written
    # <link rel="alternate" hreflang href>: (hreflang as written, href as written)
    alternates: list[tuple[str, str]] = field(default_factory=list)
    # <link rel="next|prev|up|contents|..." href> (crawler.reading.links.is_navigation): hrefs as written
    navigation: list[str] = field(default_factory=list)


def read_head(root: Any) -> Head:
    head = Head()
    ld_types: set[str] = set()
    lang = root.get("lang") or root.get("{http://www.w3.org/XML/1998/namespace}lang")
    if lang and lang.strip():
        head.lang = lang.strip()[:64]
    for el in root.iter("title", "meta", "base", "script", "link"):
        tag = el.tag
        if tag == "title":
            if not head.title and el.text:
                head.title = clean(scrub(el.text))[:500]
        elif tag == "meta":
            name = (el.get("name") or el.get("property") or "").lower()
            content = el.get("content") or ""
            if name in ("robots", "googlebot"):
                head.robots = head.robots | parse_robots_directives(content)
            elif name in ("description", "og:description") and head.description is None:
                head.description = clean(scrub(content))
            elif name == "og:type":
                ld_types.add(content.strip().lower())
            elif head.lang is None and (el.get("http-equiv") or "").lower() == "content-language" and content.strip():
                head.lang = content.strip()[:64]
        elif tag == "base":
            href = el.get("href")
            if head.base_href is None and href and href.strip(_C0_OR_SPACE):
                # The URL parser's own trim: C0 controls and spaces only.
                head.base_href = href.strip(_C0_OR_SPACE)
        elif tag == "link":
            rel = (el.get("rel") or "").lower().split()
            href = el.get("href")
            if head.canonical is None and "canonical" in rel and href and href.strip(_C0_OR_SPACE):
                head.canonical = href.strip(_C0_OR_SPACE)[:2000]
            elif ("alternate" in rel and el.get("hreflang") and href and href.strip(_C0_OR_SPACE)
                  and len(head.alternates) < MAX_ALTERNATES):
                head.alternates.append((str(el.get("hreflang"))[:64], href.strip(_C0_OR_SPACE)[:2000]))
            elif href and len(head.navigation) < MAX_NAVIGATION and is_navigation(el.get("rel")):
                target = href.strip(_C0_OR_SPACE)[:2000]
                if target and target not in head.navigation:
                    head.navigation.append(target)
        elif tag == "script":
            if (el.get("type") or "").lower() == "application/ld+json" and el.text:
                ld_types.update(t.lower() for t in _LD_TYPE.findall(el.text))
    head.ld_types = frozenset(ld_types)
    return head


_C0_OR_SPACE = "".join(map(chr, range(0x21)))


def parse_robots_directives(value: str) -> frozenset[str]:
    """Directives of a robots meta tag or an X-Robots-Tag header value.

    ``none`` means ``noindex, nofollow``. A header value may name a user agent
    (``googlebot: noindex``); such agent-specific values are ignored here
    unless they name no agent.
    """
    out: set[str] = set()
    for part in value.lower().split(","):
        part = part.strip()
        head, sep, rest = part.partition(":")
        if sep and head.strip() not in _VALUED_DIRECTIVES:
            if head.strip() not in ("*", "robots"):
                continue  # addressed to another crawler ("googlebot: noindex")
            part = rest.strip()
        if part == "none":
            out.update(("noindex", "nofollow"))
        elif part:
            out.add(part.split(":")[0].strip())
    return frozenset(out)


_VALUED_DIRECTIVES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)

