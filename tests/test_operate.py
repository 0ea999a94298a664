"""Operating a running crawl end to end: ``scrapy status``, ``scrapy seed``
and ``scrapy stop`` as commands, against real worker processes on the grid
sites (tests/support/mockserver.py) and a real Redis."""

from __future__ import annotations

import json
import subprocess
import sys
import re
import time
from collections import Counter
from pathlib import Path

import pytest

from crawler.store import SQLiteStore
from tests.support.commands import command, status, wait_status
from tests.support.crawl import until
from tests.support.workers import EXPECTED, Worker, fetched, seeds, wait_for_requests

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("_no_worker_outlives_its_test")]

SETTINGS = {"DOWNLOAD_DELAY": 0.3, "FRONTIER_HEARTBEAT_INTERVAL": 0.5, "FRONTIER_LEASE_TIMEOUT": 10,
            "PROGRESS_INTERVAL": 1}


def stored(crawl_dir: Path, name: str) -> Counter[str]:
    with SQLiteStore(crawl_dir / f"{name}.sqlite3") as store:
        return Counter(p["url"] for p in store.iter_pages() if p["state"] == "C")


def test_stop_status_refuse_clear_resume(grid_server, redis_url, crawl_name, tmp_path):
    """Two workers; ``scrapy stop`` mid-crawl: both finish what they hold and
    exit 0, the crawl reads "stopped" with nothing leased; a worker started
    then refuses to run; after ``scrapy stop --clear`` (and a ``scrapy
    seed`` of a page no link reaches) one worker finishes the crawl. Every
    URL fetched exactly once over all runs, every page stored once."""
    # 0.6 s between a site's pages: the grid's 124 pages last over 18 s, so
    # the second worker's start, the status polls and the stop (each a Scrapy
    # process of its own) land mid-crawl on a loaded machine too; at 0.3 s
    # the crawl once ended first (three test files at a time on two cores).
    settings = {**SETTINGS, "DOWNLOAD_DELAY": 0.6, "REDIS_URL": redis_url, "CRAWL_NAME": crawl_name}
    mark = grid_server.mark()
    a = Worker([seeds(grid_server)], settings, tmp_path)
    wait_for_requests(grid_server, mark, 8)
    b = Worker([], settings, tmp_path)
    st = wait_status(settings, tmp_path, lambda st: len(st["nodes"]) == 2)
    assert st["state"] == "running"
    assert len(st["nodes"]) == 2 and all(n["alive"] and n["state"] == "running" for n in st["nodes"])
    assert st["frontier"]["sites"] == 4 and st["frontier"]["queued"] > 0

    code, out, err = command("stop", [], settings, tmp_path)
    assert code == 0 and "asked every worker to stop" in out, err
    t0 = time.monotonic()
    assert a.wait(30) == 0, a.log[-3000:]
    assert b.wait(30) == 0, b.log[-3000:]
    assert time.monotonic() - t0 < 10  # the lease timeout: they did not wait to be reaped
    for w in (a, b):
        assert "Stop asked (scrapy stop)" in w.log and "'finish_reason': 'stopped'" in w.log, w.log[-3000:]
        assert "Progress: " in w.log
    st = status(settings, tmp_path)
    assert st["state"] == "stopped" and st["stop"]["stop"] == "graceful"
    assert st["frontier"]["leased"] == 0 and st["frontier"]["queued"] > 0
    assert [n["alive"] for n in st["nodes"]] == [False, False]
    assert [n["state"] for n in st["nodes"]] == ["stopped", "stopped"]
    assert "joining 1 running worker" in b.log, b.log[:5000]
    # The tables, piped: whole columns, and nodes that stopped cleanly read so.
    code, out, err = command("status", [], settings, tmp_path)
    assert code == 0, err
    header = next(line for line in out.splitlines() if "pages/min" in line and "heartbeat" in line)
    assert header.split() == ["┃", "node", "┃", "host", "┃", "pid", "┃", "state", "┃", "pages", "┃", "pages/min",
                              "┃", "links", "┃", "errors", "┃", "heartbeat", "┃"], out
    rows = [line for line in out.splitlines() if any(n["id"] in line for n in st["nodes"])]
    assert len(rows) == 2 and all(" stopped " in r and "(dead)" not in r and "…" not in r for r in rows), out
    first = fetched(grid_server, mark)
    assert sum(n["pages"] for n in st["nodes"]) == sum(stored(tmp_path, crawl_name).values()) > 0

    # A worker started while the flag is set says so and fetches nothing.
    before = len(grid_server.requests(mark))
    late = Worker([], settings, tmp_path)
    assert late.wait(60) == 0
    assert "Not starting" in late.log and "scrapy stop --clear" in late.log, late.log[-2000:]
    assert len(grid_server.requests(mark)) == before

    # Seeds go into the stopped crawl; --clear lets a worker finish it.
    extra = grid_server.url("/g/5/?from=seed", host="127.0.0.5")
    code, out, err = command("seed", ["--json", extra, "javascript:alert(1)"], settings, tmp_path)
    assert code == 0, err
    assert json.loads(out)["added"] == 1 and len(json.loads(out)["refused"]) == 1
    code, out, _ = command("stop", ["--clear", "--json"], settings, tmp_path)
    assert code == 0 and json.loads(out)["cleared"] is True
    c = Worker([], {**settings, "DOWNLOAD_DELAY": 0.1}, tmp_path)  # nothing to race now: the rest at 0.1 s
    assert c.wait(120) == 0, c.log[-3000:]
    assert "resuming it" in c.log and "running worker" not in c.log, c.log[:5000]
    got = Counter(fetched(grid_server, mark))
    path = extra.split("/", 3)[3]
    assert got == EXPECTED + Counter({("127.0.0.5", "/" + path): 1}), (got - EXPECTED, EXPECTED - got)
    assert len(first) < sum(EXPECTED.values())  # the stop did stop it early
    assert all(n == 1 for n in stored(tmp_path, crawl_name).values())
    st = status(settings, tmp_path)
    assert st["state"] == "finished" and st["frontier"]["queued"] == 0
    assert st["totals"]["pages"] == sum(stored(tmp_path, crawl_name).values())


