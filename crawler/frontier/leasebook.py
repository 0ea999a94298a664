"""The lease book: what one worker holds from the frontier, and what it owes
it. Pure bookkeeping (no Scrapy, no Redis), unit-tested on its own
(``tests/test_leasebook.py``); the scheduler (``scheduler.py``) feeds it
Scrapy's events and the frontier service sends what it gathers.

A leased request's lease is acknowledged once, and only once, everything
the page produced is settled: its callback's output is exhausted and every
item it yielded has passed the item pipelines (stored, dropped or failed).
Until then the URL stays leased in Redis: a worker killed at any moment
leaves no URL marked done but not stored.

What the book gathers for the next commit, all sent in one round trip:

- ``links``: new requests to enqueue;
- ``acks``: leases settled, (id, "C", "T", "E" or "F", reason): "T" is done and
  on a focused crawl's topic (the frontier counts those per node and crawl);
  "F" a request robots.txt forbade (``FORBIDDEN``: neither a page nor an error);
  a lease added with a ``kind`` ("V": a re-crawl's revisit; "A": a URL
  settled as an error before, fetched again; "S": a sitemap) has it as the
  state's second letter, so the crawl's page count counts pages, not fetches;
- ``requeues``: leases to retry after a backoff, (id, delay, site, entry);
- ``downloaded``: leases whose download is over (their site's concurrency
  slot is free for the next request, before the page is processed);
- ``releases``: leases to give back unstarted (or whose pages could not be
  stored): their URLs go back to the head of their site queues.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawler.frontier.queues import CommitResult, Lease, LinkEntry

__all__ = ["FORBIDDEN", "Commit", "LeaseBook", "Tracker"]

# The reason a request robots.txt forbade ends with (``tracking.py``): its
# lease settles as "F", counted apart from pages and errors.
FORBIDDEN = "robots_forbidden"


@dataclass(slots=True)
class Tracker:
    """What is still outstanding for one leased request."""

    items: int = 0  # items yielded and not yet settled by the pipelines
    output_done: bool = False
    state: str = "C"
    reason: str = ""
    release: bool = False  # give the URL back instead of acknowledging it
    on_topic: bool = False  # a focused crawl's page on its topic
    kind: str = ""  # "V": a re-crawl's revisit; "A": an error's URL again; "S": a sitemap (module docstring)
    since: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class Commit:
    links: list[LinkEntry]
    acks: list[tuple[str, str, str]]
    requeues: list[tuple[str, float, str, str]]
    downloaded: list[str]

    def __bool__(self) -> bool:
        return bool(self.links or self.acks or self.requeues or self.downloaded)


class LeaseBook:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.leases: dict[str, Lease] = {}
        self.trackers: dict[str, Tracker] = {}
        self.links: list[LinkEntry] = []
        self.acks: list[tuple[str, str, str]] = []
        self.requeues: list[tuple[str, float, str, str]] = []
        self.downloaded: list[str] = []
        self.releases: list[str] = []
        self._maybe_orphans: set[str] = set()
        self._downloading: set[str] = set()  # leases whose download is not over
        self._unprocessed: set[str] = set()  # leases whose callback's output is not exhausted
        self.acked = {"C": 0, "T": 0, "E": 0}  # pages (a sitemap is no page: ``sitemaps``); "F" once one is forbidden by robots.txt
        self.sitemaps = {"C": 0, "E": 0}  # sitemap files read and failed
        self.pages = 0  # pages acknowledged as done: not sitemaps (CLOSESPIDER_PAGECOUNT counts these)

    # -- leases in ---------------------------------------------------------------
    def add(self, lease: Lease, kind: str = "") -> None:
        self.leases[lease.id] = lease
        self.trackers[lease.id] = Tracker(kind=kind, since=self.clock())
        self._downloading.add(lease.id)
        self._unprocessed.add(lease.id)

    def in_flight(self) -> dict[str, int]:
        """Leases whose download is not over yet, by site."""
        out: dict[str, int] = {}
        for lease_id in self._downloading:
            lease = self.leases.get(lease_id)
            if lease is not None:
                out[lease.site] = out.get(lease.site, 0) + 1
        return out

    def holds(self, lease_id: str) -> bool:
        return lease_id in self.leases

    def refuse(self, lease_id: str, reason: str) -> None:
        """An entry that cannot become a request: settled once, as an error."""
        self.acks.append((lease_id, "E", reason))
        self.acked["E"] += 1

    # -- what a page produces ------------------------------------------------------
    def item_yielded(self, lease_id: str, error: str | None = None, on_topic: bool = False) -> None:
        """The callback yielded an item (an error record when ``error``; a
        page on a focused crawl's topic when ``on_topic``)."""
        tracker = self.trackers.get(lease_id)
        if tracker is None:
            return
        tracker.items += 1
        tracker.on_topic = tracker.on_topic or on_topic
        if error is not None:
            tracker.state, tracker.reason = "E", error

    def item_settled(self, lease_id: str, *, unstored: bool = False, error: str | None = None) -> None:
        """An item passed the pipelines: stored, or not stored because the
        store was away (``unstored``: the URL goes back to the queue), or
        failed (``error``)."""
        tracker = self.trackers.get(lease_id)
        if tracker is None:
            return
        if unstored:
            tracker.release = True
        elif error is not None:
            tracker.state, tracker.reason = "E", error[:500]
        tracker.items -= 1
        self._maybe_settle(lease_id, tracker)

    def output_done(self, lease_id: str, error: str | None = None) -> None:
        """The callback (or errback) is exhausted; ``error``: it failed."""
        tracker = self.trackers.get(lease_id)
        if tracker is None:
            return
        tracker.output_done = True
        self._unprocessed.discard(lease_id)
        if error == FORBIDDEN:
            tracker.state, tracker.reason = "F", error
        elif error:
            tracker.state, tracker.reason = "E", error
        self._maybe_settle(lease_id, tracker)

    def _maybe_settle(self, lease_id: str, tracker: Tracker) -> None:
        if tracker.output_done and tracker.items <= 0:
            self.settle(lease_id)

    def settle(self, lease_id: str) -> None:
        """Acknowledge the lease (or give it back, when its pages could not be stored)."""
        tracker = self.trackers.pop(lease_id, None)
        self.leases.pop(lease_id, None)
        self._downloading.discard(lease_id)
        self._unprocessed.discard(lease_id)
        if tracker is None:
            return
        if tracker.release:
            self.releases.append(lease_id)
            return
        state = "T" if tracker.state == "C" and tracker.on_topic else tracker.state
        kind = tracker.kind if tracker.kind in ("V", "A", "S") else ""
        self.acks.append((lease_id, state + kind, tracker.reason))
        # Counted apart, as the frontier counts them (sitemaps_read,
        # sitemap_errors): this worker's pages and errors agree with the crawl's.
        counts = self.sitemaps if kind == "S" else self.acked
        counts[state] = counts.get(state, 0) + 1
        if state in ("C", "T") and kind != "S":
            self.pages += 1

    def page_room(self, limit: int) -> int:
        """How many more page requests may be leased under ``limit`` pages
        (``CLOSESPIDER_PAGECOUNT``; 0: no limit): those stored and those held
        count, so the limit is reached exactly, never passed by requests in
        flight; one that fails or is forbidden frees its place."""
        if limit <= 0:
            return 1 << 30
        held = sum(1 for t in self.trackers.values() if t.kind != "S")
        return limit - self.pages - held

    # -- other events ------------------------------------------------------------------
    def download_over(self, lease_id: str) -> bool:
        """The lease's download is over: its site slot can be freed. False
        for a request this book does not hold."""
        if lease_id not in self.leases:
            return False
        self._downloading.discard(lease_id)
        self.downloaded.append(lease_id)
        return True

    def retry(self, lease_id: str, delay: float, entry: str) -> bool:
        """The same URL is to be fetched again (a retry) after ``delay``
        seconds, as ``entry``: the lease moves to the frontier's retry queue."""
        lease = self.leases.pop(lease_id, None)
        self.trackers.pop(lease_id, None)
        self._downloading.discard(lease_id)
        self._unprocessed.discard(lease_id)
        if lease is None:
            return False
        self.requeues.append((lease_id, delay, lease.site, entry))
        return True

    def give_back(self, lease_ids: Iterable[str]) -> None:
        for lease_id in lease_ids:
            self.trackers.pop(lease_id, None)
            self.leases.pop(lease_id, None)
            self._downloading.discard(lease_id)
            self._unprocessed.discard(lease_id)
            self.releases.append(lease_id)

    def enqueue(self, link: LinkEntry) -> None:
        self.links.append(link)

    # -- commits -----------------------------------------------------------------------
    def has_writes(self) -> bool:
        return bool(self.links or self.acks or self.requeues or self.downloaded)

    @property
    def done(self) -> int:
        """Leases acknowledged as done (on a focused crawl's topic or not)."""
        return self.acked.get("C", 0) + self.acked.get("T", 0)

    def unprocessed(self) -> int:
        """Leases whose page the spider has not finished with (downloading,
        or waiting for its callback); those waiting only for the store do
        not count."""
        return len(self._unprocessed)

    def busy(self) -> bool:
        """Anything held or owed: the crawl is not over for this worker."""
        return bool(self.trackers or self.links or self.acks or self.requeues or self.releases)

    def take(self) -> Commit:
        """What the next commit sends; the book forgets it (see ``restore``)."""
        commit = Commit(self.links, self.acks, self.requeues, self.downloaded)
        self.links, self.acks, self.requeues, self.downloaded = [], [], [], []
        return commit

    def take_downloaded(self) -> list[str]:
        """Downloads over, told to Redis with the next lease call (which frees
        their sites' slots); the book forgets them (see ``restore``)."""
        downloaded, self.downloaded = self.downloaded, []
        return downloaded

    def take_releases(self) -> list[str]:
        releases, self.releases = self.releases, []
        return releases

    def restore(self, commit: Commit | None = None, result: CommitResult | None = None,
                releases: list[str] | None = None, downloaded: list[str] | None = None) -> None:
        """Keep what was not sent (Redis away) for the next commit, first."""
        if commit is not None:
            self.links[:0] = commit.links
            self.acks[:0] = commit.acks
            self.requeues[:0] = commit.requeues
            self.downloaded[:0] = commit.downloaded
        if result is not None:
            self.links[:0] = result.unsent_links
            self.acks[:0] = result.unsent_acks
            self.requeues[:0] = result.unsent_requeues
            self.downloaded[:0] = result.unsent_downloaded
        if releases:
            self.releases[:0] = releases
        if downloaded:
            self.downloaded[:0] = downloaded

    # -- heartbeat checks ----------------------------------------------------------------
    def orphans(self, held: set[str], buffered: set[str]) -> set[str]:
        """Leases Redis holds for this worker that it does not know (their
        acknowledgement was lost, e.g. Redis restarted without its last
        writes): to give back, or the crawl would wait for them forever.
        Only those seen twice in a row, so that a lease taken between the two
        reads is not mistaken for one. A lease whose acknowledgement or retry
        waits to be sent (Redis full, or away) is known: still held in Redis."""
        owed = {a[0] for a in self.acks} | {r[0] for r in self.requeues}
        unknown = held - set(self.leases) - buffered - set(self.releases) - owed
        orphans = unknown & self._maybe_orphans
        self._maybe_orphans = unknown - orphans
        return orphans

    def overdue(self, timeout: float) -> list[str]:
        """Leases whose output is done but an item never settled (a component
        swallowed it) for ``timeout`` seconds: to acknowledge anyway."""
        now = self.clock()
        return [lease_id for lease_id, t in self.trackers.items() if t.output_done and now - t.since > timeout]

    def settle_finished(self) -> None:
        """Closing: acknowledge every lease whose work is done."""
        for lease_id, tracker in list(self.trackers.items()):
            if tracker.output_done and tracker.items <= 0:
                self.settle(lease_id)
