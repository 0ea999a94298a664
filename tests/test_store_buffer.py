"""The store's write buffer (crawler.store.buffer) against real stores: an
SQLite file, and MongoDB through a SecantusDB server of the test's own.

The store goes away as it does in a crawl: SQLite locked by another
connection (``BEGIN EXCLUSIVE``), the SecantusDB server stopped and started
again on the same port and data. Where a test needs exact attempt counts it
gives the buffer a clock of its own whose sleeps pass at once and fire the
test's events (the store coming back, the crawl stopping) at given times."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections import Counter

import pytest
from pymongo.errors import PyMongoError

from crawler.store import SQLiteStore, StoreUnavailable, WriteBuffer, read_spill
from crawler.store.mongo import MongoStore
from tests.support.servers import start_secantus, stop_secantus

BUFFER_LOG = "crawler.store.buffer"


class Stats(Counter):
    """Counters as the buffer sees Scrapy's stats collector."""

    def inc_value(self, key, count=1):
        self[key] += count

    def without_errors(self):
        """The counters but ``store/write_error/*``, and how many of those in all."""
        errors = sum(n for k, n in self.items() if k.startswith("store/write_error/"))
        return {k: n for k, n in self.items() if not k.startswith("store/write_error/")}, errors


class FakeTime:
    """The buffer's ``clock`` and ``sleep``: a sleep moves the clock at once,
    then runs the events due by the new time, in order, once each. Kept in
    whole milliseconds, so that ten steps of 0.1 s make exactly 1 s."""

    def __init__(self):
        self.ms = 0
        self.events = []

    @property
    def now(self):
        return self.ms / 1000

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.ms += round(seconds * 1000)
        if self.ms > 3_600_000:  # a buffer that never gives up fails the test instead of hanging it
            raise AssertionError(f"still sleeping at {self.now}s")
        while self.events and self.events[0][0] <= self.now:
            self.events.pop(0)[1]()

    def at(self, when, action):
        self.events.append((when, action))
        self.events.sort(key=lambda e: e[0])


class SQLiteBackend:
    name = "sqlite"
    transient_errors = {"store/write_error/OperationalError"}

    def __init__(self, tmp_path):
        self.store = SQLiteStore(tmp_path / "crawl.sqlite3")
        self.store.conn.execute("PRAGMA busy_timeout = 10")  # a locked file fails a write at once
        self._blocker = sqlite3.connect(self.store.path, isolation_level=None)

    def go_away(self):
        self._blocker.execute("BEGIN EXCLUSIVE")

    def come_back(self):
        self._blocker.execute("ROLLBACK")

    def close(self):
        self._blocker.close()
        self.store.close()


class MongoBackend:
    name = "mongo"
    transient_errors = {"store/write_error/ServerSelectionTimeoutError", "store/write_error/AutoReconnect",
                        "store/write_error/NetworkTimeout"}

    def __init__(self, server):
        self.server = server
        self.store = MongoStore(f"mongodb://127.0.0.1:{server['port']}", "buffer", timeout_ms=300)

    def go_away(self):
        stop_secantus(self.server["proc"])

    def come_back(self):
        self.server["proc"], _ = start_secantus(self.server["storage"], self.server["port"])
        # Until the store's own client finds it again, so that the next
        # attempt is the one that succeeds.
        deadline = time.monotonic() + 30
        while True:
            try:
                self.store.client.admin.command("ping")
                return
            except PyMongoError:
                if time.monotonic() > deadline:
                    raise

    def close(self):
        self.store.close()


@pytest.fixture(params=["sqlite", pytest.param("mongo", marks=pytest.mark.slow)])  # a server per test
def backend(request, tmp_path):
    b = SQLiteBackend(tmp_path) if request.param == "sqlite" else MongoBackend(request.getfixturevalue("mongo"))
    yield b
    b.close()


@pytest.fixture
def sqlite(tmp_path):
    b = SQLiteBackend(tmp_path)
    yield b
    b.close()


def page(name, **kw):
    return {"url": f"http://a.test/{name}", "site": "a.test", "state": "C", "depth": 1, "title": name.upper(),
            "links": [], **kw}


def stored(store):
    return [p["url"] for p in store.iter_pages()]


def make_buffer(store, tmp_path, fake=None, **kw):
    stats = Stats()
    timing = {"clock": fake.clock, "sleep": fake.sleep} if fake is not None else {}
    options = {"retry_delay": 1.0, "retry_max_delay": 4.0, "close_timeout": 5.0, **timing, **kw}
    return WriteBuffer(store, tmp_path / "crawl.unstored.jsonl", stats, **options), stats


def messages(caplog, level=logging.WARNING):
    return [r.getMessage() for r in caplog.records if r.name == BUFFER_LOG and r.levelno >= level]


