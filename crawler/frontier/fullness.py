"""A full Redis, waited out by one worker (the frontier service's part).

With ``maxmemory`` reached under ``noeviction``, Redis refuses every
command that would add data (``OutOfMemoryError``), and a Lua script whose
first write would: the script stops there, having changed nothing, and is
sent again later (a script that has written once runs to its end: Redis
cannot stop it halfway). So a full Redis is not an outage: it answers, and
reads, deletes and scripts that free before they add still go through.

While Redis is full the worker:

- takes no new work (the scheduler asks ``full`` before leasing);
- keeps what it holds: the pages in flight are fetched and parsed, their
  duplicate check waits (``writable``, ``crawler/duplicates/check.py``), their
  links and acknowledgements stay in the lease book, none dropped;
- keeps beating (``lua/heartbeat.lua`` frees before it writes), so that no
  worker is taken for dead and reaped for the time memory was short;
- learns it with a heartbeat too, not only from a refused write
  (``probe``: a worker whose every site waits on another worker's leases
  writes nothing, yet is paused as well);
- asks again with each heartbeat (``FRONTIER_HEARTBEAT_INTERVAL``) whether
  every node has 2 % of its ``maxmemory`` (at least 1 MiB) free again
  (``INFO memory``, ``crawler/redis/memory.py``: a Redis at the edge of its
  limit would stop and start the crawl at every page) and every shard
  takes a write (``Control.takes_writes``: one command per shard that
  would add data but adds nothing); once they do, it says so, wakes the
  duplicate checks that wait and carries on. No restart.

It says so twice: one WARNING when it finds Redis full, naming the node and
its limit (``Redis is full (used_memory 2.0 MB of maxmemory 2.0 MB at
host:port): no new work is taken until memory is raised or freed``), and
one INFO when Redis takes writes again.

Stats: ``frontier/redis_full`` (times this worker found Redis full),
``frontier/redis_full_seconds`` (how long it waited, in all).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import redis
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from crawler.redis.memory import is_oom, memory_of

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from crawler.frontier.frontier import Frontier

logger = logging.getLogger(__name__)

__all__ = ["Fullness"]


def where_full(client: Any) -> str:
    """The full nodes as the warning names them ("used_memory X of
    maxmemory Y at host:port"); every node with a limit when none reads
    full any more (memory freed since the refusal)."""
    try:
        nodes = memory_of(client)
    except redis.RedisError as exc:
        return f"its memory unreadable: {exc}"
    shown = [n for n in nodes if n.full] or [n for n in nodes if n.limit] or nodes
    return "; ".join(n.describe() for n in shown)


class Fullness:
    """Whether this worker found Redis full, and the duplicate checks that
    wait for it to take writes again."""

    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats
        self.since: float | None = None  # monotonic time it was found full; None: it takes writes
        self.where = ""
        self._waiters: list[Deferred[None]] = []

    @property
    def full(self) -> bool:
        return self.since is not None

    def note(self, exc: BaseException, frontier: Frontier, spider: Any) -> bool:
        """Whether ``exc`` is Redis refusing a write for want of memory;
        the first of a spell is said once, as a WARNING."""
        if not is_oom(exc):
            return False
        self._found(frontier, spider)
        return True

    def probe(self, frontier: Frontier, spider: Any) -> None:
        """With each heartbeat while it takes writes: whether every shard
        still would. A worker with nothing to write (every site's turn held
        by another worker's leases, which wait for memory) learns so too,
        and shows paused in ``scrapy status``, instead of idling unaware."""
        try:
            if frontier.control.takes_writes():
                return
        except redis.RedisError:
            return  # away: the next heartbeat's error says so
        self._found(frontier, spider)

    def _found(self, frontier: Frontier, spider: Any) -> None:
        if self.since is None:
            self.since = time.monotonic()
            self.where = where_full(frontier.client)
            self.stats.inc_value("frontier/redis_full")
            logger.warning("Redis is full (%(where)s): no new work is taken until memory is raised or freed",
                           {"where": self.where}, extra={"spider": spider})

    def poll(self, frontier: Frontier, spider: Any) -> bool:
        """Whether Redis takes writes (asked of every shard while it was
        full); the end of a spell is said once, and the waiting checks woken."""
        if self.since is None:
            return True
        try:
            if any(n.full for n in memory_of(frontier.client)):
                return False
        except redis.ResponseError:
            pass  # INFO denied (an ACL): the write alone decides
        except redis.RedisError:
            return False  # away now: the heartbeat's error says so, and this asks again
        try:
            if not frontier.control.takes_writes():
                return False
        except redis.RedisError:
            return False
        waited = time.monotonic() - self.since
        self.since = None
        self.stats.inc_value("frontier/redis_full_seconds", round(waited))
        logger.info("Redis takes writes again after %(s).1fs (%(where)s): taking new work",
                    {"s": waited, "where": where_full(frontier.client)}, extra={"spider": spider})
        waiters, self._waiters = self._waiters, []
        for d in waiters:
            d.callback(None)
        return True

    async def writable(self) -> None:
        """Return once Redis takes writes (at once when it is not full)."""
        while self.since is not None:
            d: Deferred[None] = Deferred()
            self._waiters.append(d)
            await maybe_deferred_to_future(d)
