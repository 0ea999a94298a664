"""Store contract tests. Every store (embedded SQLite now, MongoDB later) must
pass the same tests: the fixture is parametrised by store kind."""

import uuid

import pytest

from crawler.store import SQLiteStore
from crawler.store.mongo import MongoStore


@pytest.fixture(params=["sqlite", "mongo"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SQLiteStore(tmp_path / "crawl.sqlite3")
        yield s
        s.close()
        return
    uri = request.getfixturevalue("mongo_uri")
    name = "t_" + uuid.uuid4().hex[:12]
    s = MongoStore(uri, name)
    yield s
    s.client.drop_database(name)
    s.close()


def page(url, site="a.test", state="C", links=(), **kw):
    return {"url": url, "site": site, "state": state, "depth": 0, "status": 200,
            "page_type": "index", "title": url, "text": "text of " + url,
            "fetched_at": 1000.0, "links": [{"url": u, "anchor": a} for u, a in links], **kw}


def test_write_and_read_back(store):
    store.write([
        page("http://a.test/", links=[("http://a.test/x", "X"), ("http://b.test/", "B")]),
        page("http://a.test/x", page_type="info", links=[("http://a.test/", "Home")]),
    ])
    got = store.get_page("http://a.test/")
    assert got["title"] == "http://a.test/" and got["page_type"] == "index" and got["state"] == "C"
    assert got["inlinks"] == ["http://a.test/x"]
    assert store.inlinks("http://a.test/x") == ["http://a.test/"]
    assert store.outlinks("http://a.test/") == [
        {"url": "http://a.test/x", "anchor": "X"}, {"url": "http://b.test/", "anchor": "B"}]
    assert store.get_page("http://a.test/nope") is None
    assert [p["url"] for p in store.iter_pages()] == ["http://a.test/", "http://a.test/x"]


def test_sites_table_counts_pages_errors_and_discovered_sites(store):
    store.write([
        page("http://a.test/", links=[("http://b.test/", "B")]),
        page("http://a.test/gone", state="E", error="HTTP 404"),
    ])
    sites = {s["site"]: s for s in store.sites()}
    assert sites["a.test"]["pages"] == 1 and sites["a.test"]["errors"] == 1
    assert sites["a.test"]["links"] == 1
    assert sites["b.test"]["pages"] == 0 and sites["b.test"]["links"] == 0
    assert sites["b.test"]["discovered_from"] == "http://a.test/"


def test_sites_page_and_error_counts_follow_every_rewrite(store):
    """Pages that go from done to error and back, a URL twice in a batch,
    pages of other states: after every batch each site's counts are the
    store's own count of its pages."""
    import random

    rng = random.Random(7)
    urls = [(f"http://{site}/{i}", site) for site in ("a.test", "b.test") for i in range(12)]
    for _ in range(40):
        batch = [page(url, site=site, state=rng.choice("CCEP")) for url, site in rng.sample(urls, rng.randint(1, 8))]
        if rng.random() < 0.3:
            batch.append(dict(batch[0], state=rng.choice("CE")))  # the same URL again: the last row stands
        store.write(batch)
        for s in store.sites():
            assert (s["pages"], s["errors"]) == (store.count_pages(site=s["site"], state="C"),
                                                 store.count_pages(site=s["site"], state="E")), s
    assert {s["site"] for s in store.sites()} == {"a.test", "b.test"}


def test_sites_record_which_site_a_mirror_copies(store):
    store.write([page("http://copy.test/a", site="copy.test", dup_of="http://a.test/a")])
    store.write([page("http://copy.test/b", site="copy.test", dup_of="http://a.test/b", mirror_of="a.test")])
    store.write([page("http://copy.test/c", site="copy.test")])  # set once, kept
    assert {s["site"]: s["mirror_of"] for s in store.sites()} == {"copy.test": "a.test"}


def test_sites_links_follow_rewrites_in_any_batch(store):
    """``links``: edges out of the site's pages, a link listed twice once."""
    a = [("http://a.test/x", "X"), ("http://b.test/", "B"), ("http://a.test/x", "X again")]
    store.write([page("http://a.test/", links=a), page("http://b.test/", site="b.test",
                                                        links=[("http://a.test/", "A")])])
    store.write([page("http://a.test/x", links=[("http://a.test/", "Home")])])
    links = {s["site"]: s["links"] for s in store.sites()}
    assert links == {"a.test": 3, "b.test": 1}
    # A re-crawl drops a link and adds two; writing it twice changes nothing.
    again = page("http://a.test/", links=[("http://a.test/y", "Y"), ("http://a.test/z", "Z"),
                                         ("http://a.test/x", "X")])
    store.write([again])
    store.write([again])
    assert {s["site"]: s["links"] for s in store.sites()} == {"a.test": 4, "b.test": 1}
    assert sum(1 for e in store.iter_links() if e["src"].startswith("http://a.test")) == 4


def test_writes_are_idempotent_upserts(store):
    batch = [page("http://a.test/", links=[("http://a.test/x", "X")]), page("http://a.test/x")]
    store.write(batch)
    first = (list(store.iter_pages()), list(store.iter_links()), store.sites())
    store.write(batch)
    assert (list(store.iter_pages()), list(store.iter_links()), store.sites()) == first
    assert store.count_pages() == 2


def test_rewrite_replaces_fields_and_out_links(store):
    store.write([page("http://a.test/", links=[("http://a.test/old", "Old")])])
    store.write([page("http://a.test/", title="New", links=[("http://a.test/new", "New")])])
    assert store.get_page("http://a.test/")["title"] == "New"
    assert store.inlinks("http://a.test/old") == []
    assert store.inlinks("http://a.test/new") == ["http://a.test/"]


def test_a_page_stored_again_with_a_new_type_keeps_its_links_and_counts(store):
    """A site's first page, typed again once its template is known, comes
    again whole with its new type: in the same batch or a later one."""
    links = [("http://a.test/x", "X"), ("http://b.test/", "B")]
    store.write([page("http://a.test/", links=links), page("http://a.test/", links=links, page_type="info")])
    store.write([page("http://a.test/y", links=links)])
    store.write([page("http://a.test/y", links=links, page_type="info")])
    assert [store.get_page(u)["page_type"] for u in ("http://a.test/", "http://a.test/y")] == ["info", "info"]
    assert store.inlinks("http://a.test/x") == ["http://a.test/", "http://a.test/y"]
    assert {s["site"]: (s["pages"], s["links"]) for s in store.sites()}["a.test"] == (2, 4)


def test_a_page_given_twice_in_a_batch_is_stored_as_its_last_version(store):
    """A copy by its canonical put right (crawler/duplicates/variants.py) comes again
    without ``dup_of``, maybe in its first write's batch: the last wins."""
    for n in range(20):
        u = f"http://a.test/{n}"
        store.write([page(u, dup_of="http://a.test/"), page(u, dup_of=None, page_type="info")])
    assert [(p["dup_of"], p["page_type"]) for p in store.iter_pages()] == [(None, "info")] * 20


def test_count_pages_by_site_and_state(store):
    store.write([page("http://a.test/"), page("http://a.test/e", state="E"),
                 page("http://b.test/", site="b.test")])
    assert store.count_pages() == 3
    assert store.count_pages(site="a.test") == 2
    assert store.count_pages(site="a.test", state="C") == 1
    assert [p["url"] for p in store.iter_pages(site="b.test")] == ["http://b.test/"]


def test_sqlite_store_written_before_sites_links_is_migrated(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite3"
    with SQLiteStore(path) as s:
        s.write([page("http://a.test/", links=[("http://a.test/x", "X"), ("http://b.test/", "B")])])
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE sites DROP COLUMN links")  # as the first release wrote it
    db.commit()
    db.close()
    with SQLiteStore(path) as s:
        assert {x["site"]: x["links"] for x in s.sites()} == {"a.test": 2, "b.test": 0}
        s.write([page("http://a.test/y", links=[("http://a.test/", "Home")])])
        assert {x["site"]: x["links"] for x in s.sites()} == {"a.test": 3, "b.test": 0}


def test_due_pages_kept_links_and_revisit_state_on_every_store(store):
    store.write([page("http://a.test/", links=[("http://a.test/x", "X")], next_fetch_at=1500.0, etag='"e"'),
                 page("http://a.test/x", next_fetch_at=1200.0, history=[[1000.0, "new", None]]),
                 page("http://b.test/", site="b.test"),  # no next_fetch_at: as stored before the re-crawl
                 page("http://a.test/gone", state="D", next_fetch_at=1.0)])
    due = [p["url"] for p in store.due(1400.0, 300.0)]
    assert due == ["http://a.test/x", "http://b.test/"] or due == ["http://b.test/", "http://a.test/x"]
    assert [(p["url"], p["next_fetch_at"]) for p in store.due(1600.0, 300.0) if p["url"] != "http://b.test/"] == [
        ("http://a.test/x", 1200.0), ("http://a.test/", 1500.0)]
    assert [p["url"] for p in store.due(1600.0, 300.0, site="a.test", limit=1)] == ["http://a.test/x"]
    assert store.count_due(1400.0, 300.0) == 2 and store.count_due(1250.0, 300.0) == 1
    assert sorted(p["url"] for p in store.due(0.0, 300.0, every=True)) == [
        "http://a.test/", "http://a.test/x", "http://b.test/"]
    state = store.revisit_state(["http://a.test/", "http://a.test/x", "http://nowhere.test/"])
    assert sorted(state) == ["http://a.test/", "http://a.test/x"]
    assert state["http://a.test/"]["links"] == ["http://a.test/x"] and state["http://a.test/"]["etag"] == '"e"'
    assert state["http://a.test/x"]["history"] == [[1000.0, "new", None]]
    # links None: the stored out-links stay.
    store.write([page("http://a.test/", links=(), next_fetch_at=1900.0) | {"links": None}])
    assert store.outlinks("http://a.test/") == [{"url": "http://a.test/x", "anchor": "X"}]
    assert store.get_page("http://a.test/")["next_fetch_at"] == 1900.0
    assert {x["site"]: x["links"] for x in store.sites()}["a.test"] == 1


def test_revisit_sample_draws_histories_of_pages_in_state_c(store):
    assert store.revisit_sample(10) == (0, [])
    store.write([page(f"http://a.test/{i}", history=[[1000.0 + i, "new", None]]) for i in range(30)]
                + [page("http://a.test/gone", state="D", history=[[1.0, "gone", None]]),
                   page("http://a.test/err", state="E")])
    store.write([page("http://a.test/0", history=[[1000.0, "new", None]], evidence={"u": 5.0, "c": [], "n": 1.0})])
    total, sample = store.revisit_sample(10)
    assert total == 30 and len(sample) == 10
    histories = [p["history"] for p in sample]
    assert all(len(h) == 1 and h[0][1] == "new" and 1000.0 <= h[0][0] < 1030.0 for h in histories)
    assert len({h[0][0] for h in histories}) == 10  # ten different pages
    total, every = store.revisit_sample(1000)
    assert total == 30 and sorted(p["history"][0][0] for p in every) == [1000.0 + i for i in range(30)]
    assert {p["history"][0][0]: p["evidence"] for p in every if p["evidence"]} == {
        1000.0: {"u": 5.0, "c": [], "n": 1.0}}
    # Drawn at random, not the first ten each time.
    draws = {tuple(sorted(p["history"][0][0] for p in store.revisit_sample(10)[1])) for _ in range(5)}
    assert len(draws) > 1
    assert store.revisit_sample(0) == (30, [])


def test_sqlite_store_written_before_the_recrawl_is_migrated(tmp_path):
    import sqlite3

    path = tmp_path / "old.sqlite3"
    with SQLiteStore(path) as s:
        s.write([page("http://a.test/")])
    db = sqlite3.connect(path)
    for column in ("change_rate", "changed_at", "history", "gone_count"):
        db.execute(f"ALTER TABLE pages DROP COLUMN {column}")  # as stores before the re-crawl were
    db.execute("DROP INDEX pages_next_fetch")
    db.commit()
    db.close()
    with SQLiteStore(path) as s:
        assert s.get_page("http://a.test/")["history"] == []
        assert [p["next_fetch_at"] for p in s.due(2000.0, 500.0)] == [1500.0]
        s.write([page("http://a.test/", history=[[1000.0, "new", None]], gone_count=0)])
        assert s.get_page("http://a.test/")["history"] == [[1000.0, "new", None]]


def test_sqlite_store_survives_reopen(tmp_path):
    path = tmp_path / "s.sqlite3"
    with SQLiteStore(path) as s:
        s.write([page("http://a.test/")])
    with SQLiteStore(path) as s:
        assert s.count_pages() == 1
        with s.conn:
            assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_unreachable_mongodb_is_a_clear_error_without_the_password():
    import socket

    from crawler.store import StoreUnavailable

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreUnavailable) as info:
        MongoStore(f"mongodb://crawler:secret@127.0.0.1:{port}", "x", timeout_ms=300)
    message = str(info.value)
    assert message.startswith(f"cannot reach MongoDB at mongodb://***@127.0.0.1:{port} within 0.3 s")
    assert "secret" not in message


def test_mongodb_rewrite_of_an_unchanged_page_writes_no_edges(mongo_uri):
    """A re-crawl finding the same links costs the page's upsert only; a
    changed anchor updates its edge; in-links stay right."""
    name = "t_" + uuid.uuid4().hex[:12]
    with MongoStore(mongo_uri, name) as s:
        batch = [page("http://a.test/", links=[("http://a.test/x", "X"), ("http://b.test/", "B")])]
        s.write(batch)
        calls = []
        original = s.links.bulk_write

        def counting(ops, **kw):
            calls.append(len(ops))
            return original(ops, **kw)

        s.links.bulk_write = counting
        s.write(batch)
        assert calls == []
        s.write([page("http://a.test/", links=[("http://a.test/x", "Ex"), ("http://b.test/", "B")])])
        assert calls == [1]
        assert s.outlinks("http://a.test/") == [{"url": "http://a.test/x", "anchor": "Ex"},
                                                {"url": "http://b.test/", "anchor": "B"}]
        assert s.pages.find_one({"url": "http://a.test/x"})["inlinks"] == ["http://a.test/"]
        s.client.drop_database(name)


def test_mongo_keeps_a_bounded_inlinks_array_and_every_in_link_in_links(mongo_uri):
    """A hub every page links to: its document keeps the first in-links
    (MongoDB refuses documents over 16 MB), ``inlinks()`` all of them."""
    name = "t_" + uuid.uuid4().hex[:12]
    store = MongoStore(mongo_uri, name)
    try:
        store.inlinks_kept = 3
        for i in range(5):
            store.write([page(f"http://a.test/{i}", links=[("http://a.test/", "Home")])])
        doc = store.pages.find_one({"url": "http://a.test/"})
        assert doc["inlinks"] == [f"http://a.test/{i}" for i in range(3)] and "state" not in doc
        assert store.inlinks("http://a.test/") == [f"http://a.test/{i}" for i in range(5)]
        store.write([page("http://a.test/", links=[("http://a.test/0", "Zero")])])
        got = store.get_page("http://a.test/")
        assert got["state"] == "C" and got["inlinks"] == [f"http://a.test/{i}" for i in range(5)]
        # A link gone makes room again; the new page's link to the hub is kept.
        store.write([page("http://a.test/1", links=[])])
        store.write([page("http://a.test/9", links=[("http://a.test/", "Home")])])
        doc = store.pages.find_one({"url": "http://a.test/"})
        assert sorted(doc["inlinks"]) == ["http://a.test/0", "http://a.test/2", "http://a.test/9"]
        assert store.inlinks("http://a.test/") == [f"http://a.test/{i}" for i in (0, 2, 3, 4, 9)]
    finally:
        store.client.drop_database(name)
        store.close()


_OPEN_AT = r"""
import sys, time
from crawler.store.sqlite import SQLiteStore
at = float(sys.argv[2])
while time.time() < at:
    pass
SQLiteStore(sys.argv[1]).close()
print("opened")
"""


@pytest.mark.slow
def test_workers_opening_a_new_store_at_the_same_moment_all_open_it(tmp_path):
    """Switching a new file to WAL takes a lock SQLite's busy timeout does
    not wait for: of 4 processes opening one new store at the same moment,
    one in two trials failed with "database is locked" (a worker of a
    two-worker crawl failed to start about once in 40)."""
    import subprocess
    import sys
    import time

    for trial in range(5):
        path = tmp_path / f"t{trial}" / "site.sqlite3"
        at = time.time() + 0.8
        procs = [subprocess.Popen([sys.executable, "-c", _OPEN_AT, str(path), str(at)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
        outs = [p.communicate(timeout=60) for p in procs]
        assert [(p.returncode, out) for p, (out, _) in zip(procs, outs)] == [(0, "opened\n")] * 4, \
            [err[-500:] for _, err in outs]
        with SQLiteStore(path) as store:
            assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sitemap_listings_mark_pages_whichever_is_written_first(store):
    """crawler/sitemaps/crawl.py: a listing written before or after its page sets
    the page's in_sitemap, lastmod and changefreq, and the first revisit
    interval of a page fetched once; a page written again keeps them."""
    first = [{"t": 1000.0, "o": "new", "d": None}]
    store.write([page("http://a.test/before", history=first, revisit_interval=86400.0, next_fetch_at=87400.0),
                 {"_sitemap": "http://a.test/sitemap.xml", "entries": [
                     ["http://a.test/before", 500.0, "hourly"], ["http://a.test/after", None, "weekly"],
                     ["http://a.test/plain", None, None], "not an entry", ["http://a.test/x", "bad", 3]]}])
    store.write([page("http://a.test/after", history=first, revisit_interval=86400.0, next_fetch_at=87400.0),
                 page("http://a.test/plain", history=first, revisit_interval=86400.0, next_fetch_at=87400.0),
                 page("http://a.test/unlisted", history=first, revisit_interval=86400.0, next_fetch_at=87400.0)])
    got = {p["url"]: (p["in_sitemap"], p["lastmod"], p["changefreq"], p["revisit_interval"], p["next_fetch_at"])
           for p in store.iter_pages()}
    assert got == {"http://a.test/before": (True, 500.0, "hourly", 3600.0, 4600.0),
                   "http://a.test/after": (True, None, "weekly", 7 * 86400.0, 1000.0 + 7 * 86400.0),
                   "http://a.test/plain": (True, None, None, 86400.0, 87400.0),
                   "http://a.test/unlisted": (False, None, None, 86400.0, 87400.0)}
    # Written again (a re-crawl's visit: two visits now), the page keeps its
    # listing; its interval is the re-crawl's own from then on.
    two = first + [{"t": 2000.0, "o": "unchanged", "d": 0}]
    store.write([page("http://a.test/before", history=two, revisit_interval=50000.0, next_fetch_at=52000.0)])
    again = store.get_page("http://a.test/before")
    assert (again["in_sitemap"], again["lastmod"], again["changefreq"], again["revisit_interval"]) == (
        True, 500.0, "hourly", 50000.0)


def test_in_degree_and_mirror_degree_computed_for_every_page(store):
    """Before a re-collection (crawler/spiders/recrawl.py): links to each
    stored page and pages stored as copies of it; a page written again
    keeps them until the next computation."""
    store.write([page("http://a.test/", links=[("http://a.test/x", "X"), ("http://a.test/y", "Y")]),
                 page("http://a.test/x", links=[("http://a.test/y", "Y")]),
                 page("http://a.test/y", links=[]),
                 page("http://b.test/y", site="b.test", dup_of="http://a.test/y", links=[("http://a.test/", "")])])
    store.compute_degrees()
    got = {p["url"]: (p["indegree"], p["mirror_degree"]) for p in store.iter_pages()}
    assert got == {"http://a.test/": (1, 0), "http://a.test/x": (1, 0), "http://a.test/y": (2, 1),
                   "http://b.test/y": (0, 0)}
    store.write([page("http://a.test/y", links=[])])
    assert (store.get_page("http://a.test/y")["indegree"], store.get_page("http://a.test/y")["mirror_degree"]) == (2, 1)
    total, sample = store.revisit_sample(10)
    assert total == 4 and sorted((p["indegree"], p["mirror_degree"]) for p in sample) == [(0, 0), (1, 0), (1, 0), (2, 1)]


def test_changes_stored_once_and_read_by_time_on_every_store(store):
    from crawler.recrawl.diff import CHANGE_KEY, change

    old = page("http://a.test/p", text="one\ntwo", markdown="one\n\ntwo", fetched_at=1000.0)
    new = page("http://a.test/p", text="one\nthree", markdown="one\n\nthree", fetched_at=2000.0)
    new[CHANGE_KEY] = change("changed", new, old, 1000)
    first = page("http://a.test/q", fetched_at=1500.0)
    first[CHANGE_KEY] = change("new", first, None, 1000)
    store.write([first, new])
    store.write([new])  # a batch written again: each change kept once
    found = store.changes(1000.0)
    assert [(c["kind"], c["url"], c["at"]) for c in found] == [
        ("new", "http://a.test/q", 1500.0), ("changed", "http://a.test/p", 2000.0)]
    assert (found[1]["added"], found[1]["removed"], found[1]["previous_at"], found[1]["cut"]) == (
        ["three"], ["two"], 1000.0, False)
    assert "-two\n+three" in found[1]["diff"]
    assert [c["url"] for c in store.changes(1600.0)] == ["http://a.test/p"]
    assert [c["url"] for c in store.changes(0.0, until=2000.0)] == ["http://a.test/q"]
    assert store.changes(0.0, site="b.test") == []
    assert store.stored_urls() == ["http://a.test/q", "http://a.test/p"]
