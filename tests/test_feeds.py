"""Feed exports (crawler/operations/feeds.py): ``scrapy crawl site -O pages.jsonl``
writes each page once, with its final type and the fields ``scrapy export``
writes. The exporter's hold-back first, on Scrapy's own exporter; then a
crawl of a real server, as a user runs it."""

from __future__ import annotations

import io
import json
import subprocess
from collections import Counter

import pytest

from crawler.operations.feeds import CsvPageExporter, JsonLinesPageExporter, PageFeed
from crawler.items import PageItem
from crawler.store.base import PAGE_FIELDS
from tests.support import ROOT
from tests.support.commands import command
from tests.support.crawl import crawl_cmd, stop_embedded_redis
from tests.support.servers import start_server
from tests.test_template import write_site


def rows(buf: io.BytesIO) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().decode().splitlines()]


def test_a_page_waiting_for_a_second_look_is_written_once_final():
    buf = io.BytesIO()
    feed = JsonLinesPageExporter(buf)
    feed.start_exporting()
    first = PageItem(url="http://a.org/1", site="a.org", page_type="index", pending=1, warc=object())
    other = PageItem(url="http://a.org/2", site="a.org", page_type="info")
    feed.export_item(first)
    feed.export_item(other)
    assert [r["url"] for r in rows(buf)] == ["http://a.org/2"]
    # Typed again: the page takes its new type, and its write again is no row.
    first.page_type, first.pending = "info", 0
    feed.export_item(PageItem(url="http://a.org/1", site="a.org", page_type="info", typed_again=True))
    assert len(rows(buf)) == 1  # written with the next page
    feed.export_item(PageItem(url="http://a.org/3", site="a.org", page_type="info"))
    got = rows(buf)
    assert [(r["url"], r["page_type"]) for r in got] == [
        ("http://a.org/2", "info"), ("http://a.org/3", "info"), ("http://a.org/1", "info")]
    assert all(list(r) == list(PAGE_FIELDS) for r in got)
    # The crawl's end: a page still waiting is written as it is.
    feed.export_item(PageItem(url="http://a.org/4", site="a.org", page_type="index", pending=2))
    feed.finish_exporting()
    assert [(r["url"], r["page_type"]) for r in rows(buf)][-1] == ("http://a.org/4", "index")


def test_a_feed_that_picks_its_fields_gets_them():
    buf = io.BytesIO()
    feed = JsonLinesPageExporter(buf, fields_to_export=["url", "links", "evidence"])
    feed.export_item(PageItem(url="http://a.org/1", site="a.org", links=[{"url": "http://a.org/2", "anchor": "2"}]))
    assert rows(buf) == [{"url": "http://a.org/1", "links": [{"url": "http://a.org/2", "anchor": "2"}],
                          "evidence": None}]


def test_every_format_scrapy_ships_has_its_page_exporter():
    from scrapy.settings import default_settings
    from scrapy.utils.misc import load_object

    from crawler import settings

    assert set(settings.FEED_EXPORTERS) == set(default_settings.FEED_EXPORTERS_BASE)
    for fmt, path in settings.FEED_EXPORTERS.items():
        cls = load_object(path)
        assert issubclass(cls, PageFeed) and issubclass(cls, load_object(default_settings.FEED_EXPORTERS_BASE[fmt]))


def test_a_csv_feed_has_the_stored_fields_as_its_header():
    buf = io.BytesIO()
    feed = CsvPageExporter(buf)
    feed.start_exporting()
    feed.export_item(PageItem(url="http://a.org/1", site="a.org", page_type="info"))
    feed.finish_exporting()
    header, row = buf.getvalue().decode().splitlines()
    assert header.split(",") == list(PAGE_FIELDS) and row.startswith("http://a.org/1,a.org,0,C,,info,")


@pytest.mark.slow
def test_crawl_with_a_feed_writes_each_page_once_final_as_export_does(tmp_path, frontier_settings):
    """The generated manual of tests/test_template.py: its first three
    articles are typed alone as index pages, then again, once the site's
    template is known, as information pages, and stored twice."""
    write_site(tmp_path / "site")
    server = start_server(tmp_path, hosts="127.0.0.1", root=tmp_path / "site")
    crawl_dir = tmp_path / "crawl"
    feed = tmp_path / "pages.jsonl"
    settings = {**frontier_settings, "CONCURRENT_REQUESTS": 1}
    try:
        cmd = crawl_cmd([f"seeds={server.url('/index.html')}"], settings, crawl_dir) + ["-O", str(feed)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "'classifier/retype/info': 3" in proc.stderr  # the pages stored twice
        code, out, err = command("export", ["-o", str(tmp_path / "export.jsonl")], settings, crawl_dir)
        assert code == 0, err
    finally:
        server.stop()
        stop_embedded_redis(crawl_dir)
    fed = [json.loads(line) for line in feed.read_text().splitlines()]
    exported = {p["url"]: p for p in map(json.loads, (tmp_path / "export.jsonl").read_text().splitlines())}
    assert len(exported) == 81
    assert Counter(p["url"] for p in fed) == Counter(list(exported))  # each page once
    assert {p["url"]: p["page_type"] for p in fed} == {u: p["page_type"] for u, p in exported.items()}
    assert Counter(p["page_type"] for p in fed) == {"info": 80, "index": 1}
    assert all(list(p) == list(exported[p["url"]]) == list(PAGE_FIELDS) for p in fed)
    assert f"Stored jsonl feed (84 items) in: {feed}" in proc.stderr  # Scrapy counts what passed it
