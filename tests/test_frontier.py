"""The frontier's Redis operations against a real Redis (REDIS_URL, else the
embedded one), one crawl name (key prefix) per test."""

from __future__ import annotations

import hashlib
import json
import pickle
import time

import pytest
import redis
from scrapy import Request, Spider

from crawler.duplicates.fingerprint import content_hash, fingerprints, shingles, sketch
from crawler.frontier.dupindex import page_id
from crawler.frontier import Frontier, LinkEntry
from crawler.frontier.serialize import SerializationError, request_from_json, request_to_json


@pytest.fixture
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def make(client, crawl_name, **kw) -> Frontier:
    kw.setdefault("default_delay", 0)
    kw.setdefault("delay_margin", 0)
    return Frontier(client, crawl_name, node=kw.pop("node", "n1"), **kw)


def link(f: Frontier, url: str, site: str, head: bool = False) -> LinkEntry:
    bucket, member = f.queues.slot(hashlib.sha1(url.encode()).digest())
    return LinkEntry(bucket, member, site, json.dumps({"u": url}), head)


def urls(leases) -> list[str]:
    return [json.loads(lease.entry)["u"] for lease in leases]


def test_enqueue_dedups_exactly_and_atomically(client, crawl_name):
    f = make(client, crawl_name)
    batch = [link(f, f"http://a/{i}", "a") for i in range(100)]
    assert f.queues.enqueue(batch + batch[:10]) == (100, 10, 0)
    assert f.queues.enqueue(batch) == (0, 100, 0)
    assert f.views.stats()["queued"] == 100
    assert f.views.pending() == 100


def test_dedup_costs_at_most_16_bytes_per_url(client, crawl_name):
    f = make(client, crawl_name, buckets=64)
    n = 20_000
    for start in range(0, n, 1000):
        f.queues.enqueue([LinkEntry(*f.queues.slot(hashlib.sha1(f"u{i}".encode()).digest()), "s", "")
                   for i in range(start, start + 1000)])
    keys = f.views.dedup_keys()
    assert len(keys) == 64
    assert {client.object("encoding", k) for k in keys} == {b"intset"}
    used = sum(client.memory_usage(k, samples=0) for k in keys)
    assert used / n <= 16, used / n
    # Exact: every one of them is now a duplicate, no new URL is.
    again = [LinkEntry(*f.queues.slot(hashlib.sha1(f"u{i}".encode()).digest()), "s", "")
             for i in range(n - 1000, n + 1000)]
    added, dup, _ = f.queues.enqueue(again)
    assert (added, dup) == (1000, 1000)


def test_lease_takes_one_request_per_ready_site(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=4, default_delay=1)
    f.queues.enqueue([link(f, f"http://{s}/{i}", s) for i in range(3) for s in ("a", "b", "c")])
    leases, _ = f.queues.lease(10)
    assert sorted((lease.site, u) for lease, u in zip(leases, urls(leases))) == [
        ("a", "http://a/0"), ("b", "http://b/0"), ("c", "http://c/0")]
    assert f.queues.lease(2)[0] == []  # every site waits for its delay


def test_lease_fills_free_concurrency_of_sites_without_delay(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=3)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(5)])
    assert urls(f.queues.lease(10)[0]) == ["http://a/0", "http://a/1", "http://a/2"]


def test_live_workers_share_a_sites_concurrency(client, crawl_name):
    a = make(client, crawl_name, concurrency_per_site=8, node="a", lease_timeout=30)
    b = make(client, crawl_name, concurrency_per_site=8, node="b", lease_timeout=30)
    a.queues.enqueue([link(a, f"http://s/{i}", "s") for i in range(30)])
    a.control.heartbeat()
    alone, _ = a.queues.lease(16)
    assert len(alone) == 8  # the only live worker: the whole site
    a.queues.commit(acks=[(lease.id, "C", "") for lease in alone], downloaded=[lease.id for lease in alone])
    b.control.heartbeat()
    a.control.heartbeat()
    assert (a.live_nodes, b.live_nodes) == (2, 2)
    mine, _ = a.queues.lease(16)
    assert len(mine) == 4  # its share of the site's 8 between two workers
    assert a.queues.lease(16, in_flight={"s": 4})[0] == []  # at its share ...
    theirs, _ = b.queues.lease(16)
    assert len(theirs) == 4  # ... though 4 slots were free: the other worker's


def test_a_lease_call_counts_the_live_workers_between_heartbeats(client, crawl_name):
    """Workers started together each see only themselves at their first
    heartbeat; the lease call counts them again (at most every 0.1 s), so
    the first to lease does not keep a one-site crawl's every slot."""
    a = make(client, crawl_name, concurrency_per_site=8, node="a", lease_timeout=30)
    b = make(client, crawl_name, concurrency_per_site=8, node="b", lease_timeout=30)
    a.queues.enqueue([link(a, f"http://s/{i}", "s") for i in range(30)])
    a.control.heartbeat()
    assert a.live_nodes == 1
    b.control.heartbeat()  # b joins; a does not beat again
    first, _ = a.queues.lease(2)
    assert len(first) == 2 and a.live_nodes == 2  # counted in this call's round trip
    time.sleep(0.11)
    more, _ = a.queues.lease(16, in_flight={"s": 2})
    assert len(more) == 2  # its share of 8 between two workers is 4
    theirs, _ = b.queues.lease(16)
    assert len(theirs) == 4


