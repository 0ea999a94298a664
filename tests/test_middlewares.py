"""Politeness and safety middlewares: robots.txt that fails or stalls, the
trap guard, hostile responses."""

from __future__ import annotations

from collections import Counter

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from crawler.middlewares import RobotsTxtGuardMiddleware, TrapGuardMiddleware
from crawler.store import SQLiteStore
from tests.conftest import run_crawl


def test_robots_txt_5xx_crawls_the_site_as_if_it_had_none(server, tmp_path, frontier_settings):
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/', host='127.0.0.3')}"],
                       {"ROBOTSTXT_MAX_RETRY_TIMES": 1, **frontier_settings})
    assert result.returncode == 0
    # robots.txt tried twice (one retry), then the site crawled.
    assert Counter(result.fetched) == Counter(["/robots.txt", "/robots.txt", "/", "/partner-article.html"])
    assert "robots.txt of http://127.0.0.3:" in result.log
    assert "answered 503; crawling the site as if it had none" in result.log
    assert "'robotstxt/unavailable': 1" in result.log


def test_robots_txt_that_stalls_does_not_hold_the_site(server, tmp_path, frontier_settings):
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/', host='127.0.0.4')}"],
                       {"ROBOTSTXT_DOWNLOAD_TIMEOUT": 0.5, "ROBOTSTXT_MAX_RETRY_TIMES": 1,
                        **frontier_settings}, timeout=25)
    assert result.returncode == 0
    assert Counter(result.fetched) == Counter(["/robots.txt", "/robots.txt", "/", "/partner-article.html"])
    assert "'robotstxt/unavailable': 1" in result.log


def test_hostile_responses_become_error_records(server, tmp_path, frontier_settings):
    seeds = ",".join(server.url(p) for p in ("/endless.html", "/slow.html?s=20", "/reset.html"))
    result = run_crawl(server, tmp_path, [f"seeds={seeds}"],
                       {"DOWNLOAD_MAXSIZE": 1_000_000, "DOWNLOAD_TIMEOUT": 1, "RETRY_TIMES": 1,
                        "CONCURRENT_REQUESTS_PER_DOMAIN": 4, "FRONTIER_BACKOFF_MIN": 0.1,
                        **frontier_settings}, timeout=60)
    assert result.returncode == 0
    assert Counter(result.fetched) == Counter(
        ["/robots.txt", "/endless.html", "/slow.html?s=20", "/slow.html?s=20", "/reset.html", "/reset.html"])
    with SQLiteStore(result.store_path) as store:
        pages = {p["url"].rsplit("/", 1)[1]: p for p in store.iter_pages()}
    assert {k: p["state"] for k, p in pages.items()} == {
        "endless.html": "E", "slow.html?s=20": "E", "reset.html": "E"}
    assert pages["slow.html?s=20"]["error"] == "timeout"
    assert pages["endless.html"]["error"] == "download cancelled (over DOWNLOAD_MAXSIZE, or crawl stopped)"
    assert pages["reset.html"]["error"] == "connection lost (DownloadFailedError)"


def _trap_guard(**settings):
    crawler = get_crawler(settings_dict={"TRAP_MAX_SHAPE_RUN": 2, "TRAP_MAX_REPEATED_SEGMENT": 3, **settings})
    return crawler, TrapGuardMiddleware.from_crawler(crawler)


def test_trap_guard_cuts_chains_of_one_shape():
    crawler, mw = _trap_guard()
    crawler.stats.open_spider()
    chain = []
    response = HtmlResponse("http://h/cal?m=0", body=b"", request=Request("http://h/cal?m=0"))
    for month in range(1, 6):
        out = list(mw.process_spider_output(response, [Request(f"http://h/cal?m={month}"), {"item": 1}]))
        if len(out) == 1:
            break
        request = out[0]
        chain.append((request.url, request.meta.get("shape_run")))
        response = HtmlResponse(request.url, body=b"", request=request)
    assert chain == [("http://h/cal?m=1", 1), ("http://h/cal?m=2", 2)]
    assert crawler.stats.get_value("trap/dropped/shape_run") == 1


def test_trap_guard_other_shapes_reset_the_chain_and_repeats_are_dropped():
    crawler, mw = _trap_guard()
    crawler.stats.open_spider()
    response = HtmlResponse("http://h/cal?m=5", body=b"", request=Request("http://h/cal?m=5", meta={"shape_run": 2}))
    out = list(mw.process_spider_output(response, [
        Request("http://h/other.html"), Request("http://h/a/b/a/b/a/b"),
        Request("http://h/cal?m=6", meta={"dont_trap_guard": True}), Request("http://h/cal?m=7"),
    ]))
    assert [r.url for r in out] == ["http://h/other.html", "http://h/cal?m=6"]
    assert "shape_run" not in out[0].meta
    assert crawler.stats.get_value("trap/dropped/repeated_segment") == 1
    assert crawler.stats.get_value("trap/dropped/shape_run") == 1


@pytest.mark.parametrize(("settings", "message"), [
    ({"TRAP_MAX_SHAPE_RUN": -1}, "TRAP_MAX_SHAPE_RUN (-1)"),
])
def test_trap_guard_rejects_bad_settings(settings, message):
    from scrapy.exceptions import NotConfigured
    with pytest.raises(NotConfigured, match=message.replace("(", r"\(").replace(")", r"\)")):
        _trap_guard(**settings)


def test_robots_guard_bounds_only_the_robots_request():
    crawler = get_crawler(settings_dict={"ROBOTSTXT_OBEY": True, "ROBOTSTXT_DOWNLOAD_TIMEOUT": 3,
                                         "ROBOTSTXT_MAX_RETRY_TIMES": 0})
    mw = RobotsTxtGuardMiddleware.from_crawler(crawler)
    robots = Request("http://h/robots.txt", meta={"dont_obey_robotstxt": True})
    page = Request("http://h/page")
    mw.process_request(robots)
    mw.process_request(page)
    assert robots.meta["download_timeout"] == 3 and robots.meta["max_retry_times"] == 0
    assert "download_timeout" not in page.meta
    crawler.stats.open_spider()
    resp = mw.process_response(robots, HtmlResponse("http://h/robots.txt", status=404, body=b"Disallow: /"))
    assert resp.body == b""
    assert crawler.stats.get_value("robotstxt/unavailable") is None  # 4xx means "no robots.txt"


@pytest.mark.parametrize(("value", "seconds"), [
    (None, 0.0), (b"", 0.0), (b"120", 120.0), (b"nonsense", 0.0),
    (b"Wed, 21 Oct 2015 07:28:30 GMT", 30.0),  # an HTTP date, 30 s after "now"
    (b"Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # in the past
])
def test_retry_after(value, seconds):
    from email.utils import parsedate_to_datetime

    from crawler.middlewares import retry_after

    now = parsedate_to_datetime("Wed, 21 Oct 2015 07:28:00 GMT").timestamp()
    assert retry_after(value, now=now) == seconds