# -- writing -----------------------------------------------------------------------------

def test_batches_are_written_and_read_back(backend, tmp_path):
    buffer, stats = make_buffer(backend.store, tmp_path)
    first = [page("a", links=[{"url": "http://a.test/b", "anchor": "B"}]), page("b"), page("c")]
    assert buffer.write(first) == [None, None, None]
    assert buffer.write([page("d", title="Dee")]) == [None]
    assert stored(backend.store) == ["http://a.test/a", "http://a.test/b", "http://a.test/c", "http://a.test/d"]
    assert backend.store.get_page("http://a.test/d")["title"] == "Dee"
    assert backend.store.inlinks("http://a.test/b") == ["http://a.test/a"]
    assert stats == {"store/pages_written": 4}
    assert not buffer.down and not buffer.spill_path.exists()


def test_closing_or_abort_changes_nothing_while_the_store_is_up(backend, tmp_path):
    buffer, stats = make_buffer(backend.store, tmp_path)
    buffer.start_closing()
    buffer.abort()
    assert buffer.write([page("a"), page("b")]) == [None, None]
    assert stored(backend.store) == ["http://a.test/a", "http://a.test/b"]
    assert stats == {"store/pages_written": 2}


# -- outages -----------------------------------------------------------------------------

def test_an_outage_is_retried_with_doubling_backoff_until_the_store_is_back(backend, tmp_path, caplog):
    fake = FakeTime()
    buffer, stats = make_buffer(backend.store, tmp_path, fake)
    buffer.write([page("before")])
    backend.go_away()
    fake.at(5.0, backend.come_back)
    with caplog.at_level(logging.INFO, logger=BUFFER_LOG):
        outcomes = buffer.write([page("a"), page("b")])
    # Attempts at 0, 1, 3 (failed), 7 (written): backoff 1, 2, 4 (the max).
    assert outcomes == [None, None]
    assert fake.now == 7.0
    counts, errors = stats.without_errors()
    assert errors == 3 and set(stats) - set(counts) <= backend.transient_errors
    assert counts == {"store/pages_written": 3, "store/outages": 1, "store/outage_seconds": 7}
    assert stored(backend.store) == ["http://a.test/a", "http://a.test/b", "http://a.test/before"]
    log = messages(caplog)
    assert len(log) == 2
    assert log[0].startswith("The store is unavailable (")
    assert log[0].endswith(") for 0s; 2 pages wait for it and are not acknowledged; retrying in 1.0s")
    assert log[1] == "The store is back after 7.0s; writing the 2 pages that waited"
    assert not buffer.down and not buffer.spill_path.exists()


def test_a_write_waits_in_its_thread_while_the_store_is_away(backend, tmp_path):
    """Real time, a real thread: the write blocks until the store is back,
    which keeps the pages it had before (same file, same server data)."""
    buffer, stats = make_buffer(backend.store, tmp_path, retry_delay=0.05, retry_max_delay=0.1)
    assert buffer.write([page("before")]) == [None]
    backend.go_away()
    result = []
    writer = threading.Thread(target=lambda: result.append(buffer.write([page("a"), page("b")])), daemon=True)
    writer.start()
    try:
        deadline = time.monotonic() + 30
        while stats.without_errors()[1] < 3:
            assert time.monotonic() < deadline, stats
            time.sleep(0.02)
        assert buffer.down and result == [] and writer.is_alive()
        assert stats["store/outages"] == 1
        backend.come_back()
        writer.join(30)
    finally:
        buffer.abort()  # a failed test leaves no writer retrying
    assert result == [[None, None]]
    assert not buffer.down
    assert stats["store/pages_written"] == 3 and stats["store/outages"] == 1
    assert stored(backend.store) == ["http://a.test/a", "http://a.test/b", "http://a.test/before"]


def test_a_long_outage_is_told_every_30_seconds(sqlite, tmp_path, caplog):
    fake = FakeTime()
    buffer, stats = make_buffer(sqlite.store, tmp_path, fake, retry_delay=10.0, retry_max_delay=10.0,
                                waiting=lambda: 42)
    sqlite.go_away()
    fake.at(65.0, sqlite.come_back)
    with caplog.at_level(logging.WARNING, logger=BUFFER_LOG):
        assert buffer.write([page("a")]) == [None]
    assert messages(caplog) == [
        f"The store is unavailable (database is locked) for {s}s; 42 pages wait for it and are not "
        "acknowledged; retrying in 10.0s" for s in (0, 30, 60)] + [
        "The store is back after 70.0s; writing the 42 pages that waited"]
    assert stats == {"store/write_error/OperationalError": 7, "store/outages": 1, "store/outage_seconds": 70,
                     "store/pages_written": 1}


