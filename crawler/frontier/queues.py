"""The frontier's queues and leases: links deduplicated and queued per
site, leased to workers at each site's time, acknowledged, retried and given
back. One script per shard (``COMMIT``, ``LEASE``, ``RELEASE``,
``crawler/redis/lua``), the shards of one call sent in one round trip.

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
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crawler.redis.gateway import text as _s
from crawler.requestmeta import TOPIC_PRIORITY

if TYPE_CHECKING:
    from crawler.frontier.base import Settings, State
    from crawler.redis.gateway import Call, Gateway
    from crawler.redis.keys import Keys

__all__ = ["IRANGE", "CommitResult", "Lease", "LinkEntry", "Queues", "entry_priority", "fingerprint_slot"]

# An importance crawl's ranks: IRANGE - importance in hundredths (lua/shard.lua).
IRANGE = 100_000


def fingerprint_slot(fp: bytes, buckets: int) -> tuple[str, str]:
    """(bucket, member) of a request fingerprint in the dedup sets."""
    member = int.from_bytes(fp[:8], "big", signed=True)
    bucket = int.from_bytes(fp[8:12], "big") % buckets
    return str(bucket), str(member)


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
    # An importance crawl's: "i<importance>:<cash>" (hundredths: the URL's
    # importance if new, what it gains if queued already) or "b<cash>" (a
    # URL this worker sent before: only raised). See lua/shard.lua.
    place: str = ""


@dataclass(slots=True)
class Lease:
    id: str
    site: str
    entry: str
    gap: float = 0.0  # seconds the site's requests must be apart (0: no delay)
    rank: int = -1  # in an ordered shard, the entry's rank when leased (smaller: better); -1 otherwise

    @property
    def importance(self) -> float | None:
        """An importance crawl's entry: its importance when leased."""
        return (IRANGE - self.rank) / 100.0 if self.rank >= 0 else None


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


