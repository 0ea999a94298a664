"""Crawl worker processes on the grid sites (tests/support/mockserver.py:
127.0.0.5-8, four IP-address sites of 31 pages each, linking within
themselves and off-site), sharing one frontier.

``Worker`` runs ``scrapy crawl`` in the background; every process a test
starts goes into ``RUNNING``, which the ``_no_worker_outlives_its_test``
fixture (tests/conftest.py) empties after each test, killing what still
runs. ``EXPECTED`` is what a crawl of the grid fetches, ``seeds`` its
seed argument; ``wait_for_requests`` and ``fetched`` read the server's
request log; ``sigkill_scenario`` is the SIGKILLed worker scenario, on a
single Redis and on a Redis Cluster alike."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

from crawler.frontier import Frontier
from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import crawl_cmd
from tests.support.mockserver import GRID_HOSTS, grid_paths

EXPECTED = Counter((h, p) for h in GRID_HOSTS for p in ["/robots.txt", *grid_paths()])

DELAY = 0.2

RUNNING: list[subprocess.Popen] = []


def seeds(server) -> str:
    return "seeds=" + ",".join(server.url("/", host=h) for h in GRID_HOSTS)


class Worker:
    def __init__(self, args: list[str], settings: dict, crawl_dir: Path):
        self.proc = subprocess.Popen(crawl_cmd(["follow=all", *args], settings, crawl_dir), cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        RUNNING.append(self.proc)
        self.log = ""

    def wait(self, timeout: float = 120) -> int:
        try:
            self.log, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.log, _ = self.proc.communicate()
            raise AssertionError(f"worker did not finish:\n{self.log[-4000:]}") from None
        return self.proc.returncode

    def stat(self, name: str) -> int:
        for line in self.log.splitlines():
            if line.strip().startswith(f"'{name}':"):
                return int(line.split(":", 1)[1].strip().rstrip(",}"))
        return 0


def wait_for_requests(server, mark: int, n: int, timeout: float = 180) -> None:
    """Until the server has seen ``n`` requests since ``mark``. It returns
    as soon as they come: the bound is for a crawl that never will, and is
    generous because on a machine busy with other work a worker's start
    (Scrapy's imports, a scrapyd job's egg) took over a minute."""
    deadline = time.monotonic() + timeout
    while len(server.requests(mark)) < n:
        assert time.monotonic() < deadline, "the crawl did not get going"
        time.sleep(0.02)


def fetched(server, mark: int) -> list[tuple[str, str]]:
    return [(str(r["host"]), str(r["path"])) for r in server.requests(mark)]


def sigkill_scenario(grid_server, client, redis_url: str, crawl_name: str, tmp_path: Path) -> tuple[Frontier, str]:
    """Worker A is SIGKILLed mid-crawl, B and a restarted A finish: nothing
    lost, at most A's held leases fetched again, every one of them returned
    (by B's reaper once the lease times out, or taken back at once by the
    restarted A, which finds A's process gone on this machine), every page
    stored. Returns the frontier and A's node (on a single Redis and on
    a Redis Cluster alike: tests/test_redis_cluster.py)."""
    settings = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name, "DOWNLOAD_DELAY": 0.05,
                "FRONTIER_LEASE_TIMEOUT": 2, "FRONTIER_HEARTBEAT_INTERVAL": 0.3,
                "CONCURRENT_REQUESTS": 8, "FRONTIER_DELAY_MARGIN": 0}
    mark = grid_server.mark()
    a = Worker([seeds(grid_server)], settings, tmp_path)
    wait_for_requests(grid_server, mark, 4)  # B finds work (else it stops at once)
    b = Worker([], settings, tmp_path)
    wait_for_requests(grid_server, mark, 40)
    a.proc.send_signal(signal.SIGKILL)
    a.wait()
    frontier = Frontier(client, crawl_name, node="reader")
    node_a = next(k for k, v in frontier.views.nodes().items() if v["pid"] == a.proc.pid)
    held = frontier.views.held_leases(node_a)
    again = Worker([], settings, tmp_path)  # A restarted: a new node, no seeds
    assert b.wait() == 0, b.log[-3000:]
    assert again.wait() == 0, again.log[-3000:]
    got = Counter(fetched(grid_server, mark))
    assert set(got) == set(EXPECTED)  # nothing lost
    refetched = sum(got.values()) - sum(EXPECTED.values())
    assert refetched <= held, (refetched, held)
    # B too is on this machine: whichever of B and the restarted A looks
    # first takes them back (the heartbeat finds A's pid gone).
    returned = sum(w.stat("frontier/reaped") + w.stat("frontier/taken_over") for w in (b, again))
    assert returned == held, (returned, held)
    for w in (b, again):
        if w.stat("frontier/taken_over"):
            assert f"Took back {w.stat('frontier/taken_over')} leases" in w.log
    with SQLiteStore(tmp_path / f"{crawl_name}.sqlite3") as store:
        assert store.count_pages(state="C") == len(GRID_HOSTS) * len(grid_paths())
    return frontier, node_a