def test_a_worker_that_finds_nothing_asks_again_soon(client, crawl_name, monkeypatch):
    """0.1 s after finding nothing, then every 0.2 s (a worker whose peer
    is fetching the seed takes part as soon as links come); a site with
    queued work whose slots another worker holds: within 0.1 s. The
    workers' clock is the test's, so the waits are exact however slow the
    machine (the waits are the worker's own; Redis holds no delay here)."""
    from types import SimpleNamespace

    from crawler.frontier import queues

    now = [1000.0]
    monkeypatch.setattr(queues, "time", SimpleNamespace(
        monotonic=lambda: now[0], time=time.time, time_ns=time.time_ns, sleep=time.sleep))
    f1 = make(client, crawl_name, node="w1", concurrency_per_site=1)
    f2 = make(client, crawl_name, node="w2", concurrency_per_site=1)
    # (The clock is moved to exactly what the worker computed: now + wait.)
    t = now[0]
    leases, wait = f2.queues.lease(4)
    assert leases == [] and wait == pytest.approx(0.1)
    now[0] = t + 0.05
    assert f2.queues.lease(4) == ([], pytest.approx(0.05))  # not asked again yet
    now[0] = t = t + 0.1
    leases, wait = f2.queues.lease(4)
    assert leases == [] and wait == pytest.approx(0.2)
    f1.queues.enqueue([link(f1, f"http://a/{i}", "a") for i in range(3)])
    now[0] = t = t + 0.2
    taken, _ = f1.queues.lease(1)
    assert urls(taken) == ["http://a/0"]  # the site's one slot
    leases, wait = f2.queues.lease(4)
    assert leases == [] and wait == pytest.approx(0.1)  # waiting for the slot, not for 0.5 s
    f1.queues.commit(downloaded=[taken[0].id])
    now[0] = t + 0.1
    assert urls(f2.queues.lease(4)[0]) == ["http://a/1"]


def test_site_delay_holds_for_every_worker(client, crawl_name):
    """The site's delay (2 s) after a download, held in Redis for every
    worker: another worker, and a new one that has asked nothing before,
    get nothing within it, and the next URL after it. Redis judges the
    delay by its own clock, some time inside each call: a call that ended
    within the delay must get nothing, one begun after it the next URL,
    however slow the machine (a stalled one lands in the second case)."""
    delay = 2.0
    f1 = make(client, crawl_name, default_delay=delay, node="w1")
    f2 = make(client, crawl_name, default_delay=delay, node="w2", concurrency_per_site=1)
    f1.queues.enqueue([link(f1, f"http://a/{i}", "a") for i in range(3)])
    first, _ = f1.queues.lease(1)
    assert urls(first) == ["http://a/0"]
    before = time.monotonic()  # the delay starts inside the next call
    f1.queues.lease(1, downloaded=[first[0].id])  # download over: only the delay holds now
    after = time.monotonic()
    leases, wait = f2.queues.lease(1)
    if time.monotonic() < before + delay:
        assert leases == [] and 0 <= wait <= delay
    time.sleep(max(0.0, before + 0.5 - time.monotonic()))
    fresh = make(client, crawl_name, default_delay=delay, node="w3", concurrency_per_site=1)
    asked = time.monotonic()
    got = urls(fresh.queues.lease(1)[0])
    if time.monotonic() < before + delay:
        assert got == []  # still within the site's delay
    elif asked > after + delay:
        assert got == ["http://a/1"]  # the machine stalled past the delay: the next URL
    else:
        assert got in ([], ["http://a/1"])  # the call spanned the delay's end
    if got:
        return  # the next URL went to the new worker: asserted above
    time.sleep(max(0.0, after + delay + 0.05 - time.monotonic()))
    leases, _ = f2.queues.lease(1)
    assert urls(leases) == ["http://a/1"]


def test_site_concurrency_counts_downloads_cluster_wide(client, crawl_name):
    f1 = make(client, crawl_name, node="w1", concurrency_per_site=2)
    f2 = make(client, crawl_name, node="w2", concurrency_per_site=2)
    f1.queues.enqueue([link(f1, f"http://a/{i}", "a") for i in range(4)])
    a, _ = f1.queues.lease(1)
    b, _ = f2.queues.lease(1)
    assert len(a) == len(b) == 1
    assert f2.queues.lease(1)[0] == []  # two downloads in flight for site a
    assert urls(f2.queues.lease(1, downloaded=[])[0]) == []
    leases, _ = f1.queues.lease(1, downloaded=[a[0].id])  # a's download is over
    assert urls(leases) == ["http://a/2"]


def test_dead_workers_leases_return_to_the_head_of_their_queue(client, crawl_name):
    dead = make(client, crawl_name, node="dead", lease_timeout=0.2)
    alive = make(client, crawl_name, node="alive", lease_timeout=0.2)
    dead.queues.enqueue([link(dead, f"http://a/{i}", "a") for i in range(3)])
    dead.control.heartbeat()
    held, _ = dead.queues.lease(1)
    assert urls(held) == ["http://a/0"]
    time.sleep(0.3)
    reaped, nodes, mine = alive.control.heartbeat()
    assert (reaped, nodes, mine) == (1, 1, set())
    assert urls(alive.queues.lease(1)[0]) == ["http://a/0"]  # first again
    record = alive.views.nodes()["dead"]
    assert record["state"] == "lost"
    assert alive.views.stats()["reaped"] == 1


