"""Each site's sitemap files in Redis (crawler/frontier/sitemapqueue.py):
the next is always the first waiting, adding is idempotent, a file read
is never offered again, and the files of a site are bounded."""

from __future__ import annotations

import redis

from crawler.frontier import Frontier
from crawler.frontier.sitemapqueue import SitemapFile


def test_files_wait_in_order_and_are_read_once(redis_url, crawl_name):
    client = redis.Redis.from_url(redis_url)
    try:
        q = Frontier(client, crawl_name, node="n1").sitemaps
        a, b = SitemapFile("https://a.org/a.xml", 0, True), SitemapFile("https://a.org/b.xml", 0, False)
        assert q.next("a.org") is None
        assert q.add("a.org", [a, b], max_files=0) == 0
        assert q.add("a.org", [b, a], max_files=0) == 0  # a second worker: nothing changes
        assert q.next("a.org") == a
        assert q.next("a.org") == a  # read again after a crash: the same next file
        q.done("a.org", a.url)
        child = SitemapFile("https://a.org/c.xml", 2, True)
        q.add("a.org", [child, a], max_files=0)  # an index naming a file read already
        assert [q.next("a.org"), q.next("b.org")] == [b, None]
        q.done("a.org", b.url)
        assert q.next("a.org") == child
        q.done("a.org", child.url)
        assert q.next("a.org") is None
        # At most max_files a site, counted over every add.
        more = [SitemapFile(f"https://a.org/m{i}.xml") for i in range(4)]
        assert q.add("a.org", more, max_files=5) == 2
        assert q.next("a.org") == more[0]
        q.count("a.org", read=2, listed=10, taken=7)
        stats = Frontier(client, crawl_name, node="reader").views.stats()
        assert (stats["sitemaps_read"], stats["sitemap_listed"], stats["sitemap_taken"]) == (2, 10, 7)
    finally:
        client.close()


def test_malformed_members_written_into_redis_are_set_aside(redis_url, crawl_name):
    """Members the crawler never writes (another scheme, not in normal
    form, not UTF-8, an infinite score) become no request: set
    aside as read and counted; the good file behind them is the next."""
    client = redis.Redis.from_url(redis_url)
    try:
        f = Frontier(client, crawl_name, node="n1")
        q = f.sitemaps
        key = q._key("a.org")
        client.zadd(key, {"file:///etc/passwd": 0, "HTTP://A.org/x.xml#frag": 1, b"\xff\xfe": 2,
                          "javascript:alert(1)": 2.5})
        q.add("a.org", [SitemapFile("https://a.org/good.xml", 1, True)], max_files=0)
        assert q.next("a.org") == SitemapFile("https://a.org/good.xml", 1, True)
        assert int(f.views.stats()["sitemap_refused"]) == 4
        assert client.zscore(key, "file:///etc/passwd") == -1
        q.done("a.org", "https://a.org/good.xml")
        client.zadd(key, {"https://a.org/inf.xml": float("inf")})  # no place a file the crawler adds has
        assert q.next("a.org") is None and int(f.views.stats()["sitemap_refused"]) == 5
    finally:
        client.close()
