"""A focused crawl's frontier: site queues ordered by priority, sites with the
most promising work first, against a real Redis (REDIS_URL, else the
embedded one)."""

from __future__ import annotations

import hashlib
import json
import time

import pytest
import redis

from crawler.frontier import Frontier, LinkEntry
from crawler.frontier.frontier import FrontierLayoutError

TOPIC = "topic:0123456789abcdef"


@pytest.fixture
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def make(client, crawl_name, order=TOPIC, **kw) -> Frontier:
    kw.setdefault("default_delay", 0)
    kw.setdefault("delay_margin", 0)
    kw.setdefault("concurrency_per_site", 1)
    f = Frontier(client, crawl_name, node=kw.pop("node", "n1"), **kw)
    f.check_layout(order)
    return f


def entry(url: str, priority: int | None) -> str:
    d: dict = {"u": url}
    if priority is not None:
        d["m"] = {"topic_priority": priority}
    return json.dumps(d, separators=(",", ":"))  # as the crawler writes entries


def link(f: Frontier, url: str, site: str, priority: int = 0, head: bool = False, dedup: bool = True) -> LinkEntry:
    bucket, member = f.queues.slot(hashlib.sha1(url.encode()).digest()) if dedup else ("", "")
    return LinkEntry(bucket, member, site, entry(url, priority), head, priority)


def urls(leases) -> list[str]:
    return [json.loads(lease.entry)["u"] for lease in leases]


def drain(f: Frontier, n: int = 1) -> list[str]:
    """Lease and settle one request at a time until nothing is left."""
    out = []
    while True:
        leases, _ = f.queues.lease(n)
        if not leases:
            return out
        out += urls(leases)
        f.queues.commit(acks=[(lease.id, "C", "") for lease in leases], downloaded=[lease.id for lease in leases])


def test_a_site_serves_its_most_promising_requests_first_in_order_queued(client, crawl_name):
    f = make(client, crawl_name)
    f.queues.enqueue([link(f, "http://a/low1", "a", 100), link(f, "http://a/high1", "a", 900),
               link(f, "http://a/mid", "a", 500), link(f, "http://a/high2", "a", 900),
               link(f, "http://a/low2", "a", 100), link(f, "http://a/none", "a", 0)])
    assert f.views.queue_length("a") == 6
    assert drain(f) == ["http://a/high1", "http://a/high2", "http://a/mid", "http://a/low1", "http://a/low2",
                        "http://a/none"]
    assert f.views.stats()["queued"] == 0 and f.views.pending() == 0


def test_the_same_links_without_a_topic_stay_first_in_first_out(client, crawl_name):
    f = make(client, crawl_name, order="fifo")
    f.queues.enqueue([link(f, "http://a/low1", "a", 100), link(f, "http://a/high1", "a", 900)])
    assert drain(f) == ["http://a/low1", "http://a/high1"]


SITES = [("a", 200), ("b", 900), ("c", 500), ("d", 700)]


def test_ready_sites_with_better_work_go_first_in_a_shard(client, crawl_name):
    f = make(client, crawl_name, shards=1)
    f.queues.enqueue([link(f, f"http://{s}/1", s, p) for s, p in SITES])
    assert [urls(f.queues.lease(1)[0]) for _ in SITES] == [["http://b/1"], ["http://d/1"], ["http://c/1"],
                                                          ["http://a/1"]]


def test_and_across_the_shards_one_lease_call_asks(client, crawl_name):
    f = make(client, crawl_name, shards=4)
    assert len({f.keys.site(s).index for s, _ in SITES}) > 1
    f.queues.enqueue([link(f, f"http://{s}/1", s, p) for s, p in SITES])
    leases, _ = f.queues.lease(4)
    assert urls(leases) == ["http://b/1", "http://d/1", "http://c/1", "http://a/1"]


def test_politeness_still_decides_when_a_site_is_served(client, crawl_name):
    f = make(client, crawl_name, default_delay=0.5, shards=1)
    f.queues.enqueue([link(f, "http://b/1", "b", 900), link(f, "http://b/2", "b", 900),
                      link(f, "http://a/1", "a", 100)])
    first, _ = f.queues.lease(1)
    assert urls(first) == ["http://b/1"]
    f.queues.commit(acks=[(first[0].id, "C", "")], downloaded=[first[0].id])
    # b waits its delay: the less promising site that is ready goes meanwhile
    assert urls(f.queues.lease(1)[0]) == ["http://a/1"]
    assert f.queues.lease(1)[0] == []
    time.sleep(0.55)
    assert urls(f.queues.lease(1)[0]) == ["http://b/2"]


