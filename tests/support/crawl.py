"""Crawls run as a user runs them: ``scrapy crawl`` in a subprocess from
the repository, against a test server (``tests.support.servers``)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import ROOT
from tests.support.servers import Server


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
            "FRONTIER_DELAY_MARGIN": 0,
            # Crawls of tests about other things read no sitemaps: their
            # fetches are exactly their pages (tests/test_sitemaps.py reads them).
            "SITEMAP_ENABLED": False}
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
