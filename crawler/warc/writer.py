"""The writer thread: records built, compressed and written off the
reactor thread (no Scrapy).

``submit`` queues a fetch and returns a ``concurrent.futures.Future`` of
where its main record went (``Written``). The thread builds the records
(``records.RecordMaker``), claims each payload in the archive index
(``digests.ArchiveIndex``; one round trip a batch), writes them
(``files.WarcFiles``: a revisit when the payload was archived before, here
or by another worker) and settles its claims once the records are on disk
(one more). A copy whose payload another worker has claimed but not yet
written waits (``warc/waits``), asked about again every 0.1 s, while the
fetches behind it are written: it becomes a revisit once that record is
on disk, or is archived in full when the claim expires (that worker died
between claim and write). At close, the thread ends once no copy waits.
gzip and sha1 release the GIL, so on a machine of two cores the writing
runs beside the crawl.

A full disk is waited out (``_write_waiting``: tried again every second,
the crawl holding meanwhile, ``warc/disk_full`` counts the spells). Any
other failure (an unwritable directory, an I/O error) fails that fetch's
future and every later one: a WARC crawl that cannot write its archive
stops (the pipeline closes the spider) rather than go on without it. Redis going
away is not a failure: the payload is archived in full.
"""

from __future__ import annotations

import errno
import logging
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable

from crawler.warc.digests import CLAIM_TTL_MS, CLAIMED, PENDING, WRITTEN, ArchiveIndex, Claim
from crawler.warc.files import WarcFiles
from crawler.warc.records import Exchange, NotModified, Original, RecordMaker, payload_digest, warc_date

__all__ = ["WarcWriter", "Written"]

logger = logging.getLogger(__name__)

_BATCH = 64  # fetches written together at most (what was queued meanwhile)
_FULL_RETRY = 1.0  # seconds between tries to write to a full disk
_WAIT_POLL = 0.1  # seconds between asks about an original another writer has claimed, not yet written
# A copy waits at most this long for another writer's original (its claim
# expires sooner: this only bounds a wait on a clock that misbehaves); then
# it is archived in full, unclaimed.
_MAX_WAIT = 2 * CLAIM_TTL_MS / 1000


@dataclass(slots=True, frozen=True)
class Written:
    """Where a fetch's main record went, and what it was."""

    file: str
    offset: int
    length: int
    kind: str  # "response" or "revisit"
    date: str
    digest: str | None


@dataclass
class Counts:
    responses: int = 0
    revisits: int = 0
    not_modified: int = 0
    truncated: int = 0
    bytes: int = 0
    index_errors: int = 0
    waits: int = 0  # copies that waited for another writer's original
    claims_taken_over: int = 0  # claims of a writer that died (or stalled) before writing
    disk_full: int = 0  # spells of a full disk waited out


@dataclass(slots=True)
class _Job:
    ex: Exchange
    dedup: bool
    future: Future[Written]
    since: float  # time.monotonic() at submit
    waited: bool = False


_NONE = object()  # no job came while a copy waited