def test_stop_now_gives_leases_back_at_once(grid_server, redis_url, crawl_name, tmp_path):
    """``scrapy stop --now``: the worker exits within a heartbeat or two,
    nothing stays leased, and a resumed crawl fetches every URL (those in
    flight at the stop may be fetched twice, nothing is lost)."""
    settings = {**SETTINGS, "REDIS_URL": redis_url, "CRAWL_NAME": crawl_name, "CONCURRENT_REQUESTS": 8}
    mark = grid_server.mark()
    a = Worker([seeds(grid_server)], settings, tmp_path)
    wait_for_requests(grid_server, mark, 16)
    code, _, err = command("stop", ["--now"], settings, tmp_path)
    assert code == 0, err
    t0 = time.monotonic()
    assert a.wait(30) == 0, a.log[-3000:]
    assert time.monotonic() - t0 < 5
    assert "Stop asked (scrapy stop --now)" in a.log
    assert "'finish_reason': 'stopped_now'" in a.log, a.log[-3000:]  # docs/reference.md, not 'shutdown'
    st = status(settings, tmp_path)
    assert st["state"] == "stopped" and st["frontier"]["leased"] == 0
    # Resumed by a supervisor of two workers: its own check's warning comes
    # out in Scrapy's log format (it makes no crawler process of its own).
    b = Worker([], {**settings, "STOP_CLEAR": 1, "CRAWL_PROCESSES": 2}, tmp_path)
    assert b.wait(120) == 0, b.log[-3000:]
    assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[crawler\.commands\.crawl\] WARNING: Cleared the stop flag "
                     r"of crawl ", b.log, re.M), b.log[-3000:]
    got = Counter(fetched(grid_server, mark))
    assert set(got) == set(EXPECTED), set(EXPECTED) - set(got)
    assert set(stored(tmp_path, crawl_name)) == {grid_server.url(p, host=h) for h, p in EXPECTED if p != "/robots.txt"}


