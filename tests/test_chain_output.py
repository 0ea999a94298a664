"""What a page's chain (crawler/chain/) yields, step by step on the real
parts (tests/support/chainpages.py): variants (a copy by its canonical),
store (the page's item, robots noindex, users' fields), follow (its links'
requests, in page order; nofollow, duplicates); and the records
crawler/chain/record.py makes for fetched, not-modified and failed pages."""

from __future__ import annotations

import textwrap
import time
from typing import Any

from scrapy.http import HtmlResponse, Request, Response
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.internet.error import DNSLookupError
from twisted.python.failure import Failure

import crawler.chain as chain_module
from crawler.chain import OTHER, PDF, record
from crawler.items import PageItem
from crawler.duplicates.check import Checked
from crawler.pagetypes.rules import INDEX, INFO
from tests.support.chainpages import (
    INDEX_BODY,
    PROSE,
    SITE,
    build,  # noqa: F401  (a fixture)
    html,
    requests,
    response,
    run,
    spider,  # noqa: F401  (a fixture)
    stat,
    step,
    url,
)
from tests.support.pdfs import line_rect, text_pdf


def fields(item: PageItem, names: str) -> tuple[Any, ...]:
    return tuple(getattr(item, name) for name in names.split())


# -- variants --------------------------------------------------------------------------------------


def test_a_canonical_to_another_page_of_the_crawl_makes_the_page_its_copy_queued_after_its_item(spider):
    body = html(PROSE, head='<link rel="canonical" href="/main.html">')
    out, page = run(spider, response(spider, "/copy.html?ref=1", body=body))
    item = page.item
    assert (item.canonical, item.dup_of, page.canonical_copy, page.language_followed) == (
        url("/main.html"), url("/main.html"), False, True)  # the site's canonicals not judged yet: links followed
    assert out == [item, page.canonical_request]
    assert requests(out[1:]) == [(url("/main.html"), {"referer_url": item.url, "depth": 2})]
    assert out[1].priority == 1
    assert stat(spider, "canonical/copy") == 1


def test_a_canonical_to_the_page_itself_makes_no_copy(spider):
    out, page = run(spider, response(spider, "/main.html", body=html(PROSE, head='<link rel="canonical" '
                                                                                 'href="/main.html">')))
    assert (page.item.canonical, page.item.dup_of, page.canonical_request) == (url("/main.html"), None, None)
    assert out == [page.item] and stat(spider, "canonical/copy") is None


# -- store -----------------------------------------------------------------------------------------


def _docstring_step() -> type:
    """The user's step the chain's docstring shows (``crawler/chain/__init__.py``), as written there."""
    doc = chain_module.__doc__ or ""
    start = doc.index("    class Price:", doc.index("A user's field"))
    space: dict[str, Any] = {}
    exec(textwrap.dedent(doc[start:doc.index("\n\n", start)]), space)
    return space["Price"]


Price = _docstring_step()


def test_store_yields_the_page_with_the_users_fields_as_its_extra(build):
    spider = build({"PAGE_STEPS": {f"{__name__}.Price": 950}})
    out, page = run(spider, response(spider, "/a.html", body=html(PROSE + '<span itemprop="price">12.50</span>')))
    assert out == [page.item] and page.item.extra == {"price": "12.50"}
    assert page.item.pending == 1  # typed alone (its site too young): kept to be typed again
    assert [type(s).__name__ for s in spider.chain.steps][-4:] == ["Variants", "Price", "Store", "Follow"]


def test_a_page_without_users_fields_has_no_extra(spider):
    out, page = run(spider, response(spider, "/a.html", body=html(PROSE)))
    assert out == [page.item] and page.item.extra is None


def test_robots_noindex_keeps_the_page_out_of_the_store_and_its_links_followed(spider):
    out, page = run(spider, response(spider, "/a.html", body=html(INDEX_BODY, head='<meta name="robots" '
                                                                                 'content="noindex">')))
    assert [u for u, _ in requests(out)] == [url(f"/p{i}.html") for i in range(30)]  # requests alone: no item
    assert (page.stored, stat(spider, "robots/noindex")) == (False, 1)


