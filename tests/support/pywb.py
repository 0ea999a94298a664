"""pywb, the web archive replay tool, run on the WARC files a test wrote:
what a real reader of our archives makes of them.

pywb 2.10.0 pins ``redis==2.10.6`` (and an in-memory stand-in for Redis
that its own tests use), which clash with this project's redis, so it never
enters the project's
environment: it lives in a virtual environment of its own, made on first use
under ``$CRAWLER_TEST_CACHE`` (else ``$XDG_CACHE_HOME/crawler-tests``, else
``~/.cache/crawler-tests``) as ``pywb-2.10.0/``. The first build installs
pywb from the package index (half a minute); later calls find it ready.
Several pytest-xdist workers may ask at once: an ``fcntl.flock`` on
``pywb-2.10.0.lock`` lets one build while the others wait, and a marker
file written last tells a finished venv from one killed mid-install, which
is removed and built again.

- ``pywb_bin(name)``: the path of a console script of that venv
  (``wayback``, ``wb-manager`` ...), building the venv first if needed.
- ``Pywb(workdir, warcs, cdxj=None, coll="crawl")``: a context manager
  that makes a pywb collection in ``workdir``, puts the WARC files in its
  archive, has pywb index them (or, given ``cdxj``, serves that index
  instead, untouched: how our own CDXJ export is tested), and runs
  ``wayback`` on 127.0.0.1 on a free port until the block ends. ``url``
  builds a replay URL, ``get`` fetches one (no redirects followed, no
  proxies).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

import pytest

from tests.support.servers import stop_process

PYWB_VERSION = "2.10.0"
_MARKER = ".crawler-tests-complete"  # written last: the venv is whole
_INSTALL_TIMEOUT = 1200.0
_START_TIMEOUT = 60.0


def _cache_dir() -> Path:
    if os.environ.get("CRAWLER_TEST_CACHE"):
        return Path(os.environ["CRAWLER_TEST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "crawler-tests"


def _tail(text: str | bytes | None, lines: int = 30) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return "\n".join((text or "").splitlines()[-lines:])


def _run(cmd: list[str], timeout: float, cwd: Path | None = None) -> None:
    """Run ``cmd``; on failure, fail the test naming it with its output's tail."""
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(cmd)} did not finish in {timeout:.0f} s:\n{_tail(e.stderr)}", pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited with {done.returncode}:\n{_tail(done.stderr or done.stdout)}",
                    pytrace=False)


def _venv() -> Path:
    """The pywb venv, built first if missing or half made."""
    cache = _cache_dir()
    venv = cache / f"pywb-{PYWB_VERSION}"
    if (venv / _MARKER).exists():
        return venv
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f"pywb-{PYWB_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building: wait for it
        if (venv / _MARKER).exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # what a killed build left
        _run([sys.executable, "-m", "venv", str(venv)], timeout=300)
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
              f"pywb=={PYWB_VERSION}"], timeout=_INSTALL_TIMEOUT)
        tmp = venv / (_MARKER + ".tmp")
        tmp.write_text(f"pywb=={PYWB_VERSION}\n")
        tmp.rename(venv / _MARKER)
    return venv


def pywb_bin(name: str) -> Path:
    """The path of console script ``name`` (``wayback``, ``wb-manager``,
    ``cdx-indexer`` ...) of the pywb venv, made first if needed."""
    path = _venv() / "bin" / name
    if not path.exists():
        pytest.fail(f"pywb's venv has no {name}: {path}", pytrace=False)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # urllib then raises HTTPError with the 3xx itself


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