class WarcWriter:
    """One worker's writer thread (see the module). ``index`` makes the
    archive index in the thread (its own Redis client); None: no revisits
    of identical payloads."""

    def __init__(self, files: WarcFiles, index: Callable[[], ArchiveIndex] | None = None,
                 max_queue: int = 1024) -> None:
        self.files = files
        self._make_index = index
        self._index: ArchiveIndex | None = None
        self.counts = Counts()
        self.error: BaseException | None = None
        self._jobs: queue.Queue[_Job | None] = queue.Queue(max_queue)
        self._waiting: list[_Job] = []  # copies whose original another writer has not written yet
        self._closing = threading.Event()  # close() gave up waiting: a full disk is waited out no longer
        self._maker = RecordMaker()
        self._thread = threading.Thread(target=self._run, name="warc-writer", daemon=True)
        self._thread.start()

    def submit(self, exchange: Exchange, dedup: bool = True) -> Future[Written]:
        """Queue a fetch (``dedup``: its payload may be a revisit of an
        earlier one, and an original of later ones). Blocks while the
        queue is full: the crawl goes no faster than its archive."""
        future: Future[Written] = Future()
        if self.error is not None:
            future.set_exception(self.error)
            return future
        self._jobs.put(_Job(exchange, dedup, future, time.monotonic()))
        return future

    def close(self, timeout: float = 60.0) -> None:
        """Write what is queued, then close the current file."""
        if self._thread.is_alive():
            try:
                self._jobs.put(None, timeout=timeout)
            except queue.Full:  # the writer waits for room on a full disk: it gives up
                self._closing.set()
                self._jobs.put(None)
            self._thread.join(timeout)
            if self._thread.is_alive():
                self._closing.set()
                self._thread.join(10)
        if self._thread.is_alive():
            logger.error("WARC: the writer did not finish in %(t)d s: its file is left .open (the next worker "
                         "closes it after its last whole record)", {"t": timeout})
        elif self.error is None:
            self.files.close()
        else:
            self.files.abandon()  # left .open, for salvage; its descriptor not leaked

    def _run(self) -> None:
        closing = False
        while not closing or self._waiting:
            job: _Job | None | object
            try:
                # A copy waiting for another writer's original is asked about again soon.
                job = self._jobs.get(timeout=_WAIT_POLL) if self._waiting or closing else self._jobs.get()
            except queue.Empty:
                job = _NONE
            batch: list[_Job | None | object] = [] if job is _NONE else [job]
            while job is not None and job is not _NONE and len(batch) < _BATCH:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                batch.append(job)
            closing = closing or (bool(batch) and batch[-1] is None)
            # The copies that waited first: they were fetched before.
            jobs, self._waiting = self._waiting + [j for j in batch if isinstance(j, _Job)], []
            if jobs:
                self._write_batch(jobs)

    def _archive_index(self) -> ArchiveIndex | None:
        if self._index is None and self._make_index is not None:
            try:
                self._index = self._make_index()
            except Exception as exc:  # noqa: BLE001 - archived in full meanwhile
                self.counts.index_errors += 1
                logger.warning("WARC: no archive index (%(exc)s): payloads archived in full", {"exc": exc})
        return self._index

    def _write_batch(self, jobs: list[_Job]) -> None:
        """Write the fetches queued together: one round trip claims their
        payloads in the archive index (and looks up the originals of
        304s), one settles the claims once the records are on disk. A copy
        whose original another writer claimed and has not written yet
        waits for the next batch (``digests``: never a revisit of nothing)."""
        c = self.counts
        if self.error is not None:
            for job in jobs:
                job.future.set_exception(self.error)
            return
        digests: list[str | None] = [
            payload_digest(j.ex.body) if (j.dedup and j.ex.not_modified is None and not j.ex.truncated and j.ex.body
                                          and 200 <= j.ex.status < 300) else None
            for j in jobs]
        now = time.monotonic()
        overdue = {d for j, d in zip(jobs, digests) if j.waited and now - j.since >= _MAX_WAIT}
        first: dict[str, _Job] = {}  # each payload's first fetch here: the one that claims it
        for job, digest in zip(jobs, digests):
            if digest is not None and digest not in first and digest not in overdue:
                first[digest] = job
        # A 304's original may itself be stored as a revisit (an exact copy): the
        # index names the response that holds the bytes, which the revisit names instead.
        looked = sorted({j.ex.not_modified.digest for j in jobs if j.ex.not_modified is not None})
        claims: dict[str, Claim] = {}
        known: dict[str, Original] = {}
        index = self._archive_index() if first or looked else None
        if index is not None:
            try:
                taken = index.taken_over
                got, found = index.ask([(d, j.ex.url, warc_date(j.ex.fetched_at)) for d, j in first.items()], looked)
                c.claims_taken_over += index.taken_over - taken
                claims = dict(zip(first, got))
                known = {d: o for d, o in zip(looked, found) if o is not None}
            except Exception as exc:  # noqa: BLE001 - Redis away: archived in full
                c.index_errors += 1
                index = None
                logger.warning("WARC: archive index lookup failed (%(exc)s): %(n)d responses archived in full",
                               {"exc": exc, "n": len(first) + len(looked)})
        here: dict[str, Original] = {}  # payloads written in full in this batch
        settle: list[tuple[str, Claim, bool]] = []
        for job, digest in zip(jobs, digests):
            ex, future = job.ex, job.future
            claim = claims.get(digest) if digest is not None else None
            # This fetch claimed its payload: its claim is settled, written or not.
            claimant = ((digest, claim) if digest is not None and claim is not None and claim.state == CLAIMED
                        and first[digest] is job else None)
            if self.error is not None:
                if claimant:
                    settle.append((*claimant, False))
                future.set_exception(self.error)  # nothing written after a failed write
                continue
            if digest is not None and digest not in here and claim is not None and claim.state == PENDING \
                    and not claim.mine:
                if not job.waited:
                    job.waited = True
                    c.waits += 1
                self._waiting.append(job)  # its original is not on disk yet
                continue
            original: Original | None = None
            if digest is not None:
                if digest in here:
                    original = here[digest]
                elif claim is not None and claim.state in (WRITTEN, PENDING):
                    original = claim.original
            try:
                nm = ex.not_modified
                if nm is not None and nm.digest in known and known[nm.digest].uri != nm.uri:
                    first_nm = known[nm.digest]
                    ex.not_modified = NotModified(first_nm.uri, first_nm.date, nm.digest)
                written = self._write_waiting(ex, original, digest)
            except BaseException as exc:  # noqa: BLE001 - reported through every later future
                logger.error("Cannot write the WARC record of %(url)s: %(exc)s", {"url": ex.url, "exc": exc})
                self.error = exc
                if claimant:
                    settle.append((*claimant, False))
                future.set_exception(exc)
                continue
            if digest is not None and original is None:
                here[digest] = Original(ex.url, written.date)  # a later copy in this batch is a revisit of it
                if claimant:
                    settle.append((*claimant, True))
            future.set_result(written)
        if index is not None and settle:
            try:
                index.settle_many(settle)
            except Exception as exc:  # noqa: BLE001 - the claims expire: later copies archived in full
                c.index_errors += 1
                logger.warning("WARC: archive index update failed (%(exc)s)", {"exc": exc})

    def _write_waiting(self, ex: Exchange, original: Original | None, digest: str | None) -> Written:
        """``_write``, waiting out a full disk (ENOSPC, EDQUOT): tried again
        every ``_FULL_RETRY`` s until there is room (the record cut short is
        removed each time: ``files.write``), as the store's outage is
        waited out. The fetches behind it wait in the queue, their pages
        unstored and unacknowledged, and the crawl holds once the queue or
        ``FRONTIER_MAX_UNSTORED`` is full. Closing gives up (the pages are
        left to be fetched again). Any other error fails the writer."""
        since = None
        while True:
            try:
                written = self._write(ex, original, digest)
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or self._closing.is_set():
                    raise
                if since is None:
                    since = time.monotonic()
                    self.counts.disk_full += 1
                    logger.warning("WARC: no space left in %(dir)s: the crawl waits for room, trying again every "
                                   "%(s)gs (%(n)d fetches queued)",
                                   {"dir": self.files.directory, "s": _FULL_RETRY, "n": self._jobs.qsize()})
                time.sleep(_FULL_RETRY)
                continue
            if since is not None:
                logger.warning("WARC: writing again after %(s).1fs of a full disk", {"s": time.monotonic() - since})
            return written

    def _write(self, ex: Exchange, original: Original | None, digest: str | None) -> Written:
        c = self.counts
        built = self._maker.build(ex, original, digest)
        name, offset, length = self.files.write(built.members)
        c.bytes += sum(len(m) for m in built.members)
        if ex.not_modified is not None:
            c.not_modified += 1
        elif built.kind == "revisit":
            c.revisits += 1
        else:
            c.responses += 1
            if ex.truncated:
                c.truncated += 1
        return Written(name, offset, length, built.kind, built.date, built.digest)
