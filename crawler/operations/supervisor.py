"""``CRAWL_PROCESSES``: one command, N worker processes of the same crawl.

``scrapy crawl site ... -s CRAWL_PROCESSES=N`` (``auto``: one per core the
process may run on) checks the settings and arguments once, then starts N
workers, each the same ``scrapy crawl`` with ``CRAWL_PROCESSES=1``, seeds
included (the frontier's dedup keeps each seed once; a worker started
without them at the same moment could find the crawl still empty and
end). They share the crawl's frontier (its Redis: ``REDIS_URL``, or the
embedded one in ``CRAWL_DIR``) and its store, and split the work lease by
lease.

- **Logs.** Every line a worker writes comes out on the supervisor's
  standard error prefixed with its name, ``[w1]``, ``[w2]`` ...; the
  supervisor's own lines say which worker started, ended or was restarted
  (with its process id).
- **Stopping.** Ctrl-C (SIGINT) or SIGTERM to the supervisor is passed to
  every worker once per signal: the first stops them cleanly (each gives its
  unstarted leases back), a second forces them, as with one process. The
  workers run in sessions of their own, so a terminal's Ctrl-C reaches them
  only through the supervisor, once.
- **Crashes.** A worker that ends with another status than 0 while no stop
  was asked is started again (its seeds are already seen: nothing twice),
  after 1, 2, 4 ... seconds (at most 30); its leases are taken back by the
  others once its heartbeat stops, as for any dead worker. A worker that
  crashes ``MAX_RESTARTS`` times within ``RESTART_WINDOW`` seconds is left
  down and the supervisor ends with status 1 once the others are done.
- **The end.** A worker that ends with status 0 finished (the crawl has
  nothing left for it) or was stopped: it is not started again. The
  supervisor ends when every worker has, with status 0 if every worker's
  last status was 0.
- **Start.** The first workers are forked from the supervisor once it has
  checked everything, before it starts anything else (no thread, no
  reactor): each has the modules already imported and the embedded Redis
  already joined, and starts crawling at once (a worker spawned as a new
  ``scrapy crawl`` spent about 0.6 s importing and setting up first). A
  worker restarted after a crash is spawned, as is every worker where
  ``fork`` is not safe (not on Linux, or the supervisor not the process's
  own command: ``Command._forks_workers``).
- **The embedded Redis** (no ``REDIS_URL``): the supervisor starts or joins
  it (its check before the workers start), and uses it until it ends; a
  forked worker shares the supervisor's hold on it, a spawned one takes its
  own. It stops once the last of them has ended, the supervisor or a worker,
  however it ended (crawler/redis/embedded.py): a supervisor killed
  outright leaves it to its workers, and they to nobody.
- ``SUPERVISOR_ENV`` in each worker's environment names its supervisor
  (``supervised()``).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import IO, Any, NoReturn

logger = logging.getLogger(__name__)

__all__ = ["MAX_RESTARTS", "SUPERVISOR_ENV", "Supervisor", "process_count", "supervised", "worker_command"]

MAX_RESTARTS = 5
# Each worker's environment names its supervisor (this process's id).
SUPERVISOR_ENV = "SITE_CRAWLER_SUPERVISOR"
RESTART_WINDOW = 300.0  # seconds


def supervised() -> bool:
    """Whether this process is a worker of a running supervisor (its parent;
    a name left in the environment by another run does not count)."""
    return os.environ.get(SUPERVISOR_ENV, "") == str(os.getppid())


def process_count(value: Any) -> int:
    """``CRAWL_PROCESSES`` as a number of processes (``auto``: the cores this
    process may run on)."""
    if isinstance(value, str) and value.strip().lower() == "auto":
        try:
            return max(1, len(os.sched_getaffinity(0)))
        except AttributeError:  # not on Linux
            return max(1, os.cpu_count() or 1)
    return int(value)


def worker_command(spider: str, spargs: dict[str, str], settings: Sequence[str]) -> list[str]:
    """The ``scrapy crawl`` of one worker: the spider's arguments, the
    command line's settings, one process."""
    cmd = [sys.executable, "-m", "scrapy", "crawl", spider]
    for name, value in spargs.items():
        cmd += ["-a", f"{name}={value}"]
    for item in settings:
        # One process each, and each its own log (the supervisor's output).
        if not item.startswith(("CRAWL_PROCESSES=", "LOG_FILE=")):
            cmd += ["-s", item]
    return [*cmd, "-s", "CRAWL_PROCESSES=1"]


class _Forked:
    """A worker forked from the supervisor, looked after as a ``Popen``."""

    def __init__(self, pid: int, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is lost
                self.returncode = 1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, signum)


@dataclass
class _Worker:
    name: str
    proc: subprocess.Popen[bytes] | _Forked | None = None
    crashes: deque[float] = field(default_factory=deque)
    restart_at: float | None = None
    last_status: int | None = None


