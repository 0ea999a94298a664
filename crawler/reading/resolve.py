"""A page's links made absolute: against its ``<base href>`` (a broken one
ignored, as browsers do), normalised by the crawl's ``LinkResolver``,
distinct, never the page itself. Pure: the spiders, the renderer and
``variants.py`` resolve through here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawler.scope.urls import InvalidURL, normalize

if TYPE_CHECKING:
    from crawler.reading.extract import Page
    from crawler.scope.urls import LinkResolver

__all__ = ["page_base", "resolve_links", "resolve_navigation"]


def resolve_links(resolver: LinkResolver, url: str, page: Page,
                  with_contexts: bool = False) -> tuple[dict[str, str], dict[str, str]]:
    """The page's distinct links (normalised, absolute, against its ``<base
    href>``; not the page itself) with their anchors, and with their
    surroundings when a topic scores them."""
    base = page_base(url, page)
    resolve = resolver.resolve
    out: dict[str, str] = {}
    contexts: dict[str, str] = {}
    for i, (href, anchor) in enumerate(page.links):
        link = resolve(base, href)
        if link is not None and link not in out and link != url:
            out[link] = anchor
            if with_contexts:
                contexts[link] = page.link_contexts[i]
    return out, contexts


def resolve_navigation(resolver: LinkResolver, url: str, page: Page) -> list[str]:
    """The page's distinct navigation links (``Page.navigation``), resolved
    as ``resolve_links`` resolves its links."""
    base = page_base(url, page)
    out: dict[str, None] = {}
    for href in page.navigation:
        link = resolver.resolve(base, href)
        if link is not None and link != url:
            out[link] = None
    return list(out)


def page_base(url: str, page: Page) -> str:
    """What the page's relative links resolve against: its ``<base href>``,
    normalised, else its URL."""
    if page.base_href:
        try:
            return normalize(page.base_href, url)
        except InvalidURL:
            pass  # a broken <base href> is ignored, as browsers do
    return url
