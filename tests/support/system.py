"""Debian packages the tests need (a headless Chromium, tinyproxy), installed when
absent, so that the README's test command works on a fresh machine: once,
under a lock shared by pytest-xdist's workers, with ``apt-get`` as root or
through ``sudo -n``. Where that cannot be done the test fails with what to
install: a browser test that quietly does not run proves nothing."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["CHROMIUM", "TINYPROXY", "ensure_commands"]

# command -> Debian package
CHROMIUM = {"chromium": "chromium", "chromedriver": "chromium-driver"}
TINYPROXY = {"tinyproxy": "tinyproxy"}


def ensure_commands(commands: dict[str, str]) -> str | None:
    """Install the packages of the missing ``commands``; None when all are
    there, else why not (a line for ``pytest.fail``)."""
    if all(shutil.which(c) for c in commands):
        return None
    lock = Path(tempfile.gettempdir()) / "crawler-tests-apt.lock"
    with lock.open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # one installer; the other workers wait, then find the commands
        missing = sorted({p for c, p in commands.items() if not shutil.which(c)})
        if missing and shutil.which("apt-get"):
            prefix = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
            if prefix is not None:
                env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
                subprocess.run([*prefix, "apt-get", "update", "-qq"], env=env, capture_output=True, timeout=600)
                subprocess.run([*prefix, "apt-get", "install", "-y", "-qq", *missing], env=env,
                               capture_output=True, timeout=1200)
    missing = sorted({p for c, p in commands.items() if not shutil.which(c)})
    if missing:
        return f"needs {' '.join(missing)}: apt-get install {' '.join(missing)} (could not install it here)"
    return None
