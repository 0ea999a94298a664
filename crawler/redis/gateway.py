"""The Redis gateway: every call of the frontier's parts goes through one
``Gateway``, which batches calls into pipelines, routes them on a Redis
Cluster, runs Lua scripts by name and counts the round trips.

It knows nothing of crawling: a call is ``(name, keys, args)``, where
``name`` is a script of the registry it was given (``crawler/redis/scripts.py``
for the frontier) or a plain Redis command. One ``run_many`` is one round
trip (per Redis node, in parallel); a script a server does not know yet (a
restarted node) is loaded and its call run again.

The counts (``round_trips``, ``calls`` by name) are what the frontier service
reports as ``frontier/redis_round_trips`` and ``frontier/redis_calls/<name>``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from hashlib import sha1
from typing import Any

import redis
from redis.exceptions import RedisClusterException

__all__ = ["Call", "Gateway", "ReplicaLag"]

# A call: a script's name (or a Redis command), its keys, its other arguments.
Call = tuple[str, Sequence[Any], Sequence[Any]]


STANDBY_REFRESH = 1.0  # seconds between two reads of a cluster's replicas


def cluster_nodes(client: Any, node: Any = None) -> list[tuple[Any, str, str, Any, bool]]:
    """``CLUSTER NODES`` (asked of ``node``, else of any) as rows of (node
    id, ``host:port``, flags, master id, whether it serves any slot)."""
    raw = client.execute_command("CLUSTER NODES", target_nodes=node or client.get_random_node())
    lines = raw.decode() if isinstance(raw, bytes) else raw
    if isinstance(lines, dict):  # redis-py parsed it: {address: {"node_id", "flags", "master_id", "slots", ...}}
        return [(v.get("node_id"), addr, str(v.get("flags", "")), v.get("master_id"), bool(v.get("slots")))
                for addr, v in lines.items()]
    rows = []
    for line in str(lines).splitlines():
        parts = line.split()
        if len(parts) >= 4:
            served = any(not p.startswith("[") for p in parts[8:])  # "[slot->-id]": a slot migrating, not served
            rows.append((parts[0], parts[1].split("@")[0], parts[2], parts[3], served))
    return rows


def serving_masters(client: Any, node: Any = None) -> set[str]:
    """The Redis Cluster masters (``host:port``) that serve slots, as
    ``node`` sees them: a master failed over serves none (its replica,
    promoted, serves them)."""
    return {addr for _, addr, flags, _, served in cluster_nodes(client, node) if "master" in flags and served}


def standby_replicas(client: Any, node: Any = None) -> dict[str, int]:
    """Each Redis Cluster master (``host:port``) and its replicas not
    marked failed, from ``CLUSTER NODES`` (asked of ``node``, else of any)."""
    rows = cluster_nodes(client, node)
    names = {node_id: addr for node_id, addr, flags, _, _ in rows if "master" in flags}
    out = dict.fromkeys(names.values(), 0)
    for _, _, flags, master, _ in rows:
        if ("slave" in flags or "replica" in flags) and "fail" not in flags.replace("fail?", "") \
                and master in names:
            out[names[master]] += 1
    return out


class ReplicaLag(redis.exceptions.ConnectionError):
    """Fewer replicas than ``REDIS_WAIT_REPLICAS`` took a write in time."""


class Gateway:
    """One Redis client (single or cluster), its script registry and its
    round-trip counts."""

    def __init__(self, client: Any, scripts: Mapping[str, str]) -> None:
        self.client = client
        self.cluster = not hasattr(client, "connection_pool")  # a RedisCluster has none
        # REDIS_WAIT_REPLICAS (require_replicas): the calls of these names
        # wait for that many replicas of their node to hold what they wrote.
        self.replicas = 0
        self.wait_ms = 0
        self.durable: frozenset[str] = frozenset()
        self.short_waits = 0  # pipelines whose WAIT timed out short
        self._standby: dict[str, int] = {}  # a cluster master's replicas that a failover could promote
        self._standby_at = float("-inf")
        self.round_trips = 0
        self.calls: dict[str, int] = {}
        self._sources = dict(scripts)
        self._shas = {name: sha1(source.encode()).hexdigest() for name, source in self._sources.items()}

    def require_replicas(self, replicas: int, timeout: float, names: frozenset[str]) -> None:
        """After a pipeline with any call named in ``names``, send ``WAIT
        replicas timeout`` to each node it wrote to, on the same connection:
        Redis answers once that many replicas acknowledged every write before
        it. A node answered by fewer within ``timeout`` seconds fails its
        calls with ``ReplicaLag`` (a ``ConnectionError``: to callers, what was
        written there is not to be counted on, as when Redis is away)."""
        self.replicas, self.wait_ms, self.durable = max(0, replicas), max(1, int(timeout * 1000)), names

    def _wanted(self, node: str) -> int:
        """The replicas a write on ``node`` waits for: ``replicas``, or, on
        a Redis Cluster, no more than the node has standing by (replicas of
        it in ``CLUSTER NODES`` not marked failed): a master whose replicas
        are all gone (the one a failover promoted, before the old master
        comes back as its replica) cannot be failed over, and waits for
        none. A replica that is only cut off or slow stands by: the node
        waits for it, as a failover would promote it."""
        if not self.cluster:
            return self.replicas
        now = time.monotonic()
        if now - self._standby_at > STANDBY_REFRESH:
            self._standby_at = now
            try:
                self._standby = standby_replicas(self.client)
            except Exception:  # noqa: BLE001 (no answer: keep what was known)
                pass
        return min(self.replicas, self._standby.get(node, self.replicas))

    def counted(self) -> Any:
        """The client, for one command sent outside ``run_many`` (counted as
        one round trip)."""
        self.round_trips += 1
        return self.client

    def run(self, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        """One call, in a round trip of its own."""
        return self.run_many([(name, keys, args)])[0]

    def run_many(self, calls: Sequence[Call], *, raise_on_error: bool = True) -> list[Any]:
        """Run scripts (by name) or plain commands, each on the slot of its
        keys, in one pipeline: one round trip (per Redis node, in parallel).
        A script a server does not know yet (a restarted node) is loaded and
        its call run again: it did not run the first time."""
        self.round_trips += 1
        for name, _, _ in calls:
            self.calls[name] = self.calls.get(name, 0) + 1
        results = self._pipeline(calls)
        missing = [i for i, r in enumerate(results) if isinstance(r, redis.exceptions.NoScriptError)]
        if missing:
            for name in {calls[i][0] for i in missing}:
                self.client.script_load(self._sources[name])
            again = self._pipeline([calls[i] for i in missing])
            for i, r in zip(missing, again):
                results[i] = r
        if raise_on_error:
            for r in results:
                if isinstance(r, Exception):
                    raise r
        return results

    def _pipeline(self, calls: Sequence[Call]) -> list[Any]:
        results = self._pipeline_once(calls)
        if len(calls) > 1 and self.cluster and all(isinstance(r, redis.exceptions.ConnectionError)
                                                   and not isinstance(r, ReplicaLag) for r in results):
            # redis-py fails a whole cluster pipeline when one node is
            # unreachable: send each node its own calls, so that the shards
            # on the masters still up go on (one round trip per node, only
            # while a node is away).
            by_node: dict[str, list[int]] = defaultdict(list)
            for i, (_, keys, _) in enumerate(calls):
                try:
                    node = self.client.get_node_from_key(keys[0]).name if keys else ""
                except Exception:  # noqa: BLE001 (no slot map at all: leave it failed)
                    node = ""
                by_node[node].append(i)
            if len(by_node) > 1:
                for indexes in by_node.values():
                    for i, r in zip(indexes, self._pipeline_once([calls[i] for i in indexes])):
                        results[i] = r
        return results

    def _route(self, keys: Sequence[Any]) -> dict[str, Any]:
        """On a cluster, the node of a script call's keys, named for the
        pipeline: redis-py 8's cluster pipeline otherwise asks its default
        node ``COMMAND GETKEYS`` for every EVALSHA it queues, one synchronous
        round trip per script call (measured: 200 COMMAND calls for 200
        EVALSHAs in 10 pipelines). A command sent to a node that no longer
        holds its slot is answered MOVED and sent again by redis-py, as
        without the name."""
        if not self.cluster or not keys:
            return {}
        try:
            return {"target_nodes": self.client.get_node_from_key(keys[0])}
        except Exception:  # noqa: BLE001 (no slot map yet: let redis-py find the node)
            return {}

    def _pipeline_once(self, calls: Sequence[Call]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for name, keys, args in calls:
            sha = self._shas.get(name)
            if sha is not None:
                # Not pipe.evalsha: redis-py's cluster pipeline refuses that
                # method by name, and takes the command itself.
                pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args, **self._route(keys))
            else:
                pipe.execute_command(name, *keys, *args)
        waits: list[tuple[str, list[int], int]] = []
        if self.replicas and any(name in self.durable for name, _, _ in calls):
            by_node: dict[str, list[int]] = defaultdict(list)
            route: dict[str, dict[str, Any]] = {}
            for i, (_, keys, _) in enumerate(calls):
                target = self._route(keys)
                node = target["target_nodes"].name if target else ""
                by_node[node].append(i)
                route[node] = target
            for node, indexes in by_node.items():
                wanted = self._wanted(node)
                if wanted:
                    pipe.execute_command("WAIT", wanted, self.wait_ms, **route[node])
                    waits.append((node, indexes, wanted))
        try:
            results = list(pipe.execute(raise_on_error=False))
        except redis.RedisError as exc:  # the whole pipeline failed (connection)
            return [exc] * len(calls)
        except RedisClusterException as exc:
            # Not a RedisError (redis-py 8): every node unreachable while the
            # client refreshes its slot map. To callers, Redis is away.
            return [redis.exceptions.ConnectionError(str(exc))] * len(calls)
        results = [redis.exceptions.ConnectionError(str(r)) if isinstance(r, RedisClusterException) else r
                   for r in results]
        if waits:
            answers, results = results[len(calls):], results[:len(calls)]
            for (node, indexes, wanted), answer in zip(waits, answers):
                if isinstance(answer, Exception) or int(answer) < wanted:
                    self.short_waits += 1
                    self._standby_at = float("-inf")  # a failover may be under way: look again
                    lag = ReplicaLag(f"{answer if isinstance(answer, Exception) else int(answer)} of "
                                     f"{wanted} replicas of {node or 'Redis'} acknowledged within "
                                     f"{self.wait_ms} ms (REDIS_WAIT_REPLICAS)")
                    for i in indexes:
                        if not isinstance(results[i], Exception):
                            results[i] = lag
        return results


def text(value: Any, errors: str = "replace") -> str:
    """A Redis reply (bytes, or anything else) as text."""
    return value.decode("utf-8", errors) if isinstance(value, bytes) else str(value)


def pairs(row: Any) -> Any:
    """The (field, value) pairs of an HGETALL reply (a dict, or a flat list
    from a script or RESP2 pipeline)."""
    return row.items() if isinstance(row, dict) else zip(row[::2], row[1::2])
