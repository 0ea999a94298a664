"""The adaptive rate (ADAPTIVE_RATE): a site's pace learned from its
refusals, shared by every worker through Redis (crawler/redis/lua/slow.lua),
and a crawl of a site that limits its rate (tests/support/limited_server.py)."""

from __future__ import annotations

import collections
import sys
import time

import pytest
import redis

from crawler.store.sqlite import SQLiteStore
from tests.support.crawl import run_crawl
from tests.support.servers import launch
from tests.test_frontier import link, make

PAUSE, MAX_PAUSE, MAX_PACE = 60.0, 600.0, 60.0


@pytest.fixture
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def slow(f, site="a", retry_after=0.0, latency=0.0, reason="429"):
    return f.politeness.slow(site, retry_after, latency, PAUSE, MAX_PAUSE, MAX_PACE, reason)


def succeed(f, n, site="a"):
    """``n`` leases of ``site`` done, each as a success."""
    for _ in range(n):
        leases, _ = f.queues.lease(1)
        f.queues.commit(acks=[(leases[0].id, "C", "")])


def ready_in(f, client, site="a"):
    """Seconds until ``site`` may be leased again, by Redis's clock."""
    seconds, micro = client.time()
    return (float(client.zscore(f.keys.site(site).ready, site)) - (seconds * 1000 + micro // 1000)) / 1000.0


def settle(f, client, site="a"):
    """The last slow-down of ``site`` 100 seconds ago: the server has seen its pace."""
    key = f.keys.site(site).prefix + "pstate"
    ok, last, *rest = client.hget(key, site).split(b"|")
    client.hset(key, site, b"|".join([ok, str(int(last) - 100_000).encode(), *rest]))


def gap_of(f, client, site="a"):
    return int(client.hget(f.keys.site(site).prefix + "pace", site) or 0)


def test_a_refusal_sets_a_pace_from_the_rate_the_site_was_asked_at(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=8)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(4)])
    leases, _ = f.queues.lease(4)
    assert len(leases) == 4  # no delay: four at once
    # Refused after 0.2 s with four in flight: one request every 50 ms; the pace doubles it.
    assert slow(f, latency=0.2) == (0.1, 0.0, True)
    assert gap_of(f, client) == 100
    # Refusals of requests sent before that slow-down are the same incident.
    assert slow(f, latency=0.2) == (0.1, 0.0, False)
    assert slow(f, latency=5.0) == (0.1, 0.0, False)
    assert client.hget(f.keys.site("a").stats, "slowdowns") == b"1"
    assert client.hget(f.keys.site("a").stats, "slow_same_incident") == b"2"


def test_the_pace_spaces_every_workers_leases(client, crawl_name):
    f1 = make(client, crawl_name, concurrency_per_site=8, node="w1")
    f2 = make(client, crawl_name, concurrency_per_site=8, node="w2")
    f1.queues.enqueue([link(f1, f"http://a/{i}", "a") for i in range(6)])
    slow(f1, latency=0.15)  # a pace of 300 ms, nothing in flight (latency over one)
    assert gap_of(f1, client) == 300
    first, _ = f1.queues.lease(5)
    assert len(first) == 1 and first[0].gap == 0.3  # one a gap
    assert 0.25 < ready_in(f2, client) <= 0.3
    assert f2.queues.lease(5)[0] == []
    time.sleep(ready_in(f2, client) + 0.02)
    assert len(f2.queues.lease(5)[0]) == 1


def test_successes_bring_the_pace_back_step_by_step(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=100)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(60)])
    slow(f, latency=0.5)
    assert gap_of(f, client) == 1000
    client.hset(f.keys.site("a").prefix + "pace", "a", 0)  # (leased at once below; the pace is set again after)
    leases, _ = f.queues.lease(60)
    client.hset(f.keys.site("a").prefix + "pace", "a", 1000)
    acks = [(lease.id, "C", "") for lease in leases]
    f.queues.commit(acks=acks[:24])
    assert gap_of(f, client) == 1000
    f.queues.commit(acks=acks[24:25])
    assert gap_of(f, client) == 970  # 25 successes: 3 % shorter
    f.queues.commit(acks=acks[25:50])
    assert gap_of(f, client) == 940
    # Near its limit (25 successes since the last incident): a third longer, not doubled.
    settle(f, client)
    assert slow(f, latency=0.0)[0] == pytest.approx(1.253)


