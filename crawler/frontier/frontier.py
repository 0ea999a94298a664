"""The Redis frontier: site queues, leases, dedup, retries, heartbeats.

``Frontier`` is the only code that talks to the frontier's keys; every
method is one round trip running one Lua script (``scripts.py``). It knows
nothing of Scrapy's engine: the scheduler (``scheduler.py``) drives it, and
operator commands and tests can use it directly.

Dedup: a request's fingerprint (``crawler.request_fingerprinter``, 20 bytes)
becomes a 64-bit integer kept in one of ``DUPEFILTER_BUCKETS`` Redis sets,
the bucket chosen by other bits of the same fingerprint. Redis stores small
sets of integers as a sorted array of 8-byte integers (intset), so a URL
costs about 8 bytes plus the bucket's share of key overhead; with 76 bits
of fingerprint (64 + 12 bucket bits at the default) a false "seen" is
expected once in about 10^10 crawls of a million URLs. Size the buckets so
each holds at most ``set-max-intset-entries`` (512 by default on a server we
do not configure, 4096 on the embedded one): buckets = expected URLs / 400.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from crawler.frontier import scripts

logger = logging.getLogger(__name__)

__all__ = ["Duplicate", "Frontier", "Lease", "LinkEntry", "fingerprint_slot"]


def fingerprint_slot(fp: bytes, buckets: int) -> tuple[str, str]:
    """(bucket, member) of a request fingerprint in the dedup sets."""
    member = int.from_bytes(fp[:8], "big", signed=True)
    bucket = int.from_bytes(fp[8:12], "big") % buckets
    return str(bucket), str(member)


@dataclass(slots=True)
class LinkEntry:
    """A request to enqueue: dedup slot (empty bucket: no dedup), site, JSON,
    and whether it goes first in its site queue (raised priority)."""

    bucket: str
    member: str
    site: str
    entry: str
    head: bool = False


@dataclass(slots=True, frozen=True)
class Duplicate:
    """The verdict of the duplicate index: ``kind`` "new", "exact" or "near";
    the first page with that content (on this site when there is one), the
    Hamming distance to it, whether it is on the same site, and the site this
    page's site mirrors (None: not a mirror)."""

    kind: str
    first: str | None = None
    distance: int = -1
    same_site: bool = False
    mirror_of: str | None = None


@dataclass(slots=True)
class Lease:
    id: str
    site: str
    entry: str
    gap: float = 0.0  # seconds the site's requests must be apart (0: no delay)


