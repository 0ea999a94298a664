"""Pure parts of reading a response that had no tests of their own:
redirects and meta refreshes (crawler/reading/redirects.py) and what the
spiders read of a response's headers and meta (crawler/reading/responses.py)."""

from __future__ import annotations

import pytest
from scrapy.http import HtmlResponse, Response, TextResponse

from crawler.reading.redirects import hop, location_target, meta_refresh
from crawler.reading.responses import content_length, dup_order_of, header, is_html, media_type, revisit_due

URL = "http://a.test/dir/page.html"


@pytest.mark.parametrize("head, target", [
    ('<meta http-equiv="refresh" content="0; url=../next.html">', "http://a.test/next.html"),
    ('<META HTTP-EQUIV="Refresh" CONTENT="5;URL=http://b.test/x">', "http://b.test/x"),
    ('<meta http-equiv="refresh" content="101; url=/late.html">', None),  # over MAX_REFRESH_DELAY: a reload
    ('<meta http-equiv="refresh" content="30">', None),  # reloads itself
    ('<meta http-equiv="refresh" content="0; url=page.html">', None),  # itself
    ('<meta http-equiv="refresh" content="0; url=ftp://a.test/f">', None),  # not fetched
    ("<p>no refresh here</p>", None),
])
def test_meta_refresh_targets(head, target):
    assert meta_refresh(f"<html><head>{head}</head><body>x</body></html>", URL) == target


def test_a_refresh_past_the_first_8_kib_is_not_read():
    assert meta_refresh(" " * 8200 + '<meta http-equiv="refresh" content="0; url=/x">', URL) is None


@pytest.mark.parametrize("location, target", [
    ("/other", "http://a.test/other"), ("HTTP://A.TEST:80/x#f", "http://a.test/x"),
    ("", None), (None, None), ("mailto:x@a.test", None), ("http://[bad", None),
])
def test_location_targets(location, target):
    assert location_target(location, URL) == target


def test_a_hop_carries_its_chain_and_stops_at_a_loop_or_the_limit():
    first = hop(URL, "http://a.test/b", {}, 3)
    assert (first.error, first.meta) == (None, {"redirect_times": 1, "redirect_urls": [URL]})
    second = hop("http://a.test/b", "http://a.test/c", first.meta, 3)
    assert second.meta == {"redirect_times": 2, "redirect_urls": [URL, "http://a.test/b"]}
    loop = hop("http://a.test/c", URL, second.meta, 3)
    assert (loop.stat, loop.error) == ("redirect/loop",
                                       f"redirect loop: {URL} -> http://a.test/b -> http://a.test/c -> {URL}")
    assert hop(URL, URL, {}, 3).stat == "redirect/loop"
    limit = hop("http://a.test/d", "http://a.test/e", {"redirect_times": 3, "redirect_urls": []}, 3)
    assert (limit.stat, limit.error) == ("redirect/limit", "too many redirects: 4 hops (REDIRECT_MAX_TIMES = 3)")
    # What a frontier entry carries that is not a count or a chain is none.
    odd = hop(URL, "http://a.test/z", {"redirect_times": "9", "redirect_urls": [1, "http://a.test/y"]}, 3)
    assert odd.meta == {"redirect_times": 1, "redirect_urls": ["http://a.test/y", URL]}


def test_the_re_crawls_meta_is_read_only_when_well_formed():
    assert revisit_due({"revisit": 1700000000}) == 1700000000
    assert revisit_due({"revisit": True}) is None and revisit_due({"revisit": "1"}) is None
    assert revisit_due({}) is None
    assert dup_order_of({"dup_order": "0123456789abcd"}) == "0123456789abcd"
    for bad in ("0123456789ABCD", "0123456789abc", 123, None):
        assert dup_order_of({"dup_order": bad}) is None


def test_headers_as_the_spiders_read_them():
    r = Response(URL, headers={"Content-Length": "1234", "Content-Type": "Text/HTML; charset=utf-8",
                               "ETag": '"e\xe9"'.encode("latin-1")})
    assert (content_length(r), media_type(r), header(r, b"ETag"), header(r, b"Missing")) == \
        (1234, "text/html", '"e\xe9"', None)
    assert header(None, b"ETag") is None
    for bad in ("-1", "12a", "9" * 16, ""):
        assert content_length(Response(URL, headers={"Content-Length": bad})) is None
    assert media_type(Response(URL)) is None and media_type(Response(URL, headers={"Content-Type": ";x"})) is None


@pytest.mark.parametrize("ctype, html", [
    (None, True), ("text/html", True), ("application/xhtml+xml; charset=utf-8", True), ("text/plain", True),
    ("application/json", False), ("text/css", False),
])
def test_what_counts_as_html(ctype, html):
    headers = {"Content-Type": ctype} if ctype else {}
    cls = HtmlResponse if ctype is None else TextResponse
    assert is_html(cls(URL, body=b"x", headers=headers, encoding="utf-8")) is html
