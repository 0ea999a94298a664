"""Redis calls a worker cannot go on without, waited for while Redis is away.

``until_answered(call, what, spider)`` runs ``call`` (a plain function
that talks to Redis) and returns what it returns; on a ``redis.RedisError``
(a restart, a Redis Cluster failing over or down) it says so once, waits
a second off the reactor and runs it again, until Redis answers. The start
of a worker uses it: a worker that starts, or reaches its start, while
Redis is away waits for it as its scheduler does, instead of closing with
a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import task

__all__ = ["until_answered"]

logger = logging.getLogger(__name__)
T = TypeVar("T")
RETRY_SECONDS = 1.0


async def _pause() -> None:
    from twisted.internet import reactor

    await maybe_deferred_to_future(task.deferLater(reactor, RETRY_SECONDS, lambda: None))


async def until_answered(call: Callable[[], T], what: str, spider: Any = None,
                         pause: Callable[[], Awaitable[None]] = _pause) -> T:
    """``call()``, run again after ``pause()`` while Redis fails it."""
    down = 0
    while True:
        try:
            value = call()
        except redis.RedisError as exc:
            if not down:
                logger.error("Redis unavailable while reading %(what)s (%(exc)s); waiting for it",
                             {"what": what, "exc": exc}, extra={"spider": spider})
            down += 1
            await pause()
            continue
        if down:
            logger.warning("Redis is back: %(what)s read after %(n)d tries", {"what": what, "n": down + 1},
                           extra={"spider": spider})
        return value