def test_a_site_that_keeps_refusing_is_paused_doubling(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=8)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(3)])
    assert slow(f, latency=0.05) == (0.1, 0.0, True)  # the first incident: slower, no pause
    assert slow(f, latency=0.01) == (0.1, 0.0, False)  # within a second of it: the same incident
    for gap in (0.2, 0.4, 0.8, 1.6):  # refused again, no success between: slower each time
        settle(f, client)
        assert slow(f, latency=0.01) == (gap, 0.0, True)
    settle(f, client)  # at a request every 1.6 s, still refused: the site is paused
    pace, pause, new = slow(f, latency=0.01)
    assert (pace, pause, new) == (3.2, PAUSE, True)
    assert PAUSE - 1 < ready_in(f, client) <= PAUSE  # nothing of the site before the pause is over
    assert f.queues.lease(1)[0] == []
    settle(f, client)
    assert slow(f, latency=0.01)[1:] == (2 * PAUSE, True)


def test_a_success_between_two_incidents_means_no_pause(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=8)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(3)])
    leases, _ = f.queues.lease(1)
    assert slow(f, latency=0.01)[1] == 0.0
    f.queues.commit(acks=[(leases[0].id, "C", "")])
    settle(f, client)
    pace, pause, new = slow(f, latency=0.01)
    assert (pace, pause, new) == (0.04, 0.0, True)  # 20 ms doubled, no pause
    ok, _, strikes, why = client.hget(f.keys.site("a").prefix + "pstate", "a").split(b"|")
    assert (ok, strikes, why) == (b"0", b"0", b"429")


def test_retry_after_is_honoured_and_capped(client, crawl_name):
    f = make(client, crawl_name)
    assert slow(f, retry_after=30.0)[1] == 30.0
    time.sleep(0.01)
    assert f.politeness.slow("b", 5000.0, 0.0, PAUSE, MAX_PAUSE, MAX_PACE)[1] == MAX_PAUSE


def test_the_pace_is_capped_and_never_below_the_delay(client, crawl_name):
    f = make(client, crawl_name, default_delay=2.0)
    client.hset(f.keys.site("a").prefix + "pace", "a", 50_000)
    client.hset(f.keys.site("a").prefix + "pstate", "a", "0|0|0")
    assert slow(f, latency=0.0)[0] == MAX_PACE
    f2 = make(client, crawl_name + "x", default_delay=2.0)
    f2.queues.enqueue([link(f2, f"http://a/{i}", "a") for i in range(2)])
    client.hset(f2.keys.site("a").prefix + "pace", "a", 100)  # faster than the delay: the delay holds
    leases = f2.queues.lease(5)[0]
    assert len(leases) == 1 and leases[0].gap == pytest.approx(2.0)


@pytest.mark.parametrize("bad", [b"abc", b"-5", b"nan", b"inf", b"1e400"])
def test_a_malformed_pace_in_redis_reads_as_none(client, crawl_name, bad):
    f = make(client, crawl_name, concurrency_per_site=8)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(3)])
    client.hset(f.keys.site("a").prefix + "pace", "a", bad)
    client.hset(f.keys.site("a").prefix + "pstate", "a", b"x|y")
    assert len(f.queues.lease(3)[0]) == 3  # no gap
    assert slow(f, latency=0.03)[0] == pytest.approx(0.02)  # 30 ms over three in flight, doubled (floor 10 ms)


# -- a crawl ---------------------------------------------------------------------------------------


def limited_server(tmp_path, *args: str):
    log = tmp_path / "requests.jsonl"
    return launch([sys.executable, "-m", "tests.support.limited_server", "--hosts", "127.0.0.2", "--log", str(log),
                   *args], log)


