"""The lease book on its own: pure bookkeeping, no Scrapy, no Redis."""

from __future__ import annotations

from crawler.frontier.queues import CommitResult, Lease, LinkEntry
from crawler.frontier.leasebook import FORBIDDEN, LeaseBook


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def book_with(*ids: str, clock: Clock | None = None) -> LeaseBook:
    book = LeaseBook(clock or Clock())
    for lease_id in ids:
        book.add(Lease(lease_id, "a", "{}"))
    return book


def test_a_lease_is_acknowledged_once_its_output_and_items_are_settled():
    book = book_with("0.1")
    book.item_yielded("0.1")
    book.item_yielded("0.1")
    book.output_done("0.1")
    assert book.acks == []  # two items still in the pipelines
    book.item_settled("0.1")
    assert book.acks == []
    book.item_settled("0.1")
    assert book.acks == [("0.1", "C", "")]
    assert not book.holds("0.1")
    book.item_settled("0.1")  # a late signal changes nothing
    assert book.acks == [("0.1", "C", "")]
    assert book.acked == {"C": 1, "T": 0, "E": 0}


def test_an_error_record_or_a_failed_item_settles_as_an_error():
    book = book_with("0.1", "0.2", "0.3")
    book.item_yielded("0.1", error="HTTP 404")
    book.item_settled("0.1")
    book.output_done("0.1")
    book.item_yielded("0.2")
    book.output_done("0.2")
    book.item_settled("0.2", error="item not stored: too large")
    book.output_done("0.3", error="spider error: ValueError: x")
    assert book.acks == [("0.1", "E", "HTTP 404"), ("0.2", "E", "item not stored: too large"),
                         ("0.3", "E", "spider error: ValueError: x")]


def test_an_item_the_store_could_not_take_gives_the_url_back():
    book = book_with("0.1")
    book.item_yielded("0.1")
    book.output_done("0.1")
    book.item_settled("0.1", unstored=True)
    assert (book.acks, book.take_releases()) == ([], ["0.1"])


def test_a_retry_moves_the_lease_to_the_retry_queue():
    book = book_with("0.1")
    assert book.retry("0.1", 4.0, '{"u":"x"}')
    assert book.requeues == [("0.1", 4.0, "a", '{"u":"x"}')]
    assert not book.retry("0.1", 4.0, "{}")  # no longer held
    book.output_done("0.1")  # the first attempt's callback: nothing to settle
    assert book.acks == []


def test_downloads_over_are_sent_once_with_the_next_commit():
    book = book_with("0.1")
    assert book.download_over("0.1")
    assert not book.download_over("9.9")
    book.enqueue(LinkEntry("1", "2", "a", "{}"))
    commit = book.take()
    assert (commit.downloaded, len(commit.links)) == (["0.1"], 1)
    assert not book.take()


def test_what_redis_did_not_take_goes_first_next_time():
    book = book_with("0.1", "0.2")
    book.output_done("0.1")
    commit = book.take()
    book.output_done("0.2")
    book.restore(commit)
    assert [a[0] for a in book.acks] == ["0.1", "0.2"]
    sent = book.take()
    book.restore(result=CommitResult(unsent_acks=sent.acks[1:]))
    assert [a[0] for a in book.acks] == ["0.2"]


def test_orphans_are_leases_unknown_twice_in_a_row():
    book = book_with("0.1")
    assert book.orphans({"0.1", "0.7"}, buffered=set()) == set()
    assert book.orphans({"0.1", "0.7", "0.8"}, buffered=set()) == {"0.7"}
    assert book.orphans({"0.8", "0.9"}, buffered={"0.9"}) == {"0.8"}


def test_overdue_leases_are_those_whose_items_never_settled():
    clock = Clock()
    book = book_with("0.1", "0.2", clock=clock)
    book.item_yielded("0.1")
    book.output_done("0.1")
    book.item_yielded("0.2")  # output not done: still being processed
    clock.now += 61
    assert book.overdue(60) == ["0.1"]
    book.settle("0.1")
    assert book.acks == [("0.1", "C", "")]


def test_busy_until_everything_is_sent():
    book = book_with("0.1")
    assert book.busy()
    book.output_done("0.1")
    assert book.busy()  # the acknowledgement is not sent yet
    book.take()
    assert not book.busy()
    book.give_back(["0.5"])
    assert book.busy() and book.take_releases() == ["0.5"]