def test_two_outages_are_counted_apart(sqlite, tmp_path):
    fake = FakeTime()
    buffer, stats = make_buffer(sqlite.store, tmp_path, fake)
    for name, back_at in (("a", 0.5), ("b", 2.5)):
        sqlite.go_away()
        fake.at(back_at, sqlite.come_back)
        assert buffer.write([page(name)]) == [None]
    # First: attempts at 0 and 1; second: at 1, 2 and 4.
    assert stats == {"store/write_error/OperationalError": 3, "store/outages": 2, "store/outage_seconds": 1 + 3,
                     "store/pages_written": 2}


# -- giving up ---------------------------------------------------------------------------

def test_closing_during_an_outage_gives_up_after_the_close_timeout_and_spills(backend, tmp_path, caplog):
    fake = FakeTime()
    buffer, stats = make_buffer(backend.store, tmp_path, fake, close_timeout=3.0)
    buffer.write([page("before")])
    backend.go_away()
    fake.at(2.0, buffer.start_closing)  # the crawl stops: the caller says so, from its own thread
    batch = [page("a", text="é 中文"), page("b")]
    with caplog.at_level(logging.ERROR, logger=BUFFER_LOG):
        outcomes = buffer.write(batch)
    # Attempts at 0, 1 and 3; closing seen at 2: it gives up at 2 + 3.
    assert fake.now == 5.0
    assert buffer.closing and buffer.down
    assert [type(o) for o in outcomes] == [StoreUnavailable, StoreUnavailable]
    assert outcomes[0] is outcomes[1]
    assert str(outcomes[0]).startswith("store unavailable (") and str(outcomes[0]).endswith(") when the crawl stopped")
    assert read_spill(buffer.spill_path) == batch
    counts, errors = stats.without_errors()
    assert errors == 3
    assert counts == {"store/pages_written": 1, "store/outages": 1, "store/pages_spilled": 2}
    [message] = messages(caplog, logging.ERROR)
    assert message.endswith(f": 2 pages saved to {buffer.spill_path}, their URLs go back to the frontier. "
                            "http://a.test/a http://a.test/b")
    assert message.startswith("The store is still unavailable (")
    backend.come_back()
    assert stored(backend.store) == ["http://a.test/before"]


def test_abort_during_an_outage_gives_up_at_once(backend, tmp_path):
    fake = FakeTime()
    buffer, stats = make_buffer(backend.store, tmp_path, fake, close_timeout=600.0)
    backend.go_away()
    fake.at(2.0, buffer.abort)
    first = [page("a"), page("b")]
    outcomes = buffer.write(first)
    assert fake.now == 2.0
    assert [type(o) for o in outcomes] == [StoreUnavailable, StoreUnavailable]
    # Still away and aborted: the next batch is not even tried, and goes
    # to the end of the same file.
    second = buffer.write([page("c")])
    assert [type(o) for o in second] == [StoreUnavailable]
    assert str(second[0]) == "store unavailable (still down) when the crawl stopped"
    assert [p["url"] for p in read_spill(buffer.spill_path)] == ["http://a.test/a", "http://a.test/b",
                                                                  "http://a.test/c"]
    counts, errors = stats.without_errors()
    assert errors == 2  # attempts at 0 and 1 only
    assert counts == {"store/outages": 1, "store/pages_spilled": 3}
    backend.come_back()
    assert stored(backend.store) == []


def test_a_spill_file_that_cannot_be_written_is_said_and_not_counted(sqlite, tmp_path, caplog):
    fake = FakeTime()
    stats = Stats()
    buffer = WriteBuffer(sqlite.store, tmp_path, stats, retry_delay=1.0, close_timeout=0.0,
                         clock=fake.clock, sleep=fake.sleep)  # the spill path is a directory
    buffer.start_closing()
    sqlite.go_away()
    with caplog.at_level(logging.ERROR, logger=BUFFER_LOG):
        outcomes = buffer.write([page("a"), page("b")])
    assert [type(o) for o in outcomes] == [StoreUnavailable, StoreUnavailable]
    assert stats == {"store/write_error/OperationalError": 1, "store/outages": 1}
    [message] = messages(caplog, logging.ERROR)
    assert message.startswith(f"Could not write 2 unstored pages to {tmp_path} (")
    assert message.endswith("); their URLs go back to the frontier: http://a.test/a http://a.test/b")


# -- refusals ----------------------------------------------------------------------------

