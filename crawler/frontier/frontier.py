"""The Redis frontier: site queues, leases, dedup, retries, heartbeats, the
crawl's scope, the robots.txt cache, the duplicate index and the sites'
templates (``templates.py``).

``Frontier`` is the only code that talks to the frontier's keys (named in
``keys.py``); every operation is one round of Lua scripts (``scripts.py``),
one script per shard it touches, sent together in one pipeline. It knows
nothing of Scrapy: the frontier service (``service.py``) and the scheduler
drive it, and operator commands and tests can use it directly. It runs on a
single Redis or on a Redis Cluster (``redis.cluster.RedisCluster``) alike.

Sharding: a site's queue, politeness state and URL dedup live in the site's
shard (``FRONTIER_SHARDS`` of them per crawl, fixed when the crawl starts
and recorded in its ``meta`` key). Enqueueing groups links by shard; a lease
call asks a few shards at a time, in rotation, and each shard still hands
out at most one request per site per call, at the site's time.

URL dedup: a request's fingerprint (``crawler.request_fingerprinter``, 20
bytes) becomes a 64-bit integer kept in one of ``DUPEFILTER_BUCKETS`` Redis
sets of its site's shard, the bucket chosen by other bits of the same
fingerprint. Redis stores small sets of integers as a sorted array of 8-byte
integers (intset), so a URL costs about 8 bytes plus the bucket's share of
key overhead; with 76 bits of fingerprint (64 + 12 bucket bits at 4096
buckets) a false "seen" is expected once in about 10^10 crawls of a million
URLs. Size the buckets so that each holds at most ``set-max-intset-entries``
(512 by default on a server we do not configure, 4096 on the embedded one):
buckets = expected URLs per shard / 400.
"""

from __future__ import annotations

import json
import math
import os
import socket
import time
import uuid
import zlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from hashlib import sha1
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from crawler.fingerprint import Sketch
from crawler.frontier import scripts
from crawler.frontier.dupindex import Duplicate, DuplicateIndex
from crawler.frontier.keys import Keys, ShardKeys
from crawler.frontier.templates import SiteTemplates

__all__ = ["Duplicate", "Frontier", "FrontierLayoutError", "Lease", "LinkEntry", "fingerprint_slot"]


STOP_MODES = ("graceful", "now")


def _stop_mode(value: Any) -> str | None:
    """A stop flag read from Redis, if it is one we know (anything else: none)."""
    mode = _s(value) if value is not None else None
    return mode if mode in STOP_MODES else None


def fingerprint_slot(fp: bytes, buckets: int) -> tuple[str, str]:
    """(bucket, member) of a request fingerprint in the dedup sets."""
    member = int.from_bytes(fp[:8], "big", signed=True)
    bucket = int.from_bytes(fp[8:12], "big") % buckets
    return str(bucket), str(member)


class FrontierLayoutError(RuntimeError):
    """This worker's frontier layout differs from the crawl's (another
    ``FRONTIER_SHARDS``): it would read and write other keys."""


@dataclass(slots=True)
class LinkEntry:
    """A request to enqueue: dedup slot (empty bucket: no dedup), site, JSON,
    whether it goes first in its site queue (raised priority), and in an
    ordered crawl its priority."""

    bucket: str
    member: str
    site: str
    entry: str
    head: bool = False
    priority: int = 0  # 0..1000, in an ordered (focused) crawl: more goes first


@dataclass(slots=True)
class Lease:
    id: str
    site: str
    entry: str
    gap: float = 0.0  # seconds the site's requests must be apart (0: no delay)


@dataclass(slots=True)
class _ShardWork:
    links: list[LinkEntry] = field(default_factory=list)
    acks: list[tuple[str, str, str]] = field(default_factory=list)
    requeues: list[tuple[str, float, str, str]] = field(default_factory=list)
    downloaded: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CommitResult:
    """What a commit did, and what it could not send (its shard's Redis was
    away): the caller keeps that part and sends it again."""

    added: int = 0
    duplicates: int = 0
    capped: int = 0
    acked: int = 0
    stale: int = 0
    unsent_links: list[LinkEntry] = field(default_factory=list)
    unsent_acks: list[tuple[str, str, str]] = field(default_factory=list)
    unsent_requeues: list[tuple[str, float, str, str]] = field(default_factory=list)
    unsent_downloaded: list[str] = field(default_factory=list)
    error: Exception | None = None

    def counts(self) -> dict[str, int]:
        return {"added": self.added, "duplicates": self.duplicates, "capped": self.capped,
                "acked": self.acked, "stale": self.stale}


