"""Where a crawl's CPU goes: py-spy samples of ours and of plain Scrapy.

    python -m bench.profile_crawl [--root DIR] [--out /tmp/prof] [--which ours,plain]
    python -m bench.profile_crawl --report /tmp/prof/ours.txt [--under FUNCTION] [--top 40]

The first form serves ``--root`` (default: the PostgreSQL 15 documentation,
link-light pages where the issue's 1.2x is not met) on 127.0.0.1 and runs
each crawl of ``bench/bench_crawl.py`` (same settings: ours with every
stage, plain Scrapy's ``CrawlSpider``) under ``py-spy record`` (200
samples a second, raw collapsed stacks, idle threads left out), then
reports both. The second reports one file: the share of samples in each
function (inclusive and self), or with ``--under`` the share of each
direct callee of that function (by line), which is how "SiteSpider.parse:
52 %, of which the duplicate check 19 %" was read. ``py-spy`` comes with the
bench extra (``pip install -e ".[bench]"``); it samples from outside the
process, so the crawl runs at its own pace.
"""

from __future__ import annotations

import argparse
import collections
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_FRAME = re.compile(r"(.*?) \((.*?)(?::(\d+))?\)$")


def frame_name(frame: str, line: bool = False) -> str:
    """``function (module)`` of a py-spy frame, site-packages and the
    project's path left out; with ``line``, the line too."""
    m = _FRAME.match(frame)
    if not m:
        return frame
    where = m.group(2).split("site-packages/")[-1].replace(str(ROOT) + "/", "")
    return f"{m.group(1)} ({where}{':' + m.group(3) if line and m.group(3) else ''})"


def read_stacks(path: Path, line: bool = False) -> list[tuple[list[str], int]]:
    stacks = []
    for raw in path.read_text().splitlines():
        if raw.strip():
            stack, n = raw.rsplit(" ", 1)
            stacks.append(([frame_name(f, line) for f in stack.split(";")], int(n)))
    return stacks


def report(path: Path, top: int = 40, under: str | None = None) -> None:
    stacks = read_stacks(path, line=under is not None)
    total = sum(n for _, n in stacks) or 1
    if under:
        inside = 0
        callees: collections.Counter[str] = collections.Counter()
        for frames, n in stacks:
            at = next((i for i, f in enumerate(frames) if f.startswith(under + " ")), None)
            if at is None:
                continue
            inside += n
            callees[frames[at + 1] if at + 1 < len(frames) else "<self>"] += n
        print(f"{path}: {under} {100 * inside / total:.1f} % of {total} samples; its callees:")
        for name, n in callees.most_common(top):
            print(f"{100 * n / total:6.1f} {name}")
        return
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for frames, n in stacks:
        for name in set(frames):
            inclusive[name] += n
        own[frames[-1]] += n
    print(f"{path}: {total} samples; inclusive")
    for name, n in inclusive.most_common(top):
        print(f"{100 * n / total:6.1f} {name}")
    print("self")
    for name, n in own.most_common(top):
        print(f"{100 * n / total:6.1f} {name}")


def record(root: Path, out: Path, which: list[str], extra: dict[str, str] | None = None) -> None:
    from bench.harness import COMMON, LOOPBACK, plain_crawl, scrapy_crawl, serve

    # Beside this Python first (a virtual environment not activated), then on PATH.
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        raise SystemExit('py-spy is not installed: pip install -e ".[bench]"')
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="profile-crawl-"))
    server = serve(work, root)
    seed = server.url("/index.html")
    try:
        for name in which:
            if name == "ours":
                settings = {**COMMON, "CRAWL_DIR": work / "ours", "NETWORK_ALLOWLIST": LOOPBACK, **(extra or {})}
                cmd, cwd = scrapy_crawl([f"seeds={seed}", "follow=all"], settings), ROOT
            elif name == "plain":
                cmd, cwd = plain_crawl(seed, COMMON), work  # outside the project: none of its settings apply
            else:
                raise SystemExit(f"--which: ours or plain, not {name!r}")
            samples = out / f"{name}.txt"
            proc = subprocess.run([spy, "record", "-r", "200", "--format", "raw", "-o", str(samples), "--", *cmd],
                                  cwd=cwd, capture_output=True, text=True, timeout=1800)
            if proc.returncode != 0:
                raise SystemExit(f"{name}: py-spy or the crawl failed:\n{proc.stderr[-3000:]}")
            report(samples)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path("/usr/share/doc/postgresql-doc-15/html"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/prof"))
    ap.add_argument("--which", default="ours,plain")
    ap.add_argument("--report", type=Path, help="report a file of samples instead of recording")
    ap.add_argument("--under", help="with --report: the callees of this function (e.g. SiteSpider.parse)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for ours (repeatable), e.g. WARC_DIR=/tmp/warc")
    args = ap.parse_args()
    if args.report:
        report(args.report, args.top, args.under)
    else:
        record(args.root, args.out, [w for w in args.which.split(",") if w],
               dict(s.split("=", 1) for s in args.setting))


if __name__ == "__main__":
    main()