def test_acks_settle_and_count_states(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=5)
    f.queues.enqueue([link(f, f"http://{s}/", s) for s in ("a", "b")])
    leases, _ = f.queues.lease(5)
    result = f.queues.commit(links=[link(f, "http://a/new", "a")],
                      acks=[(leases[0].id, "C", ""), (leases[1].id, "E", "HTTP 404"), ("nope", "C", "")])
    assert result.counts() == {"added": 1, "duplicates": 0, "capped": 0, "acked": 2, "stale": 1}
    stats = f.views.stats()
    assert (stats["done"], stats["errors"], stats["leased"], stats["queued"]) == (1, 1, 0, 1)
    error = f.views.errors()[0]
    assert error["reason"] == "HTTP 404"
    assert f.views.node_counters("n1") == {"pages": 1, "errors": 1}


def test_revisits_and_errors_fetched_again_count_pages_once(client, crawl_name):
    """A re-crawl's visit ("V") is a revisit, not a page (its failure a
    revisit error); an error's URL done at last ("A") is a page and one
    error less: pages count pages, not fetches."""
    f = make(client, crawl_name, concurrency_per_site=9)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(5)])
    leases, _ = f.queues.lease(5)
    f.queues.commit(acks=[(leases[0].id, "C", ""), (leases[1].id, "E", "HTTP 500")])
    assert {k: f.views.stats().get(k, 0) for k in ("done", "errors", "revisits", "revisit_errors")} == \
        {"done": 1, "errors": 1, "revisits": 0, "revisit_errors": 0}
    f.queues.commit(acks=[(leases[2].id, "CV", ""), (leases[3].id, "EV", "HTTP 404"), (leases[4].id, "CA", "")])
    assert {k: f.views.stats().get(k, 0) for k in ("done", "errors", "revisits", "revisit_errors")} == \
        {"done": 2, "errors": 0, "revisits": 1, "revisit_errors": 1}
    assert [e["reason"] for e in f.views.errors()] == ["HTTP 404", "HTTP 500"]
    # An error's URL that fails again ("EA") stays one error: listed, not counted twice.
    f.queues.enqueue([link(f, "http://a/again", "a")])
    again, _ = f.queues.lease(1)
    f.queues.commit(acks=[(again[0].id, "E", "HTTP 500")])
    f.queues.enqueue([link(f, "http://a/again2", "a")])
    again2, _ = f.queues.lease(1)
    f.queues.commit(acks=[(again2[0].id, "EA", "HTTP 500")])
    assert f.views.stats()["errors"] == 1 and [e["reason"] for e in f.views.errors()][:2] == ["HTTP 500", "HTTP 500"]
    assert f.views.node_counters("n1") == {"pages": 3, "errors": 4}  # what the node stored and settled


def test_retry_waits_its_backoff_then_joins_the_tail(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=5)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(2)])
    leases, _ = f.queues.lease(1)
    f.queues.commit(requeues=[(leases[0].id, 0.3, "a", leases[0].entry)])
    assert urls(f.queues.lease(1)[0]) == ["http://a/1"]
    leases, wait = f.queues.lease(1)
    assert leases == [] and 0 < wait <= 0.3
    time.sleep(wait + 0.02)
    assert urls(f.queues.lease(1)[0]) == ["http://a/0"]
    assert f.views.stats()["retried"] == 1


def test_release_gives_leases_back_in_order(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=5, default_delay=0.5)
    f.queues.enqueue([link(f, f"http://{s}/{i}", s) for i in range(2) for s in ("a", "b")])
    leases, _ = f.queues.lease(5)
    assert f.queues.release([lease.id for lease in leases]) == 2
    time.sleep(0.55)
    again, _ = f.queues.lease(5)
    assert sorted(urls(again)) == sorted(urls(leases))


def test_backoff_pushes_a_site_out_and_success_halves_it(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=5)
    f.queues.enqueue([link(f, f"http://a/{i}", "a") for i in range(3)])
    assert f.politeness.backoff("a", 0.4, 10) == 0.4
    assert f.queues.lease(1)[0] == []
    assert f.politeness.backoff("a", 0.4, 10) == 0.8  # doubles
    time.sleep(0.85)
    leases, _ = f.queues.lease(1)
    f.queues.commit(acks=[(leases[0].id, "C", "")])
    assert int(client.hget(f.keys.site("a").backoff, "a")) == 400


def test_per_site_cap_is_cluster_wide(client, crawl_name):
    f1 = make(client, crawl_name, max_pages_per_site=3, node="w1")
    f2 = make(client, crawl_name, max_pages_per_site=3, node="w2")
    assert f1.queues.enqueue([link(f1, f"http://a/{i}", "a") for i in range(2)]) == (2, 0, 0)
    assert f2.queues.enqueue([link(f2, f"http://a/{i}", "a") for i in range(2, 5)]) == (1, 0, 2)


def test_head_entries_go_first(client, crawl_name):
    f = make(client, crawl_name)
    f.queues.enqueue([link(f, "http://a/1", "a"), link(f, "http://a/redirected", "a", head=True)])
    assert urls(f.queues.lease(1)[0]) == ["http://a/redirected"]


