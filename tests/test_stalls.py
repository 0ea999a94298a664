"""A worker whose own loop stalls (stopped with SIGSTOP, or starved of CPU)
is not taken for a slow site, and does not send a request whose lease was
reaped while it stalled: what the chaos run found (issue 54).

``tests.support.stall.StallOnce`` blocks a worker's reactor once, as its
Nth request is about to go on the wire, as SIGSTOP would at that moment."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict

import pytest
import redis

from crawler.frontier import Frontier
from crawler.settings.components import DOWNLOADER_MIDDLEWARES
from crawler.stall import LoopWatch
from crawler.store import SQLiteStore
from tests.support.mockserver import GRID_HOSTS, grid_paths
from tests.support.workers import EXPECTED, Worker, seeds, wait_for_requests

pytestmark = pytest.mark.usefixtures("_no_worker_outlives_its_test")

# The project's downloader middlewares and the stall, after the WARC writer
# (900), before SendSpacingMiddleware (950).
STALL = {"DOWNLOADER_MIDDLEWARES": json.dumps({**DOWNLOADER_MIDDLEWARES, "tests.support.stall.StallOnce": 920})}


def test_loop_watch_sees_a_stall_and_what_it_overlapped():
    now = [100.0]
    watch = LoopWatch(slack=0.5, clock=lambda: now[0])
    for _ in range(5):
        now[0] += 0.1
        watch.tick()
    assert watch.clean(100.0) and watch.stalls == 0
    now[0] += 3.0  # stopped: the next tick comes 3 s late
    watch.tick()
    assert watch.stalls == 1
    assert not watch.clean(now[0] - 3.5)  # a download sent before the stall, answered after it
    assert watch.clean(now[0] + 0.01)  # one sent after it
    now[0] += 0.1
    watch.tick()
    assert watch.clean(now[0] - 0.05)


def test_a_stall_is_seen_before_the_timer_says_so():
    """The first code to run after SIGCONT may be a response's, before the
    timer's late tick: a loop whose last tick is overdue is stalled now."""
    now = [0.0]
    watch = LoopWatch(slack=0.5, clock=lambda: now[0])
    watch.start()
    try:
        now[0] += 2.0
        assert not watch.clean(1.5)
    finally:
        watch.stop()


@pytest.mark.slow
def test_latency_measured_across_the_workers_own_stall_slows_no_site(grid_server, redis_url, crawl_name, tmp_path):
    """One worker, one site, four requests at a time, no delay; its loop
    blocked 4 s at its 12th answer, others in flight: their 4 s are the
    worker's, not the site's (before: the site was slowed for the whole
    cluster: rate/refused/latency 1)."""
    site = GRID_HOSTS[0]
    settings = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name, "DOWNLOAD_DELAY": 0,
                "CONCURRENT_REQUESTS_PER_DOMAIN": 4, "STALL_SECONDS": 4, "STALL_AFTER": 12, **STALL}
    mark = grid_server.mark()
    worker = Worker([f"seeds={grid_server.url('/', host=site)}"], settings, tmp_path)
    assert worker.wait() == 0, worker.log[-3000:]
    assert worker.stat("rate/refused/latency") == 0, worker.log[-3000:]
    assert worker.stat("rate/slowdowns") == 0 and "(latency)" not in worker.log
    assert worker.stat("rate/stalled") >= 1, worker.log[-3000:]
    got = Counter((str(r["host"]), str(r["path"])) for r in grid_server.requests(mark))
    assert got == Counter({(site, p): 1 for p in ["/robots.txt", *grid_paths()]})


@pytest.mark.slow
def test_a_request_whose_lease_was_reaped_during_a_stall_is_not_sent(grid_server, redis_url, crawl_name, tmp_path):
    """Worker A's loop blocks 6 s as a request is about to go out, B
    running (FRONTIER_LEASE_TIMEOUT 2 s): B reaps A's leases and fetches
    that URL. A, awake, cannot show it still holds the lease, so it gives it
    back unsent, and the leases it had taken behind it too (its heartbeat,
    fresh again, no longer holds them). Every page fetched once, stored
    once, and every gap at a site holds the delay (before: the URL fetched
    twice, A's late request maybe closer to B's than the delay; then the
    request after it, its heartbeat fresh, sent though its lease was
    reaped)."""
    delay = 0.5
    settings = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name, "DOWNLOAD_DELAY": delay,
                "FRONTIER_LEASE_TIMEOUT": 2, "FRONTIER_HEARTBEAT_INTERVAL": 0.5, "CONCURRENT_REQUESTS": 1,
                "FRONTIER_DELAY_MARGIN": 0.1}
    flag = tmp_path / "stall-now"
    mark = grid_server.mark()
    a = Worker([seeds(grid_server)], {**settings, "STALL_SECONDS": 6, "STALL_FILE": str(flag), **STALL}, tmp_path)
    wait_for_requests(grid_server, mark, 3)
    b = Worker([], settings, tmp_path)
    frontier = Frontier(redis.Redis.from_url(redis_url), crawl_name, node="reader")
    deadline = time.monotonic() + 120
    while sum(1 for n in frontier.views.nodes().values() if n.get("state") == "running") < 2:
        assert time.monotonic() < deadline and b.proc.poll() is None, "B did not join"
        time.sleep(0.1)
    flag.touch()
    assert a.wait() == 0, a.log[-3000:]
    assert b.wait() == 0, b.log[-3000:]
    requests = grid_server.requests(mark)
    got = Counter((str(r["host"]), str(r["path"])) for r in requests)
    assert got == EXPECTED, ({k: n for k, n in got.items() if n != 1}, a.log[-6000:], b.log[-3000:])
    # Every lease B reaped from A (the request in hand and those A had
    # leased behind it) given back unsent; none acknowledged late.
    assert b.stat("frontier/reaped") >= 1, b.log[-3000:]
    assert a.stat("frontier/lease_lost") == b.stat("frontier/reaped"), a.log[-3000:]
    assert a.stat("frontier/stale_ack") == 0, a.log[-3000:]
    times = defaultdict(list)
    for r in requests:
        times[r["host"]].append(float(r["t"]))
    gaps = [y - x for ts in times.values() for x, y in zip(sorted(ts), sorted(ts)[1:])]
    assert min(gaps) >= delay, sorted(gaps)[:5]
    with SQLiteStore(tmp_path / f"{crawl_name}.sqlite3") as store:
        stored = Counter(p["url"] for p in store.iter_pages())
    assert len(stored) == len(GRID_HOSTS) * len(grid_paths()) and set(stored.values()) == {1}