def test_a_page_on_a_focused_crawls_topic_is_acknowledged_as_such():
    book = LeaseBook()
    for i in ("1", "2", "3"):
        book.add(Lease(i, "a", "{}"))
    book.item_yielded("1", on_topic=True)
    book.item_yielded("2")
    book.item_yielded("3", error="HTTP 500", on_topic=True)  # an error record is not a page on topic
    for i in ("1", "2", "3"):
        book.output_done(i)
        book.item_settled(i)
    assert book.acks == [("1", "T", ""), ("2", "C", ""), ("3", "E", "HTTP 500")]
    assert book.acked == {"C": 1, "T": 1, "E": 1}


def test_leases_waiting_only_for_the_store_are_not_unprocessed():
    book = LeaseBook()
    for i in ("1", "2", "3"):
        book.add(Lease(i, "a", "{}"))
    assert book.unprocessed() == 3
    book.item_yielded("1")
    book.output_done("1")  # the spider is done with it; its item waits for the store
    assert book.unprocessed() == 2 and book.holds("1")
    book.item_settled("1")
    assert book.unprocessed() == 2 and not book.holds("1")


def test_unprocessed_leases_leave_the_count_however_they_end():
    book = LeaseBook()
    for i in "12345":
        book.add(Lease(i, "a", "{}"))
    book.download_over("1")  # downloaded, not yet processed
    book.output_done("2")  # processed: settled at once (no item)
    book.retry("3", 1.0, "{}")
    book.give_back(["4"])
    assert book.unprocessed() == 2  # "1" and "5"
    assert book.done == 1


def test_a_revisit_and_an_errors_url_again_say_so_in_their_acknowledgement():
    book = LeaseBook(Clock())
    for lease_id, kind in (("0.1", "V"), ("0.2", "V"), ("0.3", "A"), ("0.4", "A"), ("0.5", "")):
        book.add(Lease(lease_id, "a", "{}"), kind)
    book.output_done("0.1")
    book.output_done("0.2", error="HTTP 404")
    book.output_done("0.3")
    book.output_done("0.4", error="timeout")  # an error again: counted once, as it was (the frontier's script)
    book.output_done("0.5")
    assert book.acks == [("0.1", "CV", ""), ("0.2", "EV", "HTTP 404"), ("0.3", "CA", ""), ("0.4", "EA", "timeout"),
                         ("0.5", "C", "")]
    assert book.acked == {"C": 3, "T": 0, "E": 2}


def test_sitemaps_are_counted_apart_from_pages():
    """A sitemap file is no page: its acknowledgement says "S" and this
    worker's page and error counts (the progress line's) leave it out, as the
    crawl's do (issue 48)."""
    book = LeaseBook(Clock())
    for lease_id, kind in (("0.1", "S"), ("0.2", "S"), ("0.3", "")):
        book.add(Lease(lease_id, "a", "{}"), kind)
    book.output_done("0.1")
    book.output_done("0.2", error="sitemap: HTTP 404 (http://a/s.xml)")
    book.output_done("0.3")
    assert book.acks == [("0.1", "CS", ""), ("0.2", "ES", "sitemap: HTTP 404 (http://a/s.xml)"), ("0.3", "C", "")]
    assert (book.acked, book.sitemaps, book.done) == ({"C": 1, "T": 0, "E": 0}, {"C": 1, "E": 1}, 1)


def test_a_url_robots_txt_forbade_settles_apart_neither_page_nor_error():
    book = book_with("0.1", "0.2")
    book.output_done("0.1", error=FORBIDDEN)
    book.output_done("0.2")
    assert book.acks == [("0.1", "F", FORBIDDEN), ("0.2", "C", "")]
    assert (book.acked, book.done, book.pages) == ({"C": 1, "T": 0, "E": 0, "F": 1}, 1, 1)


def test_the_page_room_counts_pages_stored_and_page_requests_held_not_sitemaps_errors_or_forbidden():
    book = LeaseBook(Clock())
    assert book.page_room(0) == 1 << 30  # no CLOSESPIDER_PAGECOUNT
    for lease_id, kind in (("0.1", ""), ("0.2", ""), ("0.3", "S"), ("0.4", ""), ("0.5", ""), ("0.6", "V")):
        book.add(Lease(lease_id, "a", "{}"), kind)
    assert book.page_room(10) == 5  # five page requests held; a sitemap's is not one
    book.output_done("0.1")
    book.output_done("0.2", error="timeout")
    book.output_done("0.3")
    book.output_done("0.4", error=FORBIDDEN)
    assert book.pages == 1 and book.page_room(10) == 7  # 1 stored, 2 held
    book.output_done("0.5")
    book.output_done("0.6")  # a revisit stored is a page stored
    assert book.pages == 3 and book.page_room(3) == 0