@pytest.mark.slow
def test_a_rate_limited_site_is_crawled_near_its_limit_and_loses_nothing(tmp_path, frontier_settings):
    """The site answers 429 to more than 8 requests a second; the crawler
    is not told. It learns the pace within seconds, then keeps under it."""
    server = limited_server(tmp_path, "--limit", "8", "--pages", "160", "--latency", "0.005")
    try:
        result = run_crawl(server, tmp_path / "crawl", [f"seeds={server.url('/', host='127.0.0.2')}", "follow=all"],
                           {**frontier_settings, "DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
                            "RETRY_TIMES": 10, "SITEMAP_ENABLED": False}, timeout=240)
        log = server.requests(0)
    finally:
        server.stop()
    assert result.returncode == 0, result.log[-3000:]
    pages = [r for r in log if r["path"] != "/robots.txt"]
    ok = collections.Counter(r["path"] for r in pages if r["status"] == 200)
    # Every page once, none lost.
    assert sorted(ok) == sorted(["/", *(f"/p/{n}" for n in range(1, 161))]) and set(ok.values()) == {1}
    refused = [r for r in pages if r["status"] == 429]
    start = pages[0]["t"]
    late = [r for r in pages if r["t"] >= start + 10]
    late_refused = [r for r in late if r["status"] == 429]
    assert len(late) > 50
    assert len(late_refused) <= 0.02 * len(late), (len(late_refused), len(late))
    with SQLiteStore(result.store_path) as store:
        assert store.count_pages() == 161
    assert f"'rate/refused/429': {len(refused)}" in result.log


def test_the_view_shows_a_sites_pace_and_why(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=8)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(3)])
    slow(f, latency=0.05, reason="503\n<b>x")  # what is not a letter, digit, - or _ is dropped
    top = f.views.view()["top_sites"]
    assert [(t["site"], t["queued"], t["pace"], t["pace_why"]) for t in top] == [("a", 3, 0.1, "503bx")]
    assert top[0]["next_in"] == 0.0


def test_a_timeout_slows_gently_its_latency_is_no_pace(client, crawl_name):
    """A timeout's latency is the timeout: a site without a pace starts from
    10 ms (doubled), not from it."""
    f = make(client, crawl_name, concurrency_per_site=8)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(2)])
    assert slow(f, latency=8.0, reason="timeout") == (0.02, 0.0, True)
    assert slow(f, latency=8.0, reason="timeout") == (0.02, 0.0, False)  # sent before: the same incident


def test_latency_watch_slows_a_site_whose_answers_slow_down():
    from crawler.rate import LatencyWatch

    watch = LatencyWatch(3.0)
    assert not watch.slower("a", 0.2, 100.0)  # the first answer: the fastest so far
    assert [watch.slower("a", 0.25, t) for t in (101, 102, 103)] == [False, False, False]  # average 0.224
    # Answers of 2 s: the average 0.58 s, then 0.86 s, past 3x the fastest (0.6 s) and 0.7 s;
    # then quiet for 10 s.
    assert [watch.slower("a", 2.0, t) for t in (104, 105, 106, 114)] == [False, True, False, False]
    assert watch.slower("a", 2.0, 115.5)  # 10 s after the last slow-down: again
    # Fast answers that are a few times slower but not half a second: nothing.
    assert not any(watch.slower("b", x, t) for t, x in enumerate([0.01, 0.08, 0.09, 0.1, 0.1, 0.1, 0.1]))


@pytest.mark.slow
def test_a_site_whose_latency_grows_with_concurrency_is_asked_less_at_once(tmp_path, frontier_settings):
    """Each answer takes 50 ms plus 300 ms for every other request in flight;
    the site never refuses. The crawler, free to send 8 at once, lowers its
    pace once the answers slow down: the last pages are asked at most three
    at a time, and every page is stored once."""
    server = limited_server(tmp_path, "--limit", "1000", "--pages", "40", "--latency", "0.05",
                            "--per-request", "0.3")
    try:
        result = run_crawl(server, tmp_path / "crawl", [f"seeds={server.url('/', host='127.0.0.2')}", "follow=all"],
                           {**frontier_settings, "DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": 8,
                            "SITEMAP_ENABLED": False}, timeout=240)
        log = server.requests(0)
    finally:
        server.stop()
    assert result.returncode == 0, result.log[-3000:]
    pages = [r for r in log if r["path"] != "/robots.txt"]
    assert sorted(r["path"] for r in pages) == sorted(["/", *(f"/p/{n}" for n in range(1, 41))])
    assert max(r["inflight"] for r in pages[:21]) >= 4  # it was sending several at once
    assert max(r["inflight"] for r in pages[-15:]) <= 3
    assert "'rate/refused/latency': " in result.log and "rate/refused/429" not in result.log
