"""The operator's commands on a running crawl, run as an operator runs them:
``command`` runs ``scrapy <name>`` in a subprocess from the repository;
``status`` reads ``scrapy status --json``; ``wait_status`` polls it until
a condition holds."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.support import ROOT


def command(name: str, args: list[str], settings: dict, crawl_dir: Path, timeout: float = 60) -> tuple[int, str, str]:
    cmd = [sys.executable, "-m", "scrapy", name, *args]
    for k, v in {**settings, "CRAWL_DIR": str(crawl_dir)}.items():
        cmd += ["-s", f"{k}={v}"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def status(settings: dict, crawl_dir: Path) -> dict:
    code, out, err = command("status", ["--json"], settings, crawl_dir)
    assert code == 0, err
    return json.loads(out)


def wait_status(settings: dict, crawl_dir: Path, until, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        st = status(settings, crawl_dir)
        if until(st):
            return st
        assert time.monotonic() < deadline, st
        time.sleep(0.5)