class Queues:
    """The crawl's site queues and this worker's leases, through ``gateway``."""

    def __init__(self, gateway: Gateway, keys: Keys, settings: Settings, state: State) -> None:
        self.gateway = gateway
        self.keys = keys
        self.settings = settings
        self.state = state
        # When each shard may next have a site ready (monotonic), as the last
        # lease call there said.
        self._shard_ready = [0.0] * keys.shards
        # When the lease call next counts the live workers (monotonic): each
        # worker's share of a site's concurrency follows them between heartbeats.
        self._count_live_at = 0.0
        self._starved_poll = 0.1  # seconds until a worker that got nothing asks again (0.1, then 0.2)

    def slot(self, fp: bytes) -> tuple[str, str]:
        """The dedup bucket and member of request fingerprint ``fp``."""
        return fingerprint_slot(fp, self.settings.buckets)

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
        if self.gateway.replicas and any(w.links for w in work.values()) and any(
                w.acks or w.requeues or w.downloaded for w in work.values()):
            # REDIS_WAIT_REPLICAS: the links a page found are on their replicas
            # before the page is settled, so that no failover keeps the
            # page's acknowledgement and loses its links (another shard's).
            found = self.commit(links)
            if found.error is not None:
                found.unsent_acks, found.unsent_requeues = list(acks), list(requeues)
                found.unsent_downloaded = list(downloaded)
                return found
            settled = self.commit((), acks, requeues, downloaded)
            for name in ("added", "duplicates", "capped"):
                setattr(settled, name, getattr(settled, name) + getattr(found, name))
            return settled
        order = sorted(work)
        cfg = self.settings
        calls = []
        for index in order:
            w, sk = work[index], shards[index]
            keys: list[str] = [*sk.fixed, sk.leases(cfg.node)]
            args: list[Any] = [cfg.node, cfg.cap, cfg.conc, cfg.default_delay_ms, cfg.margin_ms, len(w.links)]
            for link in w.links:
                keys += [sk.seen(link.bucket) if link.bucket else sk.queue(link.site), sk.queue(link.site)]
                args += [link.member if link.bucket else "", link.site, link.entry,
                         "h" if link.head else link.place or (str(link.priority) if link.priority else "")]
            args.append(len(w.acks))
            for lease_id, state, reason in w.acks:
                args += [lease_id, state, reason]
            args.append(len(w.requeues))
            for lease_id, delay, _site, entry in w.requeues:
                args += [lease_id, int(delay * 1000), entry]
            args += w.downloaded
            calls.append(("COMMIT", keys, args))
        results = self.gateway.run_many(calls, raise_on_error=False)
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
        cfg = self.settings
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
        site_share = -(-cfg.conc // self.state.live_nodes)
        held: dict[str, int] = dict(in_flight or {})
        leases: list[Lease] = []
        errors: list[Exception] = []
        # Workers started together each saw only themselves at their first
        # heartbeat, and heartbeats are seconds apart: with a share of the
        # whole concurrency each, the first to lease took every slot of a
        # one-site crawl and the other got nothing (two workers of the
        # PostgreSQL manual: one idle for its first 0.9 s). The live workers
        # are counted again in the lease's round trip, at most every 0.1 s.
        counting: list[Call] = []
        if now >= self._count_live_at:
            self._count_live_at = now + 0.1
            counting = [("HEARTBEAT", [self.keys.nodes, self.keys.hb], ["", "", cfg.lease_timeout_ms])]
        empty: list[int] = []  # shards with no queued work
        while asks:
            plan = sorted(asks.items())
            mine = "".join(f"{site}\t{count}\n" for site, count in held.items()
                           if count > 0 and "\n" not in site and "\t" not in site)
            calls = [("LEASE", [*shards[i].fixed, shards[i].leases(cfg.node)],
                      [cfg.node, ask, cfg.default_delay_ms, cfg.conc, cfg.margin_ms, i, site_share, mine,
                       *freed.pop(i, ())])
                     for i, ask in plan]
            results = self.gateway.run_many([*calls, *counting], raise_on_error=False)
            if counting:
                beat = results.pop()
                if not isinstance(beat, Exception):
                    self.state.live_nodes = max(1, int(beat[0]))
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
                got = (len(out) - 1) // 5
                # Entries are decoded leniently: one that is not UTF-8 (written
                # into Redis by someone else) must reach the scheduler to be
                # refused and settled, not fail the whole batch here.
                got_leases = [Lease(_s(out[i]), _s(out[i + 1]), _s(out[i + 2], "surrogateescape"),
                                    int(out[i + 3]) / 1000.0, int(out[i + 4])) for i in range(1, len(out), 5)]
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
        if self.state.ordered:
            # Each shard served its most promising sites first; across the
            # shards asked, the most promising requests go first too (by the
            # rank each had in its queue: a focused crawl's priority, an
            # importance crawl's importance, as raised after it was queued).
            leases.sort(key=lambda lease: lease.rank if lease.rank >= 0 else 1 << 62)
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
        node = self.settings.node
        calls = [("RELEASE", [*shards[i].fixed, shards[i].leases(node)], [node, self.settings.conc, *ids])
                 for i, ids in sorted(by_shard.items())]
        return sum(int(r) for r in self.gateway.run_many(calls))


def entry_priority(entry: str) -> int:
    """The priority a frontier entry carries (meta ``topic_priority``,
    0..1000; 0 for anything else), read as the Lua scripts read it: a
    number or a numeric string, rounded down."""
    try:
        meta = json.loads(entry).get("m")
        p = meta.get(TOPIC_PRIORITY) if isinstance(meta, dict) else None
        value = float(p) if isinstance(p, (int, float, str)) and not isinstance(p, bool) else math.nan
    except (ValueError, AttributeError, RecursionError, OverflowError):
        return 0
    return int(min(max(math.floor(value), 0), 1000)) if math.isfinite(value) else 0