def test_a_lease_given_back_goes_first_of_its_priority(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=5)
    f.queues.enqueue([link(f, "http://a/x1", "a", 500), link(f, "http://a/x2", "a", 500)])
    leases, _ = f.queues.lease(1)
    assert urls(leases) == ["http://a/x1"]
    f.queues.enqueue([link(f, "http://a/better", "a", 800), link(f, "http://a/x3", "a", 500)])
    assert f.queues.release([leases[0].id]) == 1
    assert drain(f) == ["http://a/better", "http://a/x1", "http://a/x2", "http://a/x3"]


def test_a_retry_keeps_its_priority(client, crawl_name):
    f = make(client, crawl_name, concurrency_per_site=5)
    f.queues.enqueue([link(f, "http://a/good", "a", 700), link(f, "http://a/poor", "a", 100)])
    leases, _ = f.queues.lease(1)
    assert urls(leases) == ["http://a/good"]
    f.queues.commit(requeues=[(leases[0].id, 0.1, "a", leases[0].entry)])
    time.sleep(0.15)
    assert drain(f) == ["http://a/good", "http://a/poor"]
    assert f.views.stats()["retried"] == 1


def test_the_same_entry_twice_is_queued_once_and_counted(client, crawl_name):
    f = make(client, crawl_name)
    again = link(f, "http://a/seed", "a", 1000, dedup=False)
    assert f.queues.enqueue([again, again]) == (1, 1, 0)
    assert f.views.stats()["queued"] == 1
    assert drain(f) == ["http://a/seed"]
    assert f.views.pending() == 0


@pytest.mark.parametrize("raw", ['{"u":"http://a/h1","m":{"topic_priority":"x"}}', "not json",
                                 '{"u":"http://a/h2","m":{"topic_priority":{"a":1}}}', '{"m":[1]}'])
def test_a_malformed_entry_given_back_gets_the_lowest_priority_not_an_error(client, crawl_name, raw):
    f = make(client, crawl_name, concurrency_per_site=5)
    good = link(f, "http://a/ok", "a", 300)
    f.queues.enqueue([LinkEntry("", "", "a", raw, False, 0), good])
    leases, _ = f.queues.lease(5)
    assert [lease.entry for lease in leases] == [good.entry, raw]
    assert f.queues.release([lease.id for lease in leases]) == 2
    time.sleep(0.55)  # the shard said nothing was left: this worker asks it again within 0.5 s
    again, _ = f.queues.lease(5)
    assert [lease.entry for lease in again] == [good.entry, raw]


def test_removing_a_sites_requests_keeps_the_rest_in_order(client, crawl_name):
    f = make(client, crawl_name)
    f.queues.enqueue([link(f, "http://a/1", "a", 300), link(f, "http://a/2", "a", 600),
                      link(f, "http://a/3", "a", 900)])
    assert f.views.remove({"a": ["http://a/3"]}) == 1
    assert f.views.queue_length("a") == 2
    assert drain(f) == ["http://a/2", "http://a/1"]
    f.queues.enqueue([link(f, "http://b/1", "b", 300)])
    assert f.views.remove({"b": []}) == 1
    assert f.queues.lease(1)[0] == [] and f.views.pending() == 0


def test_workers_of_one_crawl_must_agree_on_its_order(client, crawl_name):
    make(client, crawl_name, order=TOPIC)
    with pytest.raises(FrontierLayoutError, match="is a focused crawl: join it with -a topic="):
        make(client, crawl_name, order="fifo")
    with pytest.raises(FrontierLayoutError, match="was started with another topic"):
        make(client, crawl_name, order="topic:ffffffffffffffff")
    make(client, crawl_name, order=None)  # operators' commands and re-crawls join as it is


def test_a_crawl_started_without_a_topic_cannot_become_focused(client, crawl_name):
    f = make(client, crawl_name, order=None)
    f.queues.enqueue([link(f, "http://a/1", "a")])
    with pytest.raises(FrontierLayoutError, match="was started without a topic"):
        make(client, crawl_name, order=TOPIC)
    assert client.hget(f.keys.meta, "order") is None
    make(client, crawl_name, order="fifo")
    with pytest.raises(FrontierLayoutError, match="was started without a topic"):
        make(client, crawl_name, order=TOPIC)


