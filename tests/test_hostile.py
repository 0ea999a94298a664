"""Hostile frontier entries: whoever writes into the crawl's Redis may
stall nothing, take over nothing and fetch nothing the crawler would not.

Entries are written straight into a site queue, ahead of a good entry; a
worker joins the crawl and must settle each bad entry once, as an error with
the reason, then fetch the good one."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import redis

from crawler.frontier import Frontier
from tests.support.crawl import run_crawl, stop_embedded_redis

GOOD = "/docs/guide/intro-to-the-crawler.html"


def bad_entries(server) -> list[tuple[bytes, str]]:
    """(raw entry, words of the reason it is refused with)."""
    u = server.url("/docs/guide/setup-and-install.html")
    deep = ("[" * 30_000 + "]" * 30_000).encode()  # under the size cap, over the nesting limit
    return [
        (b'{"u": "' + u.encode() + b'\xff\xfe"}', "not UTF-8"),
        (json.dumps({"u": "not a url"}).encode(), "not an absolute http(s) URL"),
        (json.dumps({"u": u, "m": [1]}).encode(), "'m' must be an object"),
        (json.dumps({"u": u, "h": 5}).encode(), "'h' must be an object"),
        (json.dumps({"u": u, "b": "!!not base64"}).encode(), "body"),
        (deep, "bad JSON"),
        (json.dumps({"u": u, "c": "_set_crawler"}).encode(), "not one of spider 'site'"),
        (json.dumps({"u": u, "c": "start"}).encode(), "not one of spider 'site'"),
        (json.dumps({"u": "file:///etc/passwd"}).encode(), "not an absolute http(s) URL"),
        (json.dumps({"u": u, "m": {"download_maxsize": 0}}).encode(), "meta key 'download_maxsize'"),
        (json.dumps({"u": u, "m": {"proxy": "http://127.0.0.1:1"}}).encode(), "meta key 'proxy'"),
        (json.dumps({"u": u, "m": {"dont_obey_robotstxt": True}}).encode(), "meta key 'dont_obey_robotstxt'"),
        (json.dumps({"u": u, "x": "DELETE"}).encode(), "method 'DELETE'"),
        (json.dumps({"u": u, "h": {"Cookie": ["a=1"]}}).encode(), "header 'Cookie'"),
        (json.dumps({"u": u, "m": {"depth": "deep"}}).encode(), "bad value for meta key 'depth'"),
        (json.dumps({"u": u, "m": {"revisit": 1 << 40}}).encode(), "bad value for meta key 'revisit'"),
        (b'"just a string"', "not a request object"),
        (json.dumps({"u": u, "e": "parse"}).encode(), "not one of spider 'site''s frontier_errbacks"),
        (json.dumps({"u": u.replace("/docs/", "/docs/./")}).encode(), "not in normal form"),
        (json.dumps({"u": "http://1.2.3.4.5/"}).encode(), "bad host"),
        (b'{"u": "' + u.encode() + b"?" + b"a" * 70_000 + b'"}', "at most 65536"),
    ]


def test_bad_entries_are_settled_once_and_the_queue_moves_on(server, tmp_path, frontier_settings, redis_url):
    name = frontier_settings["CRAWL_NAME"]
    site = "127.0.0.1"
    bad = bad_entries(server)
    client = redis.Redis.from_url(redis_url)
    frontier = Frontier(client, name, node="writer")
    shard = frontier.keys.site(site)
    good = json.dumps({"u": server.url(GOOD)}).encode()
    client.rpush(shard.queue(site), *[e for e, _ in bad], good)
    client.zadd(shard.ready, {site: 0})
    client.hset(shard.stats, "queued", len(bad) + 1)

    result = run_crawl(server, tmp_path, [], {**frontier_settings, "LOG_LEVEL": "INFO"}, timeout=60)

    assert result.returncode == 0, result.log[-3000:]
    # The good entry was fetched (after robots.txt), nothing of the bad ones.
    assert result.fetched == ["/robots.txt", GOOD]
    stats = frontier.views.stats()
    assert (stats["errors"], stats["done"], stats["queued"], stats["leased"]) == (len(bad), 1, 0, 0)
    # Entries are kept as written (cut at 2 KiB): not necessarily UTF-8.
    errors = [json.loads(e.decode("utf-8", "replace")) for e in client.lrange(shard.errors, 0, -1)]
    assert len(errors) == len(bad)
    reasons = sorted(e["reason"] for e in errors)
    for _, words in bad:
        assert sum(words in r for r in reasons) >= 1, (words, reasons)
    assert all(r.startswith("refused frontier entry: ") for r in reasons)
    assert result.log.count("Refused a frontier entry") == len(bad)
    assert f"'frontier/refused_entry': {len(bad)}" in result.log
    client.close()


@pytest.mark.parametrize("entry", [
    {"u": "http://a/", "m": {"redirect_urls": ["http://a/1"] * 65}},
    {"u": "http://a/", "p": 10**12},
    {"u": "http://a/", "q": 1},
    {"u": "http://a/\n"},
    {"u": "http://a/", "h": {"Referer": ["x\r\nSet-Cookie: a"]}},
    {"u": "http://a/", "k": {"x": 1}},
    {"u": "http://a/", "x": "HEAD"},  # the method follows from the callback: parse is a GET's
])
def test_more_refused_entries(entry):
    from crawler.frontier.serialize import SerializationError, request_from_json
    from crawler.spiders.site import SiteSpider

    with pytest.raises(SerializationError):
        request_from_json(json.dumps(entry), SiteSpider())


def test_an_entry_cannot_choose_the_method():
    """The re-crawl's HEAD (RECRAWL_HEAD) is queued as its callback
    ``parse_head``; read back, the method follows from that callback, and an
    entry naming another (a HEAD for ``parse``, whose page would be stored
    empty; a GET for ``parse_head``) is refused."""
    from scrapy import Request

    from crawler.frontier.serialize import SerializationError, request_from_json, request_to_json
    from crawler.spiders.recrawl import RecrawlSpider

    spider = RecrawlSpider()
    head = Request("http://a/", method="HEAD", callback=spider.parse_head, errback=spider.head_failed,
                   meta={"revisit": 5, "head_length": 120, "head_since": 4})
    back = request_from_json(request_to_json(head, spider), spider)
    assert (back.method, back.callback, back.errback, back.meta) == (
        "HEAD", spider.parse_head, spider.head_failed, {"revisit": 5, "head_length": 120, "head_since": 4})
    get = request_from_json(json.dumps({"u": "http://a/"}), spider)
    assert (get.method, get.callback) == ("GET", None)  # None: the spider's parse
    for entry in ({"u": "http://a/", "c": "parse_head"}, {"u": "http://a/", "x": "HEAD"},
                  {"u": "http://a/", "c": "parse_head", "x": "GET"}):
        with pytest.raises(SerializationError, match="does not go with callback"):
            request_from_json(json.dumps(entry), spider)
    with pytest.raises(SerializationError, match="does not go with callback"):
        request_to_json(Request("http://a/", method="HEAD", callback=spider.parse), spider)


# -- a hostile site ----------------------------------------------------------------
from tests.support.hostile_server import HUB_ARTICLES  # noqa: E402

@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    from tests.support.servers import start_server

    srv = start_server(tmp_path_factory.mktemp("hostile"), hosts="127.0.0.1,127.0.0.2,127.0.0.3",
                       script="hostile_server.py")
    yield srv
    srv.stop()


def pages_of(result) -> dict[str, dict]:
    from crawler.store import SQLiteStore

    with SQLiteStore(result.store_path) as store:
        return {p["url"]: p for p in store.iter_pages()}


@pytest.fixture(scope="module")
def hostile_crawl(hostile, tmp_path_factory):
    crawl_dir = tmp_path_factory.mktemp("crawl")
    result = run_crawl(hostile, crawl_dir, [f"seeds={hostile.url('/')}"],
                       {"DOWNLOAD_MAXSIZE": 1024 * 1024, "CONCURRENT_REQUESTS": 1, "LOG_LEVEL": "DEBUG"})
    stop_embedded_redis(crawl_dir)  # the safety net: a crawl stops its own on the way out
    assert result.returncode == 0, result.log[-3000:]
    return result


def test_redirects_loops_and_bombs_are_error_records(hostile_crawl, hostile):
    u = hostile.url
    pages = pages_of(hostile_crawl)
    chain = [f"/chain/{n}" for n in range(11)]
    # Exactly these, once each: nothing off-site, no hop past the limit.
    assert sorted(hostile_crawl.fetched) == sorted([
        "/robots.txt", "/", "/loop/a", "/loop/b", *chain, "/nolocation", "/off-site",
        "/meta-off-site.html", "/metadata", "/private-net", "/bomb.html", "/short/", "/short/index.html",
        "/short/a.html", "/hub/", *HUB_ARTICLES, "/formfeed.html", "/ff-child.html", "/badlinks.html",
        "/bl-child.html", "/latin1.html", "/gbk.html", *[f"/refresh/{n}.html" for n in range(11)],
        "/reload.html"])
    assert set(hostile_crawl.hosts) == {"127.0.0.1"}
    summary = {url.replace(u(""), ""): (p["state"], p["status"], p["error"]) for url, p in pages.items()}
    assert summary["/loop/a"] == ("C", 302, None)
    assert summary["/loop/b"] == ("E", 301, f"redirect loop: {u('/loop/a')} -> {u('/loop/b')} -> {u('/loop/a')}")
    assert all(summary[p] == ("C", 302, None) for p in chain[:-1])
    assert summary["/chain/10"] == ("E", 302, "too many redirects: 11 hops (REDIRECT_MAX_TIMES = 10)")
    assert summary["/nolocation"] == ("E", 302, "HTTP 302 redirect without a valid Location (None)")
    assert summary["/off-site"] == ("C", 302, None)
    state, status, error = summary["/bomb.html"]
    assert (state, status) == ("E", None) and "exceeded DOWNLOAD_MAXSIZE (1048576 B) during decompression" in error
    # Off-scope targets are edges, never fetched.
    with __import__("crawler.store", fromlist=["SQLiteStore"]).SQLiteStore(hostile_crawl.store_path) as store:
        assert store.outlinks(u("/off-site")) == [
            {"url": u("/landing.html", host="127.0.0.2"), "anchor": "[redirect 302]"}]
        assert {"url": u("/refreshed.html", host="127.0.0.2"), "anchor": "[meta refresh]"} in store.outlinks(
            u("/meta-off-site.html"))
        assert store.outlinks(u("/metadata")) == [
            {"url": "http://169.254.169.254/latest/meta-data/", "anchor": "[redirect 302]"}]
    assert "'redirect/loop': 1" in hostile_crawl.log and "'redirect/limit': 2" in hostile_crawl.log
    assert "'redirect/off_scope': 4" in hostile_crawl.log
    # A meta refresh is a hop like a 3xx: the chain stops at the same limit,
    # but a page with content stays a page; one that only reloads is no hop.
    refreshes = [summary[f"/refresh/{n}.html"] for n in range(11)]
    assert refreshes == [("C", 200, None)] * 11
    assert pages[u("/refresh/5.html")]["depth"] == pages[u("/refresh/0.html")]["depth"] == 1
    assert summary["/reload.html"] == ("C", 200, None)


def test_exact_copies_of_short_pages_are_found(hostile_crawl, hostile):
    pages = pages_of(hostile_crawl)
    first, copy = pages[hostile.url("/short/")], pages[hostile.url("/short/index.html")]
    assert first["content_hash"] == copy["content_hash"] is not None
    assert (first["dup_of"], copy["dup_of"]) == (None, hostile.url("/short/"))
    # Fingerprinted for the re-crawl's change detection, but too short to
    # decide near duplicates by: the copy was found by the exact check.
    assert first["simhash"] is not None and first["simhash"] == copy["simhash"]


def test_scope_any_still_refuses_private_and_metadata_addresses(hostile, tmp_path):
    result = run_crawl(hostile, tmp_path, [f"seeds={hostile.url('/')}", "scope=any"],
                       {"DOWNLOAD_MAXSIZE": 1024 * 1024, "TRAP_MAX_SHAPE_RUN": 0})
    stop_embedded_redis(tmp_path)
    assert result.returncode == 0, result.log[-3000:]
    pages = pages_of(result)
    # The other site on loopback (allowed by the tests' NETWORK_ALLOWLIST) is crawled ...
    assert {"/landing.html", "/refreshed.html"} <= {p for p, h in zip(result.fetched, result.hosts)
                                                    if h == "127.0.0.2"}
    # ... the metadata service and the private network are error records.
    meta = pages["http://169.254.169.254/latest/meta-data/"]
    private = pages["http://10.0.0.1/admin"]
    assert meta["state"] == private["state"] == "E"
    assert "169.254.169.254 (cloud metadata" in meta["error"] and "10.0.0.1 (private" in private["error"]


def test_a_copy_published_first_elsewhere_does_not_stop_the_original(hostile, tmp_path, frontier_settings):
    copier = run_crawl(hostile, tmp_path, [f"seeds={hostile.url('/', host='127.0.0.3')}"], frontier_settings)
    assert copier.returncode == 0, copier.log[-3000:]
    original = run_crawl(hostile, tmp_path, [f"seeds={hostile.url('/hub/')}"], frontier_settings)
    assert original.returncode == 0, original.log[-3000:]
    # The hub is recorded as a copy of what the copier published first ...
    hub = pages_of(original)[hostile.url("/hub/")]
    assert hub["dup_of"] == hostile.url("/", host="127.0.0.3")
    # ... and its own links are still followed (the copier's, fetched first, were 404s).
    assert set(copier.hosts) == {"127.0.0.3"}
    assert Counter(p for p, h in zip(original.fetched, original.hosts)
                   if h == "127.0.0.1" and p.startswith("/hub/")) == Counter(["/hub/", *HUB_ARTICLES])
    stored = pages_of(original)
    assert [stored[hostile.url(p)]["state"] for p in HUB_ARTICLES] == ["C"] * len(HUB_ARTICLES)
    assert "'simhash/cross_site_copy': 1" in original.log


def test_control_characters_and_bad_hrefs_lose_nothing(hostile_crawl, hostile):
    u = hostile.url
    pages = pages_of(hostile_crawl)
    ff = pages[u("/formfeed.html")]
    assert (ff["state"], ff["title"], ff["page_type"]) == ("C", "Form feed", "index")
    assert "page 1 page 2" in ff["text"]
    assert pages[u("/ff-child.html")]["state"] == "C"  # its links were followed
    bad = pages[u("/badlinks.html")]
    assert bad["state"] == "C"
    from crawler.store import SQLiteStore

    with SQLiteStore(hostile_crawl.store_path) as store:
        # The malformed <base href> is ignored, as browsers do; bad hrefs are not links.
        assert store.outlinks(u("/badlinks.html")) == [{"url": u("/bl-child.html"), "anchor": "good"}]
        assert store.outlinks(u("/formfeed.html")) == [{"url": u("/ff-child.html"), "anchor": "Child"}]


def test_undeclared_encodings_read_as_browsers_read_them(hostile_crawl, hostile):
    pages = pages_of(hostile_crawl)
    latin = pages[hostile.url("/latin1.html")]
    assert (latin["encoding"], latin["title"]) == ("windows-1252", "Crème brûlée")
    assert "Voilà où l'été a commencé" in latin["text"]
    gbk = pages[hostile.url("/gbk.html")]
    assert (gbk["encoding"], gbk["title"]) == ("gbk", "网络爬虫")
