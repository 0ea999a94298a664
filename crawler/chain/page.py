"""What the steps of a page's chain read and write: one ``Page`` a response.

A step reads the fields the steps before it wrote and writes its own
(``docs/DESIGN.md``, "The chain" lists who writes what). What the spider
is to yield (the page's item, items written again, requests) goes to
``emit``, in order; ``stop`` ends the chain after the current step (a
redirect, a PDF that cannot be read, a page kept out of the store).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.http import Response

    from crawler.reading.extract import Page as Analysis
    from crawler.items import PageItem
    from crawler.duplicates.check import Checked
    from crawler.pagetypes.typer import Typed

__all__ = ["Page", "HTML", "PDF", "OTHER"]

# What a response holds (``Page.kind``), set by the decode step.
HTML, PDF, OTHER = "html", "pdf", "other"


@dataclass(slots=True, eq=False)
class Page:
    """One response on its way through the chain.

    Written by: the chain (``response``, ``item``), decode (``kind``,
    ``robots`` from X-Robots-Tag, ``text``), parse and render (``tree``,
    ``analysis``, ``text``, ``navigations``), read (``links``, ``contexts``, ``refresh``; the item's
    title, text, abstract and links), check (``checked``), kind (``kind_scores``;
    the item's kind), type (``typed``,
    ``keys``, ``blocks``), variants (``canonical_request``,
    ``canonical_copy``, ``language_followed``), store (``kept``). ``fields`` holds what users'
    own steps extract: stored with the page (its ``extra`` field).
    """

    response: Response
    item: PageItem
    kind: str = HTML
    # The page's robots directives: X-Robots-Tag, then its <meta name=robots>.
    robots: frozenset[str] = frozenset()
    # The decoded HTML (the rendered DOM's once rendered).
    text: str = ""
    # The parsed HTML (lxml root, scripts and styles taken out; None: unparsable),
    # and what crawler/reading/extract.py read of it: text, links, head, typing features.
    tree: Any = None
    analysis: Analysis | None = None
    # URLs scripts tried to send the browser to (-a render).
    navigations: list[str] = field(default_factory=list)
    # The page's distinct links, absolute and normalised -> anchor (and context, focused crawls).
    links: dict[str, str] = field(default_factory=dict)
    contexts: dict[str, str] = field(default_factory=dict)
    refresh: str | None = None
    blocks: list[Any] = field(default_factory=list)
    keys: list[str] | None = None
    checked: Checked | None = None
    typed: Typed | None = None
    # The page's kinds' probabilities (crawler/pagetypes/kind.py), by the
    # kind step; the type step types a page alone by them (None: not read).
    kind_scores: dict[str, float] | None = None
    # The page's type features (crawler.pagetypes.features.page_features),
    # read once by the kind step for the kind and the type.
    base_features: list[float] | None = None
    # The request for the page's canonical URL when it is a copy (queued
    # after the page's item: the store step yields it), and whether its
    # links are to be left alone (its canonical on the same site is trusted).
    canonical_request: Any = None
    canonical_copy: bool = False
    language_followed: bool = True
    # Users' fields (crawler/chain/__init__.py shows how a step adds one).
    fields: dict[str, Any] = field(default_factory=dict)
    out: list[Any] = field(default_factory=list)
    stopped: bool = False

    @property
    def url(self) -> str:
        return self.item.url

    @property
    def meta(self) -> dict[str, Any]:
        return self.response.meta

    @property
    def stored(self) -> bool:
        """Whether the page is stored (robots ``noindex`` keeps it out)."""
        return "noindex" not in self.robots

    @property
    def followed(self) -> bool:
        """Whether the page's links may be followed (robots ``nofollow``)."""
        return "nofollow" not in self.robots

    @property
    def duplicate(self) -> bool:
        return self.checked is not None and self.checked.duplicate

    def emit(self, *outputs: Any) -> None:
        """Something for the spider to yield (an item or a request), in order."""
        self.out.extend(outputs)

    def stop(self) -> None:
        """The page's chain ends after this step."""
        self.stopped = True
