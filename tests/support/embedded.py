"""The embedded Redis seen from outside: ``servers`` finds the redis-server
processes working in a crawl directory, ``one_server`` asserts there is one,
``assert_gone`` waits until there is none; ``read`` is what a new process
on that directory finds in its Redis. ``ENV`` is the environment without
``REDIS_URL``, so that a process uses the embedded Redis. The
``crawl_dir`` fixture (tests/conftest.py) stops what a test leaves running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tests.support import ROOT

ENV = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
GONE_WITHIN = 10.0  # seconds: a clean end stops the server at once, a kill within the watcher's grace


def servers(crawl_dir: Path) -> list[psutil.Process]:
    """The redis-server processes working in ``crawl_dir``'s embedded Redis
    directory (Redis runs in its data directory)."""
    found = []
    for proc in psutil.process_iter(["name", "cwd"]):
        if proc.info["name"] == "redis-server" and proc.info["cwd"] == str(crawl_dir / "redis"):
            found.append(proc)
    return found


def assert_gone(crawl_dir: Path, timeout: float = GONE_WITHIN) -> None:
    deadline = time.monotonic() + timeout
    while servers(crawl_dir):
        assert time.monotonic() < deadline, (
            f"a redis-server still runs in {crawl_dir / 'redis'} {timeout:g} s after its last user ended: "
            f"{[(p.pid, p.ppid()) for p in servers(crawl_dir)]}")
        time.sleep(0.05)


def one_server(crawl_dir: Path) -> psutil.Process:
    found = servers(crawl_dir)
    assert len(found) == 1, found
    return found[0]


READ = """
import json, sys
from pathlib import Path
from scrapy.settings import Settings
from crawler.frontier import Frontier
from crawler.redis.client import get_redis
client = get_redis(Settings(), Path(sys.argv[1]))
stats = Frontier(client, "site", node="reader").views.stats()
print(json.dumps({"keys": {k.decode(): client.get(k).decode() for k in client.keys("*")
                           if not k.startswith(b"{") and client.type(k) == b"string"},
                  **{k: stats.get(k, 0) for k in ("done", "queued", "leased")}}))
"""


def read(crawl_dir: Path) -> dict:
    """What a new process that starts on ``crawl_dir`` finds in its Redis."""
    out = subprocess.run([sys.executable, "-c", READ, str(crawl_dir)], cwd=ROOT, env=ENV, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)