class Supervisor:
    def __init__(self, spider: str, spargs: dict[str, str], settings: Sequence[str], processes: int,
                 fork: Callable[[], NoReturn] | None = None) -> None:
        """``fork``: what a forked worker runs (the crawl, then its exit);
        None: every worker is spawned as a new ``scrapy crawl``."""
        self.spider = spider
        self.fork = fork
        self.spargs = dict(spargs)
        self.settings = list(settings)
        self.workers = [_Worker(f"w{i + 1}") for i in range(processes)]
        self.stopping = 0  # signals passed on
        self._lock = threading.Lock()
        self._readers: list[threading.Thread] = []

    # -- output ---------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self._write(f"[supervisor] {text}")

    def _write(self, line: str) -> None:
        with self._lock:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def _pump(self, name: str, stream: IO[bytes]) -> None:
        prefix = f"[{name}] "
        for raw in iter(stream.readline, b""):
            self._write(prefix + raw.decode("utf-8", "replace").rstrip("\n"))
        stream.close()

    # -- workers ---------------------------------------------------------------------------
    def _start(self, w: _Worker) -> None:
        cmd = worker_command(self.spider, self.spargs, self.settings)
        env = {**os.environ, SUPERVISOR_ENV: str(os.getpid())}
        w.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        self._read(w)
        self.say(f"{w.name} started (pid {w.proc.pid})")

    def _read(self, w: _Worker) -> None:
        assert w.proc is not None and w.proc.stdout is not None
        reader = threading.Thread(target=self._pump, args=(w.name, w.proc.stdout), daemon=True)
        reader.start()
        self._readers.append(reader)

    def _fork_all(self, fork: Callable[[], NoReturn]) -> None:
        """Fork every worker, then read their output: no thread may run
        while this process forks (a child would inherit its locks held).
        SIGINT and SIGTERM wait while a worker is forked (a signal then
        reaches the supervisor once the worker is known to it, or the worker
        once it has its own handlers); after a stop no worker is started. A
        fork that fails leaves the remaining workers to be spawned."""
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the workers' statuses are ours to collect
        held = {signal.SIGINT, signal.SIGTERM}
        forked: list[_Worker] = []
        failed = False
        for w in self.workers:
            if self.stopping:
                break
            signal.pthread_sigmask(signal.SIG_BLOCK, held)
            try:
                read, write = os.pipe()
                sys.stdout.flush()
                sys.stderr.flush()
                try:
                    pid = os.fork()
                except OSError as exc:
                    os.close(read)
                    os.close(write)
                    self.say(f"cannot fork {w.name} ({exc}): starting it as a new process")
                    failed = True  # it and the rest are spawned, once the forked ones are read
                    break
                if pid == 0:  # the worker
                    try:
                        os.close(read)
                        for other in forked:
                            assert other.proc is not None and other.proc.stdout is not None
                            other.proc.stdout.close()
                        os.setsid()  # a terminal's Ctrl-C reaches it through the supervisor only
                        null = os.open(os.devnull, os.O_RDONLY)
                        os.dup2(null, 0)
                        os.close(null)
                        os.dup2(write, 1)
                        os.dup2(write, 2)
                        os.close(write)
                        signal.signal(signal.SIGINT, signal.default_int_handler)
                        signal.signal(signal.SIGTERM, signal.SIG_DFL)
                        signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
                        os.environ[SUPERVISOR_ENV] = str(os.getppid())
                        fork()
                    finally:
                        os._exit(1)
                os.close(write)
                w.proc = _Forked(pid, os.fdopen(read, "rb"))
                forked.append(w)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, held)
            self.say(f"{w.name} started (pid {pid})")
        for w in forked:
            self._read(w)
        if failed:  # the others are spawned
            for w in self.workers:
                if w.proc is None and not self.stopping:
                    self._start(w)

    def _signal(self, signum: int, _frame: Any = None) -> None:
        self.stopping += 1
        name = signal.Signals(signum).name
        self.say(f"{name}: passing it to every worker"
                 + (" (again: they stop at once)" if self.stopping > 1 else " (they stop cleanly)"))
        for w in self.workers:
            if w.proc is not None and w.proc.poll() is None:
                try:
                    w.proc.send_signal(signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)
                except ProcessLookupError:
                    pass

    def run(self) -> int:
        """Start the workers and look after them until all are done; the
        exit status (0: every worker ended with 0)."""
        previous = {s: signal.signal(s, self._signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.say(f"starting {len(self.workers)} workers of one crawl")
            if self.fork is not None and threading.active_count() == 1:
                self._fork_all(self.fork)
            else:
                if self.fork is not None:
                    # pymongo's monitors, after the MongoDB check, end half a
                    # second after their client is closed: not worth the wait.
                    others = sorted({t.name for t in threading.enumerate() if t is not threading.current_thread()})
                    self.say(f"threads running ({', '.join(others)}): the workers are started as new processes")
                for w in self.workers:
                    self._start(w)
            while True:
                alive = self._look()
                if not alive:
                    break
                time.sleep(0.05)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            for t in self._readers:
                t.join(5)
        failed = [w for w in self.workers if w.last_status not in (0, None)]
        self.say("every worker has ended" + (f"; {', '.join(w.name for w in failed)} did not end cleanly"
                                               if failed else ""))
        return 1 if failed else 0

    def _look(self) -> bool:
        """Reap ended workers, restart crashed ones; True while any runs or waits."""
        now = time.monotonic()
        busy = False
        for w in self.workers:
            if w.proc is not None:
                status = w.proc.poll()
                if status is None:
                    busy = True
                    continue
                w.last_status, w.proc = status, None
                if status == 0 or self.stopping:
                    self.say(f"{w.name} ended (status {status})")
                    continue
                while w.crashes and now - w.crashes[0] > RESTART_WINDOW:
                    w.crashes.popleft()
                w.crashes.append(now)
                if len(w.crashes) > MAX_RESTARTS:
                    self.say(f"{w.name} ended with status {status} {len(w.crashes)} times in "
                             f"{RESTART_WINDOW:.0f} s: not restarting it")
                    continue
                delay = min(2.0 ** (len(w.crashes) - 1), 30.0)
                w.restart_at = now + delay
                self.say(f"{w.name} ended with status {status}: restarting it in {delay:g} s "
                         f"(restart {len(w.crashes)})")
            if w.restart_at is not None:
                if self.stopping:
                    w.restart_at = None
                elif now >= w.restart_at:
                    w.restart_at = None
                    self._start(w)
                    busy = True
                else:
                    busy = True
        return busy