def test_a_pdf_noindex_is_counted_another_documents_is_not(spider):
    pdf = {"Content-Type": "application/pdf", "X-Robots-Tag": "noindex"}
    _, page = run(spider, response(spider, "/d.pdf", body=b"%PDF-1.4\n", headers=pdf, cls=Response), until="Decode")
    step(spider, "Store", page)  # read would have filled its text in (crawler/reading/documents.py)
    assert page.out == [] and stat(spider, "robots/noindex") == 1
    _, page = run(spider, response(spider, "/e.pdf", body=b"%PDF-1.4\n", headers={"Content-Type": "application/pdf"},
                                   cls=Response), until="Decode")
    step(spider, "Store", page)
    assert page.out == [page.item] and page.kind == PDF
    out, page = run(spider, response(spider, "/a.png", body=b"\x89PNG", headers={"Content-Type": "image/png",
                                                                                 "X-Robots-Tag": "noindex"},
                                     cls=Response))
    assert out == [] and page.kind == OTHER and stat(spider, "robots/noindex") == 1


def test_a_pdf_is_read_stored_and_its_links_are_an_information_pages(spider):
    links = [(0, "/manual/next.html", line_rect(0))]
    body = text_pdf([["Rivers carve their valleys over thousands of years."]], title="Rivers", links=links)
    pdf = {"Content-Type": "application/pdf"}
    try:
        out, page = run(spider, response(spider, "/r.pdf", body=body, headers=pdf, cls=Response))
        item = page.item
        assert out == [item] and (item.state, item.title, item.page_type) == ("C", "Rivers", INFO)
        assert item.text == "Rivers carve their valleys over thousands of years."
        # Its link annotation, made absolute, with the words under its rectangle as anchor.
        assert item.links == [{"url": url("/manual/next.html"), "anchor": item.text}]
        assert page.checked == Checked(duplicate=False, template=None, young=False)
        out, page = run(spider, response(spider, "/s.pdf", body=body, headers={**pdf, "X-Robots-Tag": "noindex"},
                                         cls=Response))
        assert out == [] and stat(spider, "robots/noindex") == 1
        out, page = run(spider, response(spider, "/t.pdf", body=b"%PDF-1.4\nnot a PDF", headers=pdf, cls=Response))
        assert out == [page.item] and page.stopped and page.checked is None
        assert page.item.state == "E" and page.item.error.startswith("pdf: ")
        assert (stat(spider, "pdf/documents"), stat(spider, "frontier/links_parsed")) == (2, 0)
    finally:
        spider.parts.documents._closed(spider)  # its children, as at the spider's close


# -- follow ----------------------------------------------------------------------------------------


def test_an_index_pages_links_are_requested_in_page_order_after_its_item(spider):
    out, page = run(spider, response(spider, "/a.html", body=html(INDEX_BODY)))
    assert page.item.page_type == INDEX and out[0] is page.item
    assert requests(out[1:]) == [(url(f"/p{i}.html"), {"referer_url": url("/a.html"), "depth": 3})
                                 for i in range(30)]
    assert all(r.callback == spider.parse and r.errback == spider.errback for r in out[1:])
    assert (stat(spider, "frontier/links_new"), stat(spider, "request_depth_max")) == (30, 3)


def test_an_information_pages_links_wait_for_its_second_look(spider):
    """Under ``follow=index`` and its site too young for a template: kept, its
    links with it, to follow should it turn out an index page (store)."""
    out, page = run(spider, response(spider, "/a.html", body=html(PROSE + '<p>See <a href="/more.html">more</a>.</p>')))
    assert page.item.page_type == INFO and out == [page.item]
    [kept] = spider.parts.typer.first_pages.peek(SITE)
    assert (kept.url, kept.links, kept.item, kept.depth) == (url("/a.html"), [url("/more.html")], page.item, 2)
    assert stat(spider, "frontier/links_new") == 0  # only its alternates and navigation links (none) were judged


