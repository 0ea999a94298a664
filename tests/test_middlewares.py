"""Politeness and safety middlewares: robots.txt that fails or stalls, the
trap guard, hostile responses."""

from __future__ import annotations

from collections import Counter

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from crawler.middlewares import TRAP_PARENT, RobotsTxtGuardMiddleware, TrapGuardMiddleware
from crawler.store import SQLiteStore
from tests.support.crawl import run_crawl


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


def test_trap_guard_judges_a_link_of_another_page_against_that_page():
    """A site's first page typed again as an index page later has its links
    followed from another page's callback (a first page typed again, crawler/pagetypes/typer.py): each is
    judged against its own page (``TRAP_PARENT``), not the response."""
    crawler, mw = _trap_guard()
    crawler.stats.open_spider()
    response = HtmlResponse("http://h/cal?m=5", body=b"", request=Request("http://h/cal?m=5", meta={"shape_run": 2}))
    out = list(mw.process_spider_output(response, [
        # Of a first page two links deep in a calendar: dropped as the response's would be.
        Request("http://h/cal?m=8", meta={TRAP_PARENT: ("http://h/cal?m=7", {"shape_run": 2})}),
        # Of a first page of another shape: kept, its chain starts there.
        Request("http://h/cal?m=9", meta={TRAP_PARENT: ("http://h/start.html", {})}),
        # The response's own link: judged against the response, dropped.
        Request("http://h/cal?m=6"),
    ]))
    assert [(r.url, r.meta.get("shape_run"), TRAP_PARENT in r.meta) for r in out] == [("http://h/cal?m=9", None, False)]
    assert crawler.stats.get_value("trap/dropped/shape_run") == 2


def test_trap_guard_settings_are_checked_at_start():
    """A bad value stops the start (crawler.config), never switches the guard off."""
    from scrapy.settings import Settings

    from crawler import settings as defaults
    from crawler.config import ConfigError, check_settings

    settings = Settings()
    settings.setmodule(defaults)
    settings.set("TRAP_MAX_SHAPE_RUN", -1)
    with pytest.raises(ConfigError, match=r"^bad setting: TRAP_MAX_SHAPE_RUN=-1 must be at least 0$"):
        check_settings(settings)


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


def _chain(mw, start: str, next_url, steps: int = 40, meta: dict | None = None):
    """Follow one link a page through the middleware: [(url, path meta)] kept."""
    from crawler.scope.traps import META_KEYS

    chain = []
    response = HtmlResponse(start, body=b"", request=Request(start, meta=meta or {}))
    for _ in range(steps):
        out = list(mw.process_spider_output(response, [Request(next_url(response.url)), {"item": 1}]))
        if len(out) == 1:
            break
        request = out[0]
        chain.append((request.url, {k: request.meta[k] for k in META_KEYS if k in request.meta}))
        response = HtmlResponse(request.url, body=b"", request=request)
    return chain


def _numbered(url: str) -> str:
    n = url.count("/") - 2
    return url + "xyz"[(n - 1) % 3] + f"{n}/"


def _session(url: str) -> str:
    import hashlib

    return "http://h/s/" + hashlib.sha256(url.encode()).hexdigest()[:16] + "/"


def test_trap_guard_cuts_numbered_levels_and_carries_the_evidence(caplog):
    crawler, mw = _trap_guard(TRAP_MAX_SHAPE_RUN=30)
    crawler.stats.open_spider()
    with caplog.at_level("DEBUG", logger="crawler.middlewares"):
        chain = _chain(mw, "http://h/", _numbered)
    assert [url for url, _ in chain] == [
        "http://h/x1/", "http://h/x1/y2/", "http://h/x1/y2/z3/", "http://h/x1/y2/z3/x4/",
        "http://h/x1/y2/z3/x4/y5/", "http://h/x1/y2/z3/x4/y5/z6/", "http://h/x1/y2/z3/x4/y5/z6/x7/",
        "http://h/x1/y2/z3/x4/y5/z6/x7/y8/"]
    assert [meta for _, meta in chain] == [{"descent_run": n, "numbered_run": n} for n in range(1, 9)]
    assert crawler.stats.get_value("trap/dropped/numbered_run") == 1
    assert [r.getMessage() for r in caplog.records] == [
        "Dropped <GET http://h/x1/y2/z3/x4/y5/z6/x7/y8/z9/>: path trap "
        "(PathEvidence(descent_run=9, numbered_run=9, token_run=0))"]
    assert caplog.records[0].levelname == "DEBUG"


