"""What a page yields (issue 50) everywhere a page goes: its main content
as ``text`` and ``markdown``, its ``metadata`` and ``kind``, stored in SQLite
and MongoDB, in ``scrapy export`` (jsonl, csv) and in ``-O`` feeds. A crawl
of a local site, as a user runs it, through the content, metadata and kind
steps: a page with nested lists, a table with spans, code in ``pre`` and a
heading inside a link, under navigation and over a footer left out."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from crawler.store import SQLiteStore
from crawler.store.base import PAGE_FIELDS
from tests.support.commands import command
from tests.support.crawl import run_crawl, stop_embedded_redis
from tests.support.servers import serve_pages

STORY = """<html><head><title>The Big Story | Planet</title>
<meta property="og:site_name" content="Planet"><meta property="og:title" content="The Big Story">
<script type="application/ld+json">{"@context": "https://schema.org", "@type": "NewsArticle",
 "headline": "The Big Story", "author": {"@type": "Person", "name": "Lois Lane"},
 "datePublished": "2025-09-04T10:00:00Z", "nested": {"a": [1, 2.5, true, null]}}</script>
</head><body><nav><a href="/">Home</a> <a href="/plain.html">Plain</a></nav>
<article><h1>The Big Story</h1>
<p>Some words of the story, <em>enough</em> of them to be a page, told by a reporter who was there.</p>
<a href="/plain.html"><h2>A heading in a link</h2></a>
<ul><li>One<ul><li>One and a half</li></ul></li><li>Two</li></ul>
<table><tr><th colspan="2">Span</th></tr><tr><td>a</td><td>b</td></tr></table>
<pre><code class="language-python">print("hi")</code></pre>
<p>The story ends here, with <strong>strong</strong> words and a <a href="/more.html">link</a>.</p>
</article><footer><p>Copyright Planet, all rights reserved.</p></footer></body></html>"""
INDEX = """<html><head><title>Planet</title></head><body><p><a href="/story.html">Story</a>
<a href="/plain.html">Plain</a></p></body></html>"""
PLAIN = "<html><body><p>No title, no metadata.</p></body></html>"

STORY_METADATA = {
    "title": "The Big Story", "author": "Lois Lane", "published": "2025-09-04T10:00:00Z", "site_name": "Planet",
    "type": "newsarticle",
    "jsonld": [{"@context": "https://schema.org", "@type": "NewsArticle", "headline": "The Big Story",
                "author": {"@type": "Person", "name": "Lois Lane"}, "datePublished": "2025-09-04T10:00:00Z",
                "nested": {"a": [1, 2.5, True, None]}}],
    "opengraph": {"og:site_name": "Planet", "og:title": "The Big Story"},
}
STORY_MARKDOWN = """# The Big Story

Some words of the story, *enough* of them to be a page, told by a reporter who was there.

## [A heading in a link]({base}/plain.html)

- One
  - One and a half
- Two

| Span |  |
| --- | --- |
| a | b |

```python
print("hi")
```

