"""The supervisor's fork start (crawler/operations/supervisor.py), in this process: a
fork that fails leaves the remaining workers to be spawned, and nothing
forked is left unread; killed, it leaves the embedded Redis to its workers.
End to end: tests/test_processes.py."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import time

import psutil
import pytest

from crawler.operations.supervisor import Supervisor, _Forked
from tests.support import ROOT
from tests.support.crawl import crawl_cmd
from tests.support.embedded import ENV, assert_gone, one_server, read, servers


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


@pytest.mark.slow
def test_a_killed_supervisor_leaves_the_embedded_redis_to_its_workers_and_it_goes_with_the_last(server, crawl_dir):
    """The supervisor holds the embedded Redis for its workers; killed
    outright (no exit handler runs), its forked workers crawl on on the same
    server, which stops once the last of them has ended."""
    cmd = crawl_cmd([f"seeds={server.url('/')}"], {"CRAWL_PROCESSES": 2, "DOWNLOAD_DELAY": 0.3,
                                                   "TRAP_MAX_SHAPE_RUN": 3}, crawl_dir)
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    workers: list[psutil.Process] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = re.match(r"\[supervisor\] w\d started \(pid (\d+)\)", line)
            if m:
                workers.append(psutil.Process(int(m.group(1))))
            if len(workers) == 2 and re.match(r"\[w\d\] .*Spider opened", line):
                break
        assert len(workers) == 2
        redis_server = one_server(crawl_dir)
        time.sleep(1.0)
        proc.kill()
        proc.wait(30)
        assert all(w.is_running() for w in workers)
        assert servers(crawl_dir) == [redis_server]  # theirs still
        gone, alive = psutil.wait_procs(workers, timeout=120)
        assert not alive
    finally:
        for w in workers:
            try:
                w.kill()
            except psutil.Error:
                pass
    assert_gone(crawl_dir)
    found = read(crawl_dir)
    assert found["done"] >= 3 and found["leased"] == 0, found
