"""The base of the operator commands (``scrapy status``, ``seed``, ``stop``,
``console``): settings as the spiders read them, ``--json``, and a failure
to reach Redis, a crawl that does not exist (``ops.NoSuchCrawl``: a typo
in ``CRAWL_NAME``) or a misspelled ``-s`` setting as one line and exit
status 1.

It lives outside ``crawler/commands`` because Scrapy registers every
command class it finds in that package as a command of its own."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import redis
from scrapy.commands import ScrapyCommand

from crawler.operations import ops
from crawler.config import ConfigError
from crawler.redis.client import RedisUnavailable

if TYPE_CHECKING:
    import argparse

    from crawler.frontier.frontier import Frontier

__all__ = ["FrontierCommand"]

T = TypeVar("T")


class FrontierCommand(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def open_frontier(self, create: bool = False) -> Frontier:
        """The crawl's frontier; ``ops.NoSuchCrawl`` if the crawl does not
        exist (and ``create`` is not asked)."""
        assert self.settings is not None
        return ops.open_frontier(self.settings, create=create)

    def guarded(self, name: str, work: Callable[[], T]) -> T | None:
        """``work()``; None (after one line on stderr, exit status 1) when
        Redis cannot be reached, the crawl does not exist or a setting is
        misspelled."""
        try:
            return work()
        except (RedisUnavailable, redis.RedisError, ops.NoSuchCrawl, ConfigError) as exc:
            print(f"scrapy {name}: {exc}", file=sys.stderr)
            self.exitcode = 1
            return None
