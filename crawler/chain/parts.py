"""The parts a crawl's steps share, built once where the spider is built.

Steps (``crawler/chain/``) and the spider's own callbacks (start, sitemaps,
close) reach the crawl's components through one ``Parts``: the follower
(scope, rules, the URL cache, the frontier's requests), the sitemaps, the
page check, the typer, the canonical and language judge, the renderer, the
document reader, and the spider's settings a page's steps read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crawler.reading.encoding import EncodingHints
from crawler.scope.urls import LinkResolver

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from crawler.reading.documents import Documents
    from crawler.following.follow import Follower
    from crawler.frontier.faces import SpiderFace
    from crawler.duplicates.check import PageCheck
    from crawler.pagetypes.typer import PageTyper
    from crawler.render.service import Renderer
    from crawler.sitemaps.crawl import Sitemaps
    from crawler.following.topic import Topic
    from crawler.duplicates.variants import Variants

__all__ = ["Parts", "PartStep"]


@dataclass(slots=True, eq=False)
class Parts:
    crawler: Crawler
    spider: Spider
    # The spider's request for a link (callback parse, errback errback).
    request: Callable[[str, str | None], Request]
    follower: Follower
    sitemaps: Sitemaps
    variants: Variants
    pagecheck: PageCheck
    renderer: Renderer
    documents: Documents
    typer: PageTyper
    topic: Topic | None
    max_text_chars: int
    # MAIN_CONTENT: the page's text is its main content, with its Markdown.
    main_content: bool
    max_redirects: int
    resolver: LinkResolver
    # The crawl's frontier as the spider's parts see it (``frontier/faces.py``).
    frontier: SpiderFace
    # The site's last legacy encoding: the hint for its pages that declare none.
    encodings: EncodingHints

    @property
    def stats(self) -> Any:
        return self.crawler.stats

    @classmethod
    def build(cls, crawler: Crawler, spider: Spider, request: Callable[[str, str | None], Request],
              follower: Follower, topic: Topic | None) -> Parts:
        from crawler.reading.documents import Documents
        from crawler.frontier.signals import ROBOTS_READ
        from crawler.duplicates.check import PageCheck
        from crawler.pagetypes.typer import PageTyper
        from crawler.render.service import Renderer
        from crawler.sitemaps.crawl import Sitemaps
        from crawler.duplicates.variants import Variants

        settings = crawler.settings
        resolver = LinkResolver()
        sitemaps = Sitemaps(crawler, follower, spider)
        crawler.signals.connect(sitemaps.robots_read, signal=ROBOTS_READ)
        return cls(crawler=crawler, spider=spider, request=request, follower=follower, sitemaps=sitemaps,
                   variants=Variants(crawler, follower), pagecheck=PageCheck(crawler, follower.frontier),
                   renderer=Renderer(crawler, follower, resolver), documents=Documents(crawler),
                   typer=PageTyper(crawler, follower.frontier), topic=topic,
                   max_text_chars=settings.getint("STORE_MAX_TEXT_CHARS"),
                   main_content=settings.getbool("MAIN_CONTENT"),
                   max_redirects=settings.getint("REDIRECT_MAX_TIMES"), resolver=resolver, frontier=follower.frontier,
                   encodings=EncodingHints())


class PartStep:
    """A crawler step: built with the crawl's parts (``Chain.from_settings``)."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts

    @classmethod
    def from_parts(cls, parts: Parts) -> Any:
        return cls(parts)