def test_trap_guard_cuts_fresh_session_tokens():
    crawler, mw = _trap_guard(TRAP_MAX_SHAPE_RUN=30)
    crawler.stats.open_spider()
    chain = _chain(mw, "http://h/", _session)
    assert len(chain) == 10
    assert chain[-1][1] == {"descent_run": 1, "numbered_run": 1, "token_run": 10}
    assert crawler.stats.get_value("trap/dropped/token_variants") == 1


@pytest.mark.parametrize(("settings", "links", "kept", "reason"), [
    ({"TRAP_MAX_NUMBERED_RUN": 3}, _numbered, 3, "numbered_run"),
    ({"TRAP_MAX_NUMBERED_RUN": 0, "TRAP_MAX_DESCENT_RUN": 5}, _numbered, 5, "descent_run"),
    ({"TRAP_MAX_TOKEN_VARIANTS": 0, "TRAP_MAX_TOKEN_RUN": 4}, _session, 4, "token_run"),
    ({"TRAP_MAX_TOKEN_VARIANTS": 3}, _session, 3, "token_variants"),
])
def test_trap_guard_path_limits_come_from_settings(settings, links, kept, reason):
    crawler, mw = _trap_guard(TRAP_MAX_SHAPE_RUN=30, **settings)
    crawler.stats.open_spider()
    assert len(_chain(mw, "http://h/", links)) == kept
    assert crawler.stats.get_value(f"trap/dropped/{reason}") == 1


def test_trap_guard_path_rules_off_and_opt_out():
    off = {"TRAP_MAX_DESCENT_RUN": 0, "TRAP_MAX_NUMBERED_RUN": 0, "TRAP_MAX_TOKEN_RUN": 0,
           "TRAP_MAX_TOKEN_VARIANTS": 0}
    crawler, mw = _trap_guard(TRAP_MAX_SHAPE_RUN=30, **off)
    assert len(_chain(mw, "http://h/", _numbered)) == 40
    assert len(_chain(mw, "http://h/", _session)) == 40
    crawler, mw = _trap_guard()
    crawler.stats.open_spider()
    deep = "http://h/x1/y2/z3/x4/y5/z6/x7/y8/"
    response = HtmlResponse(deep, body=b"", request=Request(deep, meta={"descent_run": 8, "numbered_run": 8}))
    out = list(mw.process_spider_output(response, [Request(deep + "z9/", meta={"dont_trap_guard": True}),
                                                   Request(deep + "z9/")]))
    assert [r.meta.get("dont_trap_guard") for r in out] == [True]


def test_trap_guard_replaces_stale_evidence_with_json():
    import json

    crawler, mw = _trap_guard()
    crawler.stats.open_spider()
    response = HtmlResponse("http://h/a/b/", body=b"", request=Request("http://h/a/b/", meta={"descent_run": 7}))
    request = Request("http://h/", meta={"descent_run": 3, "token_run": 2, "referer_url": "x"})
    (out,) = mw.process_spider_output(response, [request])
    assert out.meta == {"referer_url": "x"}  # went up: the runs start again
    response = HtmlResponse("http://h/a/", body=b"", request=Request("http://h/a/", meta={"descent_run": "7"}))
    (out,) = mw.process_spider_output(response, [Request("http://h/a/b/")])
    assert json.loads(json.dumps(out.meta)) == {"descent_run": 1}  # a bad value counts as 0


