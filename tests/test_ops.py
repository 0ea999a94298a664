"""The operators' layer (crawler/operations/ops.py) on a real Redis: seed, remove,
status and the stop flag, read and written through ``Frontier`` as the
``scrapy status/seed/stop`` commands do."""

from __future__ import annotations

import json
import time

import pytest
import redis

from crawler.operations import ops
from crawler.frontier import Frontier


@pytest.fixture
def frontier(redis_url, crawl_name):
    client = redis.Redis.from_url(redis_url)
    f = Frontier(client, crawl_name, node="w1", default_delay=0, lease_timeout=1.0)
    f.check_layout()
    yield f
    client.close()


def queued_urls(f: Frontier, site: str) -> list[str]:
    return [json.loads(e)["u"] for e in f.client.lrange(f.keys.site(site).queue(site), 0, -1)]


def test_seed_normalises_dedups_refuses_and_widens_the_scope(frontier):
    out = ops.seed(frontier, ["http://A.example/x/../y", "http://a.example/y", "ftp://a.example/",
                              "http://b.example:80/", "not a url", " ", "http://a.example/z#frag"])
    assert (out["added"], out["seen"], out["removed"]) == (3, 0, 0)
    assert [r["url"] for r in out["refused"]] == ["ftp://a.example/", "not a url"]
    assert all(r["reason"] for r in out["refused"])
    assert queued_urls(frontier, "a.example") == ["http://a.example/y", "http://a.example/z"]
    assert queued_urls(frontier, "b.example") == ["http://b.example/"]
    again = ops.seed(frontier, ["http://a.example/y", "http://c.example/"])
    assert (again["added"], again["seen"], again["refused"]) == (1, 1, [])
    sites, hosts, _ = frontier.scope_store.share()
    assert sites == {"a.example", "b.example", "c.example"}
    assert hosts == {"a.example", "b.example", "c.example"}
    assert frontier.views.stats()["queued"] == 4
    # A seeded entry is the spider's own: it leases and parses as a seed.
    leases, _ = frontier.queues.lease(10)
    assert sorted(json.loads(lease.entry)["u"] for lease in leases) == [
        "http://a.example/y", "http://b.example/", "http://c.example/"]
    # parse and errback, the spider's own: neither is written out.
    assert all("e" not in json.loads(lease.entry) and "c" not in json.loads(lease.entry) for lease in leases)


def test_remove_urls_and_sites_leaves_leased_ones_and_keeps_them_seen(frontier):
    ops.seed(frontier, [f"http://a.example/{i}" for i in range(5)] + ["http://b.example/", "http://b.example/2"])
    leases, _ = frontier.queues.lease(2)  # the head of each site's queue
    assert sorted(json.loads(lease.entry)["u"] for lease in leases) == ["http://a.example/0", "http://b.example/"]
    out = ops.remove(frontier, ["http://a.example/1", "http://a.example/3", "http://a.example/0",
                                "http://nowhere.example/", "::bad"])
    assert [r["url"] for r in out["refused"]] == ["::bad"]
    assert out["removed"] == 2
    assert queued_urls(frontier, "a.example") == ["http://a.example/2", "http://a.example/4"]
    assert ops.remove(frontier, sites=["b.example"])["removed"] == 1
    assert queued_urls(frontier, "b.example") == []
    st = frontier.views.stats()
    assert (st["queued"], st["leased"], st["removed"]) == (2, 2, 3)
    # Removed URLs stay seen: seeding them again adds nothing.
    assert ops.seed(frontier, ["http://a.example/1", "http://b.example/2"])["seen"] == 2
    # The queues still serve what is left, in order.
    frontier.queues.commit(acks=[(lease.id, "C", "") for lease in leases])
    assert drain(frontier) == ["http://a.example/2", "http://a.example/4"]


def drain(f: Frontier, timeout: float = 10.0) -> list[str]:
    """Lease and acknowledge until nothing is pending; the URLs in lease order."""
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while f.views.pending():
        assert time.monotonic() < deadline, out
        got, wait = f.queues.lease(10)
        out += [json.loads(g.entry)["u"] for g in got]
        f.queues.commit(acks=[(g.id, "C", "") for g in got])
        if not got:
            time.sleep(min(wait or 0.05, 0.5))
    return out


