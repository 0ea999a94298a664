"""Which pages ``-a render=auto`` renders, and which sites it stops
rendering: pure logic, no Scrapy.

A page is a candidate when its static HTML looks built by scripts
(``looks_scripted``), read from what the spider has parsed anyway plus a
scan of the markup for scripts, an application root and a ``<noscript>``
warning:

- no ``<script>`` at all: never (nothing would run); nor a page with
  ``NOSCRIPT_TEXT`` characters of text and ``NOSCRIPT_LINKS`` links (it
  has its content; a script may add to it, not build it);
- an empty application root (``<div id="root"></div>``, ``app``,
  ``__next``, ``__nuxt``, ``<app-root></app-root>`` ...): "empty app root";
- fewer than ``THIN_TEXT`` characters of text and fewer than ``THIN_LINKS``
  links: "little text and few links";
- a ``<noscript>`` that asks for JavaScript, with fewer than
  ``NOSCRIPT_TEXT`` characters of text and fewer than ``NOSCRIPT_LINKS``
  links: "noscript warning". (With *or*, every javadoc page, whose search
  box brings a "JavaScript is disabled" notice, was a candidate.)

Measured with ``python -m bench.bench_render --rule`` (``bench/RESULTS.md``):
on static documentation trees, and on script-built pages.

A rendering *paid off* (``paid_off``) when the rendered page has at least
``PAID_TEXT`` more characters of text (and 20 % more) or ``PAID_LINKS``
more links than the static one; the renderer counts only links that
neither the static page nor the worker's crawl had (a menu a script writes
on every page of a Doxygen site pays once, not on every page).
``SiteMemory`` keeps, per site, how often rendering paid: once a site has
had ``probe`` renderings and fewer than one in ``probe`` paid off, it is
taken as static and its candidates are no longer rendered, so a static site
whose pages happen to look thin pays for a few renderings, then nothing.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["RENDER_MODES", "NOSCRIPT_LINKS", "NOSCRIPT_TEXT", "PAID_LINKS", "PAID_TEXT", "THIN_LINKS", "THIN_TEXT", "Shape",
           "SiteMemory", "looks_scripted", "paid_off", "shape_of"]

# -a render: what the crawl renders.
RENDER_MODES = ("never", "auto", "always")
THIN_TEXT = 300
THIN_LINKS = 5
NOSCRIPT_TEXT = 1500
NOSCRIPT_LINKS = 10
PAID_TEXT = 200
PAID_LINKS = 3

_SCRIPT = re.compile(rb"<script[\s>]", re.IGNORECASE)
# An element whose id names an application root, empty (whitespace or
# comments inside at most), or an Angular root element.
_APP_ROOT = re.compile(
    rb"<(div|main|section|body|app)\b[^>]*\bid\s*=\s*[\"']?(?:root|app|__next|__nuxt|___gatsby|app-root|main-app|"
    rb"application|svelte|q-app|ember-app)[\"'\s>][^>]*>(?:\s|<!--.*?-->)*</\1\s*>"
    rb"|<app-root\b[^>]*>\s*</app-root\s*>",
    re.IGNORECASE | re.DOTALL)
_NOSCRIPT = re.compile(rb"<noscript\b[^>]*>(.{0,2000}?)</noscript", re.IGNORECASE | re.DOTALL)
_ASKS_FOR_JS = re.compile(rb"javascript|enable js|\bjs\b", re.IGNORECASE)


@dataclass(frozen=True)
class Shape:
    """What the rule reads of a page: its text and links (as extracted),
    its scripts, an empty application root, a noscript warning."""

    text_chars: int
    links: int
    scripts: int = 0
    app_root: bool = False
    noscript: bool = False


def shape_of(markup: bytes, text_chars: int, links: int) -> Shape:
    """A page's shape from its markup (the bytes as received) and what the
    extraction found: ``text_chars`` characters of text, ``links`` links.
    ``scripts`` is 1 when the page has a script at all. A page with text
    and links enough is not scanned further: nothing in it could make it a
    candidate (most pages of a static site end here, at one search)."""
    if _SCRIPT.search(markup) is None:
        return Shape(text_chars, links)
    if text_chars >= NOSCRIPT_TEXT and links >= NOSCRIPT_LINKS:
        return Shape(text_chars, links, 1)
    noscript = any(_ASKS_FOR_JS.search(m.group(1)) for m in _NOSCRIPT.finditer(markup))
    return Shape(text_chars, links, 1, _APP_ROOT.search(markup) is not None, noscript)


def looks_scripted(shape: Shape) -> str | None:
    """Why the page looks built by scripts (None: it does not)."""
    if not shape.scripts or (shape.text_chars >= NOSCRIPT_TEXT and shape.links >= NOSCRIPT_LINKS):
        return None
    if shape.app_root:
        return "empty app root"
    if shape.text_chars < THIN_TEXT and shape.links < THIN_LINKS:
        return "little text and few links"
    if shape.noscript and shape.text_chars < NOSCRIPT_TEXT and shape.links < NOSCRIPT_LINKS:
        return "noscript warning"
    return None


def paid_off(static: Shape, rendered: Shape) -> bool:
    """Whether rendering gave the page content its static HTML lacked."""
    more_text = rendered.text_chars - static.text_chars
    if more_text >= PAID_TEXT and rendered.text_chars >= 1.2 * static.text_chars:
        return True
    return rendered.links - static.links >= PAID_LINKS


class SiteMemory:
    """Per site: renderings done and how many paid off, for at most
    ``size`` sites (least recently used forgotten)."""

    def __init__(self, probe: int = 3, size: int = 100_000) -> None:
        self.probe = max(1, probe)
        self.size = max(1, size)
        self._sites: OrderedDict[str, tuple[int, int]] = OrderedDict()

    def worth_rendering(self, site: str) -> bool:
        """False once the site has had ``probe`` renderings and fewer than
        one in ``probe`` paid off."""
        return self._worth(*self._sites.get(site, (0, 0)))

    def _worth(self, done: int, paid: int) -> bool:
        return done < self.probe or paid * self.probe >= done

    def record(self, site: str, paid: bool) -> bool:
        """One rendering on ``site``; returns True when this one made the
        site static (it stops being rendered)."""
        done, got = self._sites.pop(site, (0, 0))
        before = self._worth(done, got)
        done, got = done + 1, got + int(paid)
        self._sites[site] = (done, got)
        if len(self._sites) > self.size:
            self._sites.popitem(last=False)
        return before and not self._worth(done, got)

    def counts(self, site: str) -> tuple[int, int]:
        """(renderings, renderings that paid off) on ``site``."""
        return self._sites.get(site, (0, 0))
