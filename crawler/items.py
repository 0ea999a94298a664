"""What the spiders yield: one ``PageItem`` per fetched (or failed) URL."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["PageItem"]


@dataclass(slots=True, repr=False)
class PageItem:
    """A page as stored (DESIGN.md, "Stored data").

    ``links`` holds the page's out-links as ``{"url", "anchor"}`` dicts, every
    valid http(s) link once, on-site or not; stores keep them as edges.
    """

    url: str
    site: str
    depth: int = 0
    state: str = "C"  # C completed, E error, D deleted
    status: int | None = None
    page_type: str | None = None
    title: str = ""
    text: str = ""
    abstract: str = ""
    simhash: int | None = None
    content_hash: str | None = None
    dup_of: str | None = None
    fetched_at: float | None = None
    etag: str | None = None
    last_modified: str | None = None
    next_fetch_at: float | None = None
    revisit_interval: float | None = None
    error: str | None = None
    encoding: str | None = None
    referer: str | None = None
    # The Content-Length header of the response, as sent (what a re-crawl's
    # HEAD compares on servers without validators: RECRAWL_HEAD).
    content_length: int | None = None
    # The re-crawl's bookkeeping (crawler/recrawl/merge.py fills it in as the page
    # is written): the estimated change rate (changes a second), when the
    # content last changed, the bounded history of visits, 404/410 in a row.
    change_rate: float | None = None
    changed_at: float | None = None
    history: list[Any] = field(default_factory=list)
    gone_count: int = 0
    # Set by the recrawl spider on a page fetched again: the due time it was
    # fetched for. The store's writer merges the page with its stored version.
    revisit: int | None = None
    links: list[dict[str, str]] = field(default_factory=list)
    # Set when the page's site mirrors another (most of its pages are copies
    # of that site's): stores record it in the sites table.
    mirror_of: str | None = None
    # The page's canonical link, normalised (crawler/duplicates/canonical.py).
    canonical: str | None = None
    # Whether a sitemap of the crawl lists the page, and the lastmod (unix
    # seconds) and changefreq it gives: set by the store from the sitemaps'
    # listings (crawler/sitemaps/crawl.py), whichever was written first.
    in_sitemap: bool = False
    # The page's language (a primary subtag: en, de, zh) and its hreflang
    # alternates (language tag -> URL), crawler/duplicates/variants.py.
    lang: str | None = None
    # The place in time of the URL's first duplicate check (14 hex digits of
    # microseconds, crawler/frontier/dupindex.py), kept by its re-crawls: an
    # original that changed is not taken for a copy of a copy made since.
    dup_order: str | None = None
    # The response's media type (text/html, application/pdf ...), and whether
    # the page's content is its DOM after its scripts ran (-a render,
    # crawler/render/): None on a crawl that does not render.
    content_type: str | None = None
    rendered: bool | None = None
    # An importance crawl's (-a order=importance, crawler/following/importance.py):
    # the page's importance when it was leased.
    importance: float | None = None
    # WARC output (-s WARC_DIR, crawler/warc/): the record of the response
    # (or revisit) the page was stored from: its file, offset, WARC-Date and
    # payload digest. ``warc`` carries the pending write to the WARC
    # pipeline, which fills the four in before the store sees the page.
    warc: Any = None
    warc_file: str | None = None
    warc_offset: int | None = None
    warc_date: str | None = None
    warc_digest: str | None = None
    alternates: dict[str, str] | None = None
    lastmod: float | None = None
    changefreq: str | None = None
    # A focused crawl's (-a topic=PATH, crawler/following/topic.py): the page's
    # relevance, 0 to 1, and whether it reaches the topic's threshold.
    topic_score: float | None = None
    on_topic: bool | None = None
    # What users' own page steps extracted (PAGE_STEPS, crawler/chain/):
    # field name -> JSON value; None when no step added any.
    extra: dict[str, Any] | None = None
    # What a page yields (issue 50): its main content as Markdown (``text``
    # is the same words as plain text; crawler/reading/content.py), what it
    # says about itself for machines (JSON-LD, microdata, RDFa, OpenGraph,
    # Twitter cards and the normalised fields taken from them;
    # crawler/reading/metadata.py), and its kind (article, forum, product,
    # collection, listing, documentation, service, other;
    # crawler/pagetypes/kind.py). Empty or None where not read.
    markdown: str = ""
    metadata: dict[str, Any] | None = None
    kind: str | None = None
    # A page yielded again by a later response's callback, typed again once
    # its site's template was known or put right once its site's canonicals
    # were judged: written again, not an outcome of the request that
    # yielded it (not stored as a field).
    typed_again: bool = False
    # How many of the spider's second looks the page waits for (typed alone
    # and kept to be typed again: crawler/pagetypes/typer.py; a copy by its
    # canonical while its site's canonicals are judged: crawler/duplicates/variants.py).
    # Each sets the page's final values on this item when it is done and
    # counts down; a feed export writes the page once this is 0
    # (crawler/operations/feeds.py). Not stored as a field.
    pending: int = 0
    # The page this item writes again (``again``): its values are read when
    # the write is queued, so that the last write of a page has its final
    # values in whatever order two writes of it reach the store (Scrapy
    # takes a response's items CONCURRENT_ITEMS at a time, each waiting for
    # its batch: a page typed again in one response's output can reach the
    # store after the same page put right by a later response).
    again_of: PageItem | None = None

    def __repr__(self) -> str:  # logs: the text would drown the line
        return (f"<PageItem {self.url} state={self.state} status={self.status} type={self.page_type} "
                f"text={len(self.text)} chars links={len(self.links)}"
                + (f" dup_of={self.dup_of}" if self.dup_of else "") + ">")

    def again(self) -> PageItem:
        """The page to store again, with its values as they are when it is
        written (``again_of``); ``typed_again`` (see above)."""
        return replace(self, typed_again=True, pending=0, again_of=self)

    def to_dict(self) -> dict[str, Any]:
        src = self.again_of or self
        return {name: getattr(src, name) for name in self.__dataclass_fields__ if name != "again_of"}