def test_robots_nofollow_follows_nothing(spider):
    out, page = run(spider, response(spider, "/a.html", body=html(INDEX_BODY, head='<meta name="robots" '
                                                                                 'content="nofollow">')))
    assert out == [page.item] and len(page.item.links) == 30
    assert (stat(spider, "robots/nofollow"), stat(spider, "frontier/links_new")) == (1, None)


def test_a_duplicate_gives_its_links_up_even_to_a_worker_that_never_saw_them(build):
    first, second = build(), build()
    out, _ = run(first, response(first, "/a.html", body=html(INDEX_BODY)))
    assert len(out) == 31
    out, page = run(second, response(second, "/b.html", body=html(INDEX_BODY)))
    assert out == [page.item] and page.duplicate and page.item.dup_of == url("/a.html")
    # Only its hreflang alternates were judged (none): not one of its links.
    assert (stat(second, "frontier/links_parsed"), stat(second, "frontier/links_new")) == (0, 0)


# -- record.py -------------------------------------------------------------------------------------


def test_a_fetched_page_record_takes_the_requests_meta_and_the_responses_headers(spider):
    meta = {"depth": 3, "referer_url": url("/"), "revisit": 1_700_000_000, "dup_order": "0123456789abcd",
            "importance": 0.25}
    request = Request("http://Site.TEST:80/a.html#part", meta=meta)
    resp = HtmlResponse(request.url, body=b"<p>x</p>", request=request, headers={
        "Content-Type": "Text/HTML; charset=utf-8", "ETag": '"e1"', "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT",
        "Content-Length": "1234"})
    before = time.time()
    item = record.fetched(spider.crawler, resp)
    assert before <= item.fetched_at <= time.time()
    assert fields(item, "url site depth state status referer revisit dup_order etag last_modified content_length "
                        "importance content_type warc error") == (
        url("/a.html"), SITE, 3, "C", 200, url("/"), 1_700_000_000, "0123456789abcd", '"e1"',
        "Mon, 01 Jan 2024 00:00:00 GMT", 1234, 0.25, "text/html", None, None)


def test_meta_that_is_no_evidence_is_not_taken(spider):
    resp = response(spider, "/a.html", meta={"revisit": True, "dup_order": "0123456789ABCD"}, headers={})
    item = record.fetched(spider.crawler, resp)
    assert fields(item, "revisit dup_order etag content_length content_type") == (None, None, None, None, None)


def test_a_head_that_found_the_page_unchanged_carries_no_validators(spider):
    resp = response(spider, "/a.html", meta={"revisit": 1_700_000_000}, headers={"ETag": '"head"'})
    resp.request = resp.request.replace(method="HEAD")
    item = record.not_modified(spider.crawler, resp, "the WARC record")
    assert fields(item, "url state status etag last_modified revisit warc depth referer") == (
        url("/a.html"), "E", 304, None, None, 1_700_000_000, "the WARC record", 2, url("/"))


def test_a_failed_request_is_an_error_record_with_its_reason(spider):
    resp = response(spider, "/gone.html", status=503, headers={"ETag": '"x"'})
    failure = Failure(HttpError(resp, "Ignoring non-200 response"))
    failure.request = resp.request  # as Scrapy hands it to the errback
    assert fields(record.failed(spider.crawler, failure), "url state status error etag depth warc") == (
        url("/gone.html"), "E", 503, "HTTP 503", '"x"', 2, None)
    failure = Failure(DNSLookupError("no.such.host"))
    failure.request = Request(url("/x.html"), meta={"depth": 4})
    assert fields(record.failed(spider.crawler, failure), "url state status error etag depth referer") == (
        url("/x.html"), "E", None, "DNS lookup failed", None, 4, None)
