"""``scrapy console`` as an operator runs it, and its page read in a real
browser: ``ConsoleProcess`` starts the command (``--port 0``) and talks to
its API; ``texts`` and ``text`` read the page a ``browser`` (the fixture in
tests/conftest.py: headless Chromium) shows."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from crawler.operations.console import TOKEN_HEADER
from tests.support import ROOT
from tests.support.workers import RUNNING


class ConsoleProcess:
    """``scrapy console --port 0`` as an operator starts it."""

    def __init__(self, settings: dict, crawl_dir: Path, *args: str) -> None:
        cmd = [sys.executable, "-m", "scrapy", "console", "--port", "0", "--interval", "0.5", *args]
        for k, v in {**settings, "CRAWL_DIR": str(crawl_dir)}.items():
            cmd += ["-s", f"{k}={v}"]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        RUNNING.append(self.proc)
        self.lines: queue.Queue[str] = queue.Queue()
        self.out: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        first = self.lines.get(timeout=60)
        assert first.startswith("Console on http://127.0.0.1:"), first + self.proc.stderr.read()
        self.url = first.split(" ", 2)[2].strip()
        self.origin = self.url.rstrip("/")
        second = self.lines.get(timeout=10)
        self.token = second.split()[-1] if second.startswith("Actions are on") else None

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.out.append(line)
            self.lines.put(line)

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, Any, float]:
        """(status, JSON answer or the text, seconds it took)."""
        req = urllib.request.Request(self.origin + path, data=body, method=method, headers=headers or {})
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=30) as res:
                code, raw, ctype = res.status, res.read(), res.headers.get_content_type()
        except urllib.error.HTTPError as exc:
            code, raw, ctype = exc.code, exc.read(), exc.headers.get_content_type()
            exc.close()
        took = time.monotonic() - t0
        return code, json.loads(raw) if ctype == "application/json" else raw.decode(), took

    def post(self, action: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        code, out, _ = self.request("POST", f"/api/{action}", json.dumps(body).encode(), headers)
        return code, out

    def allowed(self, **more: str) -> dict[str, str]:
        """The headers the page sends with an action."""
        assert self.token is not None
        return {"Content-Type": "application/json", TOKEN_HEADER: self.token, "Origin": self.origin, **more}

    def stop(self) -> tuple[int, str, str]:
        """Ctrl-C; (exit status, stdout, stderr)."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(15)
        assert self.proc.stderr is not None
        err = self.proc.stderr.read()
        time.sleep(0.2)  # the reader thread takes the last lines
        return code, "".join(self.out), err


def texts(browser: Any, css: str) -> list[str]:
    """The text of every element ``css`` selects, read at one instant (the
    page redraws its tables at each poll)."""
    return browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent)", css)


def text(browser: Any, element_id: str) -> str:
    return browser.execute_script("return document.getElementById(arguments[0]).textContent", element_id)
