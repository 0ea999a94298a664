"""The suite itself, started as users start it (issue 48, item 17)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts a pytest of its own

ROOT = Path(__file__).resolve().parent.parent

INNER = textwrap.dedent('''
    import signal
    import subprocess
    import sys
    import time


    def test_a_child_stops_on_ctrl_c():
        child = subprocess.Popen([sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert child.stdout.readline() == "up\\n"
        child.send_signal(signal.SIGINT)
        try:
            _, err = child.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            child.kill()
            raise AssertionError("SIGINT was ignored") from None
        assert "KeyboardInterrupt" in err
''')


def test_a_suite_started_in_the_background_still_stops_its_children_with_ctrl_c(tmp_path):
    """``pytest &`` in a shell without job control starts with SIGINT
    ignored, and children inherit that: the tests that stop a crawl with
    Ctrl-C then failed. The suite's conftest puts Python's handler back."""
    (tmp_path / "test_inner.py").write_text(INNER)

    def background() -> None:  # what `cmd &` does in a non-interactive shell
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
         "--rootdir", str(tmp_path), "-c", "/dev/null", str(tmp_path / "test_inner.py")],
        cwd=ROOT, preexec_fn=background, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout
