"""The write buffer between the crawl and its store: batches written with
retry, outages waited out, and pages spilled to a file when they cannot wait.

Pure logic over a ``Store``: no Scrapy, no Twisted. ``write`` blocks (the
pipeline runs it on its one background thread) and returns one outcome per
page: None (written), a ``StoreUnavailable`` (given up on, and spilled) or
the exception with which the store refused the page for good.

When the store is away (MongoDB down, SQLite locked or the disk full; an
error ``Store.transient`` accepts), the batch is retried with backoff
doubling from ``retry_delay`` to ``retry_max_delay`` seconds for as long as
the crawl runs, with a warning every 30 s. Nothing is acknowledged
meanwhile: the pages wait in memory, Scrapy's scraper limit
(``SCRAPER_SLOT_MAX_ACTIVE_SIZE``) stops new downloads, and the crawl resumes
where it was when the store is back. Once the caller says the crawl is
stopping (``start_closing``), an outage is waited out for ``close_timeout``
seconds more; then the buffer appends what it could not write to the spill
file, says so at ERROR level, and fails those pages with
``StoreUnavailable``: the frontier gives their URLs back to the queue
instead of acknowledging them. ``abort`` (a forced shutdown) gives up at
once. The next crawl of the same name writes the spill file first
(``replay``) and removes it.

A page the store refuses for good (an error ``Store.transient`` does not
accept: a document too large, a value it cannot encode) is retried alone,
then fails; the other pages of its batch are written.

A re-crawl passes ``prepare`` (``crawler.recrawl.merge.Revisits``): each attempt
reads the stored versions of the batch's re-fetched pages and merges them
before the write, in this thread, so a retry merges again from what is
stored then (the merge is idempotent).

Stats: ``store/pages_written``, ``store/write_error/<ExcClass>``,
``store/outages``, ``store/outage_seconds``, ``store/pages_spilled``,
``store/pages_replayed``, ``store/pages_refused``; ``recrawl/fetched``,
``recrawl/<outcome>`` and ``recrawl/not_modified`` (304s) of the merged pages
once written.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from crawler.store.base import OUTCOME_KEY, StoreUnavailable, short_error

if TYPE_CHECKING:
    from pathlib import Path

    from crawler.store.base import Store

logger = logging.getLogger(__name__)

__all__ = ["Stats", "WriteBuffer", "read_spill"]

Outcome = BaseException | None
# (the store's revisit_state, a batch) -> the batch to write.
Prepare = Callable[[Callable[[Sequence[str]], dict[str, dict[str, Any]]], Sequence[dict[str, Any]]],
                   list[dict[str, Any]]]

OUTAGE_WARNING_INTERVAL = 30.0  # seconds between two "the store is unavailable" warnings
_SLEEP_STEP = 0.1  # a backoff is cut in steps this long, so that abort and closing are seen soon


class Stats(Protocol):
    """Where the counters go (Scrapy's stats collector, for one)."""

    def inc_value(self, key: str, count: int = 1, /) -> None: ...


def read_spill(path: Path) -> list[dict[str, Any]]:
    """The pages in a spill file, skipping a line cut short by a crash while
    it was appended (that page's URL was never acknowledged: the crawl
    fetches it again)."""
    pages: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                page = json.loads(line)
            except json.JSONDecodeError:
                logger.warning("%(path)s:%(n)d: skipping an incomplete line", {"path": path, "n": n})
                continue
            if isinstance(page, dict) and isinstance(page.get("url"), str):
                pages.append(page)
    return pages


class WriteBuffer:
    """Writes batches of pages to ``store``; see the module's docstring.

    ``waiting`` tells how many pages wait for the store in all (for the
    log); by default, those of the batch in hand. ``clock`` and ``sleep``
    are ``time.monotonic`` and ``time.sleep`` unless a test says otherwise.
    """

    def __init__(self, store: Store, spill_path: Path, stats: Stats, *, batch_size: int = 100,
                 retry_delay: float = 0.5, retry_max_delay: float = 30.0, close_timeout: float = 30.0,
                 waiting: Callable[[], int] | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, prepare: Prepare | None = None,
                 announce: Callable[[list[dict[str, Any]]], None] | None = None) -> None:
        self.store = store
        # Told each batch the store took, as written, before its pages are
        # acknowledged (crawler/webhooks/events.py): a worker killed before
        # it leaves its pages to be fetched and announced again.
        self._announce = announce
        self._prepare = prepare
        self.spill_path = spill_path
        self.stats = stats
        self.batch_size = batch_size
        self.retry_delay = retry_delay
        self.retry_max_delay = retry_max_delay
        self.close_timeout = close_timeout
        self._waiting = waiting
        self._clock = clock
        self._sleep_for = sleep
        self._in_hand = 0
        self._down_since: float | None = None
        self._last_warning: float | None = None
        self._closing = False
        self._close_deadline: float | None = None
        self._abort = False
        self._spill_lock = threading.Lock()

    # -- the caller's side (any thread) --------------------------------------------------
    @property
    def down(self) -> bool:
        """Is the store away (the last attempt failed with a transient error)?"""
        return self._down_since is not None

    @property
    def closing(self) -> bool:
        return self._closing

    def start_closing(self) -> None:
        """The crawl stops: an outage is waited out ``close_timeout`` more
        seconds (from when a retry first sees this), then pages are spilled."""
        self._closing = True

    def abort(self) -> None:
        """The process goes down: during an outage, spill now."""
        self._abort = True

    # -- writing (blocking) ------------------------------------------------------------
    def write(self, batch: Sequence[dict[str, Any]], spill: bool = True) -> list[Outcome]:
        """Write ``batch``; one outcome per page: None (written), a
        ``StoreUnavailable`` (given up on; spilled if ``spill``) or the
        store's refusal."""
        self._in_hand = len(batch)
        outcome = self._write_with_retry(batch, spill)
        if outcome is None or len(batch) == 1 or isinstance(outcome, StoreUnavailable):
            return [outcome] * len(batch)
        # Refused for good: find the page(s) at fault, write the others.
        return [self._write_with_retry([page], spill) for page in batch]

    def _write_with_retry(self, batch: Sequence[dict[str, Any]], spill: bool) -> Outcome:
        delay = self.retry_delay
        while True:
            if self._gave_up():
                return self._give_up(batch, spill, None)
            try:
                pages = list(batch) if self._prepare is None else self._prepare(self.store.revisit_state, batch)
                self.store.write(pages)
            except Exception as exc:
                self.stats.inc_value(f"store/write_error/{type(exc).__name__}")
                if not self.store.transient(exc):
                    if len(batch) == 1:
                        self.stats.inc_value("store/pages_refused")
                        logger.error("The store refused %(url)s: %(exc)s", {"url": batch[0]["url"], "exc": exc})
                    return exc
                self._outage(exc, delay)
                if self._sleep(delay):
                    return self._give_up(batch, spill, exc)
                delay = min(delay * 2, self.retry_max_delay)
            else:
                self.stats.inc_value("store/pages_written", len(batch))
                if self._announce is not None:
                    self._announce_written(pages)
                for page in pages:
                    for name in page.get(OUTCOME_KEY) or ():
                        self.stats.inc_value(f"recrawl/{name}")
                if self._down_since is not None:
                    down = self._clock() - self._down_since
                    self._down_since = None
                    self.stats.inc_value("store/outage_seconds", round(down))
                    logger.warning("The store is back after %(s).1fs; writing the %(n)d pages that waited",
                                   {"s": down, "n": self._waiting_now()})
                return None

    def _announce_written(self, pages: list[dict[str, Any]]) -> None:
        """Hand the written batch on; retried while its Redis is away (the
        pages wait unacknowledged, as they wait for the store)."""
        assert self._announce is not None
        delay = self.retry_delay
        deadline = self._clock() + self.close_timeout
        while True:
            try:
                self._announce(pages)
                return
            except Exception as exc:
                self.stats.inc_value(f"webhook/announce_error/{type(exc).__name__}")
                logger.warning("Could not record the batch's webhook events (%(exc)s); trying again in %(d).1fs",
                               {"exc": short_error(exc), "d": delay})
                if self._abort or self._clock() + delay > deadline:
                    # Bounded: the store took the pages, and the crawl must go on.
                    self.stats.inc_value("webhook/events_lost", len(pages))
                    logger.error("Gave up recording %(n)d pages' webhook events after %(s).0fs",
                                 {"n": len(pages), "s": self.close_timeout})
                    return
                self._sleep_for(delay)
                delay = min(delay * 2, self.retry_max_delay)

    def _waiting_now(self) -> int:
        return self._waiting() if self._waiting is not None else self._in_hand

    def _outage(self, exc: Exception, delay: float) -> None:
        now = self._clock()
        if self._down_since is None:
            self._down_since = now
            self.stats.inc_value("store/outages")
            self._last_warning = None
        if self._last_warning is None or now - self._last_warning >= OUTAGE_WARNING_INTERVAL:
            self._last_warning = now
            logger.warning(
                "The store is unavailable (%(exc)s) for %(s).0fs; %(n)d pages wait for it and are not "
                "acknowledged; retrying in %(delay).1fs", {"exc": short_error(exc), "s": now - self._down_since,
                                                          "n": self._waiting_now(), "delay": delay})

    def _gave_up(self) -> bool:
        """Stopping, the store is away and the close timeout has passed (or
        aborted: no waiting at all)."""
        if self._down_since is None:
            return False
        if self._abort:
            return True
        if self._close_deadline is None:
            return False
        return self._clock() >= self._close_deadline

    def _sleep(self, delay: float) -> bool:
        """Sleep ``delay`` seconds; True if the buffer must give up."""
        end = self._clock() + delay
        while True:
            if self._close_deadline is None and self._closing:
                self._close_deadline = self._clock() + self.close_timeout
            if self._gave_up():
                return True
            left = end - self._clock()
            if left <= 0:
                return False
            self._sleep_for(min(left, _SLEEP_STEP))

    def _give_up(self, batch: Sequence[dict[str, Any]], spill: bool, exc: Exception | None) -> StoreUnavailable:
        reason = StoreUnavailable(f"store unavailable ({short_error(exc) if exc else 'still down'}) when the crawl stopped")
        if spill:
            self._spill(batch, exc)
        return reason

    # -- the spill file ----------------------------------------------------------------
    def _spill(self, batch: Sequence[dict[str, Any]], exc: Exception | None) -> None:
        with self._spill_lock:
            try:
                self.spill_path.parent.mkdir(parents=True, exist_ok=True)
                with self.spill_path.open("a", encoding="utf-8") as f:
                    for page in batch:
                        f.write(json.dumps(page, ensure_ascii=False) + "\n")
                    f.flush()
            except OSError as err:
                logger.critical("Could not write %(n)d unstored pages to %(path)s (%(err)s); their URLs "
                                "go back to the frontier: %(urls)s",
                                {"n": len(batch), "path": self.spill_path, "err": err,
                                 "urls": " ".join(p["url"] for p in batch)})
                return
        self.stats.inc_value("store/pages_spilled", len(batch))
        logger.error("The store is still unavailable (%(exc)s) as the crawl stops: %(n)d pages saved to "
                     "%(path)s, their URLs go back to the frontier. %(urls)s",
                     {"exc": short_error(exc) if exc else "down", "n": len(batch), "path": self.spill_path,
                      "urls": " ".join(p["url"] for p in batch[:20]) + (" ..." if len(batch) > 20 else "")})

    def replay(self) -> None:
        """Write the pages an earlier run spilled, in batches, then remove the
        spill file; keep it if the store went away meanwhile (and the buffer
        gave up). Refused pages are not kept: they never will be written."""
        if not self.spill_path.exists():
            return
        pages = read_spill(self.spill_path)
        if not pages:
            self.spill_path.unlink()
            return
        logger.info("Writing %(n)d pages left unstored by an earlier run (%(path)s)",
                    {"n": len(pages), "path": self.spill_path})
        outcomes: list[Outcome] = []
        for start in range(0, len(pages), self.batch_size):
            outcomes += self.write(pages[start:start + self.batch_size], spill=False)
        if any(isinstance(o, StoreUnavailable) for o in outcomes):
            logger.error("%(path)s is kept: the store went away while it was written", {"path": self.spill_path})
            return
        self.stats.inc_value("store/pages_replayed", sum(o is None for o in outcomes))
        with self._spill_lock:
            self.spill_path.unlink(missing_ok=True)
