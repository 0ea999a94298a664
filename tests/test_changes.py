"""Change tracking: a re-crawl after pages were edited, added, deleted and
moved records exactly those changes, with what changed (the main text's
blocks, a Markdown diff), and ``scrapy changes`` lists them; the diff
itself (crawler/recrawl/diff.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crawler.recrawl.diff import blocks_changed, change, markdown_diff
from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import run_crawl
from tests.support.servers import start_server

SETTINGS = {"REVISIT_MIN_INTERVAL": 1, "REVISIT_DEFAULT_INTERVAL": 1, "REVISIT_MAX_INTERVAL": 100,
            "RECRAWL_GONE_AFTER": 1}


def page(title: str, paragraphs: list[str], links: str = "") -> str:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1>{body}{links}</body></html>"


PARAS = {name: [f"The {name} page tells of {topic} in a sentence long enough to be read as prose by the crawler "
                f"and to stand as a block of its own, number {k}." for k, topic in
                enumerate(("rivers", "harbours", "meadows"))] for name in ("a", "b", "c", "d")}


@pytest.fixture
def site(tmp_path: Path):
    root = tmp_path / "www"
    root.mkdir()
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    links = "".join(f'<li><a href="/{n}.html">{n}</a></li>' for n in PARAS)
    (root / "index.html").write_text(f"<html><head><title>Home</title></head><body><ul>{links}</ul></body></html>")
    for name, paras in PARAS.items():
        (root / f"{name}.html").write_text(page(f"Page {name}", paras))
    server = start_server(tmp_path, hosts="127.0.0.1", root=root, validators=True)
    yield server, root
    server.stop()


def changes_cmd(crawl_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scrapy", "changes", "-s", f"CRAWL_DIR={crawl_dir}", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_recrawl_records_exactly_the_pages_edited_added_deleted_and_moved(site, tmp_path):
    server, root = site
    crawl_dir = tmp_path / "crawl"
    first = run_crawl(server, crawl_dir, [f"seeds={server.url('/')}", "follow=all"], SETTINGS)
    assert first.returncode == 0, first.log[-3000:]
    with SQLiteStore(first.store_path) as store:
        assert sorted(c["url"] for c in store.changes(0)) == sorted(server.url(p) for p in (
            "/", "/a.html", "/b.html", "/c.html", "/d.html"))  # the first crawl: every page new
        assert {c["kind"] for c in store.changes(0)} == {"new"}
    time.sleep(1.1)
    since = time.time()
    edited = [PARAS["a"][0], "A paragraph written since, long enough to count as a block of the page's text.",
              PARAS["a"][2]]
    (root / "a.html").write_text(page("Page a", edited, '<p><a href="/e.html">the new page e</a></p>'))
    (root / "e.html").write_text(page("Page e", ["Page e is new: it was added after the first crawl, and the "
                                                 "edited page a links to it."]))
    (root / "b.html").unlink()
    (root / "_moves.json").write_text(json.dumps({"/c.html": "/c2.html"}))
    (root / "c2.html").write_text(page("Page c", PARAS["c"]))
    second = run_crawl(server, crawl_dir, ["all=1"], SETTINGS, spider="recrawl")
    assert second.returncode == 0, second.log[-3000:]

    listed = changes_cmd(crawl_dir, "--since", str(since), "--json")
    assert listed.returncode == 0, listed.stderr
    found = {(c["kind"], c["url"]) for c in json.loads(listed.stdout)["changes"]}
    assert found == {("changed", server.url("/a.html")), ("new", server.url("/e.html")),
                     ("gone", server.url("/b.html")), ("moved", server.url("/c.html")),
                     ("new", server.url("/c2.html"))}
    a = next(c for c in json.loads(listed.stdout)["changes"] if c["kind"] == "changed")
    assert a["added"] == [edited[1]] and a["removed"] == [PARAS["a"][1]]
    assert f"-{PARAS['a'][1]}" in a["diff"] and f"+{edited[1]}" in a["diff"]
    assert a["previous_at"] < since < a["at"]

    text = changes_cmd(crawl_dir, "--since", str(since), "--kind", "changed,moved", "--diff")
    lines = text.stdout.splitlines()
    assert lines[0].startswith("crawl site: 2 changes since ") and lines[0].endswith(": 1 changed, 1 moved")
    assert any(line.endswith(f"changed  {server.url('/a.html')}  +1 -1 blocks") for line in lines)
    assert any(line.endswith(f"moved    {server.url('/c.html')}  -> {server.url('/c2.html')}") for line in lines)
    assert f"+{edited[1]}" in lines

    assert changes_cmd(crawl_dir, "--since", "1h", "--until", str(since), "--kind", "new", "--json").returncode == 0
    bad = changes_cmd(crawl_dir, "--since", "yesterday")
    assert (bad.returncode, bad.stderr.strip().splitlines()[-1].split(": ", 1)[1]) == (2, (
        "error: 'yesterday' is no time: give ISO 8601 (2026-12-06T05:00), seconds since the epoch, "
        "or a time ago (30m, 6h, 7d)"))  # a usage error, as Scrapy's are
    assert changes_cmd(tmp_path / "nothing", "--since", "1h").returncode == 1


def test_blocks_and_diff_are_bounded():
    old = "\n".join(f"line {i}" for i in range(500))
    new = "\n".join(f"line {i}" for i in range(250, 750))
    added, removed, cut = blocks_changed(old, new)
    assert cut and len(added) == len(removed) == 200 and added[0] == "line 500" and removed[0] == "line 0"
    diff, diff_cut = markdown_diff("http://x/", old, new, 300)
    assert diff_cut and len(diff) <= 301 and diff.startswith("--- a/http://x/\n+++ b/http://x/\n")
    record = change("changed", {"url": "http://x/", "site": "x", "fetched_at": 2.0, "text": new, "markdown": new},
                    {"url": "http://x/", "fetched_at": 1.0, "text": old, "markdown": old}, 20_000)
    assert record["cut"] and record["previous_at"] == 1.0 and record["at"] == 2.0
    assert change("new", {"url": "http://x/", "fetched_at": 3.0}, None, 10)["diff"] == ""
