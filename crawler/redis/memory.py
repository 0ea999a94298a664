"""Redis memory as the crawl sees it: each node's ``used_memory``,
``maxmemory`` and ``maxmemory_policy`` (``INFO memory``, which managed
Redis services answer where ``CONFIG`` is disabled), whether a node is
full, and what an out-of-memory refusal looks like.

- A policy that evicts keys (anything but ``noeviction``) is refused at a
  worker's start (:func:`refuse_evicting`, :class:`RedisMemoryError`): an
  evicted lease, queue or seen-set entry is lost without a word.
- Under ``noeviction`` a full Redis refuses commands that add data (and a
  Lua script whose first write would; once a script has written, Redis lets
  it finish): :func:`is_oom` tells that refusal from an outage, and the
  frontier service (``crawler/frontier/fullness.py``) waits it out.
- ``scrapy status`` shows every node's figures (``crawler/operations/ops.py``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import redis

from crawler.redis.gateway import cluster_nodes

__all__ = ["MIN_ROOM", "ROOM", "NodeMemory", "RedisMemoryError", "full_at_start", "is_oom", "memory_of", "refuse_evicting", "size"]

NOEVICTION = "noeviction"
# What must be free before a worker that found Redis full takes new work
# again (NodeMemory.full): 2 % of maxmemory, at least 1 MiB.
ROOM, MIN_ROOM = 0.02, 1 << 20


class RedisMemoryError(RuntimeError):
    """Redis cannot hold the crawl as it is set up (a policy that evicts
    keys, or full when a worker starts); the message says what to change."""


def is_oom(exc: BaseException) -> bool:
    """Whether ``exc`` is Redis refusing a write because ``maxmemory`` is
    reached: ``OutOfMemoryError``, or (Redis 6.2, a command inside a Lua
    script) a ``ResponseError`` that quotes the ``-OOM`` reply."""
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        return True
    if not isinstance(exc, redis.ResponseError):
        return False
    text = str(exc)
    return text.startswith("OOM ") or "-OOM command not allowed" in text


def size(n: int) -> str:
    """Bytes for people: "812.0 KB", "1.5 GB"."""
    if n < 1024:
        return f"{n} B"
    value, unit = n / 1024, "KB"
    for bigger in ("MB", "GB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"


@dataclass(frozen=True, slots=True)
class NodeMemory:
    """One Redis node (a cluster's master, or the single Redis): where it
    is, ``used_memory``, ``maxmemory`` (0: no limit) and its policy."""

    node: str
    used: int
    limit: int
    policy: str

    @property
    def full(self) -> bool:
        """At its limit or within ``ROOM`` of it (2 %, at least 1 MiB): a
        worker that found it refusing writes takes no work until it has
        that much free again, so that a Redis at the edge of its limit
        (where its clients' buffers come and go) does not stop and start a
        crawl at every page."""
        return self.limit > 0 and self.used > self.limit - max(self.limit * ROOM, MIN_ROOM)

    @property
    def evicts(self) -> bool:
        return self.policy != NOEVICTION

    def describe(self) -> str:
        """ "used_memory 2.0 MB of maxmemory 2.0 MB at host:port" (or "no maxmemory")."""
        limit = f"maxmemory {size(self.limit)}" if self.limit else "no maxmemory"
        return f"used_memory {size(self.used)} of {limit} at {self.node}"

    def as_dict(self) -> dict[str, Any]:
        """For ``scrapy status --json``: node, used, limit, policy, full."""
        return {**asdict(self), "full": self.full}


def _name(client: redis.Redis) -> str:
    kw = client.connection_pool.connection_kwargs
    return str(kw.get("path") or f"{kw.get('host')}:{kw.get('port')}")


def _read(name: str, info: dict[str, Any]) -> NodeMemory:
    def number(key: str) -> int:
        try:
            return int(info.get(key) or 0)
        except (TypeError, ValueError):
            return 0

    return NodeMemory(name, number("used_memory"), number("maxmemory"),
                      str(info.get("maxmemory_policy") or "unknown"))


def memory_of(client: Any) -> list[NodeMemory]:
    """Every node's memory: the single Redis, or each master of a Redis
    Cluster (replicas hold the same keys). Raises ``redis.RedisError``
    (``INFO`` unreachable, or denied by an ACL)."""
    if hasattr(client, "connection_pool"):
        return [_read(_name(client), client.info("memory"))]
    return [_read(node.name, client.get_redis_connection(node).info("memory"))
            for node in client.get_primaries()]


def refuse_evicting(client: Any) -> list[NodeMemory]:
    """The nodes' memory, after refusing a Redis whose ``maxmemory-policy``
    would evict keys (:class:`RedisMemoryError`, naming each such node).
    A Redis that does not answer ``INFO memory`` (renamed, or denied) is
    not refused: nothing is known (an empty list)."""
    try:
        nodes = memory_of(client)
    except redis.ResponseError:
        return []
    evicting = [n for n in nodes if n.evicts]
    if evicting:
        where = ", ".join(f"{n.node} has maxmemory-policy {n.policy}" for n in evicting)
        raise RedisMemoryError(
            f"Redis at {where}: it would evict keys once full, and an evicted lease or seen-set entry is lost "
            f"without a word; set maxmemory-policy {NOEVICTION} (CONFIG SET maxmemory-policy {NOEVICTION}, "
            f"or in redis.conf)")
    return nodes


def full_at_start(client: Any, exc: BaseException) -> RedisMemoryError:
    """The error of a worker that finds Redis full as it starts (``exc``,
    an OOM refusal): it says which node and what to do."""
    try:
        nodes = memory_of(client)
    except redis.RedisError:
        nodes = []
    full = [n for n in nodes if n.full] or nodes
    where = "; ".join(n.describe() for n in full) or str(exc)
    return RedisMemoryError(f"Redis is full ({where}): raise maxmemory (CONFIG SET maxmemory) or free memory, "
                            "then start the worker again")


def require_replicas(client: Any, replicas: int) -> str | None:
    """Refuse ``REDIS_WAIT_REPLICAS`` above the replicas a master has
    (:class:`RedisMemoryError`, one line naming each): every write would
    wait out its timeout and fail. On a Redis Cluster with a node down (a
    failover under way: the promoted replica has none until the old master
    comes back as one) the shortfall is that node's, for a while: returned
    as a warning's text instead, and the writes to that master wait for
    its replica (a worker restarted during a failover starts)."""
    down: list[str] = []
    answered: list[Any] = []  # the masters that answered
    if hasattr(client, "connection_pool"):
        nodes = [(_name(client), client.info("replication"))]
    else:
        nodes = []
        for node in client.get_primaries():
            try:
                nodes.append((node.name, client.get_redis_connection(node).info("replication")))
                answered.append(node)
            except redis.ConnectionError:
                down.append(node.name)
    short = [f"{name} has {int(info.get('connected_slaves') or 0)}" for name, info in nodes
             if int(info.get("connected_slaves") or 0) < replicas]
    if down:
        return (f"REDIS_WAIT_REPLICAS={replicas}: master {', '.join(down)} does not answer (a failover under way?); "
                "writes to it wait until it or its replica is back")
    if not short:
        return None
    text = f"REDIS_WAIT_REPLICAS={replicas}: {', '.join(short)} connected replicas"
    if not hasattr(client, "connection_pool"):
        if any("fail" in flags for _, _, flags, _, _ in cluster_nodes(client, answered[0])):  # a node that answers
            return f"{text} now, with a node of the cluster down; writes to it wait until a replica is back"
    raise RedisMemoryError(f"{text}; give at most the replicas every master has, or 0")