def test_status_counts_nodes_pages_and_tells_a_dead_node(frontier, redis_url):
    other = Frontier(redis.Redis.from_url(redis_url), frontier.crawl, node="w2", default_delay=0, lease_timeout=1.0)
    ops.seed(frontier, [f"http://s{i}.example/" for i in range(6)])
    frontier.control.heartbeat({"spider": "site", "links": 7, "pages_per_min": 12.5, "lease_timeout": 1.0})
    other.control.heartbeat({"spider": "site", "links": 3, "lease_timeout": 1.0})
    mine, _ = frontier.queues.lease(6)
    assert len(mine) == 6
    frontier.queues.commit(acks=[(mine[0].id, "C", ""), (mine[1].id, "C", ""), (mine[2].id, "E", "HTTP 404: gone")])
    assert frontier.queues.release([m.id for m in mine[3:]]) == 3
    theirs, _ = other.queues.lease(6)
    assert len(theirs) == 3
    other.queues.commit(acks=[(theirs[0].id, "C", "")])
    st = ops.status(frontier, lease_timeout=1.0)
    assert st["state"] == "running" and st["stop"] is None
    by_id = {n["id"]: n for n in st["nodes"]}
    assert sorted(by_id) == ["w1", "w2"]
    assert (by_id["w1"]["pages"], by_id["w1"]["errors"], by_id["w1"]["links"]) == (2, 1, 7)
    assert (by_id["w2"]["pages"], by_id["w2"]["errors"], by_id["w2"]["links"]) == (1, 0, 3)
    assert by_id["w1"]["pages_per_min"] == 12.5 and all(n["alive"] for n in st["nodes"])
    assert st["frontier"] == {"queued": 0, "leased": 2, "delayed": 0, "sites": 6, "sites_ready": 0,
                              "sites_backed_off": 0, "seen": 6}
    assert st["errors"] == {"HTTP 404": 1}
    assert st["totals"]["pages"] == 3 and st["top_sites"] == []
    json.dumps(st)  # JSON-ready
    # w2 stops beating: within the lease timeout it is no longer alive.
    time.sleep(1.2)
    frontier.control.heartbeat({"lease_timeout": 1.0})  # also reaps w2's lease
    st = ops.status(frontier, lease_timeout=1.0)
    by_id = {n["id"]: n for n in st["nodes"]}
    assert by_id["w1"]["alive"] and not by_id["w2"]["alive"]
    assert by_id["w2"]["state"] == "lost" and by_id["w2"]["pages"] == 1
    assert (st["frontier"]["leased"], st["frontier"]["queued"], st["frontier"]["sites_ready"]) == (0, 2, 2)
    assert sorted(t["site"] for t in st["top_sites"]) == sorted(
        json.loads(t.entry)["u"].split("/")[2] for t in theirs[1:])
    assert [t["queued"] for t in st["top_sites"]] == [1, 1] and st["top_sites"][0]["delay"] == 0.0
    frontier.control.leave()
    # Every worker gone, two URLs queued, no stop asked (Ctrl-C, a crash):
    # stopped, not idle.
    st = ops.status(frontier, lease_timeout=1.0)
    assert (st["state"], st["stop"], st["frontier"]["queued"]) == ("stopped", None, 2)


def test_a_finished_crawl_says_so(frontier):
    ops.seed(frontier, ["http://a.example/"])
    leases, _ = frontier.queues.lease(1)
    frontier.queues.commit(acks=[(leases[0].id, "C", "")])
    assert ops.status(frontier, lease_timeout=1.0)["state"] == "finished"


def test_stop_flag_reaches_workers_at_their_heartbeat_and_clears(frontier):
    assert frontier.control.stop_requested() is None
    frontier.control.heartbeat()
    assert frontier.stop_mode is None
    ops.request_stop(frontier)
    assert frontier.control.stop_requested()["stop"] == "graceful"
    frontier.control.heartbeat()
    assert frontier.stop_mode == "graceful"
    st = ops.status(frontier, lease_timeout=1.0)
    assert st["state"] == "stopping" and st["nodes"][0]["state"] == "stopping"
    ops.request_stop(frontier, now=True)
    frontier.control.heartbeat()
    assert frontier.stop_mode == "now"
    frontier.control.leave()
    assert ops.status(frontier, lease_timeout=1.0)["state"] == "stopped"
    assert frontier.control.clear_stop() is True and frontier.control.clear_stop() is False
    frontier.control.heartbeat()
    assert frontier.stop_mode is None


