"""The writer thread: records built, compressed and written off the
reactor thread (no Scrapy).

``submit`` queues a fetch and returns a ``concurrent.futures.Future`` of
where its main record went (``Written``). The thread builds the records
(``records.RecordMaker``), asks the archive index whether the payload was
archived before (``digests.ArchiveIndex``: a revisit then), writes them
(``files.WarcFiles``) and registers a new payload once it is on disk. gzip
and sha1 release the GIL, so on a machine of two cores the writing runs
beside the crawl.

A failure (a full disk, an unwritable directory) fails that fetch's future
and every later one: a WARC crawl that cannot write its archive stops (the
pipeline closes the spider) rather than go on without it. Redis going
away is not a failure: the payload is archived in full.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable

from crawler.warc.digests import ArchiveIndex
from crawler.warc.files import WarcFiles
from crawler.warc.records import Exchange, NotModified, Original, RecordMaker, payload_digest

__all__ = ["WarcWriter", "Written"]

logger = logging.getLogger(__name__)

_BATCH = 64  # fetches written together at most (what was queued meanwhile)


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


class WarcWriter:
    """One worker's writer thread (see the module). ``index`` makes the
    archive index in the thread (its own Redis client); None: no revisits
    of identical payloads."""

    def __init__(self, files: WarcFiles, index: Callable[[], ArchiveIndex] | None = None,
                 max_queue: int = 256) -> None:
        self.files = files
        self._make_index = index
        self._index: ArchiveIndex | None = None
        self.counts = Counts()
        self.error: BaseException | None = None
        self._jobs: queue.Queue[tuple[Exchange, bool, Future[Written]] | None] = queue.Queue(max_queue)
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
        self._jobs.put((exchange, dedup, future))
        return future

    def close(self, timeout: float = 60.0) -> None:
        """Write what is queued, then close the current file."""
        if self._thread.is_alive():
            self._jobs.put(None)
            self._thread.join(timeout)
        if self._thread.is_alive():
            logger.error("WARC: the writer did not finish in %(t)d s: its file is left .open (the next worker "
                         "closes it after its last whole record)", {"t": timeout})
        elif self.error is None:
            self.files.close()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            batch = [job]
            while job is not None and len(batch) < _BATCH:
                try:
                    job = self._jobs.get_nowait()
                except queue.Empty:
                    break
                batch.append(job)
            jobs = [j for j in batch if j is not None]
            if jobs:
                self._write_batch(jobs)
            if batch[-1] is None:
                return

    def _archive_index(self) -> ArchiveIndex | None:
        if self._index is None and self._make_index is not None:
            try:
                self._index = self._make_index()
            except Exception as exc:  # noqa: BLE001 - archived in full meanwhile
                self.counts.index_errors += 1
                logger.warning("WARC: no archive index (%(exc)s): payloads archived in full", {"exc": exc})
        return self._index

    def _write_batch(self, jobs: list[tuple[Exchange, bool, Future[Written]]]) -> None:
        """Write the fetches queued together: one round trip asks the
        archive index for all their payloads, one registers the new ones
        once they are on disk."""
        c = self.counts
        if self.error is not None:
            for _, _, future in jobs:
                future.set_exception(self.error)
            return
        digests: list[str | None] = [
            payload_digest(ex.body) if (dedup and ex.not_modified is None and not ex.truncated and ex.body
                                        and 200 <= ex.status < 300) else None
            for ex, dedup, _ in jobs]
        # A 304's original may itself be stored as a revisit (an exact copy): the
        # index names the response that holds the bytes, which the revisit names instead.
        asked = sorted({d for d in digests if d is not None}
                       | {ex.not_modified.digest for ex, _, _ in jobs if ex.not_modified is not None})
        known: dict[str, Original] = {}
        index = self._archive_index() if asked else None
        if index is not None:
            try:
                known = {d: o for d, o in zip(asked, index.lookup_many(asked)) if o is not None}
            except Exception as exc:  # noqa: BLE001 - Redis away: archived in full
                c.index_errors += 1
                index = None
                logger.warning("WARC: archive index lookup failed (%(exc)s): %(n)d responses archived in full",
                               {"exc": exc, "n": len(asked)})
        new: list[tuple[str, str, str]] = []
        for (ex, _, future), digest in zip(jobs, digests):
            if self.error is not None:
                future.set_exception(self.error)  # nothing written after a failed write
                continue
            try:
                original = known.get(digest) if digest is not None else None
                nm = ex.not_modified
                if nm is not None and nm.digest in known and known[nm.digest].uri != nm.uri:
                    first = known[nm.digest]
                    ex.not_modified = NotModified(first.uri, first.date, nm.digest)
                written = self._write(ex, original, digest)
            except BaseException as exc:  # noqa: BLE001 - reported through every later future
                logger.error("Cannot write the WARC record of %(url)s: %(exc)s", {"url": ex.url, "exc": exc})
                self.error = exc
                future.set_exception(exc)
                continue
            if digest is not None and original is None:
                # A later copy in this batch is a revisit of this one.
                known[digest] = Original(ex.url, written.date)
                new.append((digest, ex.url, written.date))
            future.set_result(written)
        if index is not None and new:
            try:
                index.register_many(new)
            except Exception as exc:  # noqa: BLE001 - a later copy is archived in full
                c.index_errors += 1
                logger.warning("WARC: archive index update failed (%(exc)s)", {"exc": exc})

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
