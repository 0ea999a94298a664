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

- ``create_crawler``: the crawl command makes its crawler as Scrapy's own
  ``crawl`` does, with ``BaseRunSpiderCommand._create_crawler`` (which warns
  when ``-o`` feeds go unused).

robots.txt (``crawler/frontier/robots.py``) needs four private parts of
Scrapy's ``RobotsTxtMiddleware`` and one of protego, which
``RobotsTxtHooks`` and ``GroupChoosingProtego`` give public names:

- ``RobotsTxtMiddleware._parsers`` (each host's parser: the cache in Redis
  fills it), ``._robotstxt_useragent`` (groups matched on the product token,
  not on the whole User-Agent), ``._parserimpl`` (the parser class), and
  ``._parse_robots`` (called once robots.txt is downloaded: the body is
  then shared with the cluster);
- ``Protego._get_matching_rule_set`` and the groups it reads,
  ``Protego._user_agents``: RFC 9309's matching on the product token.

Each function checks that what it touches is there and raises
``ScrapyInternalsChanged`` (``ProtegoInternalsChanged``) when it is not: a
release that moves one of them fails loudly (``tests/test_compat.py`` runs
them against a real engine, a real robots.txt and a real protego), never
quietly switching politeness, wake-ups or robots.txt matching off.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from importlib.metadata import version
from typing import TYPE_CHECKING, Any, cast

import scrapy
from protego import Protego
from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.robotstxt import RobotParser
    from scrapy.settings import Settings

__all__ = ["GroupChoosingProtego", "ProtegoInternalsChanged", "RobotsTxtHooks", "ScrapyInternalsChanged",
           "create_crawler", "crawler_process", "disable_downloader_delay", "reactor", "spider_closing",
           "wake_engine"]

TESTED_WITH = ("2.19", "2.20")
PROTEGO_TESTED_WITH = ("0.7",)


class ScrapyInternalsChanged(RuntimeError):
    package: str = "Scrapy"
    installed: str = scrapy.__version__
    tested: tuple[str, ...] = TESTED_WITH

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{self.package} {self.installed} has no {what}, which crawler/compat.py needs "
            f"(tested with {self.package} {', '.join(self.tested)}); see that module's docstring")


class ProtegoInternalsChanged(ScrapyInternalsChanged):
    package = "protego"
    installed = version("protego")
    tested = PROTEGO_TESTED_WITH


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


def create_crawler(command: Any, spidercls: Any) -> Crawler:
    """The crawler Scrapy's ``crawl`` command makes for ``spidercls`` (its
    ``crawler_process`` set): ``BaseRunSpiderCommand._create_crawler``."""
    make = getattr(command, "_create_crawler", None)
    if not callable(make):
        raise ScrapyInternalsChanged("BaseRunSpiderCommand._create_crawler")
    return cast("Crawler", make(spidercls))


# RobotsTxtMiddleware's own parts a subclass reads or sets, as Scrapy 2.19 names them.
_ROBOTS_PARTS = ("_parsers", "_parserimpl", "_robotstxt_useragent")


class RobotsTxtHooks(RobotsTxtMiddleware):
    """Scrapy's robots.txt middleware with the private parts a subclass
    needs under public names (checked as it is made):

    - ``parsers``: each netloc's parser (a Deferred while its robots.txt is
      fetched, None after a failed fetch);
    - ``match_on(token)``: robots.txt groups are matched on ``token``, not
      on each request's User-Agent header;
    - ``use_parser(cls)``, ``parser_class``: the parser class
      (``ROBOTSTXT_PARSER``'s);
    - ``robots_fetched(response, netloc, request)``: called once a host's
      robots.txt is downloaded; an override calls ``parse_fetched`` for
      Scrapy's own handling (stats, ``robots_parsed``, the parser kept)."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        for name in _ROBOTS_PARTS:
            if not hasattr(self, name):
                raise ScrapyInternalsChanged(f"RobotsTxtMiddleware.{name}")
        hook = getattr(RobotsTxtMiddleware, "_parse_robots", None)
        if (not inspect.iscoroutinefunction(hook)
                or list(inspect.signature(hook).parameters) != ["self", "response", "netloc", "request"]):
            raise ScrapyInternalsChanged("async RobotsTxtMiddleware._parse_robots(response, netloc, request)")

    @property
    def parsers(self) -> dict[str, Any]:
        return cast("dict[str, Any]", self._parsers)

    def match_on(self, token: str) -> None:
        # Scrapy's process_request_2 matches on this when it is set.
        self._robotstxt_useragent = token

    def use_parser(self, parser: type) -> None:
        # Scrapy annotates the parser class as an instance of it.
        self._parserimpl = cast("RobotParser", parser)

    @property
    def parser_class(self) -> RobotParser:
        return self._parserimpl  # Scrapy's annotation: an instance for the class

    async def _parse_robots(self, response: Response, netloc: str, request: Request) -> None:
        await self.robots_fetched(response, netloc, request)

    async def robots_fetched(self, response: Response, netloc: str, request: Request) -> None:
        await self.parse_fetched(response, netloc, request)

    async def parse_fetched(self, response: Response, netloc: str, request: Request) -> None:
        await super()._parse_robots(response, netloc, request)


class GroupChoosingProtego(Protego):
    """protego's parser, choosing the group of rules that applies to a user
    agent with ``choose_group`` (protego's ``_get_matching_rule_set``),
    given the groups of the robots.txt (protego's ``_user_agents``: each
    user-agent line, lower-cased, to its rules)."""

    @staticmethod
    def check() -> None:
        """Raise if this protego does not ask ``_get_matching_rule_set``
        (called by a crawl that uses it, before it starts)."""
        if not callable(getattr(Protego, "_get_matching_rule_set", None)):
            raise ProtegoInternalsChanged("Protego._get_matching_rule_set")

    def choose_group(self, user_agent: str, groups: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def _get_matching_rule_set(self, user_agent: str) -> Any:
        groups = getattr(self, "_user_agents", None)
        if not isinstance(groups, Mapping):
            raise ProtegoInternalsChanged("Protego._user_agents")
        return self.choose_group(user_agent, groups)
