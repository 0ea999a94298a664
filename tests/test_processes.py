"""``CRAWL_PROCESSES``: one ``scrapy crawl`` starts N workers of the same
crawl and looks after them (crawler/operations/supervisor.py), end to end against the
grid sites and a real Redis."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections import Counter

import psutil
import pytest
import redis

from crawler.frontier import Frontier
from crawler.operations.supervisor import SUPERVISOR_ENV, supervised, worker_command
from tests.support import ROOT
from tests.support.crawl import crawl_cmd, until
from tests.support.workers import EXPECTED, RUNNING, seeds

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("_no_worker_outlives_its_test")]

PAGES = sum(n for (_, path), n in EXPECTED.items() if path != "/robots.txt")


class Supervised:
    """``scrapy crawl site ... -s CRAWL_PROCESSES=N`` as an operator runs it,
    its output read line by line as it comes."""

    def __init__(self, args: list[str], settings: dict, crawl_dir) -> None:
        self.proc = subprocess.Popen(crawl_cmd(["follow=all", *args], settings, crawl_dir), cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        RUNNING.append(self.proc)
        self.lines: queue.Queue[str] = queue.Queue()
        self.out: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out.append(line)
            self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line like {pattern!r}:\n" + "".join(self.out[-60:])) from None
            m = re.search(pattern, line)
            if m:
                return m

    def wait(self, timeout: float = 120) -> int:
        code = self.proc.wait(timeout)
        time.sleep(0.2)  # the reader takes the last lines
        return code

    @property
    def log(self) -> str:
        return "".join(self.out)


@pytest.fixture
def settings(redis_url, crawl_name):
    yield {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name, "CRAWL_PROCESSES": 2, "DOWNLOAD_DELAY": 0.05,
           "FRONTIER_HEARTBEAT_INTERVAL": 0.5, "FRONTIER_LEASE_TIMEOUT": 3}
    client = redis.Redis.from_url(redis_url)
    Frontier(client, crawl_name, node="reader").views.delete_all()
    client.close()


def fetched(server, mark) -> Counter:
    return Counter((str(r["host"]), str(r["path"])) for r in server.requests(mark))


def test_two_processes_crawl_every_url_once_and_say_which_is_which(grid_server, settings, tmp_path):
    mark = grid_server.mark()
    run = Supervised([seeds(grid_server)], settings, tmp_path)
    assert run.wait() == 0, run.log[-3000:]
    assert fetched(grid_server, mark) == EXPECTED
    log = run.log
    assert re.search(r"^\[supervisor\] starting 2 workers of one crawl$", log, re.M)
    pids = [int(p) for p in re.findall(r"^\[supervisor\] (?:w1|w2) started \(pid (\d+)\)$", log, re.M)]
    assert len(pids) == 2
    for name in ("w1", "w2"):
        assert re.search(rf"^\[{name}\] .*Spider opened", log, re.M)
        assert re.search(rf"^\[{name}\] .*Spider closed \(finished\)", log, re.M)
        assert re.search(rf"^\[supervisor\] {name} ended \(status 0\)$", log, re.M)
    assert log.rstrip().endswith("[supervisor] every worker has ended")
    client = redis.Redis.from_url(settings["REDIS_URL"])
    frontier = Frontier(client, settings["CRAWL_NAME"], node="reader")
    nodes = frontier.views.nodes()
    assert sorted(int(n["pid"]) for n in nodes.values()) == sorted(pids)
    pages = {n: c.get("pages", 0) for n, c in frontier.views.counters_of(sorted(nodes)).items()}
    assert sum(pages.values()) == PAGES and min(pages.values()) > 0, pages  # both took part
    assert [_process(p) for p in pids] == [None, None]  # no worker outlives the command


def test_two_processes_into_mongodb_are_spawned_and_store_every_page_once(grid_server, settings, tmp_path,
                                                                         mongo_uri):
    """With MONGO_URI the supervisor's check of the store leaves pymongo's
    threads running a moment: it says so and spawns its workers rather than
    fork with threads; they store every page once."""
    import pymongo

    database = "procs_" + settings["CRAWL_NAME"].replace("-", "_")[:40]
    mark = grid_server.mark()
    run = Supervised([seeds(grid_server)], {**settings, "MONGO_URI": mongo_uri, "MONGO_DATABASE": database},
                     tmp_path)
    assert run.wait() == 0, run.log[-3000:]
    assert fetched(grid_server, mark) == EXPECTED
    assert re.search(r"^\[supervisor\] threads running \(.*pymongo.*\): the workers are started as new "
                     r"processes$", run.log, re.M), run.log[-3000:]
    with pymongo.MongoClient(mongo_uri) as client:
        urls = [d["url"] for d in client[database].pages.find({"state": "C"}, {"url": 1})]
        client.drop_database(database)
    assert len(urls) == len(set(urls)) == PAGES


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def test_a_killed_worker_is_restarted_and_nothing_is_lost(grid_server, settings, tmp_path):
    settings = {**settings, "DOWNLOAD_DELAY": 0.3}
    mark = grid_server.mark()
    run = Supervised([seeds(grid_server)], settings, tmp_path)
    pid = int(run.wait_for(r"^\[supervisor\] w2 started \(pid (\d+)\)").group(1))
    run.wait_for(r"^\[w2\] .*Spider opened")
    # The first workers are forked from the supervisor (the same command
    # line); a restarted one is spawned, a crawl of one process.
    supervisor = psutil.Process(run.proc.pid).cmdline()
    assert psutil.Process(pid).cmdline() == supervisor and "CRAWL_PROCESSES=2" in supervisor
    time.sleep(2)
    assert len(grid_server.requests(mark)) < sum(EXPECTED.values())  # mid-crawl
    psutil.Process(pid).kill()
    run.wait_for(r"^\[supervisor\] w2 ended with status -9: restarting it in 1 s \(restart 1\)$")
    again = int(run.wait_for(r"^\[supervisor\] w2 started \(pid (\d+)\)").group(1))
    assert again != pid
    # Popen returns once the child's exec has closed its close-on-exec pipe,
    # which Linux does before the new program's arguments are set up: read
    # that early (a loaded machine, CI), the command line is still empty.
    until(lambda: psutil.Process(again).cmdline(), 30, "the restarted worker's command line")
    spawned = psutil.Process(again).cmdline()
    assert spawned != supervisor and spawned[-2:] == ["-s", "CRAWL_PROCESSES=1"]
    assert run.wait() == 0, run.log[-3000:]
    got = fetched(grid_server, mark)
    # Every URL fetched; those the killed worker held may be fetched again
    # once its leases are taken back (at most its lease batch).
    assert set(got) == set(EXPECTED)
    assert sum(got.values()) - sum(EXPECTED.values()) <= 16
    client = redis.Redis.from_url(settings["REDIS_URL"])
    stats = Frontier(client, settings["CRAWL_NAME"], node="reader").views.stats()
    assert (stats["done"], stats["queued"], stats["leased"]) == (PAGES, 0, 0)


def test_ctrl_c_stops_every_worker_cleanly_and_the_crawl_resumes(grid_server, settings, tmp_path):
    settings = {**settings, "DOWNLOAD_DELAY": 0.3}
    mark = grid_server.mark()
    run = Supervised([seeds(grid_server)], settings, tmp_path)
    pids = [int(run.wait_for(rf"^\[supervisor\] {w} started \(pid (\d+)\)").group(1)) for w in ("w1", "w2")]
    run.wait_for(r"^\[w2\] .*Spider opened")
    time.sleep(1.5)
    run.proc.send_signal(signal.SIGINT)
    assert run.wait() == 0, run.log[-3000:]
    assert "[supervisor] SIGINT: passing it to every worker (they stop cleanly)" in run.log
    for w in ("w1", "w2"):
        assert re.search(rf"^\[{w}\] .*Spider closed \(shutdown\)", run.log, re.M)
    assert [_process(p) for p in pids] == [None, None]
    client = redis.Redis.from_url(settings["REDIS_URL"])
    frontier = Frontier(client, settings["CRAWL_NAME"], node="reader")
    stats = frontier.views.stats()
    assert stats["leased"] == 0 and stats["queued"] > 0  # given back, waiting for the next run
    first = fetched(grid_server, mark)
    mark = grid_server.mark()
    resumed = Supervised([], settings, tmp_path)
    assert resumed.wait() == 0, resumed.log[-3000:]
    both = first + fetched(grid_server, mark)
    assert set(both) == set(EXPECTED)


def test_a_bad_process_count_is_one_line(tmp_path):
    proc = subprocess.run(crawl_cmd(["seeds=http://127.0.0.1:9/"], {"CRAWL_PROCESSES": "many"}, tmp_path), cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "Error: bad setting: CRAWL_PROCESSES='many' must be a number of processes from 1 to 256, or auto")


def test_a_worker_gets_the_spiders_arguments_and_one_process():
    cmd = worker_command("site", {"seeds": "http://a/", "topic": "t.yaml"}, ["CRAWL_PROCESSES=auto", "X=1"])
    assert cmd[1:] == ["-m", "scrapy", "crawl", "site", "-a", "seeds=http://a/", "-a", "topic=t.yaml",
                       "-s", "X=1", "-s", "CRAWL_PROCESSES=1"]


def test_a_worker_at_its_bound_of_held_leases_waits_and_loses_nothing(grid_server, settings, tmp_path):
    settings = {**settings, "CRAWL_PROCESSES": 1, "DOWNLOAD_DELAY": 0, "FRONTIER_MAX_HELD": 2}
    mark = grid_server.mark()
    run = Supervised([seeds(grid_server)], settings, tmp_path)
    assert run.wait() == 0, run.log[-3000:]
    assert fetched(grid_server, mark) == EXPECTED
    held_back = re.search(r"'frontier/lease_held_back': (\d+)", run.log)
    assert held_back and int(held_back.group(1)) > 0
    assert "[supervisor]" not in run.log  # one process: no supervisor


def _embedded_servers(crawl_dir) -> list[psutil.Process]:
    """The embedded Redis servers of ``crawl_dir`` (redis-server runs in its data directory)."""
    found = []
    for proc in psutil.process_iter(["name", "cwd"]):
        if proc.info["name"] == "redis-server" and proc.info["cwd"] == str(crawl_dir / "redis"):
            found.append(proc)
    return found


def test_workers_on_the_embedded_redis_leave_it_to_the_supervisor_which_shuts_it_down(grid_server, tmp_path):
    """Without REDIS_URL every worker joins the embedded server the
    supervisor started (its preflight) and holds; the workers leave it
    running, and it is gone once the supervisor has ended."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    mark = grid_server.mark()
    cmd = crawl_cmd(["follow=all", seeds(grid_server)], {"CRAWL_PROCESSES": 2, "DOWNLOAD_DELAY": 0.05}, tmp_path)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    RUNNING.append(proc)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out[-3000:]
    assert fetched(grid_server, mark) == EXPECTED
    for name in ("w1", "w2"):
        assert re.search(rf"^\[{name}\] .*Frontier site on .*redis\.socket", out, re.M)
        assert re.search(rf"^\[supervisor\] {name} ended \(status 0\)$", out, re.M)
    assert _embedded_servers(tmp_path) == []