def test_keys_are_the_crawls_and_each_script_stays_in_one_slot(client, crawl_name):
    from redis.crc import key_slot

    f = make(client, crawl_name, max_pages_per_site=5)
    f.queues.enqueue([link(f, f"http://{s}/1", s) for s in "abcdefgh"])
    f.control.heartbeat()
    f.queues.lease(8)
    keys = f.views.all_keys()
    assert len(keys) >= 8
    assert all(k.startswith(("{" + crawl_name + "}:", "{" + crawl_name + ":s")) for k in keys)
    # A site's keys share its shard's hash tag: one slot for its scripts.
    for site in "abcdefgh":
        shard = f.keys.site(site)
        slots = {key_slot(k.encode()) for k in [*shard.fixed, shard.queue(site), shard.seen(3), shard.leases("n1")]}
        assert len(slots) == 1
    # The sites spread over several shards.
    assert len({f.keys.site(s).index for s in "abcdefgh"}) > 1


class _Spider(Spider):
    name = "s"
    frontier_callbacks = frozenset({"parse", "other"})
    frontier_errbacks = frozenset({"parse"})
    frontier_head_callbacks = frozenset()

    def parse(self, response):
        pass

    def other(self, response):
        pass


def test_requests_travel_as_json_with_callbacks_by_name():
    spider = _Spider()
    req = Request("http://a/x", callback=spider.other, errback=spider.parse, priority=3,
                  meta={"depth": 2, "obj": object(), "download_slot": "a", "proxy": "http://p/"},
                  headers={"X-A": "1", "Referer": "http://a/"})
    data = request_to_json(req, spider)
    # Only the crawler's own meta keys and headers travel.
    assert json.loads(data) == {"u": "http://a/x", "c": "other", "e": "parse", "p": 3,
                                "h": {"Referer": ["http://a/"]}, "m": {"depth": 2}}
    back = request_from_json(data, spider)
    assert back.callback == spider.other and back.errback == spider.parse
    assert back.meta == {"depth": 2} and back.priority == 3


@pytest.mark.parametrize("request_", [
    Request("http://a/", method="POST"), Request("http://a/", body=b"x"),
    Request("http://a/", cb_kwargs={"k": 1}),
])
def test_requests_the_frontier_would_refuse_are_not_written(request_):
    with pytest.raises(SerializationError):
        request_to_json(request_, _Spider())


def test_undeclared_callbacks_are_not_written():
    spider = _Spider()
    spider.undeclared = lambda response: None  # type: ignore[attr-defined]
    with pytest.raises(SerializationError):
        request_to_json(Request("http://a/", callback=spider.undeclared), spider)


@pytest.mark.parametrize("entry", [
    pickle.dumps(Request("http://a/")),  # a pickle is never loaded
    b"not json", json.dumps([1, 2]), json.dumps({"u": "http://a/", "c": "__class__"}),
    json.dumps({"u": "http://a/", "c": "nonexistent"}),
])
def test_untrusted_entries_are_refused(entry):
    with pytest.raises(SerializationError):
        request_from_json(entry, _Spider())


def _words(start: int, n: int) -> list[str]:
    """n distinct words: no 3-shingle of them repeats."""
    return [f"w{k}" for k in range(start, start + n)]


def _exact_resemblance(a: str, b: str) -> float:
    sa, sb = set(shingles(a).tolist()), set(shingles(b).tolist())
    return len(sa & sb) / len(sa | sb)


def _check(f, url: str, site: str, content_key: str, text: str):
    fp, sketch = fingerprints(text)
    return f.duplicates.check(url, site, content_key, sketch)


def test_a_duplicate_check_is_one_round_trip_of_four_scripts_on_one_redis(client, crawl_name):
    """On one Redis (not a cluster) the 10 band tables are one script call,
    not one per shard: what a page costs to pack and parse. A page with a
    sketch is found as an exact copy by its record, not in ``content``."""
    f = make(client, crawl_name)
    assert f.duplicates.levels == "4,16,64,256,1024"  # the crawl's grown tables: read once a worker
    f.gateway.round_trips, f.gateway.calls = 0, {}
    assert _check(f, "http://a/1", "a", "k1", " ".join(_words(0, 50))).kind == "new"
    assert f.round_trips == 1
    assert f.calls == {"MIRROR": 1, "BAND": 1, "RECORD": 1}


def test_near_duplicate_index_is_shared_and_atomic(client, crawl_name):
    f1 = make(client, crawl_name, node="w1")
    f2 = make(client, crawl_name, node="w2")
    base = _words(0, 200)  # 198 word 3-shingles: the sketch holds the whole set

    def verdict(f, url, ch, words, exact=None):
        d = _check(f, url, "a", ch, " ".join(words))
        if exact is not None:  # the odd sketch of a whole set: within 0.006 of the truth here
            assert abs(d.resemblance - exact) < 0.006, (d.resemblance, exact)
        return d.kind, d.first

    assert verdict(f1, "http://a/1", "h1", base) == ("new", None)
    # 20 words added at the end: 20 new shingles, resemblance 198/218.
    near = base + _words(1000, 20)
    assert _exact_resemblance(" ".join(base), " ".join(near)) == 198 / 218
    assert verdict(f2, "http://a/2", "h2", near, 198 / 218) == ("near", "http://a/1")
    # 25 words: 198/223 = 0.888, below 0.9 against page 1; page 2 was a copy
    # of its own site's page 1, so it was not indexed: the page is new.
    assert verdict(f2, "http://a/3", "h3", base + _words(1000, 25)) == ("new", None)
    # 30 words in the middle: 2 shingles out, 32 in: 196/230, below 0.9 again.
    middle = base[:100] + _words(2000, 30) + base[100:]
    assert _exact_resemblance(" ".join(base), " ".join(middle)) == 196 / 230
    assert verdict(f1, "http://a/4", "h4", middle) == ("new", None)
    # Five at the start: the nearest of the pages indexed, across workers.
    start = _words(3000, 5) + base
    r = _exact_resemblance(" ".join(base), " ".join(start))
    assert r == 198 / 203
    assert verdict(f2, "http://a/5", "h5", start, r) == ("near", "http://a/1")
    assert verdict(f1, "http://a/6", "h1", base, 1.0) == ("exact", "http://a/1")
    # A page seen again (re-crawl) is not a copy of itself.
    assert verdict(f1, "http://a/1", "h1", base) == ("new", None)
    stats = f1.views.stats()
    assert (stats["near_duplicates"], stats["exact_duplicates"]) == (2, 1)


