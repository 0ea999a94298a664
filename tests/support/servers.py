"""Test servers run as subprocesses on 127.0.0.1, each binding port 0 and
printing its address: the test HTTP servers (``tests.support.mockserver``,
``tests.support.hostile_server``) and SecantusDB (MongoDB's wire protocol)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from tests.support import ROOT


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
                 validators: bool = False, port: int = 0) -> Server:
    """Start ``script`` (a server module of ``tests/support/``:
    ``mockserver.py`` or ``hostile_server.py``) on ``hosts``, logging
    every request into ``tmp/requests.jsonl``; ``root``: a directory of
    pages to serve instead of the generated site; ``port``: 0 for any free
    one, else that one (URLs, and what is hashed from them, the same from
    run to run)."""
    log = (tmp / "requests.jsonl").resolve()
    # Run as a module from the repository, so that it imports its siblings
    # as tests.support.* whatever the caller's working directory.
    module = "tests.support." + script.removesuffix(".py")
    cmd = [sys.executable, "-m", module, "--hosts", hosts, "--log", str(log)]
    if root is not None:
        cmd += ["--root", str(Path(root).resolve())]
    if validators:
        cmd.append("--validators")
    if latency:
        cmd += ["--latency", str(latency)]
    if grid_pages:
        cmd += ["--grid-pages", str(grid_pages)]
    if port:
        cmd += ["--port", str(port)]
    return launch(cmd, log)


def launch(cmd: list[str], log: Path) -> Server:
    """Run a server command from the repository that prints ``{"port": P}``
    as its first line once it listens, logging its requests into ``log``."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise RuntimeError(f"{' '.join(cmd[1:3])} did not start")
    return Server(port=json.loads(line)["port"], log=log, proc=proc)


def serve_pages(tmp: Path, pages: dict[str, str | bytes], robots: str = "User-agent: *\nAllow: /\n") -> Server:
    """A test server on 127.0.0.1 serving ``pages`` (path -> body) and a
    robots.txt from files under ``tmp/www``."""
    root = tmp / "www"
    for path, body in {**pages, "/robots.txt": robots}.items():
        f = root / path.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(body if isinstance(body, bytes) else body.encode())
    return start_server(tmp, hosts="127.0.0.1", root=root)


def start_secantus(storage: Path, port: int = 0) -> tuple[subprocess.Popen[str], int]:
    """A SecantusDB daemon (MongoDB's wire protocol) on 127.0.0.1: ``port`` 0
    for any free port, or a given one to restart a stopped server in place."""
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


def stop_process(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    """Terminate ``proc``, then kill it if it has not gone in 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def stop_secantus(proc: subprocess.Popen[str]) -> None:
    stop_process(proc)
