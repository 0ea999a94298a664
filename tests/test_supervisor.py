"""The supervisor's fork start (crawler/supervisor.py), in this process: a
fork that fails leaves the remaining workers to be spawned, and nothing
forked is left unread. End to end: tests/test_processes.py."""

from __future__ import annotations

import errno
import os
import time

from crawler.supervisor import Supervisor, _Forked


def test_a_fork_that_fails_leaves_the_remaining_workers_to_be_spawned(monkeypatch, capsys):
    sup = Supervisor("site", {}, [], 3, fork=lambda: os._exit(0))
    spawned: list[str] = []
    monkeypatch.setattr(sup, "_start", lambda w: spawned.append(w.name))
    real_fork = os.fork
    calls: list[int] = []

    def fork() -> int:
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        return real_fork()

    monkeypatch.setattr(os, "fork", fork)
    before = set(os.listdir("/proc/self/fd"))
    sup._fork_all(sup.fork)
    assert len(calls) == 2
    assert spawned == ["w2", "w3"]  # the one that failed, and the rest
    first = sup.workers[0].proc
    assert isinstance(first, _Forked)
    deadline = time.monotonic() + 10
    while first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert first.returncode == 0
    for t in sup._readers:
        t.join(5)
    # The failed fork's pipe is closed, and so is the first worker's read
    # end, by its reader once the worker had ended.
    assert first.stdout.closed
    assert set(os.listdir("/proc/self/fd")) <= before
    err = capsys.readouterr().err
    assert "[supervisor] w1 started (pid " in err
    assert ("[supervisor] cannot fork w2 ([Errno 11] Resource temporarily unavailable): starting it as a new "
            "process") in err


def test_no_worker_is_forked_once_a_stop_was_asked(monkeypatch):
    sup = Supervisor("site", {}, [], 2, fork=lambda: os._exit(0))
    sup.stopping = 1
    monkeypatch.setattr(os, "fork", lambda: (_ for _ in ()).throw(AssertionError("forked")))
    sup._fork_all(sup.fork)
    assert [w.proc for w in sup.workers] == [None, None]