The story ends here, with **strong** words and a [link]({base}/more.html)."""
STORY_TEXT = """The Big Story
Some words of the story, enough of them to be a page, told by a reporter who was there.
A heading in a link
One
One and a half
Two
Span
a b
print("hi")
The story ends here, with strong words and a link."""


def expected(site) -> dict[str, tuple]:
    """(text, markdown, metadata, kind) of each page: the content, metadata and kind steps' (the kinds are the
    model's, crawler/data/kind.json, refitted with the URL's shape: an article this short is not told from the rest,
    "other"; the site's root, two links and a title, reads as a service's front page)."""
    base = site.url("").rstrip("/")
    return {
        "/": ("Story Plain", f"[Story]({base}/story.html) [Plain]({base}/plain.html)", {"title": "Planet"},
              "service"),
        "/story.html": (STORY_TEXT, STORY_MARKDOWN.format(base=base), STORY_METADATA, "other"),
        "/plain.html": ("No title, no metadata.", "No title, no metadata.", None, "other"),
    }


@pytest.fixture
def site(tmp_path: Path):
    server = serve_pages(tmp_path, {"/index.html": INDEX, "/story.html": STORY, "/plain.html": PLAIN})
    yield server
    server.stop()


def crawl(site, crawl_dir: Path, settings: dict, extra: list[str] | None = None):
    result = run_crawl(site, crawl_dir, [f"seeds={site.url('/')}", "follow=all"], settings)
    assert result.returncode == 0, result.log[-3000:]
    return settings


def stored(pages: list[dict], site) -> dict[str, tuple]:
    return {p["url"][len(site.url("")):] or "/": (p["text"], p["markdown"], p["metadata"], p["kind"])
            for p in pages if p.get("state") == "C" and p["url"].endswith(("/", ".html"))}


@pytest.mark.slow
def test_sqlite_export_and_feed_hold_the_new_fields(site, tmp_path: Path, frontier_settings):
    crawl_dir = tmp_path / "crawl"
    feed = tmp_path / "feed.jsonl"
    settings = crawl(site, crawl_dir, {**frontier_settings, "FEEDS": json.dumps({str(feed): {"format": "jsonl"}})})
    try:
        with SQLiteStore(crawl_dir / f"{frontier_settings['CRAWL_NAME']}.sqlite3") as store:
            assert stored(list(store.iter_pages()), site) == expected(site)
        for name in ("export.jsonl", "export.csv"):
            code, out, err = command("export", ["-o", str(tmp_path / name)], settings, crawl_dir)
            assert code == 0, err
    finally:
        stop_embedded_redis(crawl_dir)
    lines = [json.loads(line) for line in (tmp_path / "export.jsonl").read_text().splitlines()]
    assert stored(lines, site) == expected(site)
    assert stored([json.loads(line) for line in feed.read_text().splitlines()], site) == expected(site)
    with open(tmp_path / "export.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(PAGE_FIELDS)
    for row in rows:  # JSON in a cell, as it reads back; empty for None
        row["metadata"] = json.loads(row["metadata"]) if row["metadata"] else None
        row["kind"] = row["kind"] or None
    assert stored(rows, site) == expected(site)


@pytest.mark.slow
def test_mongodb_holds_the_new_fields(site, tmp_path: Path, frontier_settings, mongo_uri):
    import pymongo

    database = frontier_settings["CRAWL_NAME"]
    crawl(site, tmp_path / "crawl", {**frontier_settings, "MONGO_URI": mongo_uri})
    db = pymongo.MongoClient(mongo_uri)[database]
    try:
        assert stored(list(db.pages.find({"state": {"$exists": True}})), site) == expected(site)
    finally:
        db.client.drop_database(database)
        db.client.close()


# -- the stores' contract, without a crawl -----------------------------------------------------------

HOSTILE = {"title": "T", "jsonld": [{"@type": "Thing", "_$where": "1", "og:x": [1, 2.5, None, True],
                                     "deep": {"a": {"b": "</script>\u00e9"}}}], "errors": 2}


@pytest.fixture(params=["sqlite", "mongo"])
def store(request, tmp_path):
    import uuid

    from crawler.store.mongo import MongoStore

    if request.param == "sqlite":
        with SQLiteStore(tmp_path / "crawl.sqlite3") as s:
            yield s
        return
    name = "t_" + uuid.uuid4().hex[:12]
    s = MongoStore(request.getfixturevalue("mongo_uri"), name)
    yield s
    s.client.drop_database(name)
    s.close()


def row(url: str, **kw) -> dict:
    return {"url": url, "site": "a.test", "state": "C", "depth": 0, "status": 200, "title": "t", "text": "x",
            "fetched_at": 1000.0, "links": [], **kw}


def test_each_store_keeps_markdown_metadata_and_kind(store):
    store.write([row("http://a.test/", markdown="# A\n\n| x |\n|---|", metadata=HOSTILE, kind="product"),
                 row("http://a.test/b")])
    got = store.get_page("http://a.test/")
    assert (got["markdown"], got["metadata"], got["kind"]) == ("# A\n\n| x |\n|---|", HOSTILE, "product")
    got = store.get_page("http://a.test/b")
    assert (got["markdown"], got["metadata"], got["kind"]) == (None, None, None)
    store.write([row("http://a.test/", markdown="", metadata=None, kind="other")])
    got = store.get_page("http://a.test/")
    assert (got["markdown"], got["metadata"], got["kind"]) == ("", None, "other")


def test_a_sqlite_store_written_before_the_new_fields_gains_them(tmp_path: Path):
    import sqlite3

    path = tmp_path / "old.sqlite3"
    with SQLiteStore(path) as s:
        s.write([row("http://a.test/")])
    db = sqlite3.connect(path)
    for column in ("markdown", "metadata", "kind"):
        db.execute(f"ALTER TABLE pages DROP COLUMN {column}")  # as stores before issue 50 were
    db.commit()
    db.close()
    with SQLiteStore(path) as s:
        got = s.get_page("http://a.test/")
        assert (got["markdown"], got["metadata"], got["kind"]) == (None, None, None)
        s.write([row("http://a.test/", markdown="m", metadata={"title": "T"}, kind="article")])
        got = s.get_page("http://a.test/")
        assert (got["markdown"], got["metadata"], got["kind"]) == ("m", {"title": "T"}, "article")
