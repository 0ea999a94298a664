"""A page's life as a chain of steps.

Every response a spider's ``parse`` receives becomes a ``Page``
(``crawler/chain/page.py``) handed through the steps of the setting
``PAGE_STEPS`` in their order, as Scrapy composes ``ITEM_PIPELINES``: a dict
of class paths to numbers, merged with ``PAGE_STEPS_BASE`` (the crawler's
own steps; a path set to None in ``PAGE_STEPS`` is taken out). Each step is
a class with one method::

    class Price:
        def process_page(self, page: Page) -> None | Awaitable[None]: ...

built with ``from_parts(parts)`` when it has one (the crawler's own steps:
``crawler/chain/parts.py``), else ``from_crawler(crawler)``, else with no
argument. A step reads the page's fields earlier steps wrote and writes its
own; what the spider yields goes through ``page.emit``; ``page.stop()`` ends
the chain. HTML, PDF and other documents, redirects and a re-crawl's
not-modified visits all go through the same list: a step that has nothing
to do for a page returns at once.

A user's field (``docs/crawling.md``, "Your own steps")::

    class Price:
        def process_page(self, page):
            if page.tree is not None:  # an HTML page's (crawler/chain/parse.py)
                found = page.tree.xpath("string(//*[@itemprop='price'])").strip()
                page.fields["price"] = found or None

    # settings: PAGE_STEPS = {"myproject.steps.Price": 950}   (after type, before store)

and the page is stored with ``extra: {"price": ...}``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from typing import TYPE_CHECKING, Any, Protocol

from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from crawler.chain.page import HTML, OTHER, PDF, Page
from crawler.config import ConfigError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from crawler.chain.parts import Parts

__all__ = ["Chain", "HTML", "OTHER", "PDF", "Page", "Step"]


class Step(Protocol):
    def process_page(self, page: Page) -> Awaitable[None] | None: ...


class Chain:
    """The steps of ``PAGE_STEPS_BASE`` and ``PAGE_STEPS``, in order."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps

    @classmethod
    def from_settings(cls, crawler: Crawler, parts: Parts) -> Chain:
        settings = crawler.settings
        try:
            paths = build_component_list(settings.getwithbase("PAGE_STEPS"))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"PAGE_STEPS: {exc}") from None
        steps: list[Step] = []
        for path in paths:
            try:
                cls_ = load_object(path)
            except (ImportError, NameError, ValueError, AttributeError) as exc:
                raise ConfigError(f"PAGE_STEPS: cannot load {path!r}: {exc}") from None
            if hasattr(cls_, "from_parts"):
                step = cls_.from_parts(parts)
            elif hasattr(cls_, "from_crawler"):
                step = cls_.from_crawler(crawler)
            else:
                step = cls_()
            if not callable(getattr(step, "process_page", None)):
                raise ConfigError(f"PAGE_STEPS: {path} has no process_page(page) method")
            steps.append(step)
        return cls(steps)

    async def run(self, response: Response, page: Page) -> AsyncIterator[Any]:
        """Hand ``page`` through the steps; yield what each emits, as it does."""
        for step in self.steps:
            done = step.process_page(page)
            if done is not None:  # an async step's coroutine; a plain step returns None
                await done
            if page.out:
                out, page.out = page.out, []
                for each in out:
                    yield each
            if page.stopped:
                return

    def __repr__(self) -> str:
        return "<Chain " + " -> ".join(type(s).__name__ for s in self.steps) + ">"
