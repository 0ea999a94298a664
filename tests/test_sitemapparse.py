"""Sitemap files within the protocol's limits (crawler/sitemaps/parse.py) and
the first re-crawl interval a listing gives (crawler/recrawl/change.py)."""

from __future__ import annotations

import gzip
from datetime import datetime, timezone

import pytest

from crawler.recrawl.change import Policy, sitemap_interval
from crawler.sitemaps.parse import (MAX_BYTES, MAX_URLS, Entry, SitemapError, gunzip_bounded, parse_lastmod,
                                  parse_sitemap, robots_sitemaps)

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: str) -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset {NS}>{"".join(entries)}</urlset>'.encode()


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


def test_a_urlset_gives_its_urls_with_lastmod_and_changefreq():
    body = urlset("<url><loc>https://a.org/docs/x.html</loc><lastmod>2024-05-01</lastmod>"
                  "<changefreq>Daily</changefreq></url>",
                  "<url><loc> https://a.org/docs/y.html#frag </loc><changefreq>sometimes</changefreq></url>",
                  "<url><lastmod>2024</lastmod></url>")  # no loc: not an entry
    parsed = parse_sitemap(body, "https://a.org/docs/sitemap.xml", named=False)
    assert parsed.kind == "urlset"
    assert parsed.entries == [Entry("https://a.org/docs/x.html", ts("2024-05-01T00:00:00"), "daily"),
                              Entry("https://a.org/docs/y.html", None, None)]
    assert (parsed.listed, parsed.invalid, parsed.off_location, parsed.problems) == (2, 0, 0, [])


def test_the_location_rule_holds_unless_robots_txt_names_the_sitemap():
    body = urlset(*(f"<url><loc>{u}</loc></url>" for u in (
        "https://a.org/docs/in.html", "https://a.org/blog/out.html", "https://b.org/docs/in.html",
        "javascript:alert(1)", "https://a.org/docs/")))
    parsed = parse_sitemap(body, "https://a.org/docs/sitemap.xml", named=False)
    assert [e.url for e in parsed.entries] == ["https://a.org/docs/in.html", "https://a.org/docs/"]
    assert (parsed.listed, parsed.off_location, parsed.invalid) == (5, 2, 1)
    named = parse_sitemap(body, "https://a.org/docs/sitemap.xml", named=True)
    assert [e.url for e in named.entries] == ["https://a.org/docs/in.html", "https://a.org/blog/out.html",
                                              "https://a.org/docs/"]
    assert named.off_location == 1  # another host, even when named


def test_an_index_and_a_text_sitemap_gzipped():
    index = (f'<sitemapindex {NS}><sitemap><loc>https://a.org/s1.xml.gz</loc></sitemap>'
             "<sitemap><loc>https://a.org/s2.txt</loc><lastmod>2024-01-02T03:04:05Z</lastmod></sitemap>"
             "</sitemapindex>").encode()
    parsed = parse_sitemap(gzip.compress(index), "https://a.org/sitemap.xml", named=False)
    assert parsed.kind == "index"
    assert parsed.entries == [Entry("https://a.org/s1.xml.gz"), Entry("https://a.org/s2.txt", ts("2024-01-02T03:04:05"))]
    text = parse_sitemap(b"https://a.org/a.html\r\n\r\n  https://a.org/b.html  \nnot a url\n", "https://a.org/s2.txt",
                         named=False)
    assert text.kind == "text" and [e.url for e in text.entries] == ["https://a.org/a.html", "https://a.org/b.html"]
    assert text.invalid == 1


