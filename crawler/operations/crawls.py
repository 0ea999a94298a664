"""Which crawl an operator command reads: ``open_frontier`` opens the
frontier of the crawl the settings name (``REDIS_URL``, ``CRAWL_NAME``,
``CRAWL_DIR``) as the spiders open it, and refuses one that does not exist
with :class:`NoSuchCrawl`, naming the crawls there are (``crawl_names``).
``crawler.operations.ops`` re-exports all three."""

from __future__ import annotations

import socket
from typing import Any

from crawler.frontier.frontier import Frontier
from crawler.scope.urls import redact_credentials

__all__ = ["NoSuchCrawl", "crawl_names", "open_frontier"]


class NoSuchCrawl(LookupError):
    """An operator command names a crawl that does not exist (a typo in
    ``CRAWL_NAME``, ``CRAWL_DIR`` or ``REDIS_URL``): the message says which
    crawls do."""


def crawl_names(client: Any) -> list[str]:
    """The crawls a Redis holds: those with a ``meta`` key (every worker and
    ``scrapy seed --new`` write it), sorted."""
    out = set()
    for key in client.scan_iter(match="[{]*[}]:meta", count=1000):
        text = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
        if text.startswith("{") and text.endswith("}:meta"):
            out.add(text[1:-len("}:meta")])
    return sorted(out)


def open_frontier(settings: Any, spider: str = "site", create: bool = False, client: Any = None) -> Frontier:
    """The frontier of the crawl the settings name (``REDIS_URL``,
    ``CRAWL_NAME``, ``CRAWL_DIR``), as the spiders open it; on embedded
    defaults, the embedded Redis of the crawl in ``CRAWL_DIR``. A crawl
    started with another ``FRONTIER_SHARDS`` is read with its own.

    A crawl that does not exist raises :class:`NoSuchCrawl` naming those
    that do, and nothing is created (no crawl directory, no embedded Redis,
    no key), unless ``create`` (``scrapy seed --new``): then its layout is
    recorded as a worker would record it. ``client``: a Redis client of the
    caller's to use (``scrapy serve`` reads many crawls through one); it is
    never closed here."""
    from crawler.config import check_setting_names
    from crawler.crawldir import crawl_dir, crawl_name
    from crawler.redis.client import get_redis

    check_setting_names(settings)
    name = crawl_name(settings, spider)
    directory = crawl_dir(settings, create=create)
    if client is None and not settings.get("REDIS_URL") and not create and not (directory / "redis").is_dir():
        raise NoSuchCrawl(f"no crawl in {directory} (CRAWL_DIR): give the crawl's -s CRAWL_DIR= or -s REDIS_URL=, "
                          "or start one with `scrapy crawl site -a seeds=URL`")
    own = client is None
    if own:
        client = get_redis(settings, directory)
    kwargs = {"default_delay": settings.getfloat("DOWNLOAD_DELAY"),
              "concurrency_per_site": settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN"),
              "max_pages_per_site": settings.getint("FRONTIER_MAX_PAGES_PER_SITE"),
              "buckets": settings.getint("DUPEFILTER_BUCKETS"),
              "lease_timeout": settings.getfloat("FRONTIER_LEASE_TIMEOUT")}
    shards = settings.getint("FRONTIER_SHARDS")
    frontier = Frontier(client, name, node=f"ops-{socket.gethostname()}", shards=shards, **kwargs)
    recorded = frontier.meta.recorded_shards()
    if recorded is None and not create:
        others = crawl_names(client)
        if own:
            client.close()
        there = f"at {redact_credentials(settings.get('REDIS_URL'))}" if settings.get("REDIS_URL") else f"in {directory}"
        raise NoSuchCrawl(f"no crawl {name!r} {there}; " + (
            f"the crawls there: {', '.join(others)} (give -s CRAWL_NAME=NAME)" if others else "it holds no crawl")
            + "; `scrapy seed --new URL` starts a crawl without crawling")
    if recorded is None:
        frontier.check_layout()
    elif recorded != shards:
        frontier = Frontier(client, name, node=frontier.node, shards=recorded, **kwargs)
    return frontier
