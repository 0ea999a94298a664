"""``REDIS_WAIT_REPLICAS``: the frontier's writes wait for replicas (Redis
``WAIT``), against real ``redis-server`` processes: a master and its
replica, the replica stopped (a lag), and a crawl that asks for more
replicas than there are (refused at start)."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess

import pytest
from scrapy.settings import Settings

from crawler.frontier.frontier import Frontier
from crawler.frontier.queues import LinkEntry
from crawler.frontier.service import DURABLE
from crawler.redis.gateway import ReplicaLag
from crawler.redis.client import _has_heir, get_redis
from crawler.redis.memory import RedisMemoryError, require_replicas
from tests.support import ROOT
from tests.support.crawl import crawl_cmd, until
from tests.support.redis_cluster import start_cluster
from tests.support.redis_server import start_redis


@pytest.fixture
def pair(tmp_path):
    master = start_redis(tmp_path / "m")
    replica = start_redis(tmp_path / "r")
    replica.client().replicaof("127.0.0.1", master.port)
    client = master.client()
    until(lambda: int(client.info("replication").get("connected_slaves", 0)) == 1, 30, "the replica to connect")
    # Connected is not yet in sync: WAIT counts a replica once its first full sync is over.
    until(lambda: replica.client().info("replication").get("master_link_status") == "up", 30, "the replica's sync")
    yield master, replica
    if replica.process.poll() is None:
        replica.process.send_signal(signal.SIGCONT)
    replica.stop()
    master.stop()


def frontier(client, wait: int = 1) -> Frontier:
    f = Frontier(client, "wait-test", node="w1", default_delay=0.0, delay_margin=0.0, shards=2)
    f.gateway.require_replicas(wait, 0.3, DURABLE)
    return f


def link(f: Frontier, url: str, site: str) -> LinkEntry:
    bucket, member = f.queues.slot(hashlib.sha1(url.encode()).digest())
    return LinkEntry(bucket, member, site, json.dumps({"u": url}))


def test_writes_wait_for_the_replica_and_fail_while_it_lags(pair):
    master, replica = pair
    f = frontier(master.client())
    assert f.queues.enqueue([link(f, "http://a.test/1", "a.test"), link(f, "http://b.test/1", "b.test")])[0] == 2
    leases, _ = f.queues.lease(1)
    assert len(leases) == 1
    # WAIT returned: the replica holds the lease, as the master does.
    lease_key = f.keys.site(leases[0].site).leases("w1")
    assert replica.client().hlen(lease_key) == 1
    replica.process.send_signal(signal.SIGSTOP)
    with pytest.raises(ReplicaLag, match="0 of 1 replicas"):
        f.queues.enqueue([link(f, "http://a.test/2", "a.test")])
    with pytest.raises(ReplicaLag):
        # The page's links are not on the replica: the page is not settled (its
        # links and acknowledgement are the caller's to send again).
        f.queues.commit([link(f, "http://b.test/2", "b.test")], [(leases[0].id, "C", "")])
    assert master.client().hlen(lease_key) == 1
    assert f.gateway.short_waits >= 2
    replica.process.send_signal(signal.SIGCONT)
    until(lambda: f.queues.commit([link(f, "http://b.test/2", "b.test")], [(leases[0].id, "C", "")]).error is None,
          30, "the replica to take writes again")
    assert replica.client().hlen(lease_key) == 0


def test_asking_more_replicas_than_a_master_has_is_refused(pair, tmp_path):
    master, _ = pair
    require_replicas(master.client(), 1)
    with pytest.raises(RedisMemoryError, match="REDIS_WAIT_REPLICAS=2: 127.0.0.1:\\d+ has 1 connected replicas"):
        require_replicas(master.client(), 2)
    done = subprocess.run(crawl_cmd(["seeds=http://127.0.0.1:9/"], {"REDIS_URL": master.url,
                                                                       "REDIS_WAIT_REPLICAS": 2}, tmp_path / "c"),
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "REDIS_WAIT_REPLICAS=2" in done.stderr.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_worker_started_during_a_failover_is_not_refused(tmp_path):
    """A master of a cluster with a replica each is killed and its replica
    promoted: the new master has no replica until the old one comes back
    as its replica. A worker started meanwhile (its supervisor restarting
    it) is warned, not refused: the shortfall is a node down, for a while
    (before: refused, 'has 0 connected replicas', and the chaos run's
    groups hit their crash limits). With every node up, asking more
    replicas than there are is still refused."""
    cluster = start_cluster(tmp_path / "cluster", masters=3, replicas=1)
    try:
        client = cluster.client()
        assert require_replicas(client, 1) is None
        with pytest.raises(RedisMemoryError, match="REDIS_WAIT_REPLICAS=2: .* has 1 connected replicas; give"):
            require_replicas(client, 2)
        victim = next(n for n in cluster.nodes if n.role == "master")
        heir = next(n for n in cluster.nodes if n.follows == victim.index)
        cluster.kill_node(victim.index)
        # A worker's client made now waits for the failover instead of
        # failing on the master that does not answer (before: exit 1).
        started = get_redis(Settings({"REDIS_URL": cluster.url}), tmp_path)
        primaries = {n.port for n in started.get_primaries()}
        assert heir.port in primaries and victim.port not in primaries and len(primaries) == 3
        started.close()

        def promoted() -> bool:
            cluster.refresh()
            return heir.role == "master"

        until(promoted, 60, "the replica's promotion")
        cluster.wait_ok(60)
        client = cluster.client()
        warning = require_replicas(client, 1)
        assert warning is not None and warning.startswith("REDIS_WAIT_REPLICAS=1: 127.0.0.1:")
        assert warning.endswith("has 0 connected replicas now, with a node of the cluster down; "
                                "writes to it wait until a replica is back")
        cluster.start_node(victim.index)
        until(lambda: require_replicas(cluster.client(), 1) is None, 60, "the old master back as a replica")
    finally:
        cluster.stop()


@pytest.mark.slow
def test_a_failover_already_done_is_waited_for_not_refused(tmp_path):
    """A worker's client whose slot map still names a master that failed
    over (read from a node gossip had not reached yet) while the node it
    then asks shows the promotion: the dead master has no replica any more,
    and serves no slot. That is a failover done, not a master without an
    heir: the worker waits for a fresh slot map (before: refused at once, in
    one of three CI runs of the test above)."""
    cluster = start_cluster(tmp_path / "cluster", masters=3, replicas=1)
    try:
        stale = cluster.client()  # its slot map names the victim
        victim = next(n for n in cluster.nodes if n.role == "master")
        heir = next(n for n in cluster.nodes if n.follows == victim.index)
        cluster.kill_node(victim.index)

        def promoted() -> bool:
            cluster.refresh()
            return heir.role == "master"

        until(promoted, 60, "the replica's promotion")
        cluster.wait_ok(60)
        down = [f"127.0.0.1:{victim.port} (Error 111 connecting to 127.0.0.1:{victim.port}. Connection refused)"]
        assert f"127.0.0.1:{victim.port}" in {n.name for n in stale.get_nodes()}
        assert _has_heir(stale, down) is True
        # The promoted master has no replica (the victim is down): killed, its
        # slots stay its own, and nothing will take over: no heir.
        cluster.kill_node(heir.index)
        assert _has_heir(stale, [f"127.0.0.1:{heir.port} (down)"]) is False
        stale.close()
    finally:
        cluster.stop()
