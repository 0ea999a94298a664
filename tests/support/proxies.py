"""Debian's tinyproxy on loopback, for the proxy-pool tests (installed when
absent: ``tests/support/system.py``)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Tinyproxy:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    conf: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def requests(self) -> list[str]:
        """The URLs asked of this proxy so far, in order."""
        if not self.log.exists():
            return []
        return re.findall(r"Request \(file descriptor \d+\): \w+ (\S+) HTTP", self.log.read_text(errors="replace"))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_tinyproxy(tmp: Path, name: str, auth: tuple[str, str] | None = None) -> Tinyproxy:
    import pytest

    from tests.support.system import TINYPROXY, ensure_commands

    why = ensure_commands(TINYPROXY)
    if why is not None:
        pytest.fail(why)
    exe = shutil.which("tinyproxy") or "/usr/bin/tinyproxy"
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / f"{name}.log"
    conf = tmp / f"{name}.conf"
    for _ in range(20):
        port = free_port()
        lines = [f"Port {port}", "Listen 127.0.0.1", "Timeout 30", f'LogFile "{log}"', "LogLevel Connect",
                 "MaxClients 100", "Allow 127.0.0.1", "DisableViaHeader Yes"]
        if auth is not None:
            lines.append(f"BasicAuth {auth[0]} {auth[1]}")
        conf.write_text("\n".join(lines) + "\n")
        proc = subprocess.Popen([exe, "-d", "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return Tinyproxy(proc, port, log, conf)
            except OSError:
                time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
    raise RuntimeError("tinyproxy did not start")