def test_a_page_the_store_refuses_fails_alone(backend, tmp_path, caplog):
    buffer, stats = make_buffer(backend.store, tmp_path)
    # Neither SQLite nor BSON holds a 70-bit integer: refused for good.
    batch = [page("a"), page("bad", simhash=2**70), page("c")]
    with caplog.at_level(logging.ERROR, logger=BUFFER_LOG):
        outcomes = buffer.write(batch)
    assert outcomes[0] is None and outcomes[2] is None
    assert type(outcomes[1]) is OverflowError
    assert stored(backend.store) == ["http://a.test/a", "http://a.test/c"]
    # The batch, then the bad page alone.
    assert stats == {"store/write_error/OverflowError": 2, "store/pages_refused": 1, "store/pages_written": 2}
    assert messages(caplog, logging.ERROR) == [f"The store refused http://a.test/bad: {outcomes[1]}"]
    assert not buffer.down and not buffer.spill_path.exists()


# -- the spill file ----------------------------------------------------------------------

def write_spill(path, pages, tail=""):
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pages) + tail, encoding="utf-8")


def test_replay_writes_the_spill_file_in_batches_and_removes_it(backend, tmp_path, caplog):
    buffer, stats = make_buffer(backend.store, tmp_path, batch_size=2)
    pages = [page("a", text="é 中文"), page("b"), page("bad", simhash=2**70), page("d"), page("e")]
    write_spill(buffer.spill_path, pages)
    with caplog.at_level(logging.INFO, logger=BUFFER_LOG):
        buffer.replay()
    assert not buffer.spill_path.exists()
    assert stored(backend.store) == ["http://a.test/a", "http://a.test/b", "http://a.test/d", "http://a.test/e"]
    assert backend.store.get_page("http://a.test/a")["text"] == "é 中文"
    # Batches [a, b], [bad, d] (refused, then one by one), [e].
    assert stats == {"store/pages_written": 4, "store/pages_replayed": 4, "store/write_error/OverflowError": 2,
                     "store/pages_refused": 1}
    log = messages(caplog, logging.INFO)
    assert len(log) == 2
    assert log[0] == f"Writing 5 pages left unstored by an earlier run ({buffer.spill_path})"
    assert log[1].startswith("The store refused http://a.test/bad: ")


def test_replay_keeps_the_spill_file_if_the_store_is_away(backend, tmp_path, caplog):
    fake = FakeTime()
    buffer, stats = make_buffer(backend.store, tmp_path, fake, close_timeout=2.0)
    pages = [page("a"), page("b"), page("c")]
    write_spill(buffer.spill_path, pages)
    before = buffer.spill_path.read_bytes()
    backend.go_away()
    buffer.start_closing()
    with caplog.at_level(logging.ERROR, logger=BUFFER_LOG):
        buffer.replay()
    assert buffer.spill_path.read_bytes() == before  # kept, and nothing appended twice
    counts, errors = stats.without_errors()
    assert errors == 2  # at 0 and 1; given up at 2
    assert counts == {"store/outages": 1}
    assert messages(caplog, logging.ERROR) == [f"{buffer.spill_path} is kept: the store went away while it was written"]
    backend.come_back()
    assert stored(backend.store) == []
    # The next start, with the store there, writes it.
    nxt, nxt_stats = make_buffer(backend.store, tmp_path)
    nxt.replay()
    assert not nxt.spill_path.exists()
    assert stored(backend.store) == ["http://a.test/a", "http://a.test/b", "http://a.test/c"]
    assert nxt_stats == {"store/pages_written": 3, "store/pages_replayed": 3}


def test_a_line_cut_short_in_the_spill_file_is_skipped(sqlite, tmp_path, caplog):
    buffer, stats = make_buffer(sqlite.store, tmp_path)
    pages = [page("a"), page("b")]
    write_spill(buffer.spill_path, [pages[0], {"no": "url"}, [1, 2], pages[1]], tail='{"url": "http://a.test/cut", "si')
    with caplog.at_level(logging.WARNING, logger=BUFFER_LOG):
        assert read_spill(buffer.spill_path) == pages
        buffer.replay()
    assert messages(caplog) == [f"{buffer.spill_path}:5: skipping an incomplete line"] * 2
    assert not buffer.spill_path.exists()
    assert stored(sqlite.store) == ["http://a.test/a", "http://a.test/b"]
    assert stats == {"store/pages_written": 2, "store/pages_replayed": 2}


def test_replay_without_pages_removes_an_empty_file_and_writes_nothing(sqlite, tmp_path):
    buffer, stats = make_buffer(sqlite.store, tmp_path)
    buffer.replay()  # no file: nothing to do
    assert not buffer.spill_path.exists()
    buffer.spill_path.write_text('{"url": "http://a.test/cut', encoding="utf-8")
    buffer.replay()
    assert not buffer.spill_path.exists()
    assert stored(sqlite.store) == [] and stats == {}
