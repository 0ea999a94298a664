"""The crawl's meta hash (``{crawl}:meta``): what every worker of a crawl
must agree on, recorded by the first and checked by the others: its layout
(``shards``, and ``dup_levels``: the duplicate index's grown tables), the order of its queues (``order``: "fifo", or a focused
crawl's "topic:<digest>"), its follow policy (``follow``), and which worker
queues again a URL the crawl settled as an error (``again\t...`` fields).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from crawler.redis.gateway import text as _s

if TYPE_CHECKING:
    from crawler.frontier.base import State
    from crawler.redis.gateway import Call, Gateway
    from crawler.redis.keys import Keys

__all__ = ["ORDERS", "ORDER_NAMES", "CrawlMeta", "FrontierLayoutError"]

# -a order -> the queue order recorded in the crawl's meta, and back.
ORDERS = {"bfs": "fifo", "dfs": "lifo", "importance": "importance"}
ORDER_NAMES = {v: k for k, v in ORDERS.items()}


def _asking(order: str) -> str:
    """An order as a user asks for it, for messages."""
    return "a topic (-a topic)" if order.startswith("topic:") else f"-a order={ORDER_NAMES.get(order, order)}"


class FrontierLayoutError(RuntimeError):
    """This worker's frontier layout differs from the crawl's (another
    ``FRONTIER_SHARDS``): it would read and write other keys."""


class CrawlMeta:
    """The crawl's recorded choices, through ``gateway``."""

    def __init__(self, gateway: Gateway, keys: Keys, state: State) -> None:
        self.gateway = gateway
        self.keys = keys
        self.state = state

    def recorded_order(self) -> str | None:
        """How the crawl's queues are ordered (``check_layout``): "fifo", a
        focused crawl's "topic:<digest>", or None (not recorded: fifo)."""
        raw = self.gateway.run("HGET", [self.keys.meta], ["order"])
        return _s(raw) if raw is not None else None

    def recorded_shards(self) -> int | None:
        """The shard count the crawl was started with (None: not started)."""
        raw = self.gateway.run("HGET", [self.keys.meta], ["shards"])
        try:
            return int(_s(raw)) if raw is not None else None
        except ValueError:
            return None

    def check_layout(self, order: str | None = None, dup_levels: str | None = None) -> None:
        """Record this crawl's shard count, or check it against the one
        recorded: workers of one crawl must agree on where keys live. With
        ``order`` (``"fifo"``, or ``"topic:<digest>"`` for a focused crawl),
        the same for the order of its queues: a focused crawl's shards are
        ordered by priority (``scripts.qpush``), and every worker of it must
        score pages by the same topic. ``dup_levels``: the levels of the
        duplicate index's grown tables (``crawler/frontier/buckets.py``),
        recorded by a new crawl before its layout, so that a worker that
        reads a layout without them reads a crawl an earlier version began
        (flat tables)."""
        client = self.gateway.counted()
        if dup_levels is not None and not client.hexists(self.keys.meta, "shards"):
            client.hsetnx(self.keys.meta, "dup_levels", dup_levels)
        created = client.hsetnx(self.keys.meta, "shards", self.keys.shards)
        if created and client.exists(self.keys.prefix + "stats"):
            client.hdel(self.keys.meta, "shards", "dup_levels")
            raise FrontierLayoutError(
                f"crawl {self.keys.crawl!r} was started by an earlier version of the crawler (all its keys in "
                f"one slot); this version cannot continue it: start a new crawl (-s CRAWL_NAME=...)")
        recorded = client.hget(self.keys.meta, "shards")
        if recorded is not None and _s(recorded) != str(self.keys.shards):
            raise FrontierLayoutError(
                f"crawl {self.keys.crawl!r} was started with FRONTIER_SHARDS={_s(recorded)}; this worker has "
                f"FRONTIER_SHARDS={self.keys.shards}: set it to {_s(recorded)} to join the crawl")
        if order is not None:
            self._check_order(order)
        else:
            raw = client.hget(self.keys.meta, "order")
            recorded = _s(raw) if raw is not None else "fifo"
            self.state.order = recorded
            self.state.ordered = recorded not in ("fifo", "lifo")

    def _check_order(self, order: str) -> None:
        """Record or check the crawl's queue order: "fifo" (-a order=bfs),
        "lifo" (dfs), "importance", a focused crawl's "topic:<digest>", or
        "any" (a worker without -a order nor topic: it takes the crawl's
        order, unless the crawl is a focused one; a new crawl is "fifo")."""
        client = self.gateway.counted()
        recorded_raw = client.hget(self.keys.meta, "order")
        if recorded_raw is None:
            # Not recorded: a new crawl, or one an earlier version started
            # (its queues are lists: first in, first out). Looked at before
            # anything is written, so a worker joining at the same moment
            # cannot make a new crawl look old.
            started = any(client.hexists(sk.stats, "enqueued") for sk in self.keys.site_shards)
            if order == "any" and not started:
                # A worker that only joins records nothing: the crawl's first
                # worker (with seeds, perhaps with -a order) may be starting
                # at this moment. Until it records, this one reads the crawl
                # as breadth-first and looks again (refresh_order).
                self.state.order, self.state.ordered, self.state.order_known = "fifo", False, False
                return
            if started and order.startswith("topic:"):
                raise FrontierLayoutError(
                    f"crawl {self.keys.crawl!r} was started without a topic; a focused crawl (-a topic) is a crawl "
                    f"of its own: start it with another -s CRAWL_NAME=...")
            if started and order not in ("fifo", "any"):
                raise FrontierLayoutError(
                    f"crawl {self.keys.crawl!r} was started breadth-first (before -a order was recorded); "
                    f"{_asking(order)} is a crawl of its own: start it with another -s CRAWL_NAME=...")
            client.hsetnx(self.keys.meta, "order", "fifo" if started or order == "any" else order)
            recorded_raw = client.hget(self.keys.meta, "order")
        recorded = _s(recorded_raw or b"fifo")
        topic_crawl = recorded.startswith("topic:")
        if order == "any" and not topic_crawl:
            order = recorded
        if recorded != order:
            if order in ("fifo", "any") and topic_crawl:
                raise FrontierLayoutError(
                    f"crawl {self.keys.crawl!r} is a focused crawl: join it with -a topic= and the same topic file")
            if recorded == "fifo" and order.startswith("topic:"):
                raise FrontierLayoutError(
                    f"crawl {self.keys.crawl!r} was started without a topic; a focused crawl (-a topic) is a crawl "
                    f"of its own: start it with another -s CRAWL_NAME=...")
            if topic_crawl and order.startswith("topic:"):
                raise FrontierLayoutError(
                    f"crawl {self.keys.crawl!r} was started with another topic; join it with the same topic file, "
                    f"or start a crawl of your own (-s CRAWL_NAME=...)")
            if topic_crawl or order.startswith("topic:"):
                raise FrontierLayoutError(
                    f"crawl {self.keys.crawl!r} has {_asking(recorded)}; this worker asks {_asking(order)}: a focused "
                    f"crawl keeps its topic order; start another crawl (-s CRAWL_NAME=...)")
            raise FrontierLayoutError(
                f"crawl {self.keys.crawl!r} has -a order={ORDER_NAMES[recorded]} (recorded when it started); this "
                f"worker asks -a order={ORDER_NAMES[order]}: join it with -a order={ORDER_NAMES[recorded]} (or without "
                f"-a order), or start another crawl (-s CRAWL_NAME=...)")
        self.state.order = recorded
        self.state.ordered = recorded != "fifo" and recorded != "lifo"
        self.state.order_known = True
        # Each shard's scripts read the flags (one shard at a time: on a
        # cluster the shards' keys lie in different slots).
        flags = (["ordered", "1", "importance", "1"] if recorded == "importance" else ["ordered", "1"]
                 if self.state.ordered else ["lifo", "1"] if recorded == "lifo" else [])
        if flags:
            self.gateway.run_many([("HSET", [sk.stats], flags) for sk in self.keys.site_shards])

    def refresh_order(self) -> None:
        """A worker that joined before the crawl's order was recorded: read
        it again (with each heartbeat, until it is there)."""
        if self.state.order_known:
            return
        raw = self.gateway.run("HGET", [self.keys.meta], ["order"])
        if raw is not None:
            recorded = _s(raw)
            self.state.order, self.state.order_known = recorded, True
            self.state.ordered = recorded not in ("fifo", "lifo")

    def crawl_policy(self, name: str, propose: str | None = None) -> str | None:
        """A per-crawl choice recorded in the crawl's meta (``follow``): with
        ``propose``, recorded unless one is already (HSETNX); the recorded
        value, or None."""
        calls: list[Call] = [("HGET", [self.keys.meta], [name])]
        if propose is not None:
            calls.insert(0, ("HSETNX", [self.keys.meta], [name, propose]))
        raw = self.gateway.run_many(calls)[-1]
        return _s(raw) if raw is not None else None

    def session(self, origin: str) -> str | None:
        """A site's shared session (``crawler/sessions/middleware.py``:
        encrypted with a key only the site's secrets give), or None."""
        raw = self.gateway.run_many([("HGET", [self.keys.meta], ["session\t" + origin])])[-1]
        return _s(raw) if raw is not None else None

    def set_session(self, origin: str, token: str) -> None:
        self.gateway.run_many([("HSET", [self.keys.meta], ["session\t" + origin, token])])

    def claim_again(self, url: str, stamp: str) -> bool:
        """Whether this worker is the one to queue ``url`` again, a URL the
        crawl settled as an error (its record's ``stamp``: when and why):
        every worker of a run brings the same seeds, and only the first may
        queue it (HSETNX in the crawl's meta hash). A later error of the same
        URL has another stamp, so a later run may try it again."""
        field = "again\t" + url[:2000] + "\t" + stamp[:200]
        return bool(self.gateway.counted().hsetnx(self.keys.meta, field, str(time.time())))