def test_malformed_operator_keys_written_into_redis_are_ignored(frontier):
    frontier.client.hset(frontier.keys.control, mapping={"stop": "rm -rf", "at": "soon"})
    assert frontier.control.stop_requested() is None
    frontier.control.heartbeat()
    assert frontier.stop_mode is None
    frontier.client.hset(frontier.keys.control, mapping={"stop": "now", "at": "soon"})
    assert frontier.control.stop_requested() == {"stop": "now", "at": 0.0, "by": ""}
    frontier.client.hset(frontier.keys.nodes, mapping={"junk": "{not json", "odd": json.dumps(
        {"pid": "x", "pages_per_min": "fast", "host": 5})})
    st = ops.status(frontier, lease_timeout=1.0)
    by_id = {n["id"]: n for n in st["nodes"]}
    assert sorted(by_id) == ["odd", "w1"]  # w1: the heartbeat above
    odd = by_id["odd"]
    assert (odd["pid"], odd["pages_per_min"], odd["host"], odd["alive"]) == (0, 0.0, "5", False)
    # Python's json reads Infinity and NaN; status --json must still print JSON.
    frontier.client.hset(frontier.keys.nodes, "inf", '{"pid": Infinity, "pages_per_min": NaN, "links": -Infinity}')
    st = ops.status(frontier, lease_timeout=1.0)
    inf = {n["id"]: n for n in st["nodes"]}["inf"]
    assert (inf["pid"], inf["pages_per_min"], inf["links"]) == (0, 0.0, 0)
    json.dumps(st, allow_nan=False)


def test_status_shows_the_delay_the_workers_keep_not_its_own(redis_url, crawl_name):
    """The command's DOWNLOAD_DELAY (7) is not the crawl's: the live workers
    report theirs (0.5), and a site without a delay of its own shows it."""
    client = redis.Redis.from_url(redis_url)
    command = Frontier(client, crawl_name, node="ops", default_delay=7, lease_timeout=1.0)
    command.check_layout()
    ops.seed(command, ["http://a.example/1", "http://a.example/2"])
    assert ops.status(command, 1.0)["top_sites"][0]["delay"] == 7  # no worker said: the command's own
    assert ops.status(command, 1.0)["download_delay"] == 7
    worker = Frontier(client, crawl_name, node="w1", default_delay=0.5, lease_timeout=1.0)
    worker.control.heartbeat({"download_delay": 0.5, "lease_timeout": 1.0})
    st = ops.status(command, 1.0)
    assert (st["download_delay"], st["top_sites"][0]["delay"]) == (0.5, 0.5)
    slow = Frontier(client, crawl_name, node="w2", default_delay=2, lease_timeout=1.0)
    slow.control.heartbeat({"download_delay": 2.0, "lease_timeout": 1.0})
    assert ops.status(command, 1.0)["download_delay"] == 2.0  # the largest of the live workers
    worker.control.leave({"download_delay": 0.5})
    slow.control.leave({"download_delay": 2.0})
    time.sleep(1.1)
    slow.client.hset(slow.keys.nodes, "w3", json.dumps({"download_delay": "evil", "heartbeat": 1e12}))
    assert ops.status(command, 1.0)["download_delay"] == 2.0  # none alive: the last to report


def test_seed_refuses_what_the_crawls_url_rules_exclude(frontier):
    from crawler.scope.rules import UrlRules

    frontier.meta.crawl_policy("rules", UrlRules(("/docs/",), ("/search",)).to_json())
    out = ops.seed(frontier, ["http://a.example/docs/x", "http://a.example/docs/search?q=1", "http://a.example/blog/"])
    assert out["added"] == 1
    assert out["refused"] == [
        {"url": "http://a.example/docs/search?q=1",
         "reason": "excluded by the crawl's URL rules: -a deny=/search matches it"},
        {"url": "http://a.example/blog/",
         "reason": "excluded by the crawl's URL rules: no -a allow pattern matches it (/docs/)"}]
    assert queued_urls(frontier, "a.example") == ["http://a.example/docs/x"]


def test_status_of_an_importance_crawl_shows_its_order_and_best_waiting_not_a_topic(redis_url, crawl_name):
    """scrapy status (JSON and text) of an -a order=importance crawl: the
    order, the best importance waiting, no focused-crawl figures."""
    import redis as redis_module
    from rich.console import Console

    from crawler.commands.status import render
    from crawler.frontier import Frontier
    from tests.test_frontier_order import ilink

    client = redis_module.Redis.from_url(redis_url)
    try:
        f = Frontier(client, crawl_name, node="n1")
        f.check_layout("importance")
        f.queues.enqueue([ilink(f, "http://a/x", "a", 12345), ilink(f, "http://b/y", "b", 500)])
        st = ops.status(f, 10)
        assert (st["control"]["order"], st["control"]["best_waiting"], st["topic"]) == ("importance", 123.45, None)
        console = Console(width=200, record=True)
        console.print(render(st))
        text = console.export_text()
        assert "control: order importance (best waiting 123.45), scope site" in text and "focused" not in text
    finally:
        client.close()
