"""``python -m bench.golden compare`` (the golden crawls' comparison,
bench/golden.py): every difference of two captures printed with its path
and both values, exit 1 if there is any. Run as a command, as the
coordinator runs it (the tests import nothing from ``bench``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT


def compare(tmp_path: Path, a: dict, b: dict, *options: str) -> subprocess.CompletedProcess[str]:
    for name, doc in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(doc))
    return subprocess.run([sys.executable, "-m", "bench.golden", "compare", str(tmp_path / "a.json"),
                           str(tmp_path / "b.json"), *options], cwd=ROOT, capture_output=True, text=True, timeout=60)


CAPTURE = {"meta": {"commit": "abc"}, "crawls": {"site": {"steps": [
    {"requests": [{"path": "/"}, {"path": "/a.html"}], "stats": {"x/y": 1},
     "store": {"pages": {"rows": [{"url": "u", "title": "T"}]}}}]}}}


def test_two_equal_captures_have_no_difference_whatever_their_meta(tmp_path):
    other = json.loads(json.dumps(CAPTURE))
    other["meta"] = {"commit": "def"}
    done = compare(tmp_path, CAPTURE, other)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ['A: {"commit": "abc"}', 'B: {"commit": "def"}', "0 difference(s)"]


def test_each_difference_is_shown_with_its_path_and_both_values(tmp_path):
    other = json.loads(json.dumps(CAPTURE))
    step = other["crawls"]["site"]["steps"][0]
    step["requests"] = [{"path": "/a.html"}, {"path": "/"}, {"path": "/b.html"}]  # reordered, one more
    step["stats"] = {"x/y": 2, "x/z": 1}
    step["store"]["pages"]["rows"][0]["title"] = "Other"
    done = compare(tmp_path, CAPTURE, other)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[2:] == [
        "/site/steps[0]/requests/<length>", "  A: 2", "  B: 3",
        "/site/steps[0]/requests[0]/path", '  A: "/"', '  B: "/a.html"',
        "/site/steps[0]/requests[1]/path", '  A: "/a.html"', '  B: "/"',
        "/site/steps[0]/stats/x/y", "  A: 1", "  B: 2",
        "/site/steps[0]/stats/x/z", '  A: "<absent>"', "  B: 1",
        "/site/steps[0]/store/pages/rows[0]/title", '  A: "T"', '  B: "Other"',
        "6 difference(s)"]
    ignored = compare(tmp_path, CAPTURE, other, "--ignore", r"/requests|/stats/")
    assert ignored.returncode == 1
    assert ignored.stdout.splitlines()[2:] == [
        "/site/steps[0]/store/pages/rows[0]/title", '  A: "T"', '  B: "Other"', "1 difference(s)"]