def _check_pairs_in_two_threads(workers, pairs, first: int, reverse_second: bool) -> dict:
    """Worker 0 checks the first half of each pair and worker 1 the second,
    both starting at once; worker 1 walks the pairs backwards when asked."""
    import threading

    verdicts: dict[tuple[int, int], object] = {}
    start = threading.Barrier(2)

    def run(w: int) -> None:
        start.wait()
        order = range(len(pairs))
        if w == 1 and reverse_second:
            order = reversed(order)
        for n in order:
            text = pairs[n][w]
            verdicts[(n, w)] = _check(workers[w], f"http://a/{first + n}/{w}", "a", content_hash(text), text)

    threads = [threading.Thread(target=run, args=(w,)) for w in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return verdicts


def _near_pairs(first: int, count: int) -> list[tuple[str, str]]:
    pairs = []
    for n in range(first, first + count):
        base = _words(n * 1000, 120)
        pairs.append((" ".join(base), " ".join(base + [f"x{n}"])))  # resemblance 118/119
    return pairs


def _copies_found(verdicts: dict, first: int, count: int) -> int:
    """Of a pair, at most the later is a copy of the earlier (never each of
    the other), and a copy always names its pair; returns the copies."""
    found = 0
    for n in range(count):
        a, b = verdicts[(n, 0)], verdicts[(n, 1)]
        assert not (a.kind == "near" and b.kind == "near")
        for d, other in ((a, 1), (b, 0)):
            assert d.kind in ("new", "near")
            if d.kind == "near":
                assert d.first == f"http://a/{first + n}/{other}"
                found += 1
    return found


def test_near_copies_checked_at_once_by_two_workers_never_copy_each_other(client, crawl_name):
    """Two workers check the two halves of 40 pairs of near copies in step,
    so many pairs are checked at the same moment: however the checks
    interleave, no page is a copy of its own copy. How many pairs are found
    in step depends on timing (on a loaded machine none may be: both halves
    in flight at once are both kept as originals), so that count is asserted
    where it does not: worker 1 walks 40 other pairs backwards, so the two
    workers meet on one pair at most and every other pair's halves are
    checked one after the other."""
    workers = [make(client, crawl_name, node="w1"), make(client, crawl_name, node="w2")]
    in_step = _near_pairs(0, 40)
    _copies_found(_check_pairs_in_two_threads(workers, in_step, 0, False), 0, 40)
    apart = _near_pairs(100, 40)
    found = _copies_found(_check_pairs_in_two_threads(workers, apart, 100, True), 100, 40)
    assert found >= 39
    again = _check(workers[0], "http://a/late", "a", content_hash(apart[0][1] + " y"), apart[0][1] + " y")
    assert again.kind == "near" and again.first in ("http://a/100/0", "http://a/100/1")


def test_a_busy_workers_clock_does_not_run_ahead_of_the_others(client, crawl_name, monkeypatch):
    """A worker that checks pages faster than one a millisecond (a clock
    that moves 0.5 ms a reading, the test's), then a page whose near copy
    another worker checks right after: the copy is found. Counted on in
    milliseconds, the busy worker's order keys ran ahead of the clock and
    the copy was taken for the earlier page."""
    from types import SimpleNamespace

    from crawler.frontier import dupindex

    now_ns = [1_800_000_000_000_000_000]

    def time_ns() -> int:
        now_ns[0] += 500_000
        return now_ns[0]

    monkeypatch.setattr(dupindex, "time", SimpleNamespace(time_ns=time_ns, time=lambda: time_ns() / 1e9))
    busy, other = make(client, crawl_name, node="w1"), make(client, crawl_name, node="w2")
    for n in range(200):
        text = " ".join(_words(10_000 + n * 100, 60))
        assert _check(busy, f"http://b/{n}", "b", content_hash(text), text).kind == "new"
    text = " ".join(_words(0, 120))
    assert _check(busy, "http://a/1", "a", content_hash(text), text).kind == "new"
    copy = text + " x"
    d = _check(other, "http://a/2", "a", content_hash(copy), copy)
    assert (d.kind, d.first) == ("near", "http://a/1")


def test_the_order_key_decides_which_of_two_near_copies_is_the_copy(client, crawl_name, monkeypatch):
    """The later page is a copy of the earlier by their order keys, not by
    which check came first: a page checked second but stamped earlier (its
    worker's clock behind) is kept as an original, and the first page,
    checked again, is then a copy of it."""
    from crawler.frontier import dupindex

    f1, f2 = make(client, crawl_name, node="w1"), make(client, crawl_name, node="w2")
    text = " ".join(_words(0, 120))
    assert _check(f1, "http://a/1", "a", content_hash(text), text).kind == "new"
    monkeypatch.setattr(dupindex.DuplicateIndex, "_order", lambda self: "00000000000001")
    d = _check(f2, "http://b/1", "b", content_hash(text + " x"), text + " x")
    assert d.kind == "new"  # stamped before page a/1: not its copy


def test_a_record_without_a_well_formed_order_key_is_no_evidence(client, crawl_name):
    """A record too short to hold its 7-byte order key and a URL, or whose
    URL is not one, is not taken for an earlier page: the first near copy is
    new."""
    f = make(client, crawl_name)
    text = " ".join(_words(0, 120))
    assert _check(f, "http://a/1", "a", content_hash(text), text).kind == "new"
    key = next(k for k in f.views.all_keys() if ":rec:" in k)
    field, value = next(iter(client.hgetall(key).items()))
    assert value[15:] == b"http://a/1"  # 3 bytes of page id, 5 of site tag, 7 of order, the URL
    for n, bad in enumerate([b"", b"\x00", b"\x00" * 6 + b"http://a/1", b"\x00" * 7 + b"a/1"]):
        client.hset(key, field, value[:8] + bad)
        copy = text + f" x{n}"
        d = _check(f, f"http://a/c{n}", "a", content_hash(copy), copy)
        # The first copy is new, and indexed: the others are its copies, never page 1's.
        assert (d.kind, d.first) == (("new", None) if n == 0 else ("near", "http://a/c0")), bad


def test_a_first_check_passed_back_keeps_its_place_and_a_malformed_one_is_ignored(client, crawl_name):
    """A URL's first check (its order key, which the store keeps as
    ``dup_order`` and a re-crawl passes back), copied since on another site,
    changed: still not a copy of its copy. A value that is not an order key
    (read back from a store) is no evidence."""
    f = make(client, crawl_name)
    text = " ".join(_words(0, 120))
    first = _check(f, "http://orig/p", "orig", content_hash(text), text)
    assert first.kind == "new" and len(first.order) == 14
    copy = text + " banner"
    d = _check(f, "http://copier/p", "copier", content_hash(copy), copy)
    assert (d.kind, d.first) == ("near", "http://orig/p")
    # The original changed a little and is checked again: without its first
    # place in time it would be a copy of its copy; with it, it is not.
    again = text + " changed"
    for bad in ("", "zz", first.order.upper(), first.order + "0", "0" * 13):
        d = f.duplicates.check("http://orig/p", "orig", content_hash(again + bad), sketch(again), first=bad)
        assert (d.kind, d.first) == ("near", "http://copier/p"), bad
    d = f.duplicates.check("http://orig/p", "orig", content_hash(again), sketch(again), first=first.order)
    assert (d.kind, d.first, d.order) == ("new", None, first.order)


def test_near_duplicates_of_long_pages_are_judged_on_a_sample_of_their_shingles(client, crawl_name):
    f = make(client, crawl_name)
    base = _words(0, 3000)
    assert _check(f, "http://a/1", "a", "h1", " ".join(base)).kind == "new"
    # 30 words in 3 places: resemblance 0.975 (exact), estimated from about 512 shingles.
    edited = base[:1000] + _words(5000, 10) + base[1000:2000] + _words(6000, 10) + base[2000:] + _words(7000, 10)
    exact = _exact_resemblance(" ".join(base), " ".join(edited))
    d = _check(f, "http://a/2", "a", "h2", " ".join(edited))
    assert (d.kind, d.first) == ("near", "http://a/1")
    assert abs(d.resemblance - exact) < 0.03
    # Every tenth word changed: far below 0.9, not a copy.
    changed = [w if k % 10 else f"x{k}" for k, w in enumerate(base)]
    assert _check(f, "http://a/3", "a", "h3", " ".join(changed)).kind == "new"


def test_malformed_duplicate_index_entries_are_no_evidence(client, crawl_name):
    f = make(client, crawl_name)
    index = f.duplicates
    text = " ".join(_words(0, 200))
    fp, sketch = fingerprints(text)
    assert f.duplicates.check("http://a/1", "a", "h1", sketch).kind == "new"

    def ref(key):
        return index._ref(page_id(key))

    bands = [index.band_entry(i, key) for i, key in enumerate(sketch.bands)]

    def spoil(*keys, value=b"\x6e" + sketch.odd[1:]):  # another magic byte: not a sketch
        for key in keys:
            client.hset(index.holding(index._sketch_key(ref(key))), ref(key), value)

    # Someone writes garbage where the index keeps the page's sketch...
    spoil("h1", value=b"\x01\x02\x03")
    assert f.duplicates.check("http://a/2", "a", "h2", sketch).kind == "new"  # no evidence, no error
    spoil("h1", "h2")
    assert f.duplicates.check("http://a/3", "a", "h3", sketch).kind == "new"  # wrong magic: refused too
    spoil("h1", "h2", "h3", value=sketch.odd + b"\x00")  # a length no sketch has
    assert f.duplicates.check("http://a/3b", "a", "h3b", sketch).kind == "new"
    spoil("h3b")
    # ... and in the band tables: an odd length, a huge value, a key of another type.
    bucket, field = bands[0]
    client.hset(bucket, field, ref("h1") + b"\xff")
    client.hset(bands[1][0], bands[1][1], ref("h1") * 300_000)  # 1.5 MB
    client.delete(bands[2][0])
    client.set(bands[2][0], "not a hash")
    started = time.monotonic()
    assert f.duplicates.check("http://a/4", "a", "h4", sketch).kind == "new"
    assert time.monotonic() - started < 1.0
    # The malformed band values were replaced by the page checked: whole references again.
    assert client.hget(bucket, field) == ref("h4")
    assert client.hget(bands[1][0], bands[1][1]) == ref("h4")
    assert client.get(bands[2][0]) == b"not a hash"  # another type: left alone
    # A record whose URL is not one: no candidate, no exception.
    spoil("h4")
    client.hset(index.holding(index._sketch_key(ref("h1"))), ref("h1"), sketch.odd)
    record = index.holding(index._record_key(ref("h1")))
    head = client.hget(record, ref("h1"))[:15]
    for bad in (b"garbage", b"", b"http://[::1", b"javascript:alert(1)"):
        client.hset(record, ref("h1"), head + bad)
        assert f.duplicates.check("http://a/5", "a", "h5", sketch).kind == "new"
    # The exact index naming a page that is not one: no copy, no exception.
    bucket, key = index._content_key("h6")
    client.hset(bucket, key, b"0000000000not a url")
    assert f.duplicates.check("http://a/6", "a", "h6").kind == "new"
    # A content bucket of another type: no evidence, left as it is.
    bucket, key = index._content_key("h7")
    client.delete(bucket)
    client.rpush(bucket, "x")
    assert f.duplicates.check("http://a/7", "a", "h7").kind == "new"
    assert client.lrange(bucket, 0, -1) == [b"x"]
    # A sketch or record bucket of another type: the check goes on, the key is left alone.
    for key in (index.holding(index._sketch_key(ref("h8"))), index.holding(index._record_key(ref("h8")))):
        client.delete(key)
        client.set(key, "not a hash")
    d = f.duplicates.check("http://a/8", "a", "h8", sketch)
    assert (d.kind, d.first) == ("near", "http://a/5")  # the one page left with whole entries
    assert client.get(index.holding(index._sketch_key(ref("h8")))) == b"not a hash"


def test_a_re_crawled_original_that_changed_is_not_a_copy_of_its_copy(client, crawl_name):
    f = make(client, crawl_name)
    text = " ".join(_words(0, 150))
    copied = "A mirror of the manual kept by the university " + text
    first = _check(f, "http://orig/p", "orig", content_hash(text), text)
    assert first.kind == "new"
    assert _check(f, "http://copier/p", "copier", content_hash(copied), copied).first == "http://orig/p"
    # The original, fetched again with one word more (its first check's
    # order passed back, as a re-crawl does from the store): its copy is
    # still later.
    changed = text + " w9999"
    again = f.duplicates.check("http://orig/p", "orig", content_hash(changed), sketch(changed), first=first.order)
    assert (again.kind, again.first) == ("new", None)
    # A page first seen now, alike, is a copy of the original, not of the copier.
    late = _check(f, "http://orig/q", "orig", content_hash(changed + " w8888"), changed + " w8888")
    assert (late.kind, late.first) == ("near", "http://orig/p")


def test_pages_alike_but_for_their_dates_are_two_pages(client, crawl_name):
    """The SimHash leaves dates and versions out, so two release notes share
    one; the index names pages by their text, so neither is taken for the
    other, on a re-crawl either."""
    f = make(client, crawl_name)
    a = "release 1.11.20 fixes a crash in the parser " + " ".join(_words(0, 20))
    b = "release 2.0.12 fixes a crash in the parser " + " ".join(_words(0, 20))
    fa, sa = fingerprints(a)
    fb, sb = fingerprints(b)
    assert fa == fb and _exact_resemblance(a, b) < 0.9
    assert f.duplicates.check("http://a/1.11.20", "a", content_hash(a), sa).kind == "new"
    assert f.duplicates.check("http://a/2.0.12", "a", content_hash(b), sb).kind == "new"
    again = f.duplicates.check("http://a/2.0.12", "a", content_hash(b), sb)
    assert (again.kind, again.first) == ("new", None)
    copy = f.duplicates.check("http://b/2.0.12", "b", content_hash(b), sb)
    assert (copy.kind, copy.first) == ("exact", "http://a/2.0.12")


def test_a_re_crawled_original_is_not_a_copy_of_its_later_copy(client, crawl_name):
    f = make(client, crawl_name)
    text = " ".join(_words(0, 150))
    copied = "A mirror of the manual kept by the university " + text
    assert _check(f, "http://orig/p", "orig", content_hash(text), text).kind == "new"
    d = _check(f, "http://copier/p", "copier", content_hash(copied), copied)
    assert (d.kind, d.first, d.same_site) == ("near", "http://orig/p", False)
    # The original, fetched again unchanged, keeps its first place in time.
    again = _check(f, "http://orig/p", "orig", content_hash(text), text)
    assert (again.kind, again.first) == ("new", None)
    assert f.duplicates.mirror_of("orig") is None


def test_a_copy_published_elsewhere_first_does_not_poison_the_original(client, crawl_name):
    f = make(client, crawl_name)
    hub = " ".join(_words(0, 100))
    # The copier's site publishes (is crawled) first.
    assert _check(f, "http://copier/hub", "copier", "c1", hub).kind == "new"
    original = _check(f, "http://orig/hub", "orig", "c1", hub)
    assert (original.kind, original.first, original.same_site, original.mirror_of) == (
        "exact", "http://copier/hub", False, None)
    # The original's own copies are still found, on its own site, first.
    again = _check(f, "http://orig/hub-copy", "orig", "c1", hub)
    assert (again.kind, again.first, again.same_site) == ("exact", "http://orig/hub", True)
    near = _check(f, "http://orig/hub-near", "orig", "c2", hub + " w900 w901")
    assert (near.kind, near.first, near.same_site) == ("near", "http://orig/hub", True)
    assert f.views.stats()["cross_site_copies"] == 1


def test_a_site_of_copies_becomes_a_mirror(client, crawl_name):
    f = make(client, crawl_name)

    def fp(name: str) -> int:  # fingerprints far apart from each other
        return int(hashlib.md5(name.encode()).hexdigest()[:16], 16)

    for i in range(4):
        assert f.duplicates.check(f"http://orig/{i}", "orig", f"c{i}").kind == "new"
    # Three pages of its own, then copies: mirror once 4 of 6 (>= half, >= 5 pages) are copies.
    verdicts = []
    for i in range(3):
        assert f.duplicates.check(f"http://mirror/own{i}", "mirror", f"own{i}").kind == "new"
    for i in range(4):
        d = f.duplicates.check(f"http://mirror/{i}", "mirror", f"c{i}",
                             mirror_min_pages=5, mirror_share=0.5)
        verdicts.append((d.kind, d.same_site, d.mirror_of))
    assert verdicts == [("exact", False, None), ("exact", False, None),
                        ("exact", False, "orig"), ("exact", False, "orig")]
    assert f.duplicates.mirror_of("mirror") == "orig"


def test_send_times_are_reserved_a_gap_apart_for_the_whole_cluster(client, crawl_name):
    w1 = make(client, crawl_name, node="w1", default_delay=1.0, delay_margin=0.05)
    w2 = make(client, crawl_name, node="w2", default_delay=1.0, delay_margin=0.05)
    start = time.monotonic()
    assert w1.politeness.reserve_send("a") == 0.0
    # The next send to a, by any worker, waits the gap (1 s + margin) after
    # it: less what has passed since (a slow machine's calls take long).
    second = w2.politeness.reserve_send("a")
    assert 1.05 - (time.monotonic() - start) - 0.01 <= second <= 1.05
    third = w1.politeness.reserve_send("a")
    assert 2.1 - (time.monotonic() - start) - 0.01 <= third <= 2.1
    assert w2.politeness.reserve_send("b") == 0.0  # another site: its own gap
    nodelay = make(client, crawl_name + "x", node="w3", default_delay=0, delay_margin=0.05)
    try:
        assert (nodelay.politeness.reserve_send("a"), nodelay.politeness.reserve_send("a")) == (0.0, 0.0)
    finally:
        nodelay.views.delete_all()


def test_a_rendered_pages_requests_take_their_place_in_the_sites_timeline(client, crawl_name):
    # crawler/render/: a request a rendered page makes is no lease; it waits
    # its turn a gap after the site's last request and pushes the site's
    # next lease a gap after itself, for every worker.
    w1 = make(client, crawl_name, node="w1", default_delay=1.0, delay_margin=0.05)
    w2 = make(client, crawl_name, node="w2", default_delay=1.0, delay_margin=0.05)
    start = time.monotonic()
    assert w1.politeness.reserve("a") == 0.0
    second = w2.politeness.reserve("a")
    assert 1.05 - (time.monotonic() - start) - 0.01 <= second <= 1.05
    w1.queues.enqueue([link(w1, "http://a/1", "a"), link(w1, "http://b/1", "b")])
    assert urls(w2.queues.lease(10)[0]) == ["http://b/1"]  # a's next turn is 2.1 s away
    assert w2.politeness.reserve("c") == 0.0
    assert 1.0 <= w2.politeness.reserve("b") <= 1.05  # b's lease took its turn: the next waits a gap
    nodelay = make(client, crawl_name + "x", node="w3", default_delay=0, delay_margin=0.05)
    try:
        assert (nodelay.politeness.reserve("a"), nodelay.politeness.reserve("a")) == (0.0, 0.0)
    finally:
        nodelay.views.delete_all()


def test_leases_carry_their_site_gap(client, crawl_name):
    f = make(client, crawl_name, default_delay=0.5, delay_margin=0.05)
    f.queues.enqueue([link(f, "http://a/1", "a")])
    f.politeness.set_site_delay("b", 2.0)
    f.queues.enqueue([link(f, "http://b/1", "b")])
    gaps = {lease.site: lease.gap for lease in f.queues.lease(10)[0]}
    assert gaps == {"a": 0.55, "b": 2.05}


def test_a_worker_with_another_shard_count_is_refused(client, crawl_name):
    from crawler.frontier.meta import FrontierLayoutError

    make(client, crawl_name, shards=16).check_layout()
    make(client, crawl_name, shards=16).check_layout()  # the same layout joins
    with pytest.raises(FrontierLayoutError, match=r"^crawl '.*' was started with FRONTIER_SHARDS=16; this worker "
                                                  r"has FRONTIER_SHARDS=8: set it to 16 to join the crawl$"):
        make(client, crawl_name, shards=8).check_layout()


def test_a_crawl_of_the_one_slot_layout_is_refused(client, crawl_name):
    from crawler.frontier.meta import FrontierLayoutError

    client.hset("{" + crawl_name + "}:stats", "queued", 3)  # as the earlier version kept it
    with pytest.raises(FrontierLayoutError, match="started by an earlier version"):
        make(client, crawl_name).check_layout()
    assert not client.exists("{" + crawl_name + "}:meta")  # nothing recorded: still refused next time