def test_a_gzip_bomb_costs_the_limit_not_the_memory():
    bomb = gzip.compress(b"\0" * (MAX_BYTES + 10 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 200_000
    body, more = gunzip_bounded(bomb)
    assert more and len(body) == MAX_BYTES
    with pytest.raises(SitemapError, match="neither XML nor a list of URLs"):
        parse_sitemap(bomb, "https://a.org/sitemap.xml.gz", named=False)
    # A bomb of whitespace around real XML: the first 50 MB are read, and said.
    xml = urlset("<url><loc>https://a.org/a.html</loc></url>")
    padded = gzip.compress(xml[:-len(b"</urlset>")] + b" " * (MAX_BYTES + 1024) + b"</urlset>")
    parsed = parse_sitemap(padded, "https://a.org/sitemap.xml.gz", named=False)
    assert [e.url for e in parsed.entries] == ["https://a.org/a.html"]
    assert parsed.problems == ["more than 50 MB uncompressed: the first 50 MB read"]


def test_more_than_50000_urls_the_first_50000_are_read():
    body = "".join(f"https://a.org/p{i}.html\n" for i in range(MAX_URLS + 7)).encode()
    parsed = parse_sitemap(body, "https://a.org/sitemap.txt", named=False)
    assert parsed.listed == MAX_URLS and len(parsed.entries) == MAX_URLS
    assert parsed.entries[-1].url == f"https://a.org/p{MAX_URLS - 1}.html"
    assert parsed.problems == ["more than 50,000 URLs: the first 50,000 read"]
    xml = urlset(*(f"<url><loc>https://a.org/p{i}.html</loc></url>" for i in range(12)))
    assert parse_sitemap(xml, "https://a.org/s.xml", named=False, max_urls=10).problems == [
        "more than 10 URLs: the first 10 read"]


@pytest.mark.parametrize("body, reason", [
    (b"<!DOCTYPE html><html><body><a href='/x'>x</a></body></html>", "an HTML page, not a sitemap"),
    (b"\n  <html><head><title>Not found</title>", "an HTML page, not a sitemap"),
    (b"<?xml version='1.0'?><rss><channel/></rss>", "XML whose root is <rss>, not <urlset> or <sitemapindex>"),
    (b"   \n\t", "empty"),
    (b"\x1f\x8bnot gzip at all", "not a readable gzip file"),
])
def test_what_is_no_sitemap_is_an_error_with_its_reason(body, reason):
    with pytest.raises(SitemapError) as info:
        parse_sitemap(body, "https://a.org/sitemap.xml", named=False)
    assert str(info.value) == reason


def test_malformed_xml_keeps_what_was_readable():
    body = urlset("<url><loc>https://a.org/a.html</loc></url>", "<url><loc>https://a.org/b.html</loc></url>")
    cut = body[: body.index(b"<url><loc>https://a.org/b")] + b"<url><loc>https://a.org/b.ht"
    parsed = parse_sitemap(cut, "https://a.org/sitemap.xml", named=False)
    assert [e.url for e in parsed.entries][:1] == ["https://a.org/a.html"]
    # Entities are not expanded (a "billion laughs" stays a few bytes).
    laughs = (b'<?xml version="1.0"?><!DOCTYPE urlset [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
              + urlset("<url><loc>https://a.org/&b;.html</loc></url>").split(b"?>", 1)[1])
    got = parse_sitemap(laughs, "https://a.org/sitemap.xml", named=False)
    assert all(len(e.url) < 40 for e in got.entries)


def test_robots_txt_sitemap_lines():
    body = (b"User-agent: *\nDisallow: /x\nSitemap: https://a.org/s1.xml\n  sitemap:/rel/s2.xml\n"
            b"Sitemap: ftp://a.org/s3.xml\nSITEMAP: https://a.org/s1.xml\nSitemap:\n")
    assert robots_sitemaps(body, "https://a.org/robots.txt") == ["https://a.org/s1.xml", "https://a.org/rel/s2.xml",
                                                                   "https://a.org/robots.txt"]


@pytest.mark.parametrize("text, expected", [
    ("2024", ts("2024-01-01T00:00:00")), ("2024-05", ts("2024-05-01T00:00:00")),
    ("2024-05-03", ts("2024-05-03T00:00:00")), ("2024-05-03T10:00:00+02:00", ts("2024-05-03T08:00:00")),
    ("2024-05-03T10:00Z", ts("2024-05-03T10:00:00")), ("yesterday", None), ("", None), (None, None),
    ("9" * 60, None),
])
def test_lastmod(text, expected):
    assert parse_lastmod(text) == expected


def test_the_first_revisit_interval_from_a_listing():
    policy = Policy(min_interval=3600, max_interval=30 * 86400)
    assert sitemap_interval("hourly", None, 1e9, policy) == 3600
    assert sitemap_interval("weekly", 0.0, 1e9, policy) == 7 * 86400  # changefreq first
    assert sitemap_interval("always", None, 1e9, policy) == 3600
    assert sitemap_interval("never", None, 1e9, policy) == 30 * 86400
    assert sitemap_interval(None, 1e9 - 10 * 86400, 1e9, policy) == 86400  # a tenth of its age
    assert sitemap_interval(None, 1e9 + 5, 1e9, policy) is None  # modified after the fetch: says nothing
    assert sitemap_interval(None, None, 1e9, policy) is None
