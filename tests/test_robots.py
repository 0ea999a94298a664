"""robots.txt: groups matched on the product token (RFC 9309), and the
cluster's cache in Redis: compact, expiring, and never trusted to be well
formed. Unit tests build the real middleware with ``get_crawler``; one crawl
runs against hosts 127.0.0.1-10 of a server started here, each with its own
robots.txt, some with cache entries written straight into Redis first."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
from collections import Counter
from urllib.parse import urlsplit

import pytest
import redis
from aiohttp import web
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.test import get_crawler

import crawler.settings as project
from crawler.frontier import Frontier
from crawler.redis.keys import Keys
from crawler.frontier.robots import (ROBOTSTXT_MAX_BODY, ClusterRobotsTxtMiddleware, MalformedEntry,
                                     ProductTokenRobotParser, cap_body, decode_entry, encode_entry,
                                     product_token)
from crawler.scope.urls import queue_key
from tests.support.crawl import run_crawl
from tests.support.mockserver import article_page, index_page

SHARDS = project.FRONTIER_SHARDS

UA = project.USER_AGENT  # "site-crawler/0.1 (+https://example.invalid/crawler-contact)"
TTL = 3600


def middleware(**settings: object) -> ClusterRobotsTxtMiddleware:
    base = {k: getattr(project, k) for k in dir(project) if k.isupper()}
    return ClusterRobotsTxtMiddleware.from_crawler(get_crawler(settings_dict={**base, **settings}))


def allowed(mw: ClusterRobotsTxtMiddleware, body: bytes, path: str, user_agent: str = UA) -> bool:
    request = Request(f"http://h.test{path}", headers={"User-Agent": user_agent})
    try:
        mw.process_request_2(mw.parse(body), request)
    except IgnoreRequest:
        return False
    return True


def groups(named: str) -> bytes:
    """A group for ``named`` that forbids everything and asks for 30 s, and a
    ``*`` group that forbids /private/ and asks for 2 s."""
    return (f"User-agent: {named}\nDisallow: /\nCrawl-delay: 30\n\n"
            "User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n").encode()


# -- product token -------------------------------------------------------------------

@pytest.mark.parametrize(("user_agent", "token"), [
    (UA, "site-crawler"),
    ("Scrapy/2.19 (+https://scrapy.org)", "Scrapy"),
    ("  MyBot/1.0  ", "MyBot"),
    ("mybot", "mybot"),
    ("mybot (+https://example.org/bot)", "mybot"),
    ("", ""),
    ("/1.0", ""),
])
def test_product_token(user_agent, token):
    assert product_token(user_agent) == token


@pytest.mark.parametrize("named", ["site", "crawler", "example", "https", "invalid", "crawler-contact", "site-c",
                                   "crawler/0.1", "SITE"])
def test_groups_named_by_a_word_of_the_user_agent_do_not_apply(named):
    mw = middleware()
    body = groups(named)
    assert (allowed(mw, body, "/page.html"), allowed(mw, body, "/private/a.html")) == (True, False)
    assert mw.crawl_delay(mw.parse(body)) == 2.0  # the * group's


@pytest.mark.parametrize("named", ["site-crawler", "SITE-CRAWLER", "Site-Crawler"])
def test_the_group_named_by_the_product_token_applies(named):
    mw = middleware()
    body = groups(named)
    assert (allowed(mw, body, "/page.html"), allowed(mw, body, "/private/a.html")) == (False, False)
    assert mw.crawl_delay(mw.parse(body)) == 30.0
    assert mw.crawler.stats.get_value("robotstxt/forbidden") == 2


def test_product_token_group_wins_over_groups_named_by_its_prefix():
    mw = middleware()
    body = (b"User-agent: site\nDisallow: /\nCrawl-delay: 30\n\n"
            b"User-agent: site-crawler\nDisallow: /mine/\nCrawl-delay: 4\n\n"
            b"User-agent: *\nDisallow: /private/\n")
    assert [allowed(mw, body, p) for p in ("/page.html", "/mine/a.html", "/private/a.html")] == [True, False, True]
    assert mw.crawl_delay(mw.parse(body)) == 4.0


def test_the_request_user_agent_header_does_not_choose_the_group():
    mw = middleware()
    body = groups("mozilla")
    assert allowed(mw, body, "/page.html", user_agent="Mozilla/5.0 (compatible; site-crawler/0.1)")


@pytest.mark.parametrize(("body", "page", "private", "delay"), [
    (b"User-agent: other\nDisallow: /\nCrawl-delay: 9\n", True, True, None),  # no group for us, no *
    (b"", True, True, None),
    (b"Disallow: /\n", True, True, None),  # a rule without a group
    (b"User-agent: *\nDisallow: /private/\n", True, False, None),
])
def test_without_a_group_of_ours_the_star_group_or_nothing_applies(body, page, private, delay):
    mw = middleware()
    assert (allowed(mw, body, "/page.html"), allowed(mw, body, "/private/a.html")) == (page, private)
    assert mw.crawl_delay(mw.parse(body)) == delay


def test_robotstxt_user_agent_is_the_product_token_when_set():
    mw = middleware(ROBOTSTXT_USER_AGENT="example")
    body = groups("example")
    assert allowed(mw, body, "/page.html") is False
    assert mw.crawl_delay(mw.parse(body)) == 30.0
    assert allowed(middleware(ROBOTSTXT_USER_AGENT="example"), groups("site-crawler"), "/page.html")


def test_scrapys_protego_parser_is_replaced_by_the_product_token_one():
    assert type(middleware().parse(b"")) is ProductTokenRobotParser


def _checked(**overrides):
    """The start-up settings check (crawler/config.py) on the project's
    defaults with ``overrides``."""
    from scrapy.settings import Settings

    from crawler import settings as defaults
    from crawler.config import check_settings

    settings = Settings()
    settings.setmodule(defaults)
    settings.update(overrides)
    check_settings(settings)


@pytest.mark.parametrize(("settings", "shown"), [
    ({"ROBOTSTXT_USER_AGENT": "my bot"}, r"ROBOTSTXT_USER_AGENT\W{1,4}'my bot'"),
    ({"ROBOTSTXT_USER_AGENT": "mybot/1.0"}, r"ROBOTSTXT_USER_AGENT\W{1,4}'mybot/1\.0'"),
    ({"USER_AGENT": "/1.0"}, r"USER_AGENT\W{1,4}'/1\.0'"),
    ({"ROBOTSTXT_CACHE_TTL": 0}, r"ROBOTSTXT_CACHE_TTL\W{1,4}0(\.0)?\b"),
    ({"ROBOTSTXT_CACHE_TTL": -1}, r"ROBOTSTXT_CACHE_TTL\W{1,4}-1(\.0)?\b"),
])
def test_bad_settings_are_refused_naming_setting_and_value(settings, shown):
    from crawler.config import ConfigError

    with pytest.raises(ConfigError, match=shown):
        _checked(**settings)


def test_a_robotstxt_user_agent_with_a_version_is_refused_with_its_product_token_shown():
    from crawler.config import ConfigError

    with pytest.raises(ConfigError, match="^" + re.escape(
            "bad setting: ROBOTSTXT_USER_AGENT='mybot/1.0' must be a product token such as 'mybot': "
            "no version, no spaces") + "$"):
        _checked(ROBOTSTXT_USER_AGENT="mybot/1.0")


# -- the body kept, and its cache entry --------------------------------------------------

def test_cap_body_keeps_short_bodies_whole():
    body = b"User-agent: *\nDisallow: /x\n"
    assert cap_body(body) is body
    assert cap_body(b"x" * ROBOTSTXT_MAX_BODY) == b"x" * ROBOTSTXT_MAX_BODY


@pytest.mark.parametrize(("body", "kept"), [
    (b"Disallow: /a\nDisallow: /private\n", b"Disallow: /a\n"),  # never half a rule
    (b"Disallow: /a\n" + b"b" * 30, b"Disallow: /a\n"),
    (b"x" * 40, b"x" * 20),  # one line: cut where the limit is
])
def test_cap_body_cuts_at_the_last_line_end_within_the_limit(body, kept):
    assert cap_body(body, limit=20) == kept


def test_cap_body_default_is_500_kib():
    body = b"Disallow: /a\n" * 50_000
    kept = cap_body(body)
    assert ROBOTSTXT_MAX_BODY == 512_000
    assert len(kept) == 511_992 and kept.endswith(b"\n")


@pytest.mark.parametrize("body", [b"", b"User-agent: *\nDisallow: /\n", bytes(range(256)), b"\n" * 10])
def test_entry_round_trip(body):
    assert decode_entry(encode_entry(body, 1_700_000_000.9)) == (1_700_000_000.0, body)


@pytest.mark.parametrize(("raw", "reason"), [
    (b"[1]", "no header"),
    (b'"x"', "no header"),
    (b'{"t": "x"}', "no header"),
    (json.dumps({"t": 1.0, "body": "User-agent: *"}).encode(), "no header"),  # the earlier format
    (b"\xff\xfe\x80 not UTF-8", "no header"),
    (b"", "no header"),
    (b"rtxt1 ", "bad header"),
    (b"rtxt1 12x\nbody", "bad header"),
    (b"rtxt1 -12\nbody", "bad header"),
    (b"rtxt1 1234567890123456\nbody", "bad header"),
    (b"rtxt1 " + b"1" * 20, "bad header"),
    (encode_entry(b"x" * (ROBOTSTXT_MAX_BODY + 1), 1.0), "body over 512000 bytes"),
    (b"rtxt1 1\n" + b"x" * 512_012, "over 512019 bytes"),
    ("rtxt1 1\nbody", "not bytes but str"),
    (None, "not bytes but NoneType"),
])
def test_malformed_entries_are_refused(raw, reason):
    with pytest.raises(MalformedEntry, match=f"^{re.escape(reason)}$"):
        decode_entry(raw)


@pytest.fixture
def frontier(redis_url, crawl_name):
    client = redis.Redis.from_url(redis_url)
    yield Frontier(client, crawl_name, node="n1")
    client.close()


def body_key(crawl: str, netloc: str) -> str:
    """The cache key of ``netloc``'s robots.txt: in its site's shard."""
    host = urlsplit("//" + netloc).hostname or ""
    return Keys(crawl, SHARDS).site(queue_key(host, "site")).robots("body", netloc)


TEN_MB_DISALLOW_ALL = encode_entry(b"User-agent: *\nDisallow: /\n" + b"#" * 10_000_000, time.time())
MALFORMED = {
    "json-array": b"[1]",
    "json-string": b'"x"',
    "json-wrong-types": b'{"t": "x"}',
    "not-utf8": b"\xff\xfe\x80\x81 User-agent: *\nDisallow: /\n",
    "10mb": TEN_MB_DISALLOW_ALL,
}


@pytest.mark.parametrize("raw", list(MALFORMED.values()) + [b"", b"rtxt1 x\n"], ids=[*MALFORMED, "empty", "header"])
def test_malformed_cache_entries_count_as_absent_and_are_logged_once(frontier, crawl_name, caplog, raw):
    mw = middleware(ROBOTSTXT_CACHE_TTL=TTL)
    frontier.client.set(body_key(crawl_name, "h.test:8080"), raw)
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.robots"):
        assert mw.cached_body(frontier.robots, "h.test:8080") is None
        assert mw.cached_body(frontier.robots, "h.test:8080") is None
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "Ignoring the robots.txt cache entry of h.test:8080"]
    assert mw.crawler.stats.get_value("robotstxt/cache_malformed") == 1
    body = b"User-agent: *\nDisallow: /private/\n"
    mw.cache_body(frontier.robots, "h.test:8080", body)  # what the fetch that follows does
    assert mw.cached_body(frontier.robots, "h.test:8080") == body


def test_a_key_of_another_type_counts_as_absent_and_is_replaced(frontier, crawl_name, caplog):
    mw = middleware(ROBOTSTXT_CACHE_TTL=TTL)
    frontier.client.hset(body_key(crawl_name, "h.test"), "t", "x")
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.robots"):
        assert mw.cached_body(frontier.robots, "h.test") is None
    assert "(not a string)" in caplog.text
    mw.cache_body(frontier.robots, "h.test", b"User-agent: *\n")
    assert mw.cached_body(frontier.robots, "h.test") == b"User-agent: *\n"


def test_a_stale_entry_counts_as_absent_quietly(frontier, crawl_name, caplog):
    mw = middleware(ROBOTSTXT_CACHE_TTL=60)
    frontier.client.set(body_key(crawl_name, "h.test"), encode_entry(b"Disallow: /\n", time.time() - 61))
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.robots"):
        assert mw.cached_body(frontier.robots, "h.test") is None
    assert caplog.records == [] and mw.crawler.stats.get_value("robotstxt/cache_malformed") is None


def test_the_entry_is_about_the_size_of_the_body_and_expires(frontier, crawl_name):
    mw = middleware(ROBOTSTXT_CACHE_TTL=TTL)
    # UTF-8 comments and bytes over 0x7f: JSON of latin-1 text made these 2 to 6 times larger.
    body = ("User-agent: *\nDisallow: /private/\n" + "# 网络爬虫请勿访问私人页面\n" * 200).encode() + bytes(range(128, 256))
    mw.cache_body(frontier.robots, "h.test:8080", body)
    key = body_key(crawl_name, "h.test:8080")
    assert 0 < frontier.client.strlen(key) - len(body) <= 20
    assert TTL - 5 < frontier.client.ttl(key) <= TTL
    assert mw.cached_body(frontier.robots, "h.test:8080") == body


def test_the_key_leaves_out_credentials(frontier, crawl_name):
    mw = middleware(ROBOTSTXT_CACHE_TTL=TTL)
    mw.cache_body(frontier.robots, "user:secret@h.test:8080", b"")
    assert frontier.client.exists(body_key(crawl_name, "h.test:8080"))
    assert mw.cached_body(frontier.robots, "user:secret@h.test:8080") == b""


# -- one crawl against hosts with their own robots.txt -------------------------------------

STANDARD = b"User-agent: *\nDisallow: /private/\n"
BIG = STANDARD + b"# padding\n" * 52_000 + b"Disallow: /ok.html\n"  # 520 KiB: the last rule is past the cap
ROBOTS: dict[str, bytes | int] = {
    # Groups named by words of the whole User-Agent string: none is ours.
    "127.0.0.1": (b"# \xe7\xbd\x91\xe7\xbb\x9c\xe7\x88\xac\xe8\x99\xab\n"
                  b"User-agent: site\nUser-agent: crawler\nUser-agent: example\nUser-agent: https\n"
                  b"Disallow: /\nCrawl-delay: 30\n\n" + STANDARD),
    "127.0.0.2": b"User-agent: site-crawler\nDisallow: /ok.html\nCrawl-delay: 0.5\n\nUser-agent: *\nDisallow: /\n",
    **{f"127.0.0.{i}": STANDARD for i in range(3, 9)},
    "127.0.0.9": BIG,
    "127.0.0.10": 503,
}
MALFORMED_HOSTS = {"127.0.0.3": "json-array", "127.0.0.4": "json-string", "127.0.0.5": "json-wrong-types",
                   "127.0.0.6": "not-utf8", "127.0.0.7": "10mb"}
CACHED_HOST = "127.0.0.8"  # a valid entry in Redis that differs from the server's robots.txt
PAGES = ["/", "/ok.html", "/private/x.html"]


class RobotsServer:
    """One aiohttp server on 127.0.0.1-10 (one port), in a thread: ``/`` links
    to ``/ok.html`` and ``/private/x.html`` on every host; ``/robots.txt`` is
    the host's entry in ``ROBOTS`` (a body, or a status). Logs what
    ``run_crawl`` reads from conftest's server."""

    def __init__(self) -> None:
        self.log: list[dict[str, object]] = []
        self.port = 0
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        host = (request.host or "").rsplit(":", 1)[0]
        self.log.append({"host": host, "path": request.path_qs})
        if request.path == "/robots.txt":
            robots = ROBOTS.get(host, 404)
            if isinstance(robots, int):
                return web.Response(status=robots, text="unavailable")
            return web.Response(body=robots, content_type="text/plain")
        if request.path == "/":
            return web.Response(text=index_page("Start", [("/ok.html", "Open"), ("/private/x.html", "Private")]),
                                content_type="text/html")
        if request.path in PAGES:
            return web.Response(text=article_page(request.path, "A page."), content_type="text/html")
        return web.Response(status=404, text="not found")

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        first = web.TCPSite(self._runner, "127.0.0.1", 0)
        await first.start()
        self.port = first._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        for host in list(ROBOTS)[1:]:
            await web.TCPSite(self._runner, host, self.port).start()

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def mark(self) -> int:
        return len(self.log)

    def requests(self, since: int = 0) -> list[dict[str, object]]:
        return list(self.log[since:])