def test_a_forked_worker_that_ends_first_leaves_the_embedded_redis_to_the_others(grid_server, tmp_path):
    """A worker forked from the supervisor inherits the supervisor's handle
    on the embedded server: stopped early (its exit handlers run), it must
    not take the server with it while the other worker crawls on."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    mark = grid_server.mark()
    cmd = crawl_cmd(["follow=all", seeds(grid_server)], {"CRAWL_PROCESSES": 2, "DOWNLOAD_DELAY": 0.3,
                                                         "FRONTIER_HEARTBEAT_INTERVAL": 0.5}, tmp_path)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    RUNNING.append(proc)
    run = Supervised.__new__(Supervised)
    run.proc, run.lines, run.out = proc, queue.Queue(), []
    threading.Thread(target=run._read, daemon=True).start()
    pid = int(run.wait_for(r"^\[supervisor\] w1 started \(pid (\d+)\)").group(1))
    run.wait_for(r"^\[w1\] .*Spider opened")
    if not any(re.search(r"^\[w2\] .*Spider opened", line) for line in run.out):  # it may come first
        run.wait_for(r"^\[w2\] .*Spider opened")
    time.sleep(1.5)
    assert len(grid_server.requests(mark)) < sum(EXPECTED.values())  # mid-crawl
    os.kill(pid, signal.SIGINT)  # w1 alone stops cleanly: its leases go back
    run.wait_for(r"^\[supervisor\] w1 ended \(status 0\)$")
    assert run.wait() == 0, run.log[-3000:]
    assert set(fetched(grid_server, mark)) == set(EXPECTED)
    assert re.search(r"^\[w2\] .*Spider closed \(finished\)", run.log, re.M), run.log[-3000:]
    w2 = "".join(line for line in run.out if line.startswith("[w2]"))
    assert " ERROR: " not in w2 and "ConnectionError" not in w2 and "redis_error" not in w2, run.log[-3000:]
    assert _embedded_servers(tmp_path) == []


def test_only_a_worker_of_its_running_parent_counts_as_supervised(monkeypatch):
    monkeypatch.delenv(SUPERVISOR_ENV, raising=False)
    assert not supervised()
    monkeypatch.setenv(SUPERVISOR_ENV, str(os.getppid()))
    assert supervised()
    monkeypatch.setenv(SUPERVISOR_ENV, str(os.getpid()))  # not its parent: left over from another run
    assert not supervised()
    monkeypatch.setenv(SUPERVISOR_ENV, "")
    assert not supervised()