class Pywb:
    """pywb replaying ``warcs`` from collection ``coll`` made in ``workdir``.

    On entering (or ``start()``) it runs ``wb-manager init coll`` in
    ``workdir``, links (or copies, across file systems) each WARC into
    ``collections/<coll>/archive/``, then either copies ``cdxj`` to
    ``collections/<coll>/indexes/index.cdxj`` and leaves it as it is (pywb
    does not index) or, with no ``cdxj``, has pywb index the archive
    (``wb-manager reindex``). It then starts ``wayback`` on 127.0.0.1 on a
    free port, and returns once it answers. Leaving (or ``stop()``) stops
    it. pywb's output is kept in ``workdir/wayback.log``.
    """

    def __init__(self, workdir: Path, warcs: list[Path], cdxj: Path | None = None, coll: str = "crawl") -> None:
        self.workdir = Path(workdir)
        self.warcs = [Path(w) for w in warcs]
        self.cdxj = Path(cdxj) if cdxj is not None else None
        self.coll = coll
        self.port = 0
        self.log = self.workdir / "wayback.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Pywb:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _make_collection(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        _run([str(pywb_bin("wb-manager")), "init", self.coll], timeout=120, cwd=self.workdir)
        coll = self.workdir / "collections" / self.coll
        for warc in self.warcs:
            dest = coll / "archive" / warc.name
            try:
                os.link(warc, dest)
            except OSError:
                shutil.copyfile(warc, dest)
        if self.cdxj is not None:
            shutil.copyfile(self.cdxj, coll / "indexes" / "index.cdxj")
        else:
            _run([str(pywb_bin("wb-manager")), "reindex", self.coll], timeout=300, cwd=self.workdir)

    def start(self) -> None:
        """Make the collection and start ``wayback``; returns once it answers."""
        self._make_collection()
        wayback = str(pywb_bin("wayback"))
        for _attempt in range(3):  # another process may take the free port first
            self.port = _free_port()
            with self.log.open("ab") as log:
                self.proc = subprocess.Popen([wayback, "-b", "127.0.0.1", "-p", str(self.port)],
                                             cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL)
            deadline = time.monotonic() + _START_TIMEOUT
            while time.monotonic() < deadline and self.proc.poll() is None:
                try:
                    with _OPENER.open(f"http://127.0.0.1:{self.port}/", timeout=5):
                        pass
                except urllib.error.HTTPError:
                    pass  # it answers, if only with an error page
                except OSError:
                    time.sleep(0.2)
                    continue
                time.sleep(0.2)  # not another process that took the port while pywb failed to bind it
                if self.proc.poll() is None:
                    return
            if self.proc.poll() is None:
                self.stop()
                pytest.fail(f"pywb's wayback did not answer on 127.0.0.1:{self.port} in {_START_TIMEOUT:.0f} s:\n"
                            f"{_tail(self.log.read_bytes())}", pytrace=False)
        self.proc = None
        pytest.fail(f"pywb's wayback exited at start:\n{_tail(self.log.read_bytes())}", pytrace=False)

    def stop(self) -> None:
        """Stop ``wayback`` (terminate, then kill); idempotent."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        stop_process(proc)

    def url(self, target_url: str, timestamp: str = "", mode: str = "id_") -> str:
        """The replay URL of ``target_url`` as captured closest to
        ``timestamp`` (14 digits, or a prefix); with no ``timestamp``, pywb's
        form for the latest (``/<coll>/id_/<url>``), which serves the
        capture closest to the current time (the latest of captures in the
        past). ``mode``: pywb's modifier, ``id_`` for the archived response
        as it was, ``mp_`` for rewritten pages."""
        return f"http://127.0.0.1:{self.port}/{self.coll}/{timestamp}{mode}/{target_url}"

    def get(self, target_url: str, timestamp: str = "", mode: str = "id_") -> tuple[int, dict[str, str], bytes]:
        """Fetch ``url(target_url, timestamp, mode)``: (status, headers,
        body), headers with lower-case names (repeated ones joined with
        ", "). A 3xx is returned as it is, not followed."""
        try:
            with _OPENER.open(self.url(target_url, timestamp, mode), timeout=30) as resp:
                return resp.status, _headers(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            with e:
                return e.code, _headers(e.headers), e.read()


def _headers(msg: object) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in msg.items():  # type: ignore[attr-defined]
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out
