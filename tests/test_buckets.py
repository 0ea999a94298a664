"""The duplicate index's grown bucket tables (crawler/frontier/buckets.py,
crawler/redis/lua/grow.lua), against a real Redis (REDIS_URL, else the
embedded one): tables start coarse and split as they fill, and what the
index finds does not change when they do."""

from __future__ import annotations

import pytest
import redis

from crawler.duplicates.fingerprint import content_hash, fingerprints
from crawler.frontier import Frontier
from crawler.frontier.buckets import SPLIT_AT, bucket_width, grown_sizes, parse_sizes


@pytest.fixture
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def text(n: int, extra: str = "") -> str:
    """Page n's text: 120 words no other page shares (a sketch of its own)."""
    return " ".join(f"p{n}w{k}" for k in range(120)) + extra


def check(f: Frontier, url: str, site: str, body: str):
    _, sk = fingerprints(body)
    return f.duplicates.check(url, site, content_hash(body), sk)


def test_the_levels_of_a_grown_table():
    assert grown_sizes(1024) == [4, 16, 64, 256, 1024]
    assert grown_sizes(4096) == [16, 64, 256, 1024, 4096]
    assert grown_sizes(64) == [4, 16, 64]
    assert grown_sizes(16) == [4, 16]
    assert grown_sizes(1000) == [250, 1000]  # 250 is no multiple of 4
    assert grown_sizes(7) == [7]  # flat
    assert [bucket_width(n) for n in (1, 256, 257, 1024, 65536, 1 << 24)] == [1, 1, 2, 2, 2, 3]
    assert parse_sizes("16,64,256,1024", 1024) == [16, 64, 256, 1024]
    assert parse_sizes("1024", 1024) == [1024]
    for bad in ("16,64", "3,1024", "", "x,1024", "0,1024"):
        assert parse_sizes(bad, 1024) is None, bad


def dup_keys(client, crawl: str, family: str) -> dict[str, dict[bytes, bytes]]:
    """The duplicate index's hashes of one family ("lsh", "rec", "osk") by key."""
    out = {}
    for key in client.scan_iter(match=f"[{{]{crawl}:d*", count=1000):
        name = key.decode()
        if f"}}:{family}:" in name and not name.endswith(":grown"):
            out[name] = client.hgetall(key)
    return out


def test_tables_split_as_they_fill_and_find_every_copy_after(client, crawl_name):
    """With 16 buckets (levels 4, 16) in one shard, 500 pages fill the band
    tables' 4 coarse buckets past SPLIT_AT: they split into the final 16,
    which then hold the fields without their bucket bytes; records and
    sketches split too. A near copy of each of the 500 pages, checked after,
    still finds it (every one, wherever the splits moved it); an exact copy
    is found by its record; a copy of its own site's page is taken out of
    the tables again, wherever they had grown to."""
    pages = 500
    f = Frontier(client, crawl_name, node="w1", default_delay=0, buckets=16, shards=1)
    f.check_layout()
    assert client.hget(f.keys.meta, "dup_levels") == b"4,16"
    assert f.duplicates.levels == "4,16"
    # Coarse at first: the first page's entries are in coarse buckets, fields 2 + 3 bytes.
    assert check(f, "http://a/0", "a", text(0)).kind == "new"
    bands = dup_keys(client, crawl_name, "lsh")
    assert len(bands) == 10 and all("/" in k for k in bands)  # "lsh:<i>:4/<b mod 4>"
    assert {len(field) for entries in bands.values() for field in entries} == {bucket_width(16) + 3}
    for n in range(1, pages):
        assert check(f, f"http://a/{n}", "a", text(n)).kind == "new"

    bands = dup_keys(client, crawl_name, "lsh")
    assert all("/" not in k for k in bands)  # every band table split down to its final buckets
    assert len(bands) == 10 * 16
    assert {len(field) for entries in bands.values() for field in entries} == {3}
    refs = [v for entries in bands.values() for v in entries.values()]
    assert sum(len(v) // 5 for v in refs) == 10 * pages  # each page once in each table
    for family in ("rec", "osk"):
        held = dup_keys(client, crawl_name, family)
        assert sum(len(entries) for entries in held.values()) == pages
        coarse = [k for k in held if "/" in k]
        assert all(len(held[k]) <= SPLIT_AT for k in coarse)
        assert len(coarse) < len(held)  # some have split
    assert client.strlen(f"{{{f.keys.dup_shards[0].prefix[1:-2]}}}:lsh:0:grown") == 1  # 4 bits

    # A second worker (its own reading of the layout) finds every page again.
    w2 = Frontier(client, crawl_name, node="w2", default_delay=0, buckets=16, shards=1)
    for n in range(pages):
        d = check(w2, f"http://a/copy{n}", "a", text(n, " more"))
        assert (d.kind, d.first) == ("near", f"http://a/{n}"), n
    d = check(w2, "http://b/same", "b", text(7))
    assert (d.kind, d.first) == ("exact", "http://a/7")
    # The copies of their own site's pages were taken out again: the tables
    # hold the 500 pages and b's exact copy of page 7 (indexed: another site).
    bands = dup_keys(client, crawl_name, "lsh")
    assert sum(len(v) // 5 for entries in bands.values() for v in entries.values()) == 10 * pages
    assert sum(len(e) for e in dup_keys(client, crawl_name, "osk").values()) == pages
    assert w2.views.stats()["near_duplicates"] == pages


def test_a_crawl_an_earlier_version_began_keeps_its_flat_tables(client, crawl_name):
    """A crawl whose meta has a layout but no ``dup_levels`` was begun with
    flat tables: a worker of this version reads and writes its final
    buckets, and finds what the earlier version wrote there."""
    f = Frontier(client, crawl_name, node="w1", default_delay=0)
    client.hset(f.keys.meta, "shards", f.keys.shards)  # as an earlier version left it
    f.check_layout()
    assert client.hget(f.keys.meta, "dup_levels") is None
    assert f.duplicates.levels == "1024"
    assert check(f, "http://a/1", "a", text(1)).kind == "new"
    bands = dup_keys(client, crawl_name, "lsh")
    assert len(bands) == 10 and all("/" not in k for k in bands)
    assert {len(field) for entries in bands.values() for field in entries} == {3}
    d = check(f, "http://b/1", "b", text(1, " more"))
    assert (d.kind, d.first) == ("near", "http://a/1")
