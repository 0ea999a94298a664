"""Crawl control end to end (issue 37): ``-a scope=prefix``, ``-a allow``,
``-a deny`` and ``-a rules=FILE`` on a real server, recorded in the crawl's
meta and held by every worker; exact fetches (the server's log) and what
was stored."""

from __future__ import annotations

import subprocess
from collections import Counter
from pathlib import Path

import pytest

from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import crawl_cmd, run_crawl, stop_embedded_redis
from tests.support.servers import serve_pages

pytestmark = pytest.mark.slow

PAGES = {
    "/docs/intro.html": ["/docs/a.html", "/docs/b/c.html", "/docs/search.html?q=x", "/blog/post.html",
                         "/docs/private/x.html", "/index.html"],
    "/docs/a.html": ["/docs/b/c.html", "/index.html", "/docs/search.html?q=y"],
    "/docs/b/c.html": ["/docs/d.html"],
    "/docs/d.html": [],
    "/docs/search.html": [],
    "/docs/private/x.html": [],
    "/blog/post.html": ["/docs/d.html"],
    "/index.html": ["/docs/intro.html", "/blog/post.html"],
}
ALLOWED = ["/docs/intro.html", "/docs/a.html", "/docs/b/c.html", "/docs/d.html"]


def page(path: str, links: list[str]) -> str:
    items = "".join(f'<li><a href="{u}">{u.strip("/").replace("/", " ")}</a></li>' for u in links)
    words = "harbour lantern meadow orchard quarry tunnel valley window garden bridge castle forest".split()
    seed = sum(map(ord, path))  # each page its own text: copies' links are not followed
    text = " ".join(words[(seed * 7 + i * (seed % 5 + 2)) % len(words)] for i in range(200))
    return f"<html><head><title>{path}</title></head><body><p>{text}</p><ul>{items}</ul></body></html>"


@pytest.fixture
def site(tmp_path: Path):
    server = serve_pages(tmp_path, {path: page(path, links) for path, links in PAGES.items()})
    try:
        yield server
    finally:
        server.stop()


def pages_fetched(fetched: list[str]) -> Counter[str]:
    return Counter(p for p in fetched if p != "/robots.txt")


def test_prefix_scope_and_rules_from_arguments_and_a_file(site, tmp_path):
    crawl_dir = tmp_path / "crawl"
    rules = tmp_path / "rules.yaml"
    rules.write_text("deny:\n  - /private/\n")
    try:
        result = run_crawl(site, crawl_dir, [f"seeds={site.url('/docs/intro.html')}", "scope=prefix", "follow=all",
                                             "deny=/search", f"rules={rules}"])
        assert result.returncode == 0, result.log[-3000:]
        assert pages_fetched(result.fetched) == Counter(ALLOWED), result.fetched
        assert "'rules/denied': 3" in result.log  # search (twice: two pages), private
        with SQLiteStore(result.store_path) as store:
            assert sorted(p["url"] for p in store.iter_pages()) == sorted(site.url(p) for p in ALLOWED)
            # Excluded links are still recorded as edges.
            assert [x["url"] for x in store.outlinks(site.url("/docs/intro.html"))] == sorted(
                site.url(u) for u in PAGES["/docs/intro.html"])

        # A worker that brings other rules, or another scope, is refused in one line.
        for args, line in (
                (["deny=/other"], "Error: crawl 'site' has other URL rules (recorded when it started: "
                                  '{"allow": [], "deny": ["/private/", "/search"]}); this worker asks {"allow": [], '
                                  '"deny": ["/other"]}: join it with the same rules (or none), or start another crawl '
                                  "(-s CRAWL_NAME=...)"),
                (["scope=site"], "Error: crawl 'site' has -a scope=prefix (recorded when it started); this worker asks "
                                 "-a scope=site: join it with -a scope=prefix (or without -a scope), or start another "
                                 "crawl (-s CRAWL_NAME=...)")):
            refused = run_crawl(site, crawl_dir, args)
            assert refused.returncode == 1 and refused.fetched == []
            assert refused.log.strip().splitlines()[-1] == line

        # A worker without rules joins with the crawl's: a new seed outside the
        # prefix of the first, under its own prefix, and its denied links stay out.
        mark = site.mark()
        joined = run_crawl(site, crawl_dir, [f"seeds={site.url('/blog/post.html')}", "follow=all"])
        assert joined.returncode == 0, joined.log[-3000:]
        assert pages_fetched([str(r["path"]) for r in site.requests(mark)]) == Counter(["/blog/post.html"])  # /docs/d.html: done
    finally:
        stop_embedded_redis(crawl_dir)


def test_a_seed_the_rules_exclude_and_a_bad_pattern_stop_the_start(site, tmp_path):
    for args, line in (
            ([f"seeds={site.url('/docs/search.html?q=1')}", "deny=/search"],
             f"Error: seed {site.url('/docs/search.html?q=1')} is excluded by the URL rules: -a deny=/search matches it"),
            ([f"seeds={site.url('/docs/intro.html')}", "allow=^https://"],
             f"Error: seed {site.url('/docs/intro.html')} is excluded by the URL rules: no -a allow pattern matches it "
             "(^https://)"),
            ([f"seeds={site.url('/docs/intro.html')}", "deny=("],
             "Error: -a deny='(' is not a regular expression (missing ) at position 1)")):
        proc = subprocess.run(crawl_cmd(args, {}, tmp_path / "crawl"), cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 1
        assert proc.stderr.strip().splitlines() == [line]
    assert not (tmp_path / "crawl").exists() or not any((tmp_path / "crawl").iterdir())


def test_two_workers_hold_the_rules_of_the_one_that_started_the_crawl(site, tmp_path):
    """The second worker brings no rules: it takes the crawl's (recorded by
    the first) and never fetches what they deny."""
    crawl_dir = tmp_path / "crawl"
    settings = {"DOWNLOAD_DELAY": 0.3, "FRONTIER_DELAY_MARGIN": 0}
    mark = site.mark()
    first = subprocess.Popen(crawl_cmd([f"seeds={site.url('/index.html')}", "follow=all", "deny=/search|/private/"],
                                       settings, crawl_dir), cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        second = run_crawl(site, crawl_dir, ["follow=all"], settings)
        out, _ = first.communicate(timeout=120)
        assert first.returncode == 0 and second.returncode == 0, (out[-2000:], second.log[-2000:])
        assert "No seeds: joining crawl site" in second.log
        every = ["/index.html", "/blog/post.html", *ALLOWED]
        assert pages_fetched([str(r["path"]) for r in site.requests(mark)]) == Counter(every)
    finally:
        if first.poll() is None:
            first.kill()
        stop_embedded_redis(crawl_dir)
