"""End-to-end: a focused crawl (``-a topic=PATH``) of a generated web with
on-topic clusters, an off-topic region and tunnels of off-topic pages,
served from disk on 127.0.0.1; exactly which pages are reached with and
without tunnelling, and what is stored."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
import pytest

from crawler.operations import ops
from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.console import ConsoleProcess, text, texts
from tests.support.crawl import crawl_cmd, run_crawl, until
from tests.support.servers import start_server

pytestmark = pytest.mark.slow

ON = ("PostgreSQL vacuum reclaims the storage of dead rows. Run vacuum often; "
      "autovacuum does it for you in PostgreSQL. ")
OFF = ("Tomatoes need sun, water and patience. Prune the side shoots and feed "
       "the plants every second week in summer. ")

# page -> (on topic?, links); "/" is the seed, an off-topic hub.
WEB: dict[str, tuple[bool, list[str]]] = {
    "/": (False, ["/a/", "/b/", "/t/1.html", "/u/1.html"]),
    # an on-topic cluster linked from the seed
    "/a/": (True, ["/a/1.html", "/a/2.html"]),
    "/a/1.html": (True, ["/a/2.html"]),
    "/a/2.html": (True, []),
    # an off-topic region that goes on and on
    "/b/": (False, ["/b/1.html"]),
    "/b/1.html": (False, ["/b/2.html"]),
    "/b/2.html": (False, ["/b/3.html"]),
    "/b/3.html": (False, ["/b/4.html"]),
    "/b/4.html": (False, []),
    # a tunnel of two off-topic pages to an on-topic cluster
    "/t/1.html": (False, ["/t/2.html"]),
    "/t/2.html": (False, ["/c/"]),
    "/c/": (True, ["/c/1.html"]),
    "/c/1.html": (True, []),
    # a tunnel of three off-topic pages to another
    "/u/1.html": (False, ["/u/2.html"]),
    "/u/2.html": (False, ["/u/3.html"]),
    "/u/3.html": (False, ["/d/"]),
    "/d/": (True, []),
}


VOCABULARY = ("river stone cloud maple lantern harbor meadow copper violet thunder orchard "
              "canyon ember falcon glacier hollow island jasmine kettle lagoon marble nectar").split()


def filler(path: str, words: int = 120) -> str:
    """Words of the page's own (a different text on every page: no page is a
    near copy of another, whose links would not be followed)."""
    rng = random.Random(path)
    return " ".join(rng.choice(VOCABULARY) + str(rng.randrange(1000)) for _ in range(words))


def page_html(path: str, on: bool, links: list[str]) -> str:
    body = (ON if on else OFF) + filler(path)
    items = "".join(f'<li><a href="{u}">page {i}</a></li>' for i, u in enumerate(links))
    return (f"<!doctype html><html><head><title>{'Vacuum' if on else 'Garden'} {path}</title></head>"
            f"<body><h1>{path}</h1><p>{body}</p><ul>{items}</ul></body></html>")


@pytest.fixture(scope="module")
def web(tmp_path_factory):
    root = tmp_path_factory.mktemp("web")
    for path, (on, links) in WEB.items():
        f = root / (path.lstrip("/") + ("index.html" if path.endswith("/") else ""))
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(page_html(path, on, links))
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\nSitemap: /sitemap.txt\n")
    topic = root.parent / "topic.yaml"
    topic.write_text("name: PostgreSQL maintenance\nkeywords:\n  vacuum: 1\n  postgresql: 1\nthreshold: 0.3\n")
    srv = start_server(tmp_path_factory.mktemp("websrv"), hosts="127.0.0.1", root=root)
    # Every page, for the crawls that read sitemaps (the others do not: SITEMAP_ENABLED off).
    (root / "sitemap.txt").write_text("".join(f"{srv.url(p)}\n" for p in WEB))
    yield srv, topic
    srv.stop()


def crawl(web, tmp_path, tunnel, min_priority=0.0, **settings):
    """The tunnel alone (TOPIC_MIN_PRIORITY 0), unless ``min_priority``
    (None: the default's)."""
    srv, topic = web
    floor = {} if min_priority is None else {"TOPIC_MIN_PRIORITY": min_priority}
    result = run_crawl(srv, tmp_path, [f"seeds={srv.url('/')}", f"topic={topic}"],
                       {"TOPIC_TUNNEL": tunnel, "CONCURRENT_REQUESTS": 1, "LOG_LEVEL": "INFO", **floor, **settings})
    assert result.returncode == 0, result.log[-3000:]
    return result


def fetched(result) -> Counter:
    return Counter(p for p in result.fetched if p != "/robots.txt")


def stats(result) -> dict:
    m = re.search(r"Dumping Scrapy stats:\n(\{.*?\})\n", result.log, re.S)
    assert m, result.log[-2000:]
    return {k: v for k, v in re.findall(r"'(topic/[a-z_]+)': (\d+)", m.group(1))}


def pages_of(result, srv):
    prefix = srv.url("")
    with SQLiteStore(result.store_path) as store:
        return {p["url"].replace(prefix, ""): p for p in store.iter_pages()}


COMMON = {"/", "/a/", "/a/1.html", "/a/2.html", "/b/", "/t/1.html", "/u/1.html"}


def test_without_tunnelling_only_on_topic_pages_links_are_followed(web, tmp_path):
    result = crawl(web, tmp_path, 0)
    assert fetched(result) == Counter(COMMON)
    assert stats(result) == {"topic/pages_scored": "7", "topic/on_topic": "3", "topic/off_topic": "4",
                             "topic/tunnel_stopped": "3"}


def test_a_tunnel_of_two_reaches_the_cluster_behind_two_off_topic_pages(web, tmp_path):
    result = crawl(web, tmp_path, 2)
    reached = COMMON | {"/b/1.html", "/b/2.html", "/t/2.html", "/c/", "/c/1.html", "/u/2.html", "/u/3.html"}
    assert fetched(result) == Counter(reached)  # each once; /d/ and /b/3.html lie beyond
    assert stats(result) == {"topic/pages_scored": "14", "topic/on_topic": "5", "topic/off_topic": "9",
                             # /b/1 /b/2 /t/2 /c/ /u/2 /u/3: their parent was off-topic (not a seed); /c/ is on topic
                             "topic/tunnel_pages": "6", "topic/tunnel_on_topic": "1",
                             "topic/tunnel_stopped": "2"}
    pages = pages_of(result, web[0])
    assert {u for u, p in pages.items() if p["on_topic"]} == {"/a/", "/a/1.html", "/a/2.html", "/c/", "/c/1.html"}
    assert all(p["on_topic"] is False for u, p in pages.items() if not WEB[u][0])
    assert all(p["topic_score"] >= 0.3 for u, p in pages.items() if WEB[u][0])
    assert all(p["topic_score"] == 0.0 for u, p in pages.items() if not WEB[u][0])


def test_a_tunnel_of_three_reaches_both_clusters(web, tmp_path):
    result = crawl(web, tmp_path, 3)
    # /d/ behind three off-topic pages; /b/3.html is the region's fourth: fetched, its links not followed
    assert fetched(result) == Counter(set(WEB) - {"/b/4.html"})


def test_with_tunnel_links_the_tunnel_passes_each_pages_best_link(web, tmp_path):
    """TOPIC_TUNNEL_LINKS 1 at the default TOPIC_MIN_PRIORITY: the links
    through the tunnels say nothing of the topic ("page 0", off-topic
    parents), yet each off-topic page passes its best one on, so the
    cluster behind two off-topic pages is reached as by the tunnel alone
    (without it they are set aside and /c/ is never fetched: the next test)."""
    result = crawl(web, tmp_path, 2, None, TOPIC_TUNNEL_LINKS=1)
    reached = COMMON | {"/b/1.html", "/b/2.html", "/t/2.html", "/c/", "/c/1.html", "/u/2.html", "/u/3.html"}
    assert fetched(result) == Counter(reached)
    assert stats(result) == {"topic/pages_scored": "14", "topic/on_topic": "5", "topic/off_topic": "9",
                             "topic/tunnel_pages": "6", "topic/tunnel_on_topic": "1", "topic/tunnel_stopped": "2",
                             # /b/ /b/1 /t/1 /t/2 /u/1 /u/2 passed their one link, each below the floor
                             "topic/tunnel_passed": "6"}


def test_links_below_the_min_priority_wait_and_the_crawl_ends(web, tmp_path):
    """With TOPIC_MIN_PRIORITY (the default 0.2), a tunnel of three is spent
    only where a link's priority says it pays: the off-topic pages' links,
    whose anchors ("page 1") and parents say nothing of the topic, are set
    aside, and the crawl ends with the on-topic cluster the seed links to."""
    result = crawl(web, tmp_path, 3, None)
    assert fetched(result) == Counter(COMMON)
    assert stats(result) == {"topic/pages_scored": "7", "topic/on_topic": "3", "topic/off_topic": "4",
                             "topic/below_min_priority": "3"}  # /b/1.html, /t/2.html, /u/2.html


def test_a_sitemap_brings_a_focused_crawl_only_what_looks_on_topic(web, tmp_path):
    """Sitemaps on (as by default): robots.txt names a sitemap listing every
    page of the web; none of them is added, since no listed URL's words or
    siblings say it is on topic: the crawl fetches what it fetches without
    the sitemap, and the sitemap."""
    srv, topic = web
    result = run_crawl(srv, tmp_path, [f"seeds={srv.url('/')}", f"topic={topic}"],
                       {"TOPIC_TUNNEL": 3, "CONCURRENT_REQUESTS": 1, "LOG_LEVEL": "INFO", "SITEMAP_ENABLED": True})
    assert result.returncode == 0, result.log[-3000:]
    assert fetched(result) == Counter(COMMON | {"/sitemap.txt"})
    # The tunnel's 3, and at least every listed page the crawl never reached
    # (pages it had not yet met when it read the sitemap are set aside too).
    assert int(stats(result)["topic/below_min_priority"]) >= 3 + len(WEB) - len(COMMON)
    assert f"'sitemap/urls_taken': {len(WEB)}," in result.log


def test_a_bad_topic_file_stops_the_start(web, tmp_path):
    srv, _ = web
    bad = tmp_path / "topic.json"
    bad.write_text(json.dumps({"keywords": {"vacuum": "lots"}}))
    result = run_crawl(srv, tmp_path, [f"seeds={srv.url('/')}", f"topic={bad}"])
    assert result.returncode != 0
    assert f"-a topic: {bad}: keywords['vacuum'] = 'lots': a weight must be a number" in result.log
    assert fetched(result) == Counter()



# -- order: two workers share one site queue, most promising links first ---------------------------

V = [f"/v{i}.html" for i in range(1, 6)]  # on-topic anchors: "vacuum ..."
G = [f"/g{i}.html" for i in range(1, 6)]  # off-topic anchors: "garden ..."


@pytest.fixture(scope="module")
def order_web(tmp_path_factory):
    root = tmp_path_factory.mktemp("orderweb")
    hub = "".join(f'<li><a href="{g}">garden notes {i}</a></li><li><a href="{v}">vacuum settings {i}</a></li>'
                  for i, (g, v) in enumerate(zip(G, V)))
    (root / "index.html").write_text(f"<html><head><title>Hub</title></head><body><h1>Hub</h1>"
                                     f"<p>{filler('/')}</p><ul>{hub}</ul></body></html>")
    for path in V + G:
        (root / path.lstrip("/")).write_text(page_html(path, path in V, []))
    topic = root.parent / "topic.json"
    topic.write_text(json.dumps({"keywords": {"vacuum": 1, "postgresql": 1}, "threshold": 0.3}))
    srv = start_server(tmp_path_factory.mktemp("ordersrv"), hosts="127.0.0.1", root=root)
    yield srv, topic
    srv.stop()


def test_two_workers_fetch_the_most_promising_links_first(order_web, redis_url, tmp_path, browser):
    import subprocess
    import time

    import redis

    from crawler.frontier import Frontier

    srv, topic = order_web
    name = f"focused_order_{int(time.time() * 1000)}"
    settings = {"REDIS_URL": redis_url, "CRAWL_NAME": name, "DOWNLOAD_DELAY": 0.3,
                "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "LOG_LEVEL": "INFO"}
    mark = srv.mark()
    workers = [subprocess.Popen(crawl_cmd([f"seeds={srv.url('/')}", f"topic={topic}"], settings, tmp_path),
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)]
    deadline = time.monotonic() + 60
    while not srv.requests(mark) and time.monotonic() < deadline:
        time.sleep(0.02)
    workers.append(subprocess.Popen(crawl_cmd([f"topic={topic}"], settings, tmp_path), cwd=ROOT,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [w.communicate(timeout=120)[0] for w in workers]
    try:
        assert [w.returncode for w in workers] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
        assert "No seeds: joining crawl" in logs[1]
        order = [str(r["path"]) for r in srv.requests(mark) if r["path"] != "/robots.txt"]
        # The hub lists them garden, vacuum, garden, ...: the vacuum links go
        # first, each kind in the order found, whichever worker fetched them.
        assert order == ["/", *V, *G]

        # The harvest rate, per node and for the crawl, as operators see it.
        frontier = Frontier(redis.Redis.from_url(redis_url), name, node="reader")
        st = ops.status(frontier, 10)
        assert {k: st["topic"][k] for k in ("on_topic", "pages", "harvest_rate")} == \
            {"on_topic": len(V), "pages": 1 + len(V) + len(G), "harvest_rate": round(len(V) / 11, 4)}
        assert sum(n["on_topic"] for n in st["nodes"]) == len(V)
        assert sum(n["pages"] for n in st["nodes"]) == 11
        for n in st["nodes"]:
            assert n["harvest_rate"] == (round(n["on_topic"] / n["pages"], 4) if n["pages"] else 0.0)
        closing = [line for log in logs for line in log.splitlines() if "(at close)" in line]
        assert len(closing) == 2 and all("on topic" in line and "% cluster)" in line for line in closing)

        # ... and the console, in a real browser.
        console = ConsoleProcess(settings, tmp_path)
        try:
            browser.get(console.url)
            until(lambda: text(browser, "topic-on_topic") == str(len(V)), what="the focused figures")
            assert text(browser, "topic-harvest_rate") == f"{100 * len(V) / 11:.1f} %"
            assert browser.execute_script("return document.getElementById('topic').hidden") is False
            assert sorted(texts(browser, "#topic-nodes td:nth-child(3)")) == \
                sorted(str(n["on_topic"]) for n in st["nodes"])
        finally:
            console.stop()
    finally:
        client = redis.Redis.from_url(redis_url)
        Frontier(client, name, node="reader").views.delete_all()
        client.close()


def test_a_plain_worker_cannot_join_a_focused_crawl(order_web, redis_url, tmp_path):
    import time

    import redis

    from crawler.frontier import Frontier

    srv, topic = order_web
    name = f"focused_join_{int(time.time() * 1000)}"
    settings = {"REDIS_URL": redis_url, "CRAWL_NAME": name, "DOWNLOAD_DELAY": 0}
    try:
        assert run_crawl(srv, tmp_path, [f"seeds={srv.url('/')}", f"topic={topic}"], settings).returncode == 0
        mark = srv.mark()
        plain = run_crawl(srv, tmp_path, [], settings)
        assert plain.returncode != 0
        assert f"crawl {name!r} is a focused crawl: join it with -a topic= and the same topic file" in plain.log
        assert srv.requests(mark) == []
    finally:
        client = redis.Redis.from_url(redis_url)
        Frontier(client, name, node="reader").views.delete_all()
        client.close()