@pytest.fixture(scope="module")
def robots_crawl(redis_url, tmp_path_factory):
    import uuid

    crawl = "robots_" + uuid.uuid4().hex[:8]
    client = redis.Redis.from_url(redis_url)
    server = RobotsServer()
    server.start()
    try:
        netloc = f"{{}}:{server.port}"
        for host, name in MALFORMED_HOSTS.items():
            client.set(body_key(crawl, netloc.format(host)), MALFORMED[name])
        client.set(body_key(crawl, netloc.format(CACHED_HOST)),
                   encode_entry(b"User-agent: *\nDisallow: /ok.html\n", time.time()), ex=TTL)
        seeds = ",".join(server.url("/", host) for host in ROBOTS)
        result = run_crawl(server, tmp_path_factory.mktemp("robots"), [f"seeds={seeds}"],  # type: ignore[arg-type]
                           {"REDIS_URL": redis_url, "CRAWL_NAME": crawl, "ROBOTSTXT_CACHE_TTL": TTL,
                            "FRONTIER_BACKOFF_MIN": 0.1})  # the 503 backs its site off
        assert result.returncode == 0, result.log[-3000:]
        layout = Keys(crawl, SHARDS)
        keys = {k.decode(): k for k in client.scan_iter(match=layout.patterns()[0], count=1000)}
        entries = {k: client.get(raw) for k, raw in keys.items() if ":robots:body:" in k}
        ttls = {k: client.ttl(keys[k]) for k in entries}
        delays = {k.decode(): int(v) for sk in layout.site_shards for k, v in client.hgetall(sk.delay).items()}
        yield result, server, entries, ttls, delays
    finally:
        server.stop()
        keys = list(client.scan_iter(match=Keys(crawl, SHARDS).patterns()[0], count=1000))
        if keys:
            client.delete(*keys)
        client.close()


