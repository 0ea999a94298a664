"""MongoDB going away in the middle of a crawl: a real SecantusDB server is
stopped while ``scrapy crawl site`` runs and started again on the same port
and data directory. Nothing may be lost: pages wait (unacknowledged) while
it is away, and a crawl stopped during the outage saves them to its spill
file and re-queues their URLs."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pymongo

from tests.support import ROOT
from tests.support.crawl import crawl_cmd
from tests.support.servers import start_secantus, stop_secantus
from tests.support.site import FETCHED, NOT_STORED, TRAP

SETTINGS = {**TRAP, "CONCURRENT_REQUESTS": 1, "DOWNLOAD_DELAY": 0.2, "MONGO_TIMEOUT": 0.2,
            "STORE_RETRY_DELAY": 0.1, "STORE_RETRY_MAX_DELAY": 0.2}
EXPECTED = sorted(set(FETCHED) - NOT_STORED)


class Crawl:
    """``scrapy crawl site`` in the background, its log in a file."""

    def __init__(self, server, crawl_dir: Path, settings: dict[str, object]) -> None:
        self.mark = server.mark()
        self.server = server
        self.log_path = crawl_dir / f"crawl-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("w")
        cmd = crawl_cmd([f"seeds={server.url('/')}"], settings, crawl_dir)
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT, text=True)

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def fetched(self) -> list[str]:
        return [str(r["path"]) for r in self.server.requests(self.mark)]

    def wait_for(self, condition, what: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if self.proc.poll() is not None:
                raise AssertionError(f"the crawl ended before {what}:\n{self.log[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} after {timeout}s:\n{self.log[-3000:]}")
            time.sleep(0.05)

    def wait(self, timeout: float = 120) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the crawl did not end in {timeout}s:\n{self.log[-3000:]}") from None
        finally:
            self._log.close()


def stored_urls(uri: str, database: str, server) -> list[str]:
    with pymongo.MongoClient(uri) as client:
        prefix = server.url("")
        return sorted(p["url"].replace(prefix, "") for p in client[database].pages.find({"state": {"$exists": True}}))


def test_mongodb_down_mid_crawl_pages_wait_and_are_all_stored(server, tmp_path, frontier_settings, mongo):
    uri = f"mongodb://127.0.0.1:{mongo['port']}"
    crawl = Crawl(server, tmp_path, {**frontier_settings, **SETTINGS, "MONGO_URI": uri})
    crawl.wait_for(lambda: len(crawl.fetched()) >= 6, "6 requests")
    stop_secantus(mongo["proc"])
    crawl.wait_for(lambda: "The store is unavailable" in crawl.log, "outage warning")
    time.sleep(4)  # several attempts: longer than any fixed number of retries would cover
    mongo["proc"], _ = start_secantus(mongo["storage"], mongo["port"])
    assert crawl.wait() == 0, crawl.log[-3000:]

    log = crawl.log
    failed = sum(int(n) for n in re.findall(r"'store/write_error/\w+': (\d+)", log))
    assert failed >= 6  # more attempts than a fixed retry budget of 5 would have made
    assert "The store is back after" in log
    assert "'store/outages': 1" in log
    assert "store/pages_spilled" not in log and "not stored" not in log
    # Every page stored, and no URL fetched twice: the waiting pages kept
    # their leases, acknowledged only once written.
    assert stored_urls(uri, frontier_settings["CRAWL_NAME"], server) == EXPECTED
    assert Counter(crawl.fetched()) == FETCHED
    with pymongo.MongoClient(uri) as client:
        errors = {p["url"]: p["error"] for p in client[frontier_settings["CRAWL_NAME"]].pages.find({"state": "E"})}
    assert sorted(u.replace(server.url(""), "") for u in errors) == ["/broken.html", "/missing.html"]


def test_a_worker_holds_at_most_max_unstored_pages_while_the_store_is_away(server, tmp_path, frontier_settings,
                                                                          mongo):
    """With MongoDB away, a worker stops leasing once FRONTIER_MAX_UNSTORED
    pages wait for it (here 3, and at most 2 more in its hands): what a kill
    would send back to be fetched again stays bounded. Before, it went on
    fetching the whole site (42 pages at a 0.2 s delay) into memory."""
    uri = f"mongodb://127.0.0.1:{mongo['port']}"
    crawl = Crawl(server, tmp_path, {**frontier_settings, **SETTINGS, "MONGO_URI": uri, "FRONTIER_MAX_UNSTORED": 3})
    crawl.wait_for(lambda: len(crawl.fetched()) >= 4, "4 requests")
    stop_secantus(mongo["proc"])
    crawl.wait_for(lambda: "The store is unavailable" in crawl.log, "outage warning")
    before = len(crawl.fetched())
    time.sleep(5)  # 25 requests' worth at the delay
    during = len(crawl.fetched()) - before
    assert during <= 5, (during, crawl.fetched())
    mongo["proc"], _ = start_secantus(mongo["storage"], mongo["port"])
    assert crawl.wait() == 0, crawl.log[-3000:]
    assert "frontier/lease_held_back" in crawl.log
    assert stored_urls(uri, frontier_settings["CRAWL_NAME"], server) == EXPECTED
    assert Counter(crawl.fetched()) == FETCHED


def test_crawl_stopped_while_mongodb_is_down_spills_then_resumes(server, tmp_path, frontier_settings, mongo):
    uri = f"mongodb://127.0.0.1:{mongo['port']}"
    database = frontier_settings["CRAWL_NAME"]
    spill = tmp_path / f"{database}.unstored.jsonl"
    settings = {**frontier_settings, **SETTINGS, "MONGO_URI": uri, "STORE_CLOSE_TIMEOUT": 1}
    first = Crawl(server, tmp_path, settings)
    first.wait_for(lambda: len(first.fetched()) >= 6, "6 requests")
    stop_secantus(mongo["proc"])
    first.wait_for(lambda: "The store is unavailable" in first.log, "outage warning")
    first.proc.send_signal(signal.SIGINT)
    assert first.wait(60) == 0, first.log[-3000:]
    log = first.log
    assert "pages saved to" in log and "could not be stored (or their writes confirmed) before the crawl" in log
    spilled = [json.loads(line)["url"].replace(server.url(""), "") for line in spill.read_text().splitlines()]
    assert spilled and len(spilled) == len(set(spilled))
    first_fetched = first.fetched()

    mongo["proc"], _ = start_secantus(mongo["storage"], mongo["port"])
    # Some spilled pages may be in the store after all: MongoDB can apply a
    # write whose reply the stop cut off. Writing them again is harmless.
    second = Crawl(server, tmp_path, settings)
    assert second.wait() == 0, second.log[-3000:]
    assert f"Writing {len(spilled)} pages left unstored by an earlier run" in second.log
    assert not spill.exists()
    assert stored_urls(uri, database, server) == EXPECTED
    # The spilled pages' URLs were queued again and fetched once more; every
    # other URL exactly as often as in one uninterrupted crawl.
    both = Counter(first_fetched) + Counter(second.fetched())
    refetched = both - FETCHED
    assert set(refetched) <= set(spilled) and set(both) == set(FETCHED)
    assert set(spilled) - {"/broken.html"} <= set(refetched)


# -- the writer's decisions, on a real SQLite store (no reactor needed) ----------------

def _pipeline(tmp_path):
    from scrapy.utils.test import get_crawler

    from crawler.frontier.faces import FrontierFaces
    from crawler.pipelines import StorePipeline
    from crawler.store import SQLiteStore

    crawler = get_crawler(settings_dict={"STORE_BATCH_SIZE": 100, "STORE_FLUSH_INTERVAL": 0.25,
                                         "STORE_RETRY_DELAY": 0.01, "STORE_RETRY_MAX_DELAY": 0.02,
                                         "STORE_CLOSE_TIMEOUT": 0.1})
    crawler.stats.open_spider()
    pipeline = StorePipeline(crawler, FrontierFaces(crawler).store)
    pipeline.open_buffer(SQLiteStore(tmp_path / "store.sqlite3"), tmp_path / "spill.jsonl")
    return pipeline


def _page(url, **kw):
    return {"url": url, "site": "127.0.0.1", "state": "C", "links": [], **kw}


def test_a_page_the_store_refuses_fails_alone(tmp_path):
    pipeline = _pipeline(tmp_path)
    # SQLite cannot hold a 70-bit integer: refused for good, not retried forever.
    batch = [_page("http://127.0.0.1/a"), _page("http://127.0.0.1/bad", simhash=2**70), _page("http://127.0.0.1/c")]
    outcomes = pipeline.buffer.write(batch)
    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], OverflowError)
    assert [p["url"] for p in pipeline.buffer.store.iter_pages()] == ["http://127.0.0.1/a", "http://127.0.0.1/c"]
    assert pipeline.stats.get_value("store/pages_refused") == 1
    assert not pipeline.buffer.spill_path.exists()


def test_store_away_while_stopping_spills_after_the_close_timeout(tmp_path):
    import sqlite3

    from crawler.store import StoreUnavailable

    pipeline = _pipeline(tmp_path)
    blocker = sqlite3.connect(tmp_path / "store.sqlite3", isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # the store is locked: a transient error
    pipeline.buffer.store._conn.execute("PRAGMA busy_timeout = 10")
    pipeline.buffer.start_closing()  # what the pipeline does once the crawl stops
    batch = [_page("http://127.0.0.1/a", text="é 中文"), _page("http://127.0.0.1/b")]
    start = time.monotonic()
    outcomes = pipeline.buffer.write(batch)
    assert time.monotonic() - start < 5
    assert all(isinstance(o, StoreUnavailable) for o in outcomes)
    assert [json.loads(line) for line in pipeline.buffer.spill_path.read_text(encoding="utf-8").splitlines()] == batch
    assert pipeline.stats.get_value("store/pages_spilled") == 2
    assert pipeline.stats.get_value("store/write_error/OperationalError") >= 1

    # The lock goes; the spill file (with a line cut short by a crash) is
    # written by the next run and removed.
    blocker.execute("ROLLBACK")
    blocker.close()
    spill = pipeline.buffer.spill_path
    with spill.open("a") as f:
        f.write('{"url": "http://127.0.0.1/cut", "si')
    from crawler.store.buffer import read_spill

    pages = read_spill(spill)
    assert pages == batch
    nxt = _pipeline(tmp_path)
    nxt.buffer.replay()
    assert not spill.exists()
    assert nxt.stats.get_value("store/pages_replayed") == 2
    assert nxt.buffer.store.get_page("http://127.0.0.1/a")["text"] == "é 中文"


def test_forced_stop_while_mongodb_is_down_spills_at_once(server, tmp_path, frontier_settings, mongo):
    """A second Ctrl-C does not wait STORE_CLOSE_TIMEOUT: the pages held for
    the store go to the spill file and the process ends."""
    uri = f"mongodb://127.0.0.1:{mongo['port']}"
    spill = tmp_path / f"{frontier_settings['CRAWL_NAME']}.unstored.jsonl"
    crawl = Crawl(server, tmp_path, {**frontier_settings, **SETTINGS, "MONGO_URI": uri, "STORE_CLOSE_TIMEOUT": 600})
    crawl.wait_for(lambda: len(crawl.fetched()) >= 6, "6 requests")
    stop_secantus(mongo["proc"])
    crawl.wait_for(lambda: "The store is unavailable" in crawl.log, "outage warning")
    crawl.proc.send_signal(signal.SIGINT)
    crawl.wait_for(lambda: "shutting down gracefully" in crawl.log, "graceful shutdown")
    time.sleep(0.5)
    crawl.proc.send_signal(signal.SIGINT)
    start = time.monotonic()
    crawl.wait(30)
    assert time.monotonic() - start < 15  # not the 600 s close timeout
    assert "forcing unclean shutdown" in crawl.log.lower()
    spilled = [json.loads(line)["url"] for line in spill.read_text().splitlines()]
    assert spilled and len(spilled) == len(set(spilled))
