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
from crawler.warc.records import Exchange, RecordMaker, payload_digest

__all__ = ["WarcWriter", "Written"]

logger = logging.getLogger(__name__)


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
        if self.error is None:
            self.files.close()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            exchange, dedup, future = job
            if self.error is not None:
                future.set_exception(self.error)
                continue
            try:
                future.set_result(self._write(exchange, dedup))
            except BaseException as exc:  # noqa: BLE001 - reported through every later future
                logger.error("Cannot write the WARC record of %(url)s: %(exc)s", {"url": exchange.url, "exc": exc})
                self.error = exc
                future.set_exception(exc)

    def _archive_index(self) -> ArchiveIndex | None:
        if self._index is None and self._make_index is not None:
            try:
                self._index = self._make_index()
            except Exception as exc:  # noqa: BLE001 - archived in full meanwhile
                self.counts.index_errors += 1
                logger.warning("WARC: no archive index (%(exc)s): payloads archived in full", {"exc": exc})
        return self._index

    def _write(self, ex: Exchange, dedup: bool) -> Written:
        c = self.counts
        original = digest = None
        eligible = dedup and ex.not_modified is None and not ex.truncated and ex.body and 200 <= ex.status < 300
        index = self._archive_index() if eligible else None
        if eligible:
            digest = payload_digest(ex.body)
            if index is not None:
                try:
                    original = index.lookup(digest)
                except Exception as exc:  # noqa: BLE001 - Redis away: archived in full
                    c.index_errors += 1
                    logger.warning("WARC: archive index lookup failed (%(exc)s): %(url)s archived in full",
                                   {"exc": exc, "url": ex.url})
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
        if index is not None and original is None and built.digest is not None:
            try:
                index.register(built.digest, ex.url, built.date)
            except Exception as exc:  # noqa: BLE001 - a later copy is archived in full
                c.index_errors += 1
                logger.warning("WARC: archive index update failed (%(exc)s)", {"exc": exc})
        return Written(name, offset, length, built.kind, built.date, built.digest)