def fetched_by_host(result) -> dict[str, Counter[str]]:
    out: dict[str, Counter[str]] = {}
    for host, path in zip(result.hosts, result.fetched):
        out.setdefault(host, Counter())[path] += 1
    return out


@pytest.mark.slow
def test_crawl_fetches_what_each_robots_txt_allows_us(robots_crawl):
    result = robots_crawl[0]
    allowed_std = Counter(["/robots.txt", "/", "/ok.html"])
    assert fetched_by_host(result) == {
        "127.0.0.1": allowed_std,  # the groups for site, crawler, example, https are not ours
        "127.0.0.2": Counter(["/robots.txt", "/", "/private/x.html"]),  # the site-crawler group is
        **{host: allowed_std for host in MALFORMED_HOSTS},  # each fetched once, again
        CACHED_HOST: Counter(["/", "/private/x.html"]),  # the cluster's cached copy, not fetched
        "127.0.0.9": allowed_std,  # the rule past 500 KiB is not read
        "127.0.0.10": Counter(["/robots.txt", "/robots.txt", *PAGES]),  # 503: one retry, then as if none
    }


def test_crawl_counts_and_logs_each_malformed_entry_once(robots_crawl):
    result, server = robots_crawl[:2]
    warnings = re.findall(r"Ignoring the robots\.txt cache entry of (\S+) \(([^)]*)\)", result.log)
    assert sorted(warnings) == [
        (f"127.0.0.3:{server.port}", "no header"), (f"127.0.0.4:{server.port}", "no header"),
        (f"127.0.0.5:{server.port}", "no header"), (f"127.0.0.6:{server.port}", "no header"),
        (f"127.0.0.7:{server.port}", "over 512019 bytes")]
    for stat, value in [("cache_malformed", 5), ("cache_hit", 1), ("crawl_delay", 1), ("truncated", 1)]:
        assert f"'robotstxt/{stat}': {value}," in result.log


def test_crawl_applies_only_our_crawl_delay(robots_crawl):
    assert robots_crawl[4] == {"127.0.0.2": 500}


def test_crawl_caches_compact_capped_expiring_entries(robots_crawl):
    server, entries, ttls = robots_crawl[1:4]
    crawl = next(iter(entries)).split("}")[0][1:].split(":")[0]
    by_host = {k.rsplit(":", 2)[1]: v for k, v in entries.items()}
    assert set(by_host) == set(ROBOTS) - {"127.0.0.10"}  # a 503 is not shared
    assert all(k == body_key(crawl, f"{k.rsplit(':', 2)[1]}:{server.port}") for k in entries)
    for host, entry in by_host.items():
        body = decode_entry(entry)[1]
        assert len(entry) - len(body) <= 20
        if host == CACHED_HOST:
            assert body == b"User-agent: *\nDisallow: /ok.html\n"
        elif host == "127.0.0.9":
            assert body == cap_body(BIG) and len(body) <= ROBOTSTXT_MAX_BODY and body.endswith(b"\n")
        else:
            assert body == ROBOTS[host]
    assert all(TTL - 120 < t <= TTL for t in ttls.values()), ttls