class Frontier:
    def __init__(
        self,
        client: Any,
        crawl: str,
        *,
        node: str | None = None,
        default_delay: float = 1.0,
        concurrency_per_site: int = 1,
        delay_margin: float = 0.01,
        max_pages_per_site: int = 0,
        buckets: int = 1024,
        lease_timeout: float = 60.0,
        shards: int = 16,
    ) -> None:
        if buckets < 1:
            raise ValueError(f"DUPEFILTER_BUCKETS ({buckets!r}) must be at least 1")
        self.client = client
        self._cluster = not hasattr(client, "connection_pool")  # a RedisCluster has none
        self.crawl = crawl
        self.keys = Keys(crawl, shards)
        self.node = node or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.node_tag = f"{zlib.crc32(self.node.encode()) & 0xFFFF:04x}"
        self.default_delay_ms = int(default_delay * 1000)
        self.conc = max(1, concurrency_per_site)
        self.margin_ms = int(delay_margin * 1000)
        self.cap = max(0, max_pages_per_site)
        self.buckets = buckets
        self.lease_timeout_ms = int(lease_timeout * 1000)
        self.round_trips = 0
        self.calls: dict[str, int] = {}
        self.ordered = False  # a focused crawl's: queues by priority (check_layout)
        self.live_nodes = 1  # workers of the crawl alive at the last heartbeat
        self.stop_mode: str | None = None  # the operator's stop, as of the last heartbeat
        self._shas = {name: sha1(getattr(scripts, name).encode()).hexdigest()
                      for name in (*scripts.ALL, *scripts.TEMPLATE_SCRIPTS)}
        self.duplicates = DuplicateIndex(self)
        self.templates = SiteTemplates(self)
        self.started = time.time()
        # When each shard may next have a site ready (monotonic), as the last
        # lease call there said.
        self._shard_ready = [0.0] * shards
        # When the lease call next counts the live workers (monotonic): each
        # worker's share of a site's concurrency follows them between heartbeats.
        self._count_live_at = 0.0
        self._starved_poll = 0.1  # seconds until a worker that got nothing asks again (0.1, then 0.2)

    # -- plumbing ------------------------------------------------------------
    def run_many(self, calls: Sequence[tuple[str, Sequence[Any], Sequence[Any]]],
                 *, raise_on_error: bool = True) -> list[Any]:
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
                self.client.script_load(getattr(scripts, name))
            again = self._pipeline([calls[i] for i in missing])
            for i, r in zip(missing, again):
                results[i] = r
        if raise_on_error:
            for r in results:
                if isinstance(r, Exception):
                    raise r
        return results

    def _pipeline(self, calls: Sequence[tuple[str, Sequence[Any], Sequence[Any]]]) -> list[Any]:
        results = self._pipeline_once(calls)
        if len(calls) > 1 and self._cluster and all(isinstance(r, redis.exceptions.ConnectionError) for r in results):
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
        if not self._cluster or not keys:
            return {}
        try:
            return {"target_nodes": self.client.get_node_from_key(keys[0])}
        except Exception:  # noqa: BLE001 (no slot map yet: let redis-py find the node)
            return {}

    def _pipeline_once(self, calls: Sequence[tuple[str, Sequence[Any], Sequence[Any]]]) -> list[Any]:
        pipe = self.client.pipeline(transaction=False)
        for name, keys, args in calls:
            sha = self._shas.get(name)
            if sha is not None:
                # Not pipe.evalsha: redis-py's cluster pipeline refuses that
                # method by name, and takes the command itself.
                pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args, **self._route(keys))
            else:
                pipe.execute_command(name, *keys, *args)
        try:
            results = list(pipe.execute(raise_on_error=False))
        except redis.RedisError as exc:  # the whole pipeline failed (connection)
            return [exc] * len(calls)
        except RedisClusterException as exc:
            # Not a RedisError (redis-py 8): every node unreachable while the
            # client refreshes its slot map. To callers, Redis is away.
            return [redis.exceptions.ConnectionError(str(exc))] * len(calls)
        return [redis.exceptions.ConnectionError(str(r)) if isinstance(r, RedisClusterException) else r
                for r in results]

    def _run(self, name: str, keys: Sequence[Any], args: Sequence[Any]) -> Any:
        return self.run_many([(name, keys, args)])[0]

    def shard(self, site: str) -> ShardKeys:
        return self.keys.site(site)

    def slot(self, fp: bytes) -> tuple[str, str]:
        return fingerprint_slot(fp, self.buckets)

    def recorded_order(self) -> str | None:
        """How the crawl's queues are ordered (``check_layout``): "fifo", a
        focused crawl's "topic:<digest>", or None (not recorded: fifo)."""
        raw = self._run("HGET", [self.keys.meta], ["order"])
        return _s(raw) if raw is not None else None

    def recorded_shards(self) -> int | None:
        """The shard count the crawl was started with (None: not started)."""
        raw = self._run("HGET", [self.keys.meta], ["shards"])
        try:
            return int(_s(raw)) if raw is not None else None
        except ValueError:
            return None

    def check_layout(self, order: str | None = None) -> None:
        """Record this crawl's shard count, or check it against the one
        recorded: workers of one crawl must agree on where keys live. With
        ``order`` (``"fifo"``, or ``"topic:<digest>"`` for a focused crawl),
        the same for the order of its queues: a focused crawl's shards are
        ordered by priority (``scripts.qpush``), and every worker of it must
        score pages by the same topic."""
        self.round_trips += 1
        created = self.client.hsetnx(self.keys.meta, "shards", self.keys.shards)
        if created and self.client.exists(self.keys.prefix + "stats"):
            self.client.hdel(self.keys.meta, "shards")
            raise FrontierLayoutError(
                f"crawl {self.crawl!r} was started by an earlier version of the crawler (all its keys in "
                f"one slot); this version cannot continue it: start a new crawl (-s CRAWL_NAME=...)")
        recorded = self.client.hget(self.keys.meta, "shards")
        if recorded is not None and _s(recorded) != str(self.keys.shards):
            raise FrontierLayoutError(
                f"crawl {self.crawl!r} was started with FRONTIER_SHARDS={_s(recorded)}; this worker has "
                f"FRONTIER_SHARDS={self.keys.shards}: set it to {_s(recorded)} to join the crawl")
        if order is not None:
            self._check_order(order)
        else:
            recorded = self.client.hget(self.keys.meta, "order")
            self.ordered = recorded is not None and _s(recorded) != "fifo"

    def _check_order(self, order: str) -> None:
        self.round_trips += 1
        recorded_raw = self.client.hget(self.keys.meta, "order")
        if recorded_raw is None:
            # Not recorded: a new crawl, or one an earlier version started
            # (its queues are lists: first in, first out). Looked at before
            # anything is written, so a worker joining at the same moment
            # cannot make a new crawl look old.
            started = any(self.client.hexists(sk.stats, "enqueued") for sk in self.keys.site_shards)
            if started and order != "fifo":
                raise FrontierLayoutError(
                    f"crawl {self.crawl!r} was started without a topic; a focused crawl (-a topic) is a crawl "
                    f"of its own: start it with another -s CRAWL_NAME=...")
            self.client.hsetnx(self.keys.meta, "order", "fifo" if started else order)
            recorded_raw = self.client.hget(self.keys.meta, "order")
        recorded = _s(recorded_raw or b"fifo")
        if recorded != order:
            if order == "fifo":
                raise FrontierLayoutError(
                    f"crawl {self.crawl!r} is a focused crawl: join it with -a topic= and the same topic file")
            if recorded == "fifo":
                raise FrontierLayoutError(
                    f"crawl {self.crawl!r} was started without a topic; a focused crawl (-a topic) is a crawl "
                    f"of its own: start it with another -s CRAWL_NAME=...")
            raise FrontierLayoutError(
                f"crawl {self.crawl!r} was started with another topic; join it with the same topic file, "
                f"or start a crawl of your own (-s CRAWL_NAME=...)")
        self.ordered = order != "fifo"
        if order != "fifo":
            # Each shard's scripts read the flag (one shard at a time: on a
            # cluster the shards' keys lie in different slots).
            self.run_many([("HSET", [sk.stats], ["ordered", "1"]) for sk in self.keys.site_shards])

    # -- queues and leases ---------------------------------------------------
    def enqueue(self, links: Sequence[LinkEntry]) -> tuple[int, int, int]:
        """Dedup and queue; returns (added, duplicates, over the site cap)."""
        if not links:
            return 0, 0, 0
        result = self.commit(links)
        if result.error is not None:
            raise result.error
        return result.added, result.duplicates, result.capped

    def commit(
        self,
        links: Sequence[LinkEntry] = (),
        acks: Sequence[tuple[str, str, str]] = (),
        requeues: Sequence[tuple[str, float, str, str]] = (),
        downloaded: Sequence[str] = (),
    ) -> CommitResult:
        """Enqueue links, settle leases (id, "C"|"E", reason), move leases to
        the retry queue (id, delay seconds, site, entry) and free the site
        slots of downloaded leases: one script per shard, one round trip.
        What a shard's Redis did not take comes back in ``unsent_*``."""
        work: dict[int, _ShardWork] = defaultdict(_ShardWork)
        shards = self.keys.site_shards
        for link in links:
            work[self.keys.site(link.site).index].links.append(link)
        stale = 0
        for field_name, items in (("acks", acks), ("requeues", requeues)):
            for item in items:
                shard = self._lease_shard(item[0])
                if shard < 0:
                    stale += 1  # not a lease id: no lease has it
                else:
                    getattr(work[shard], field_name).append(item)
        for lease_id in downloaded:
            shard = self._lease_shard(lease_id)
            if shard >= 0:
                work[shard].downloaded.append(lease_id)
        if not work:
            return CommitResult(stale=stale)
        order = sorted(work)
        calls = []
        for index in order:
            w, sk = work[index], shards[index]
            keys: list[str] = [*sk.fixed, sk.leases(self.node)]
            args: list[Any] = [self.node, self.cap, self.conc, self.default_delay_ms, self.margin_ms, len(w.links)]
            for link in w.links:
                keys += [sk.seen(link.bucket) if link.bucket else sk.queue(link.site), sk.queue(link.site)]
                args += [link.member if link.bucket else "", link.site, link.entry,
                         "h" if link.head else (str(link.priority) if link.priority else "")]
            args.append(len(w.acks))
            for lease_id, state, reason in w.acks:
                args += [lease_id, state, reason]
            args.append(len(w.requeues))
            for lease_id, delay, _site, entry in w.requeues:
                args += [lease_id, int(delay * 1000), entry]
            args += w.downloaded
            calls.append(("COMMIT", keys, args))
        results = self.run_many(calls, raise_on_error=False)
        out = CommitResult(stale=stale)
        for index, r in zip(order, results):
            if isinstance(r, Exception):
                w = work[index]
                out.unsent_links += w.links
                out.unsent_acks += w.acks
                out.unsent_requeues += w.requeues
                out.unsent_downloaded += w.downloaded
                out.error = r
                continue
            # Freed slots and new links may have made a site of this shard
            # ready: the next lease call asks it (not after up to 0.5 s, a
            # request's worth of time on a crawl of one site).
            self._shard_ready[index] = 0.0
            added, dup, capped, acked, stale = (int(x) for x in r)
            out.added += added
            out.duplicates += dup
            out.capped += capped
            out.acked += acked
            out.stale += stale
        if out.error is not None and len(out.unsent_links) + len(out.unsent_acks) + len(out.unsent_requeues) \
                + len(out.unsent_downloaded) == len(links) + len(acks) + len(requeues) + len(downloaded):
            raise out.error  # nothing went through: Redis is away
        return out

    def _lease_shard(self, lease_id: str) -> int:
        """The shard of a lease id ("<shard>.<n>", as LEASE wrote it); -1
        for an id that is not one (no lease of this frontier has it)."""
        head, _, _ = str(lease_id).partition(".")
        if head.isdigit() and int(head) < self.keys.shards:
            return int(head)
        return -1

    def lease(self, n: int, downloaded: Sequence[str] = (),
              in_flight: Mapping[str, int] | None = None) -> tuple[list[Lease], float | None]:
        """Lease up to ``n`` requests, at most one per site, from the sites
        whose next allowed time has come; first free the site slots of the
        ``downloaded`` leases (their download is over, their processing may
        not be). Returns the leases and how many seconds until it is worth
        asking again: until the next site is ready by time alone, or sooner
        while this worker finds nothing at all (other workers' links come at
        any time: after 0.1 s, then every 0.2 s).

        Every shard whose sites may be ready (by what it said last time, or
        not asked for 0.5 s: other workers add links) is asked for its share
        of ``n`` (at least one) in one round trip; a shard that had more
        ready than its share is asked again for the rest. So a crawl of many
        sites costs one round trip a lease call, and each shard still hands
        out at most one request per site per call, at the site's time. When
        more shards are ready than ``n``, each still gives one: the call may
        return up to one lease per ready shard."""
        shards = self.keys.site_shards
        now = time.monotonic()
        freed: dict[int, list[str]] = defaultdict(list)
        for lease_id in downloaded:
            if self._lease_shard(lease_id) >= 0:
                freed[self._lease_shard(lease_id)].append(lease_id)
        candidates = [i for i in range(len(shards)) if self._shard_ready[i] <= now]
        share = max(1, -(-max(1, n) // max(1, len(candidates))))
        asks = {i: share for i in candidates}
        for i in freed:
            # A slot freed may make its site ready at once (no delay): ask.
            asks.setdefault(i, share)
        # This node's share of each site's concurrency among the live workers,
        # and its downloads in flight by site (``in_flight``), which count
        # against it.
        site_share = -(-self.conc // self.live_nodes)
        held: dict[str, int] = dict(in_flight or {})
        leases: list[Lease] = []
        errors: list[Exception] = []
        # Workers started together each saw only themselves at their first
        # heartbeat, and heartbeats are seconds apart: with a share of the
        # whole concurrency each, the first to lease took every slot of a
        # one-site crawl and the other got nothing (two workers of the
        # PostgreSQL manual: one idle for its first 0.9 s). The live workers
        # are counted again in the lease's round trip, at most every 0.1 s.
        counting: list[tuple[str, Sequence[Any], Sequence[Any]]] = []
        if now >= self._count_live_at:
            self._count_live_at = now + 0.1
            counting = [("HEARTBEAT", [self.keys.nodes, self.keys.hb], ["", "", self.lease_timeout_ms])]
        empty: list[int] = []  # shards with no queued work
        while asks:
            plan = sorted(asks.items())
            mine = "".join(f"{site}\t{count}\n" for site, count in held.items()
                           if count > 0 and "\n" not in site and "\t" not in site)
            calls = [("LEASE", [*shards[i].fixed, shards[i].leases(self.node)],
                      [self.node, ask, self.default_delay_ms, self.conc, self.margin_ms, i, site_share, mine,
                       *freed.pop(i, ())])
                     for i, ask in plan]
            results = self.run_many([*calls, *counting], raise_on_error=False)
            if counting:
                beat = results.pop()
                if not isinstance(beat, Exception):
                    self.live_nodes = max(1, int(beat[0]))
                counting = []
            more: list[int] = []
            for (index, ask), out in zip(plan, results):
                if isinstance(out, Exception):
                    errors.append(out)
                    self._shard_ready[index] = now + 1.0  # its Redis is away: ask again in a second
                    continue
                wait = int(out[0])
                # Other workers add links at any time: look again within 0.5 s
                # (sooner while this worker finds nothing at all, below);
                # within 0.1 s when a site waits for a slot (another worker's
                # download may end any moment: a slot held by a worker that
                # has not said so yet is not held for long).
                self._shard_ready[index] = now + (0.1 if wait == -2 else 0.5 if wait < 0
                                                  else min(wait / 1000.0, 0.5))
                if wait == -1:
                    empty.append(index)
                got = (len(out) - 1) // 4
                # Entries are decoded leniently: one that is not UTF-8 (written
                # into Redis by someone else) must reach the scheduler to be
                # refused and settled, not fail the whole batch here.
                got_leases = [Lease(_s(out[i]), _s(out[i + 1]), _s(out[i + 2], "surrogateescape"),
                                    int(out[i + 3]) / 1000.0) for i in range(1, len(out), 4)]
                for lease in got_leases:
                    held[lease.site] = held.get(lease.site, 0) + 1
                leases += got_leases
                if ask and got == ask and wait == 0:
                    more.append(index)
            left = n - len(leases)
            if not more or left <= 0:
                break
            share = -(-left // len(more))
            asks = {i: share for i in more}
        if leases:
            self._starved_poll = 0.1
        elif empty:
            # Nothing anywhere for this worker: a worker that has just joined
            # (its peer is fetching the seed) or whose peers hold the work
            # looks again after 0.1 s, then every 0.2 s (not 0.5 s): it takes
            # part as soon as links come, and sees the crawl's end sooner.
            for index in empty:
                self._shard_ready[index] = now + self._starved_poll
            self._starved_poll = 0.2
        if errors and not leases:
            # The caller holds on to ``downloaded`` and tries again: freeing
            # a slot twice is a no-op.
            raise errors[0]
        if self.ordered:
            # Each shard served its most promising sites first; across the
            # shards asked, the most promising requests go first too.
            leases.sort(key=lambda lease: -entry_priority(lease.entry))
        return leases, max(min(self._shard_ready) - time.monotonic(), 0.0)

    def release(self, lease_ids: Sequence[str]) -> int:
        """Give unstarted leases back to the head of their site queues."""
        by_shard: dict[int, list[str]] = defaultdict(list)
        for lease_id in lease_ids:
            if self._lease_shard(lease_id) >= 0:
                by_shard[self._lease_shard(lease_id)].append(lease_id)
        if not by_shard:
            return 0
        shards = self.keys.site_shards
        calls = [("RELEASE", [*shards[i].fixed, shards[i].leases(self.node)], [self.node, self.conc, *ids])
                 for i, ids in sorted(by_shard.items())]
        return sum(int(r) for r in self.run_many(calls))

    def heartbeat(self, record: dict[str, Any] | None = None) -> tuple[int, int, set[str]]:
        """Record this node alive and reap nodes whose heartbeat stopped:
        their leases go back to the head of their queues. Returns (leases
        reaped, nodes reaped, the lease ids Redis holds for this node)."""
        rec = {"node": self.node, "host": socket.gethostname(), "pid": os.getpid(),
               "started": self.started, "heartbeat": time.time(), "state": "running", **(record or {})}
        k = self.keys
        beat, control = self.run_many([("HEARTBEAT", [k.nodes, k.hb], [self.node, json.dumps(rec), self.lease_timeout_ms]),
                                       ("HGET", [k.control], ["stop"])])
        self.stop_mode = _stop_mode(control)
        self.live_nodes = max(1, int(beat[0]))
        dead = [_s(d) for d in beat[1]]
        dead = [d for d in dead if d != self.node]
        calls = [("REAP", [*sk.fixed, sk.leases(self.node), *(sk.leases(d) for d in dead)],
                  [self.node, self.conc, *dead]) for sk in k.site_shards]
        reaped = 0
        mine: set[str] = set()
        for out in self.run_many(calls):
            reaped += int(out[0])
            mine.update(_s(x) for x in out[1])
        if dead:
            self._run("FORGET", [k.nodes, k.hb], [self.lease_timeout_ms, *dead])
        return reaped, len(dead), mine

    # -- operators: stop, view, remove ----------------------------------------------
    def request_stop(self, mode: str = "graceful", by: str = "") -> None:
        """Ask every worker of the crawl to stop ("graceful": finish what it
        holds; "now": give it back). Workers see it at their next heartbeat;
        the flag stays, and a worker started meanwhile exits, until
        ``clear_stop``."""
        if mode not in STOP_MODES:
            raise ValueError(f"stop mode {mode!r} is not one of {', '.join(STOP_MODES)}")
        self._run("HSET", [self.keys.control], ["stop", mode, "at", f"{time.time():.3f}", "by", by])

    def clear_stop(self) -> bool:
        """Let workers run the crawl again; True if a stop was set."""
        return bool(self._run("DEL", [self.keys.control], []))

    def stop_requested(self) -> dict[str, Any] | None:
        """The stop an operator asked for ({"stop", "at", "by"}), or None."""
        raw = self._run("HGETALL", [self.keys.control], [])
        items = raw.items() if isinstance(raw, dict) else zip(raw[::2], raw[1::2])
        rec: dict[str, Any] = {_s(k): _s(v) for k, v in items}
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
        out = self._run("BEATS", [self.keys.hb], [])
        now = int(out[0]) + int(out[1]) / 1e6
        return now, {_s(out[i]): int(out[i + 1]) / 1000.0 for i in range(2, len(out) - 1, 2)}

    def view(self, top: int = 10, limit: int = 100_000, default_delay: float | None = None) -> dict[str, Any]:
        """What an operator sees of the frontier: counters summed over the
        shards ({"stats"}), sites known ("sites"), ready now ("sites_ready"),
        backed off ("sites_backed_off") and the ``top`` largest site queues
        ("top_sites": site, queued, delay and backoff in seconds; a site
        without a delay of its own shows ``default_delay``, the workers',
        else this frontier's). Each shard looks at ``limit`` sites at most
        ("approximate" then says so)."""
        delay_ms = self.default_delay_ms if default_delay is None else int(default_delay * 1000)
        calls = [("VIEW", sk.fixed, [top, delay_ms, limit]) for sk in self.keys.site_shards]
        stats: dict[str, int] = {}
        sites = ready = backed_off = 0
        approximate = False
        tops: list[dict[str, Any]] = []
        for out in self.run_many(calls):
            row = out[0]
            items = row.items() if isinstance(row, dict) else zip(row[::2], row[1::2])
            for k, v in items:
                name = _s(k)
                if name != "lease_seq":
                    stats[name] = stats.get(name, 0) + int(v)
            sites += int(out[1])
            ready += int(out[2])
            backed_off += int(out[3])
            approximate = approximate or int(out[4]) >= limit
            rest = out[5:]
            for i in range(0, len(rest) - 3, 4):
                tops.append({"site": _s(rest[i]), "queued": int(rest[i + 1]),
                             "delay": int(rest[i + 2]) / 1000.0, "backoff": int(rest[i + 3]) / 1000.0})
        tops.sort(key=lambda t: (-t["queued"], t["site"]))
        return {"stats": stats, "sites": sites, "sites_ready": ready, "sites_backed_off": backed_off,
                "top_sites": tops[:top], "approximate": approximate}

    def remove(self, by_site: Mapping[str, Sequence[str]]) -> int:
        """Remove unprocessed requests: for each site, the queued and delayed
        entries of the given URLs (an empty list: every one of the site's).
        Leased requests stay. Returns how many were removed."""
        calls: list[tuple[str, Sequence[Any], Sequence[Any]]] = []
        for site, urls in by_site.items():
            sk = self.shard(site)
            prefixes: list[str] = []
            for url in urls:
                head = '{"u":' + json.dumps(url, ensure_ascii=False)
                prefixes += [head + ",", head + "}"]
            calls.append(("REMOVE", [*sk.fixed, sk.queue(site)], [site, *prefixes]))
        return sum(int(n) for n in self.run_many(calls)) if calls else 0

    def take_over(self, nodes: Sequence[str]) -> int:
        """Take back at once the leases of ``nodes`` known to be gone (a
        process of this machine that no longer runs): they go back to the
        head of their queues, and the nodes' records are marked lost.
        Returns the leases given back."""
        nodes = [n for n in nodes if n != self.node]
        if not nodes:
            return 0
        k = self.keys
        calls = [("REAP", [*sk.fixed, sk.leases(self.node), *(sk.leases(d) for d in nodes)],
                  [self.node, self.conc, *nodes]) for sk in k.site_shards]
        reaped = sum(int(out[0]) for out in self.run_many(calls))
        self._run("FORGET", [k.nodes, k.hb], [0, *nodes])
        return reaped

    def leave(self, record: dict[str, Any] | None = None) -> None:
        """This node stops: it is no longer watched for heartbeats. Its record
        stays for the operator, marked stopped. Shared state is untouched."""
        rec = {"node": self.node, "host": socket.gethostname(), "pid": os.getpid(),
               "started": self.started, "heartbeat": time.time(), **(record or {}), "state": "stopped"}
        self.run_many([("ZREM", [self.keys.hb], [self.node]),
                       ("HSET", [self.keys.nodes], [self.node, json.dumps(rec)])])

    # -- politeness ------------------------------------------------------------
    def reserve_send(self, site: str) -> float:
        """A request to ``site`` goes on the wire: seconds to wait first, so
        that it follows the last one any worker sent there by the site's gap
        (its delay, backoff and margin). 0 for sites without a delay."""
        sk = self.shard(site)
        return int(self._run("SEND", [*sk.fixed, sk.sent], [site, self.default_delay_ms, self.margin_ms])) / 1000.0

    def touch(self, site: str, delay: float) -> None:
        """A request went to ``site`` outside the frontier (robots.txt): hold
        its next request back for ``delay`` seconds, for every worker."""
        self._run("TOUCH", self.shard(site).fixed, [site, int(delay * 1000)])

    def backoff(self, site: str, minimum: float, maximum: float) -> float:
        """Back ``site`` off (429, 503, timeouts); returns the backoff in seconds."""
        return int(self._run("BACKOFF", self.shard(site).fixed,
                             [site, int(minimum * 1000), int(maximum * 1000)])) / 1000.0

    def set_site_delay(self, site: str, delay: float) -> None:
        """The delay between two fetches from ``site`` (robots.txt Crawl-delay)."""
        self._run("HSET", [self.shard(site).delay], [site, int(delay * 1000)])

    def site_delay(self, site: str) -> float | None:
        """The delay set for ``site`` (None: the default)."""
        v = self._run("HGET", [self.shard(site).delay], [site])
        return None if v is None else int(v) / 1000.0

    # -- duplicates ------------------------------------------------------------
    def near_duplicate(self, url: str, site: str, content_key: str | None, fingerprint: int | None,
                       sketch: Sketch | None = None, resemblance: float = 0.9, max_candidates: int = 32,
                       mirror_min_pages: int = 20, mirror_share: float = 0.5,
                       also: Sequence[tuple[str, Sequence[str], Sequence[Any]]] = (),
                       also_results: list[Any] | None = None) -> Duplicate:
        """See ``DuplicateIndex.check``."""
        return self.duplicates.check(url, site, content_key, fingerprint, sketch, resemblance, max_candidates,
                                     mirror_min_pages, mirror_share, also, also_results)

    def mirror_of(self, site: str) -> str | None:
        v = self._run("HGET", [self.shard(site).mirrors], [site])
        return _s(v) if v is not None else None

    def crawl_policy(self, name: str, propose: str | None = None) -> str | None:
        """A per-crawl choice recorded in the crawl's meta (``follow``): with
        ``propose``, recorded unless one is already (HSETNX); the recorded
        value, or None."""
        calls: list[tuple[str, Sequence[Any], Sequence[Any]]] = [("HGET", [self.keys.meta], [name])]
        if propose is not None:
            calls.insert(0, ("HSETNX", [self.keys.meta], [name, propose]))
        raw = self.run_many(calls)[-1]
        return _s(raw) if raw is not None else None

    def claim_again(self, url: str, stamp: str) -> bool:
        """Whether this worker is the one to queue ``url`` again, a URL the
        crawl settled as an error (its record's ``stamp``: when and why):
        every worker of a run brings the same seeds, and only the first may
        queue it (HSETNX in the crawl's meta hash). A later error of the same
        URL has another stamp, so a later run may try it again."""
        field = "again\t" + url[:2000] + "\t" + stamp[:200]
        self.round_trips += 1
        return bool(self.client.hsetnx(self.keys.meta, field, str(time.time())))

    # -- scope -------------------------------------------------------------------
    def scope(self, add_sites: Sequence[str] = (), add_hosts: Sequence[str] = ()) -> tuple[set[str], set[str]]:
        """Add to the crawl's scope (the seeds' sites and hosts) and read it."""
        k = self.keys
        calls: list[tuple[str, Sequence[Any], Sequence[Any]]] = []
        if add_sites:
            calls.append(("SADD", [k.scope_sites], list(add_sites)))
        if add_hosts:
            calls.append(("SADD", [k.scope_hosts], list(add_hosts)))
        calls += [("SMEMBERS", [k.scope_sites], []), ("SMEMBERS", [k.scope_hosts], [])]
        *_, sites, hosts = self.run_many(calls)
        return {_s(x) for x in sites}, {_s(x) for x in hosts}

    # -- robots.txt cache -----------------------------------------------------------
    def _robots_key(self, kind: str, site: str, host: str) -> str:
        # Without the user:password of a URL that has one: key names are
        # listed to whoever can SCAN.
        return self.shard(site).robots(kind, host.rpartition("@")[2])

    def robots_get(self, site: str, host: str, limit: int) -> tuple[bool, bytes]:
        """(whether the cached entry exists, its first ``limit`` + 1 bytes)."""
        key = self._robots_key("body", site, host)
        exists, raw = self.run_many([("EXISTS", [key], []), ("GETRANGE", [key], [0, limit])])
        return bool(exists), bytes(raw or b"")

    def robots_put(self, site: str, host: str, entry: bytes, ttl: int) -> None:
        self._run("SET", [self._robots_key("body", site, host)], [entry, "EX", max(1, ttl)])

    def robots_lock(self, site: str, host: str, ttl: int) -> bool:
        """Take the right to fetch ``host``'s robots.txt for ``ttl`` seconds."""
        return bool(self._run("SET", [self._robots_key("lock", site, host)],
                              [self.node, "NX", "EX", max(1, ttl)]))

    def robots_unlock(self, site: str, host: str) -> None:
        self._run("DEL", [self._robots_key("lock", site, host)], [])

    # -- reading -----------------------------------------------------------------------
    def pending(self) -> int:
        """Requests queued, waiting for a retry, or leased, anywhere."""
        calls = [("HMGET", [sk.stats], ["queued", "delayed", "leased"]) for sk in self.keys.site_shards]
        return sum(int(x or 0) for row in self.run_many(calls) for x in row)

    def stats(self) -> dict[str, int]:
        """The crawl's counters, summed over its shards."""
        out: dict[str, int] = {}
        for row in self.run_many([("HGETALL", [sk.stats], []) for sk in self.keys.site_shards]):
            items = row.items() if isinstance(row, dict) else zip(row[::2], row[1::2])
            for k, v in items:
                name = _s(k)
                if name != "lease_seq":
                    out[name] = out.get(name, 0) + int(v)
        return out

    def node_counters(self, node: str | None = None) -> dict[str, int]:
        """A node's counters (pages, errors), summed over the shards."""
        out: dict[str, int] = {}
        rows = self.run_many([("HGETALL", [sk.node(node or self.node)], []) for sk in self.keys.site_shards])
        for row in rows:
            items = row.items() if isinstance(row, dict) else zip(row[::2], row[1::2])
            for k, v in items:
                out[_s(k)] = out.get(_s(k), 0) + int(v)
        return out

    def counters_of(self, nodes: Sequence[str]) -> dict[str, dict[str, int]]:
        """Several nodes' counters (pages, errors), summed over the shards,
        in one round trip."""
        shards = self.keys.site_shards
        calls: list[tuple[str, Sequence[Any], Sequence[Any]]] = [
            ("HGETALL", [sk.node(n)], []) for n in nodes for sk in shards]
        out: dict[str, dict[str, int]] = {n: {} for n in nodes}
        for i, row in enumerate(self.run_many(calls) if calls else []):
            c = out[nodes[i // len(shards)]]
            items = row.items() if isinstance(row, dict) else zip(row[::2], row[1::2])
            for k, v in items:
                c[_s(k)] = c.get(_s(k), 0) + int(v)
        return out

    def nodes(self) -> dict[str, dict[str, Any]]:
        """The nodes' records (JSON objects; malformed ones skipped)."""
        raw = self.client.hgetall(self.keys.nodes)
        self.round_trips += 1
        out: dict[str, dict[str, Any]] = {}
        for k, v in raw.items():
            try:
                rec = json.loads(v)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out[_s(k)] = rec
        return out

    def errors(self, limit: int = 1000) -> list[dict[str, Any]]:
        """The latest final errors, newest first (malformed entries skipped)."""
        rows = self.run_many([("LRANGE", [sk.errors], [0, limit - 1]) for sk in self.keys.site_shards])
        out: list[dict[str, Any]] = []
        for row in rows:
            for v in row:
                try:
                    rec = json.loads(v)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    out.append(rec)
        out.sort(key=lambda r: -float(r.get("at") or 0) if isinstance(r.get("at"), (int, float)) else 0.0)
        return out[:limit]

    def queue_length(self, site: str) -> int:
        key = self.shard(site).queue(site)
        # A list, or in a focused crawl a sorted set (ordered by priority).
        kind = _s(self._run("TYPE", [key], []))
        return int(self._run("ZCARD" if kind == "zset" else "LLEN", [key], []))

    def held_leases(self, node: str | None = None) -> int:
        """Leases a node holds, over all shards."""
        rows = self.run_many([("HLEN", [sk.leases(node or self.node)], []) for sk in self.keys.site_shards])
        return sum(int(r) for r in rows)

    def all_keys(self) -> list[str]:
        """Every key of this crawl (SCAN; on a cluster, over every master)."""
        out: list[str] = []
        for pattern in self.keys.patterns():
            out += [_s(k) for k in self.client.scan_iter(match=pattern, count=1000)]
        return sorted(set(out))

    def dedup_keys(self) -> list[str]:
        return [k for k in self.all_keys() if ":seen:" in k]

    def delete_all(self) -> int:
        """Remove every key of this crawl (tests, and an explicit reset)."""
        keys = self.all_keys()
        for i in range(0, len(keys), 500):
            pipe = self.client.pipeline(transaction=False)
            for key in keys[i:i + 500]:
                pipe.delete(key)
            pipe.execute()
        return len(keys)


def entry_priority(entry: str) -> int:
    """The priority a frontier entry carries (meta ``topic_priority``,
    0..1000; 0 for anything else), read as the Lua scripts read it: a
    number or a numeric string, rounded down."""
    try:
        meta = json.loads(entry).get("m")
        p = meta.get("topic_priority") if isinstance(meta, dict) else None
        value = float(p) if isinstance(p, (int, float, str)) and not isinstance(p, bool) else math.nan
    except (ValueError, AttributeError, RecursionError, OverflowError):
        return 0
    return int(min(max(math.floor(value), 0), 1000)) if math.isfinite(value) else 0


def _s(value: Any, errors: str = "replace") -> str:
    return value.decode("utf-8", errors) if isinstance(value, bytes) else str(value)