class Frontier:
    def __init__(
        self,
        client: redis.Redis,
        crawl: str,
        *,
        node: str | None = None,
        default_delay: float = 1.0,
        concurrency_per_site: int = 1,
        delay_margin: float = 0.01,
        max_pages_per_site: int = 0,
        buckets: int = 4096,
        lease_timeout: float = 60.0,
    ) -> None:
        if buckets < 1:
            raise ValueError(f"DUPEFILTER_BUCKETS ({buckets!r}) must be at least 1")
        self.client = client
        self.crawl = crawl
        self.prefix = "{" + crawl + "}:"
        self.stats_key = self.prefix + "stats"
        self.node = node or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.default_delay_ms = int(default_delay * 1000)
        self.conc = max(1, concurrency_per_site)
        self.margin_ms = int(delay_margin * 1000)
        self.cap = max(0, max_pages_per_site)
        self.buckets = buckets
        self.lease_timeout_ms = int(lease_timeout * 1000)
        self.round_trips = 0
        self.calls: dict[str, int] = {}
        self._scripts = {name: client.register_script(getattr(scripts, name))
                         for name in ("ENQUEUE", "LEASE", "COMMIT", "RELEASE", "HEARTBEAT",
                                      "BACKOFF", "PENDING", "TOUCH", "NEAR_DUPLICATE", "SEND")}
        self.started = time.time()

    def key(self, name: str) -> str:
        return self.prefix + name

    def _run(self, name: str, *args: Any) -> Any:
        self.round_trips += 1
        self.calls[name] = self.calls.get(name, 0) + 1
        return self._scripts[name](keys=[self.stats_key], args=[self.prefix, *args])

    def slot(self, fp: bytes) -> tuple[str, str]:
        return fingerprint_slot(fp, self.buckets)

    # -- operations --------------------------------------------------------
    def enqueue(self, links: Sequence[LinkEntry]) -> tuple[int, int, int]:
        """Dedup and queue; returns (added, duplicates, over the site cap)."""
        if not links:
            return 0, 0, 0
        args: list[Any] = [self.cap, self.conc, len(links)]
        for link in links:
            args += [link.bucket, link.member, link.site, link.entry, "1" if link.head else ""]
        added, dup, capped = self._run("ENQUEUE", *args)
        return int(added), int(dup), int(capped)

    def lease(self, n: int, downloaded: Sequence[str] = ()) -> tuple[list[Lease], float | None]:
        """Lease up to ``n`` requests, at most one per site, from the sites
        whose next allowed time has come; first free the site slots of the
        ``downloaded`` leases (their download is over, their processing may
        not be). Returns the leases and how many seconds until the next site
        is ready by time alone (None: none will be)."""
        out = self._run("LEASE", self.node, max(1, n), self.default_delay_ms, self.conc,
                        self.margin_ms, *downloaded)
        wait = int(out[0])
        # Entries are decoded leniently: one that is not UTF-8 (written into
        # Redis by someone else) must reach the scheduler to be refused and
        # settled, not fail the whole batch here.
        leases = [
            Lease(_s(out[i]), _s(out[i + 1]), _s(out[i + 2], "surrogateescape"), int(out[i + 3]) / 1000.0)
            for i in range(1, len(out), 4)
        ]
        return leases, (None if wait < 0 else wait / 1000.0)

    def commit(
        self,
        links: Sequence[LinkEntry] = (),
        acks: Sequence[tuple[str, str, str]] = (),
        requeues: Sequence[tuple[str, float, str, str]] = (),
    ) -> dict[str, int]:
        """Enqueue links, settle leases (id, "C"|"E", reason) and move
        leases to the retry queue (id, delay seconds, site, entry): one call."""
        args: list[Any] = [self.node, self.cap, self.conc, len(links)]
        for link in links:
            args += [link.bucket, link.member, link.site, link.entry, "1" if link.head else ""]
        args.append(len(acks))
        for lease_id, state, reason in acks:
            args += [lease_id, state, reason]
        args.append(len(requeues))
        for lease_id, delay, site, entry in requeues:
            args += [lease_id, int(delay * 1000), site, entry]
        added, dup, capped, acked, stale = self._run("COMMIT", *args)
        return {"added": int(added), "duplicates": int(dup), "capped": int(capped),
                "acked": int(acked), "stale": int(stale)}

    def release(self, lease_ids: Sequence[str]) -> int:
        """Give unstarted leases back to the head of their site queues."""
        if not lease_ids:
            return 0
        return int(self._run("RELEASE", self.node, self.conc, *lease_ids))

    def heartbeat(self, record: dict[str, Any] | None = None) -> tuple[int, int, set[str]]:
        """Record this node alive and reap nodes whose heartbeat stopped.
        Returns (leases returned to their queues, nodes reaped, the lease
        ids Redis holds for this node)."""
        rec = {"node": self.node, "host": socket.gethostname(), "pid": os.getpid(),
               "started": self.started, "heartbeat": time.time(), "state": "running",
               **(record or {})}
        reaped, nodes, mine = self._run("HEARTBEAT", self.node, json.dumps(rec), self.lease_timeout_ms, self.conc)
        return int(reaped), int(nodes), {_s(x) for x in mine}

    def near_duplicate(self, url: str, site: str, content_key: str | None, fingerprint: int | None,
                       max_distance: int = 3, max_candidates: int = 1000, mirror_min_pages: int = 20,
                       mirror_share: float = 0.5) -> Duplicate:
        """Is ``url``'s content a copy of a page seen before, anywhere in the
        crawl? A copy on ``url``'s own site is preferred to one elsewhere. A new
        page (or a copy of another site's page) is indexed, atomically with
        the check. ``fingerprint`` is an unsigned 64-bit SimHash."""
        fp = f"{fingerprint:016x}" if fingerprint is not None else ""
        out = self._run("NEAR_DUPLICATE", url, site, content_key or "", fp, max_distance, max_candidates,
                        mirror_min_pages, mirror_share)
        kind = _s(out[0])
        if kind == "new":
            return Duplicate("new")
        return Duplicate(kind, _s(out[1]), int(out[2]), bool(int(out[3])), _s(out[4]) or None)

    def reserve_send(self, site: str) -> float:
        """A request to ``site`` goes on the wire: seconds to wait first, so
        that it follows the last one any worker sent there by the site's gap
        (its delay, backoff and margin). 0 for sites without a delay."""
        return int(self._run("SEND", site, self.default_delay_ms, self.margin_ms)) / 1000.0

    def touch(self, site: str, delay: float) -> None:
        """A request went to ``site`` outside the frontier (robots.txt): hold
        its next request back for ``delay`` seconds, for every worker."""
        self._run("TOUCH", site, int(delay * 1000))

    def leave(self, record: dict[str, Any] | None = None) -> None:
        """This node stops: it is no longer watched for heartbeats. Its record
        stays for the operator, marked stopped. Shared state is untouched."""
        rec = {"node": self.node, "host": socket.gethostname(), "pid": os.getpid(),
               "started": self.started, "heartbeat": time.time(), "state": "stopped",
               **(record or {})}
        self.round_trips += 1
        pipe = self.client.pipeline(transaction=True)
        pipe.zrem(self.key("hb"), self.node)
        pipe.hset(self.key("nodes"), self.node, json.dumps(rec))
        pipe.execute()

    def backoff(self, site: str, minimum: float, maximum: float) -> float:
        """Back ``site`` off (429, 503, timeouts); returns the backoff in seconds."""
        return int(self._run("BACKOFF", site, int(minimum * 1000), int(maximum * 1000))) / 1000.0

    def set_site_delay(self, site: str, delay: float) -> None:
        """The delay between two fetches from ``site`` (robots.txt Crawl-delay)."""
        self.round_trips += 1
        self.client.hset(self.key("delay"), site, int(delay * 1000))

    def pending(self) -> int:
        """Requests queued, waiting for a retry, or leased, anywhere."""
        return int(self._run("PENDING"))

    def stats(self) -> dict[str, int]:
        self.round_trips += 1
        raw = self.client.hgetall(self.key("stats"))
        return {_s(k): int(v) for k, v in raw.items()}

    def dedup_keys(self) -> list[str]:
        return [_s(k) for k in self.client.scan_iter(match=self.prefix.replace("{", "[{]") + "seen:*", count=1000)]

    def delete_all(self) -> int:
        """Remove every key of this crawl (tests, and an explicit reset)."""
        keys = list(self.client.scan_iter(match=self.prefix.replace("{", "[{]") + "*", count=1000))
        for i in range(0, len(keys), 500):
            self.client.delete(*keys[i:i + 500])
        return len(keys)


def _s(value: Any, errors: str = "replace") -> str:
    return value.decode("utf-8", errors) if isinstance(value, bytes) else str(value)