def test_trap_guard_async_output_applies_the_path_rules():
    import asyncio

    crawler, mw = _trap_guard(TRAP_MAX_NUMBERED_RUN=1)
    crawler.stats.open_spider()
    response = HtmlResponse("http://h/x1/", body=b"",
                            request=Request("http://h/x1/", meta={"descent_run": 1, "numbered_run": 1}))

    async def links():
        yield Request("http://h/x1/y2/")
        yield Request("http://h/x1/about.html")
        yield {"item": 1}

    async def run():
        return [r async for r in mw.process_spider_output_async(response, links())]

    out = asyncio.run(run())
    assert [getattr(r, "url", r) for r in out] == ["http://h/x1/about.html", {"item": 1}]
    assert crawler.stats.get_value("trap/dropped/numbered_run") == 1


def test_trap_guard_says_when_every_rule_is_off(caplog):
    off = {"TRAP_MAX_SHAPE_RUN": 0, "TRAP_MAX_REPEATED_SEGMENT": 0, "TRAP_MAX_DESCENT_RUN": 0,
           "TRAP_MAX_NUMBERED_RUN": 0, "TRAP_MAX_TOKEN_RUN": 0, "TRAP_MAX_TOKEN_VARIANTS": 0}
    with caplog.at_level("WARNING", logger="crawler.middlewares"):
        _trap_guard(**off)
    assert [r.getMessage() for r in caplog.records] == ["Spider-trap guard off: every TRAP_* limit is 0"]
    caplog.clear()
    with caplog.at_level("WARNING", logger="crawler.middlewares"):
        _trap_guard(**{**off, "TRAP_MAX_TOKEN_RUN": 1})
    assert caplog.records == []


def test_trap_guard_rejects_bad_path_settings():
    with pytest.raises(ValueError, match=r"^TRAP_HOSTS_TRACKED \(0\) must be 1 or more\.$"):
        _trap_guard(TRAP_HOSTS_TRACKED=0)


# --- Retry-After (RFC 9110 section 10.2.3) ----------------------------------------------

NOW = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
MAX = 600.0


@pytest.mark.parametrize(("value", "seconds"), [
    (None, 0.0), (b"", 0.0),
    # delay-seconds = 1*DIGIT
    (b"120", 120.0), (b"0", 0.0), (b"007", 7.0), (b"000", 0.0),
    (b"600", 600.0), (b"601", MAX), (b"9" * 15, MAX), (b"9" * 400, MAX), (b"0" * 398 + b"42", 42.0),
    (b" 120 ", 120.0), (b"\t120", 120.0),  # OWS around a field value
    (b"\n120", 0.0), (b"1 20", 0.0), (b"\x0b120", 0.0),
    (b"-5", 0.0), (b"+5", 0.0), (b"1.5", 0.0), (b"1e3", 0.0), (b"0x10", 0.0), (b"120s", 0.0),
    (b"inf", 0.0), (b"nan", 0.0), (b"1_000", 0.0),
    ("²".encode(), 0.0), (b"\xb2", 0.0),  # superscript two (UTF-8, Latin-1): not a DIGIT
    ("١٢٠".encode(), 0.0), ("１２０".encode(), 0.0),  # Arabic-Indic, fullwidth digits
    # HTTP-date: IMF-fixdate, RFC 850, asctime
    (b"Wed, 21 Oct 2015 07:28:30 GMT", 30.0),
    (b"Wednesday, 21-Oct-15 07:28:30 GMT", 30.0),
    (b"Wed Oct 21 07:28:30 2015", 30.0),
    (b"Thu Oct  1 07:28:30 2015", 0.0),  # asctime, day with a space: in the past
    (b"Wed Nov  1 07:28:00 2017", MAX),
    (b"Wed, 21 Oct 2015 07:38:00 GMT", 600.0), (b"Wed, 21 Oct 2015 07:38:01 GMT", MAX),
    (b"Wed, 21 Oct 2015 07:28:60 GMT", 59.0),  # a leap second
    (b" Wed, 21 Oct 2015 07:28:30 GMT\t", 30.0),
    (b"Wed, 21 Oct 2015 07:27:00 GMT", 0.0), (b"Thu, 01 Jan 1970 00:00:00 GMT", 0.0),  # past
    (b"Sunday, 06-Nov-94 08:49:37 GMT", 0.0),  # RFC 850: 1994, not 2094
    (b"Sunday, 21-Oct-65 07:28:30 GMT", MAX),  # 2065: 50 years ahead, not more
    (b"Sunday, 21-Oct-66 07:28:30 GMT", 0.0),  # 2066 would be over 50 years ahead: 1966
    # not HTTP-dates
    (b"Wed, 21 Oct 2015 07:28:30 UTC", 0.0), (b"wed, 21 oct 2015 07:28:30 gmt", 0.0),
    (b"Wed, 21 Oct 2015 07:28:30", 0.0), (b"Wed, 21 Oct 15 07:28:30 GMT", 0.0),
    (b"Wed, 31 Feb 2015 07:28:30 GMT", 0.0), (b"Wed, 21 Oct 2015 25:28:30 GMT", 0.0),
    (b"Wed, 21 Oct 0000 07:28:30 GMT", 0.0), (b"2015-10-21T07:28:30Z", 0.0),
    (b"Wed, 21 Oct 2015 07:28:30 +0000", 0.0), (b"Wed,21 Oct 2015 07:28:30 GMT", 0.0),
    ("Wed, 21 Oct 2015 07:28:30 GMT".encode("utf-16"), 0.0),
    # garbage
    (b"nonsense", 0.0), (b"\xff\xfe\x00\x01", 0.0), (b"\xe9t\xe9", 0.0), (b"\x00", 0.0),
    (b"12\x00", 0.0), (bytes(range(256)), 0.0),
])
def test_retry_after(value, seconds):
    from crawler.middlewares import retry_after

    assert retry_after(value, maximum=MAX, now=NOW) == seconds


