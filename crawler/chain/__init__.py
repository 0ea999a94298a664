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

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, Protocol

from scrapy import signals
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import load_object

from crawler.chain.page import HTML, OTHER, PDF, Page
from crawler.config import ConfigError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

    from crawler.chain.parts import Parts
    from crawler.items import PageItem

__all__ = ["Chain", "HTML", "OTHER", "PDF", "Page", "Step", "step_name"]


class Step(Protocol):
    def process_page(self, page: Page) -> Awaitable[None] | None: ...


class Chain:
    """The steps of ``PAGE_STEPS_BASE`` and ``PAGE_STEPS``, in order."""

    def __init__(self, steps: list[Step], crawler: Crawler | None = None) -> None:
        self.steps = steps
        self.names = [step_name(step) for step in steps]
        self.crawler = crawler
        self.cpu: dict[str, float] = dict.fromkeys(self.names, 0.0)  # seconds of CPU, every page's
        self.pages = 0

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
        chain = cls(steps, crawler)
        crawler.signals.connect(chain.closed, signal=signals.spider_closed)
        return chain

    async def run(self, response: Response, page: Page) -> AsyncIterator[Any]:
        """Hand ``page`` through the steps; yield what each emits, as it does.
        Each step's CPU (this thread's, an async step's between its awaits)
        is added to its account."""
        cpu, clock = self.cpu, time.thread_time
        self.pages += 1
        for step, name in zip(self.steps, self.names):
            t0 = clock()
            done = step.process_page(page)
            if done is not None:  # an async step's coroutine; a plain step returns None
                cpu[name] += clock() - t0
                timed = _Timed(done)
                await timed
                cpu[name] += timed.cpu
            else:
                cpu[name] += clock() - t0
            if page.out:
                out, page.out = page.out, []
                for each in out:
                    yield each
            if page.stopped:
                break
        if self.pages % PUBLISH_EVERY == 0 or self.pages < PUBLISH_EVERY:
            self.publish()

    def page(self, response: Response, make: Callable[[], PageItem]) -> Page:
        """The response's ``Page`` with the record ``make()`` makes, its CPU
        counted as the step "record" (before the chain)."""
        t0 = time.thread_time()
        page = Page(response, make())
        self.cpu["record"] = self.cpu.get("record", 0.0) + time.thread_time() - t0
        return page

    def closed(self, spider: Any = None, reason: str | None = None) -> None:
        """At the spider's close (Scrapy's signal, before the stats are
        dumped): the figures of the last pages too."""
        self.publish()

    def publish(self) -> None:
        """The steps' CPU a page so far, as stats (``page/step_ms/<step>``,
        ``page/step_pages``): sent with the worker's heartbeat and shown by
        ``scrapy status``."""
        stats = self.stats
        if stats is None or not self.pages:
            return
        for name, seconds in self.cpu.items():
            stats.set_value(f"page/step_ms/{name}", round(seconds * 1000.0 / self.pages, 4))
        stats.set_value("page/step_pages", self.pages)

    @property
    def stats(self) -> StatsCollector | None:
        """The crawl's stats (None before the crawl starts or without a crawler)."""
        try:
            return self.crawler.stats if self.crawler is not None else None
        except RuntimeError:  # Scrapy sets them when the crawl starts
            return None

    def __repr__(self) -> str:
        return "<Chain " + " -> ".join(type(s).__name__ for s in self.steps) + ">"


PUBLISH_EVERY = 50  # pages between two updates of the page/step_ms stats (each of the first; and at the close)


def step_name(step: object) -> str:
    """A step's name in the stats: its ``name`` attribute, else its class's
    name in lower case."""
    name = getattr(step, "name", None)
    return name if isinstance(name, str) and name else type(step).__name__.lower()


class _Timed:
    """An awaitable running ``inner`` and adding up this thread's CPU in
    each of its stretches between awaits (``cpu``, seconds): what the
    reactor does while the step waits is not the step's."""

    def __init__(self, inner: Awaitable[None]) -> None:
        self.inner = inner
        self.cpu = 0.0

    def __await__(self) -> Generator[Any, Any, None]:
        it = self.inner.__await__()
        clock = time.thread_time
        send: Any = None
        error: BaseException | None = None
        while True:
            t0 = clock()
            try:
                waited = it.throw(error) if error is not None else it.send(send)
            except StopIteration:
                self.cpu += clock() - t0
                return
            self.cpu += clock() - t0
            try:
                send, error = (yield waited), None
            except BaseException as exc:  # noqa: BLE001 - handed to the step, as a plain await would
                send, error = None, exc