def test_a_worker_on_the_same_machine_takes_back_a_killed_workers_leases_at_once(
        grid_server, redis_url, crawl_name, tmp_path):
    """A worker SIGKILLed (as a second Ctrl-C leaves it: no leases given
    back); the next worker with the same CRAWL_DIR sees its pid is gone,
    takes its leases back at once and says so, and finishes the crawl long
    before FRONTIER_LEASE_TIMEOUT (600 s here). Every URL fetched, the killed
    worker's in-flight ones at most twice."""
    import signal

    settings = {**SETTINGS, "REDIS_URL": redis_url, "CRAWL_NAME": crawl_name, "FRONTIER_LEASE_TIMEOUT": 600,
                "CONCURRENT_REQUESTS": 8}
    mark = grid_server.mark()
    a = Worker([seeds(grid_server)], settings, tmp_path)
    wait_for_requests(grid_server, mark, 12)
    a.proc.send_signal(signal.SIGKILL)
    a.wait(30)
    held = status(settings, tmp_path)["frontier"]["leased"]
    assert held > 0
    b = Worker([], settings, tmp_path)
    assert b.wait(120) == 0, b.log[-3000:]  # long before the leases' 600 s
    assert f"Took back {held} leases of " in b.log and f"(pid {a.proc.pid})" in b.log, b.log[-3000:]
    got = Counter(fetched(grid_server, mark))
    assert set(got) == set(EXPECTED) and max(got.values()) <= 2
    st = status(settings, tmp_path)
    assert st["state"] == "finished"
    assert [n["state"] for n in st["nodes"] if n["pid"] == a.proc.pid] == ["lost"]


