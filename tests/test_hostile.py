"""Hostile frontier entries: whoever writes into the crawl's Redis may
stall nothing, take over nothing and fetch nothing the crawler would not.

Entries are written straight into a site queue, ahead of a good entry; a
worker joins the crawl and must settle each bad entry once, as an error with
the reason, then fetch the good one."""

from __future__ import annotations

import json

import pytest
import redis

from tests.conftest import run_crawl

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
        (b'"just a string"', "not a request object"),
        (b'{"u": "' + u.encode() + b"?" + b"a" * 70_000 + b'"}', "at most 65536"),
    ]


def test_bad_entries_are_settled_once_and_the_queue_moves_on(server, tmp_path, frontier_settings, redis_url):
    name = frontier_settings["CRAWL_NAME"]
    prefix = "{" + name + "}:"
    site = "127.0.0.1"
    bad = bad_entries(server)
    client = redis.Redis.from_url(redis_url)
    good = json.dumps({"u": server.url(GOOD)}).encode()
    client.rpush(prefix + "q:" + site, *[e for e, _ in bad], good)
    client.zadd(prefix + "ready", {site: 0})
    client.hset(prefix + "stats", "queued", len(bad) + 1)

    result = run_crawl(server, tmp_path, [], {**frontier_settings, "LOG_LEVEL": "INFO"}, timeout=60)

    assert result.returncode == 0, result.log[-3000:]
    # The good entry was fetched (after robots.txt), nothing of the bad ones.
    assert result.fetched == ["/robots.txt", GOOD]
    stats = {k.decode(): int(v) for k, v in client.hgetall(prefix + "stats").items()}
    assert (stats["errors"], stats["done"], stats["queued"], stats["leased"]) == (len(bad), 1, 0, 0)
    # Entries are kept as written (cut at 2 KiB): not necessarily UTF-8.
    errors = [json.loads(e.decode("utf-8", "replace")) for e in client.lrange(prefix + "errors", 0, -1)]
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
])
def test_more_refused_entries(entry):
    from crawler.frontier.serialize import SerializationError, request_from_json
    from crawler.spiders.site import SiteSpider

    with pytest.raises(SerializationError):
        request_from_json(json.dumps(entry), SiteSpider())
