"""The only code that touches Scrapy's private internals, and why.

Scrapy 2.19 has no public way to do three things the frontier needs:

- ``disable_downloader_delay``: the frontier spaces requests to a site for
  the whole cluster (in Redis); the local downloader must not add
  ``DOWNLOAD_DELAY`` (and its jitter) on top. The downloader reads the
  setting once, into ``Downloader._delay``.
- ``wake_engine``: an empty scheduler is polled only every 5 s; a frontier
  whose next site becomes ready in 0.2 s asks the engine to look again then,
  through the engine's own trigger (``engine._slot.nextcall``).
- ``spider_closing``: the store's write buffer must know that the crawl is
  stopping (it then gives up on an absent store after its close timeout);
  the engine marks it in ``engine._slot.closing``.

- ``crawler_process``: the crawl command makes its crawler process only
  once its checks pass (so a failed start prints its one line without
  Scrapy's banner first), choosing the class as ``scrapy.cmdline.execute``
  does, by comparing ``TWISTED_REACTOR`` with Scrapy's private
  ``scrapy.utils.reactor._asyncio_reactor_path``.

Each function checks that what it touches is there and raises
``ScrapyInternalsChanged`` when it is not: a Scrapy release that moves one of
them fails loudly (``tests/test_compat.py`` runs all three against a real
engine), never quietly switching politeness or wake-ups off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import scrapy

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import Settings

__all__ = ["ScrapyInternalsChanged", "crawler_process", "disable_downloader_delay", "reactor", "spider_closing",
           "wake_engine"]

TESTED_WITH = ("2.19", "2.20")


class ScrapyInternalsChanged(RuntimeError):
    def __init__(self, what: str) -> None:
        super().__init__(
            f"Scrapy {scrapy.__version__} has no {what}, which crawler/compat.py needs "
            f"(tested with Scrapy {', '.join(TESTED_WITH)}); see that module's docstring")


def _engine(crawler: Crawler) -> Any:
    try:
        return crawler.engine
    except RuntimeError:  # Scrapy 2.19 raises when the engine is not set
        return None


def disable_downloader_delay(crawler: Crawler) -> None:
    """Make the local downloader add no delay of its own."""
    engine = _engine(crawler)
    downloader = getattr(engine, "downloader", None)
    if downloader is None or not hasattr(downloader, "_delay"):
        raise ScrapyInternalsChanged("Downloader._delay")
    downloader._delay = 0.0


def wake_engine(crawler: Crawler) -> None:
    """Ask the engine to take requests from the scheduler now. A no-op when
    the engine has no slot (not started, or already closed)."""
    engine = _engine(crawler)
    if engine is None:
        return
    if not hasattr(engine, "_slot"):
        raise ScrapyInternalsChanged("ExecutionEngine._slot")
    slot = engine._slot
    if slot is None:
        return
    nextcall = getattr(slot, "nextcall", None)
    if nextcall is None or not hasattr(nextcall, "schedule"):
        raise ScrapyInternalsChanged("ExecutionEngine._slot.nextcall.schedule")
    nextcall.schedule()


def spider_closing(crawler: Crawler) -> bool:
    """True once the crawl is stopping (or the engine is gone); False while
    the spider is open, from ``spider_opened`` on."""
    engine = _engine(crawler)
    if engine is None:
        return True
    if not hasattr(engine, "_slot"):
        raise ScrapyInternalsChanged("ExecutionEngine._slot")
    slot = engine._slot
    if slot is None:
        return True
    if not hasattr(slot, "closing"):
        raise ScrapyInternalsChanged("ExecutionEngine._slot.closing")
    return slot.closing is not None


def reactor() -> Any:
    """The running Twisted reactor, imported when asked: importing it at a
    module's load would install Twisted's default reactor before Scrapy
    installs the asyncio one. (Public Twisted, not Scrapy internals: here so
    that every module asks for it the same way.)"""
    from twisted.internet import reactor as installed

    return installed


def crawler_process(settings: Settings) -> Any:
    """The crawler process ``scrapy.cmdline.execute`` would make for a
    command: ``AsyncCrawlerProcess`` on the asyncio reactor (unless
    ``FORCE_CRAWLER_PROCESS``) or without a reactor, else ``CrawlerProcess``."""
    from scrapy.crawler import AsyncCrawlerProcess, CrawlerProcess
    from scrapy.utils import reactor as scrapy_reactor

    path = getattr(scrapy_reactor, "_asyncio_reactor_path", None)
    if path is None:
        raise ScrapyInternalsChanged("scrapy.utils.reactor._asyncio_reactor_path")
    if (settings["TWISTED_REACTOR"] == path and not settings.getbool("FORCE_CRAWLER_PROCESS")
            or not settings.getbool("TWISTED_REACTOR_ENABLED")):
        return AsyncCrawlerProcess(settings)
    return CrawlerProcess(settings)
