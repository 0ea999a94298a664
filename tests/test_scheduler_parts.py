"""The scheduler's parts (crawler/frontier/acks.py, leasing.py,
noderecord.py, joining.py): what a page's events settle its lease as, and
count; requests to frontier entries and leases back to requests; the node's
record for operators; what a run that fetched nothing says."""

from __future__ import annotations

import logging

from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from crawler.frontier.acks import Acks
from crawler.frontier.joining import say_already_finished
from crawler.frontier.leasebook import LeaseBook
from crawler.frontier.leasing import GAP_META, LEASE_META, lease_requests, link_entry
from crawler.frontier.noderecord import NodeRecord
from crawler.frontier.queues import Lease, LinkEntry
from crawler.frontier.serialize import request_to_json
from crawler.frontier.signals import GiveBack
from crawler.items import PageItem


class Clock:
    """A clock set by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def held(book: LeaseBook, *ids: str) -> None:
    for lease_id in ids:
        book.add(Lease(lease_id, "a.test", "{}"))


def test_acks_count_each_lease_as_it_settles():
    stats = get_crawler(Spider).stats
    book = LeaseBook()
    acks = Acks(book, stats)
    held(book, "1", "2", "3", "4")
    # Stored: done.
    acks.item_yielded("1", PageItem(url="http://a.test/1", site="a.test", state="C"))
    acks.item_settled("1", PageItem(url="http://a.test/1", site="a.test"), None)
    assert stats.get_value("frontier/acked/C") is None  # its callback is not over yet
    acks.output_done("1")
    # Not stored: an error, with the reason.
    acks.item_yielded("2", PageItem(url="http://a.test/2", site="a.test", state="C"))
    acks.output_done("2")
    acks.item_settled("2", PageItem(url="http://a.test/2", site="a.test"), ValueError("disk full"), failed=True)
    # Spilled (the store away): given back, not acknowledged.
    acks.item_yielded("3", PageItem(url="http://a.test/3", site="a.test", state="C"))
    acks.output_done("3")
    acks.item_settled("3", PageItem(url="http://a.test/3", site="a.test"), GiveBack())
    assert (stats.get_value("frontier/acked/C"), stats.get_value("frontier/acked/E")) == (1, 1)
    assert [(lease, state) for lease, state, _ in book.acks] == [("1", "C"), ("2", "E")]
    assert book.acks[1][2] == "item not stored: disk full"
    assert book.releases == ["3"]
    # A page typed again that was not stored: counted apart, the lease settles as it was.
    retyped = PageItem(url="http://a.test/old", site="a.test")
    retyped.typed_again = True
    acks.item_yielded("4", retyped)
    acks.output_done("4")
    acks.item_settled("4", retyped, ValueError("x"), failed=True)
    assert stats.get_value("classifier/retype/not_stored") == 1
    assert stats.get_value("frontier/acked/C") == 2 and book.pages == 2


def test_overdue_leases_are_acknowledged_with_a_warning(caplog):
    stats = get_crawler(Spider).stats
    clock = Clock()
    book = LeaseBook(clock)
    acks = Acks(book, stats)
    held(book, "9")
    acks.item_yielded("9", PageItem(url="http://a.test/9", site="a.test", state="C"))
    acks.output_done("9")  # its item never settles
    acks.settle_overdue(60.0, None)
    assert book.acks == []
    clock.now += 61.0
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.acks"):
        acks.settle_overdue(60.0, None)
    assert [(lease, state) for lease, state, _ in book.acks] == [("9", "C")]
    assert stats.get_value("frontier/acked/C") == 1
    assert [r.getMessage() for r in caplog.records] == ["Acknowledging lease 9: its items never settled"]


def test_a_request_becomes_the_entry_of_its_site_with_its_priorities():
    request = Request("http://www.example.com/p", priority=1,
                      meta={"topic_priority": 700, "imp": 5, "imp_cash": 3})
    assert link_entry(request, "E", ("b1", "m1"), "site") == LinkEntry("b1", "m1", "example.com", "E", True, 700,
                                                                       "i5:3")
    # Out of range or of another type: not carried.
    plain = Request("http://www.example.com/q", meta={"topic_priority": 1001, "imp": "5"})
    assert link_entry(plain, "E", ("", ""), "host") == LinkEntry("", "", "www.example.com", "E", False, 0, "")


class Declared(Spider):
    """A spider that declares what the frontier needs of it (crawler/frontier/spiderface.py)."""

    name = "s"
    frontier_callbacks = frozenset({"parse"})
    frontier_errbacks: frozenset[str] = frozenset()
    frontier_head_callbacks: frozenset[str] = frozenset()
    frontier_order = None
    seed_urls: list[str] = []
    revisits = False

    def parse(self, response):
        pass


def test_leases_become_tracked_requests_and_bad_entries_are_refused():
    crawler = get_crawler(Declared)
    spider = Declared()
    book = LeaseBook()
    entry = request_to_json(Request("http://a.test/x"), spider)
    leases = [Lease("L1", "a.test", entry, gap=2.0, rank=0), Lease("L2", "a.test", "{not json")]
    requests = lease_requests(leases, spider=spider, book=book, stats=crawler.stats, scheduler=None,
                              importance=True)
    assert [r.url for r in requests] == ["http://a.test/x"]
    meta = requests[0].meta
    assert (meta[LEASE_META], meta[GAP_META], meta["dont_redirect"]) == ("L1", 2.0, True)
    assert meta["importance"] == leases[0].importance
    assert book.holds("L1") and not book.holds("L2")
    assert [(lease, state) for lease, state, _ in book.acks] == [("L2", "E")]
    assert crawler.stats.get_value("frontier/refused_entry") == 1


def test_the_node_record_says_the_rate_over_the_last_minute():
    stats = get_crawler(Spider).stats
    stats.set_value("response_received_count", 7)
    stats.set_value("topic/on_topic", 2)
    clock = Clock()
    book = LeaseBook()
    record = NodeRecord(stats, book, lease_timeout=30.0, crawl_dir="/c", clock=clock)
    first = record.record(stopping=False, spider="site", download_delay=1.5)
    assert first == {"pages": 0, "fetched": 7, "errors": 0, "links": 0, "pages_per_min": 0.0,
                     "lease_timeout": 30.0, "state": "running", "download_delay": 1.5, "crawl_dir": "/c",
                     "spider": "site", "recrawl": {}, "topic": {"on_topic": 2}, "steps": {}, "step_pages": 0}
    held(book, "1", "2")
    for lease_id in ("1", "2"):
        book.output_done(lease_id)
    clock.now += 30.0
    second = record.record(stopping=True, spider="site", download_delay=1.5)
    assert (second["pages"], second["pages_per_min"], second["state"]) == (2, 4.0, "stopping")


def test_a_run_that_fetched_nothing_of_a_finished_crawl_says_how_to_crawl_again(caplog):
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.joining"):
        say_already_finished("c1", {}, None)  # a new crawl: nothing to say
        say_already_finished("c1", {"done": 3, "errors": 1}, None)
    assert len(caplog.records) == 1
    assert caplog.records[0].getMessage().startswith(
        "Crawl c1 was already finished: it holds 3 pages done and 1 errors, and nothing is pending")