def test_a_finished_crawl_run_again_says_so_then_export_and_reset(grid_server, redis_url, crawl_name, tmp_path):
    """Run a finished crawl again: it says what it holds and how to start
    afresh. ``site-crawler export`` (the console script, from another
    directory) writes every stored page; ``scrapy reset`` needs --yes, then
    the crawl's keys are gone and the same seeds crawl again."""
    import csv

    import redis as redis_lib

    from crawler.frontier import Frontier

    settings = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name, "DOWNLOAD_DELAY": 0, "PROGRESS_INTERVAL": 0}
    a = Worker([seeds(grid_server)], settings, tmp_path)
    assert a.wait(120) == 0, a.log[-3000:]
    pages = stored(tmp_path, crawl_name)
    assert len(pages) == len(EXPECTED) - 4  # all but the four robots.txt
    again = Worker([seeds(grid_server)], settings, tmp_path)
    assert again.wait(60) == 0
    assert f"Crawl {crawl_name} holds {len(pages)} pages done" in again.log and "nothing is pending" in again.log
    assert "was already finished" in again.log and "scrapy reset --yes" in again.log, again.log[-3000:]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cmd = [str(Path(sys.executable).parent / "site-crawler"), "export", "-o", "pages.jsonl",
           "-s", f"CRAWL_DIR={tmp_path}", "-s", f"CRAWL_NAME={crawl_name}"]
    p = subprocess.run(cmd, cwd=elsewhere, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in (elsewhere / "pages.jsonl").read_text().splitlines()]
    assert sorted(r["url"] for r in rows if r["state"] == "C") == sorted(pages)
    for kind in ("index", "info"):
        p = subprocess.run([*cmd[:3], f"{kind}.csv", *cmd[4:], "--type", kind], cwd=elsewhere,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        with open(elsewhere / f"{kind}.csv", newline="") as fh:
            got = list(csv.DictReader(fh))
        assert sorted(r["url"] for r in got) == sorted(r["url"] for r in rows if r["page_type"] == kind)
        assert len(got) == (len(rows) if kind == "index" else 0)  # the grid sites are all navigation
        by_url = {r["url"]: r for r in rows}
        assert all(json.loads(r["history"]) == by_url[r["url"]]["history"] for r in got)  # JSON, as in .jsonl
        assert all(json.loads(r["evidence"]) == by_url[r["url"]]["evidence"] for r in got)
    assert all(r["history"][0][1] == "new" for r in rows if r["state"] == "C")
    assert all(r["evidence"] == {"u": 0.0, "c": [], "n": 0.0} for r in rows if r["state"] == "C")

    code, out, _ = command("reset", [], {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name}, tmp_path)
    assert code == 1 and "Add --yes" in out
    client = redis_lib.Redis.from_url(redis_url)
    frontier = Frontier(client, crawl_name)
    assert frontier.views.all_keys()
    code, out, _ = command("reset", ["--yes"], {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name}, tmp_path)
    assert code == 0 and "deleted" in out
    assert frontier.views.all_keys() == []
    mark = grid_server.mark()
    fresh = Worker([seeds(grid_server)], settings, tmp_path)
    assert fresh.wait(120) == 0
    assert Counter(fetched(grid_server, mark)) == EXPECTED


def test_metrics_then_a_sigkilled_worker_reads_dead_within_the_lease_timeout(
        grid_server, redis_url, crawl_name, tmp_path):
    """A worker serving PROMETHEUS_PORT: its metrics parse with
    ``prometheus_client.parser``, labelled by crawl and by the node status
    lists, and agree with status. SIGKILLed, it reads ``alive: false`` and
    "lost" once its heartbeat is a lease timeout old, not before."""
    import signal
    import socket
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    lease_timeout = 4
    settings = {**SETTINGS, "REDIS_URL": redis_url, "CRAWL_NAME": crawl_name,
                "FRONTIER_LEASE_TIMEOUT": lease_timeout, "FRONTIER_HEARTBEAT_INTERVAL": 0.5}
    mark = grid_server.mark()
    a = Worker([seeds(grid_server)], {**settings, "PROMETHEUS_PORT": port}, tmp_path)
    wait_for_requests(grid_server, mark, 12)
    st = wait_status(settings, tmp_path, lambda st: st["nodes"] and st["nodes"][0]["pages"] >= 4)
    node = st["nodes"][0]
    assert (node["pid"], node["alive"], node["state"]) == (a.proc.pid, True, "running")

    def scrape() -> dict[str, dict]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        return {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}

    metrics = until(lambda: (m := scrape()) and m["crawler_pages_total"].value >= 4 and m, what="metrics")
    names = {"crawler_pages_total", "crawler_errors_total", "crawler_fetched_total", "crawler_links_parsed_total",
             "crawler_pages_per_minute", "crawler_cluster_pages_total", "crawler_cluster_errors_total",
             "crawler_cluster_pages_per_minute", "crawler_frontier_queued", "crawler_frontier_leased",
             "crawler_frontier_delayed", "crawler_redis_up"}
    assert names <= set(metrics), names - set(metrics)
    assert all(metrics[n].labels == {"crawl": crawl_name, "node": node["id"]} for n in names)
    assert metrics["crawler_redis_up"].value == 1
    assert metrics["crawler_fetched_total"].value >= metrics["crawler_pages_total"].value >= 4
    assert metrics["crawler_links_parsed_total"].value > 0 and metrics["crawler_cluster_pages_total"].value > 0

    a.proc.send_signal(signal.SIGKILL)
    a.wait(30)
    killed = time.monotonic()
    # Polled in this process (what `scrapy status` calls), every 0.1 s: a
    # status command's own start (seconds on a loaded machine) would be
    # counted in the wait.
    from scrapy.settings import Settings

    from crawler.operations import ops

    project = Settings()
    project.setmodule("crawler.settings")
    project.setdict({**settings, "CRAWL_DIR": str(tmp_path)})
    frontier = ops.open_frontier(project)
    try:
        st = until(lambda: (s := ops.status(frontier, lease_timeout)) and not s["nodes"][0]["alive"] and s,
                   timeout=30, what="the node read dead")
        waited = time.monotonic() - killed
    finally:
        frontier.client.close()
    assert st["nodes"][0]["state"] == "lost"
    # The last heartbeat was at most one interval before the kill.
    assert lease_timeout - 1.5 < waited < lease_timeout + 2, waited