def test_two_focused_workers_starting_together_both_join(client, crawl_name):
    probe = Frontier(client, crawl_name, node="probe")
    # The other worker recorded the order and flagged the shards a moment ago.
    client.hset(probe.keys.meta, "order", TOPIC)
    for sk in probe.keys.site_shards:
        client.hset(sk.stats, "ordered", "1")
    f = make(client, crawl_name)
    assert f.ordered and client.hget(f.keys.meta, "order").decode() == TOPIC


def test_a_crawl_an_earlier_version_started_is_first_in_first_out(client, crawl_name):
    old = Frontier(client, crawl_name, node="old", default_delay=0, delay_margin=0)
    old.check_layout()  # no order recorded: an earlier version's crawl
    old.queues.enqueue([link(old, "http://a/1", "a")])
    with pytest.raises(FrontierLayoutError, match="was started without a topic"):
        make(client, crawl_name, order=TOPIC)
    assert client.hget(old.keys.meta, "order") is None  # nothing written by the refused worker
    assert not make(client, crawl_name, order="fifo").ordered
    assert client.hget(old.keys.meta, "order") == b"fifo"


def test_the_best_ready_site_wins_even_behind_many_better_ones_waiting(client, crawl_name):
    f = make(client, crawl_name, shards=1, default_delay=30)
    f.queues.enqueue([link(f, "http://old/1", "old", 0)])  # ready first, least promising
    waiting = [f"w{i}" for i in range(40)]
    f.queues.enqueue([link(f, f"http://{s}/1", s, 950) for s in waiting]
                     + [link(f, f"http://{s}/2", s, 950) for s in waiting])
    leases, _ = f.queues.lease(41)
    assert len(leases) == 41  # one from each site; now all 41 wait 30 s
    f.queues.enqueue([link(f, "http://new/1", "new", 900), link(f, "http://old/2", "old", 0)])
    client.hset(f.keys.site("old").next, "old", 0)  # old's delay is over: ready before new
    client.zadd(f.keys.site("old").ready, {"old": 0})
    assert urls(f.queues.lease(1)[0]) == ["http://new/1"]


@pytest.mark.parametrize("priority, expected", [(500, 500), ("700", 700), (700.9, 700), (-5, 0), (5000, 1000),
                                                (True, 0), ("x", 0), (None, 0), ([1], 0)])
def test_python_reads_an_entrys_priority_as_the_scripts_do(priority, expected):
    from crawler.frontier.frontier import entry_priority

    assert entry_priority(json.dumps({"u": "http://a/", "m": {"topic_priority": priority}})) == expected


def ilink(f: Frontier, url: str, site: str, importance: int, cash: int = 0) -> LinkEntry:
    """An importance crawl's link (crawler/following/importance.py): its importance and
    dedup member in the entry's meta, its place "i<importance>:<cash>"."""
    bucket, member = f.queues.slot(hashlib.sha1(url.encode()).digest())
    e = json.dumps({"u": url, "m": {"imp": importance, "imp_key": member}}, separators=(",", ":"))
    return LinkEntry(bucket, member, site, e, place=f"i{importance}:{cash}")


def test_importance_order_raises_queued_urls_and_puts_mirrors_last(client, crawl_name):
    f = make(client, crawl_name, order="importance", shards=1)  # one lease at a time: the best first
    f.queues.enqueue([ilink(f, "http://a/low", "a", 1000), ilink(f, "http://a/high", "a", 5000),
               ilink(f, "http://m/top", "m", 90000), ilink(f, "http://b/mid", "b", 3000)])
    # A link found later to a queued URL raises it (its cash), whichever
    # worker found it; one to a URL not queued any more changes nothing.
    f.queues.enqueue([ilink(f, "http://a/low", "a", 1000, cash=4500)])
    # Site m turns out to mirror another: its pages queued from now on come last.
    client.hset(f.keys.site("m").mirrors, "m", "x")
    f.queues.enqueue([ilink(f, "http://m/next", "m", 99000)])
    got = drain(f)
    assert got[:3] == ["http://m/top", "http://a/low", "http://a/high"]  # 90.00; 55.00; 50.00
    assert got[3:] == ["http://b/mid", "http://m/next"]
    assert int(f.views.stats()["bumped"]) == 1
    f.queues.enqueue([ilink(f, "http://c/x", "c", 12345)])
    leases, _ = f.queues.lease(1)
    assert [lease.importance for lease in leases] == [123.45]
