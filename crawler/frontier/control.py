"""A worker's part in the crawl's control: its heartbeat and record for
operators, the reaping of stopped workers' leases, and the operator's stop
flag (``scrapy stop``).

Keys (``crawler/redis/keys.py``): the crawl-wide ``nodes``, ``hb`` and
``control``, and each site shard's lease hashes (``REAP`` gives a stopped
worker's leases back to their queues, shard by shard).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from crawler.redis.gateway import pairs
from crawler.redis.gateway import text as _s
from crawler.redis.memory import is_oom

if TYPE_CHECKING:
    from crawler.frontier.base import Settings, State
    from crawler.redis.gateway import Gateway
    from crawler.redis.keys import Keys

__all__ = ["STOP_MODES", "Control"]


STOP_MODES = ("graceful", "now")


def _stop_mode(value: Any) -> str | None:
    """A stop flag read from Redis, if it is one we know (anything else: none)."""
    mode = _s(value) if value is not None else None
    return mode if mode in STOP_MODES else None


class Control:
    """This worker's heartbeat and the crawl's stop flag, through ``gateway``."""

    def __init__(self, gateway: Gateway, keys: Keys, settings: Settings, state: State) -> None:
        self.gateway = gateway
        self.keys = keys
        self.settings = settings
        self.state = state

    def heartbeat(self, record: dict[str, Any] | None = None) -> tuple[int, int, set[str]]:
        """Record this node alive and reap nodes whose heartbeat stopped:
        their leases go back to the head of their queues. Returns (leases
        reaped, nodes reaped, the lease ids Redis holds for this node)."""
        cfg, k = self.settings, self.keys
        rec = {"node": cfg.node, "host": socket.gethostname(), "pid": os.getpid(),
               "started": cfg.started, "heartbeat": time.time(), "state": "running", **(record or {})}
        beat, control = self.gateway.run_many([
            ("HEARTBEAT", [k.nodes, k.hb], [cfg.node, json.dumps(rec), cfg.lease_timeout_ms]),
            ("HGET", [k.control], ["stop"])])
        self.state.stop_mode = _stop_mode(control)
        self.state.live_nodes = max(1, int(beat[0]))
        dead = [_s(d) for d in beat[1]]
        dead = [d for d in dead if d != cfg.node]
        calls = [("REAP", [*sk.fixed, sk.leases(cfg.node), *(sk.leases(d) for d in dead)],
                  [cfg.node, cfg.conc, *dead]) for sk in k.site_shards]
        reaped = 0
        mine: set[str] = set()
        for out in self.gateway.run_many(calls):
            reaped += int(out[0])
            mine.update(_s(x) for x in out[1])
        if dead:
            self.gateway.run("FORGET", [k.nodes, k.hb], [cfg.lease_timeout_ms, *dead])
        return reaped, len(dead), mine

    def takes_writes(self) -> bool:
        """Whether every Redis holding the crawl's keys takes a command that
        would add data: ``ZADD key XX 0 "\\n"`` (no node or site is named
        "\\n", and XX adds no member nor key: it changes nothing) on the
        crawl-wide keys and on each shard's, so on every master of a cluster
        that holds any. False while one refuses it for want of memory
        (``maxmemory`` reached); any other Redis error is raised."""
        k = self.keys
        probes = [k.hb, *(sk.ready for sk in (*k.site_shards, *k.dup_shards))]
        results = self.gateway.run_many([("ZADD", [key], ["XX", 0, "\n"]) for key in probes], raise_on_error=False)
        for r in results:
            if isinstance(r, Exception) and not is_oom(r):
                raise r
        return not any(isinstance(r, Exception) for r in results)

    def request_stop(self, mode: str = "graceful", by: str = "") -> None:
        """Ask every worker of the crawl to stop ("graceful": finish what it
        holds; "now": give it back). Workers see it at their next heartbeat;
        the flag stays, and a worker started meanwhile exits, until
        ``clear_stop``."""
        if mode not in STOP_MODES:
            raise ValueError(f"stop mode {mode!r} is not one of {', '.join(STOP_MODES)}")
        self.gateway.run("HSET", [self.keys.control], ["stop", mode, "at", f"{time.time():.3f}", "by", by])

    def clear_stop(self) -> bool:
        """Let workers run the crawl again; True if a stop was set."""
        return bool(self.gateway.run("DEL", [self.keys.control], []))

    def stop_requested(self) -> dict[str, Any] | None:
        """The stop an operator asked for ({"stop", "at", "by"}), or None."""
        raw = self.gateway.run("HGETALL", [self.keys.control], [])
        rec: dict[str, Any] = {_s(k): _s(v) for k, v in pairs(raw)}
        mode = _stop_mode(rec.get("stop"))
        if mode is None:
            return None
        try:
            at = float(rec.get("at") or 0)
        except ValueError:
            at = 0.0
        return {"stop": mode, "at": at, "by": str(rec.get("by") or "")[:200]}

    def heartbeats(self) -> tuple[float, dict[str, float]]:
        """Redis's clock (seconds) and the nodes being watched, with their
        last heartbeat (seconds, Redis's clock)."""
        out = self.gateway.run("BEATS", [self.keys.hb], [])
        now = int(out[0]) + int(out[1]) / 1e6
        return now, {_s(out[i]): int(out[i + 1]) / 1000.0 for i in range(2, len(out) - 1, 2)}

    def take_over(self, nodes: Sequence[str]) -> int:
        """Take back at once the leases of ``nodes`` known to be gone (a
        process of this machine that no longer runs): they go back to the
        head of their queues, and the nodes' records are marked lost.
        Returns the leases given back."""
        nodes = [n for n in nodes if n != self.settings.node]
        if not nodes:
            return 0
        k = self.keys
        calls = [("REAP", [*sk.fixed, sk.leases(self.settings.node), *(sk.leases(d) for d in nodes)],
                  [self.settings.node, self.settings.conc, *nodes]) for sk in k.site_shards]
        reaped = sum(int(out[0]) for out in self.gateway.run_many(calls))
        self.gateway.run("FORGET", [k.nodes, k.hb], [0, *nodes])
        return reaped

    def leave(self, record: dict[str, Any] | None = None) -> None:
        """This node stops: it is no longer watched for heartbeats. Its record
        stays for the operator, marked stopped. Shared state is untouched."""
        rec = {"node": self.settings.node, "host": socket.gethostname(), "pid": os.getpid(),
               "started": self.settings.started, "heartbeat": time.time(), **(record or {}), "state": "stopped"}
        self.gateway.run_many([("ZREM", [self.keys.hb], [self.settings.node]),
                       ("HSET", [self.keys.nodes], [self.settings.node, json.dumps(rec)])])