def test_retry_after_uses_the_clock_when_no_time_is_given():
    import time
    from email.utils import formatdate

    from crawler.middlewares import retry_after

    soon = formatdate(time.time() + 100, usegmt=True).encode()
    assert 95 <= retry_after(soon, maximum=MAX) <= 100
    assert retry_after(b"30", maximum=MAX) == 30.0


@pytest.mark.parametrize("value", [b"9" * 5000, b"Wed, 21 Oct 9999 07:28:30 GMT", b"\xc2\xb2" * 1000])
def test_retry_after_never_raises_nor_exceeds_the_maximum(value):
    from crawler.middlewares import retry_after

    assert 0.0 <= retry_after(value, maximum=MAX, now=NOW) <= MAX


def test_retry_after_never_raises_on_any_bytes():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from crawler.middlewares import retry_after

    @settings(max_examples=300, deadline=None)
    @given(st.binary(max_size=64) | st.text(max_size=40).map(lambda t: t.encode("utf-8")))
    def check(value: bytes) -> None:
        assert 0.0 <= retry_after(value, maximum=MAX, now=NOW) <= MAX

    check()


def test_backoff_is_clamped_to_frontier_backoff_max():
    """A 400-digit Retry-After backs the site off FRONTIER_BACKOFF_MAX, no more."""
    from crawler.middlewares import SiteBackoffMiddleware

    crawler = get_crawler(settings_dict={"FRONTIER_BACKOFF_MIN": 5, "FRONTIER_BACKOFF_MAX": 60})
    mw = SiteBackoffMiddleware.from_crawler(crawler)
    asked = []
    mw._backoff = lambda request, seconds, reason, latency=0.0: asked.append((seconds, reason, latency))
    for value, latency in ((b"9" * 400, 0.25), ("²".encode(), "x"), (b"30", None)):
        request = Request("http://h/", meta={} if latency is None else {"download_latency": latency})
        mw.process_response(request, HtmlResponse("http://h/", status=503, body=b"", headers={"Retry-After": value}))
    # The refused request's latency goes with it (what is no number: 0).
    assert asked == [(60.0, "503", 0.25), (0.0, "503", 0.0), (30.0, "503", 0.0)]
