"""A regression check of what a page costs: fails when the page steps' CPU
a page grows by more than 5 % against a baseline recorded on this machine.

    python -m bench.cpu_check record [--root DIR] [--pages 150] [--reps 7] [--instructions]
    python -m bench.cpu_check [check] [--root DIR] [--limit 5] [--instructions]

- **The work**: the first ``--pages`` HTML files (sorted by path) of
  ``--root`` (default the PostgreSQL 15 manual, ``apt-get install
  postgresql-doc-15``), each as an ``HtmlResponse`` through the page steps
  a site spider's chain runs on it that stay in the process (decode, parse,
  read, content, metadata, kind: ``bench.bench_content.CrawlerReader``)
  and the duplicate check's fingerprints (content hash, SimHash and sketch)
  of its text: the work of a page that is the crawler's own, not Scrapy's,
  Redis's or the store's.
- **The figure**: this thread's CPU (``time.thread_time``) for the whole
  set, ``--reps`` times after one warm-up pass; the least of them, over the
  pages (ms a page). The least is the steadiest figure another process on
  the machine leaves (it only ever adds time).
- **``--instructions``**: the instructions one pass executes instead,
  counted by valgrind's callgrind (``apt-get install valgrind``): the same
  count from run to run whatever else the machine does, where CPU time
  under load varies by more than the 5 % the check is for. Two runs under
  callgrind (about 2 minutes each), with and without the measured pass, the
  difference over the pages; ``PYTHONHASHSEED=0`` in both.
- **The baseline** is kept in ``~/.cache/site-crawler/cpu-baseline.json``
  (``$XDG_CACHE_HOME``), one per machine (host name, processor, Python)
  and work (root, pages): ``record`` writes it, ``check`` compares and
  exits 1 when the figure is more than ``--limit`` per cent above it, 2
  when there is no baseline for this machine and work.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

DEFAULT_ROOT = Path("/usr/share/doc/postgresql-doc-15/html")


def baseline_path() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "site-crawler" / "cpu-baseline.json"


def machine() -> str:
    cpu = ""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    except OSError:
        pass
    return f"{platform.node()} | {cpu or platform.processor()} | Python {platform.python_version()}"


def measure(root: Path, pages: int, reps: int) -> dict[str, Any]:
    from bench.bench_content import CrawlerReader
    from crawler.duplicates.fingerprint import content_hash, fingerprints

    files = html_files(root)[:pages]
    if not files:
        sys.exit(f"no HTML files under {root}")
    reader = CrawlerReader()
    bodies = [(f"http://bench.test/{p.relative_to(root)}", p.read_bytes()) for p in files]

    def one_pass() -> float:
        spent = 0.0
        for url, body in bodies:
            response = reader.response(url, body)
            t0 = time.thread_time()
            page, _ = reader.run(response)
            text = page.analysis.text if page.analysis is not None else ""
            content_hash(text)
            if len(text) >= 100:
                fingerprints(text, 1024)
            spent += time.thread_time() - t0
        return spent

    one_pass()  # warm-up: models loaded, caches filled
    runs = [one_pass() for _ in range(reps)]
    if reps == 0:
        return {}
    return {"ms_a_page": round(min(runs) * 1000.0 / len(bodies), 4),
            "runs_ms_a_page": [round(r * 1000.0 / len(bodies), 4) for r in runs],
            "pages": len(bodies), "root": str(root), "steps": reader.names}


def count_instructions(root: Path, pages: int) -> dict[str, Any]:
    """The instructions of one pass over the pages (see the module)."""
    import re
    import shutil
    import subprocess

    if shutil.which("valgrind") is None:
        sys.exit("--instructions needs valgrind (apt-get install valgrind)")
    counts = []
    for passes in (1, 0):
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m",
               "bench.cpu_check", "--child", str(passes), "--root", str(root), "--pages", str(pages)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"},
                              cwd=Path(__file__).resolve().parent.parent, check=False)
        m = re.search(r"Collected : (\d+)", proc.stderr)
        if proc.returncode != 0 or m is None:
            sys.exit(f"callgrind run failed: {proc.stderr[-2000:]}")
        counts.append(int(m.group(1)))
    n = min(pages, len(html_files(root)))
    return {"ms_a_page": round((counts[0] - counts[1]) / n / 1e6, 4), "runs_ms_a_page": [], "pages": n,
            "root": str(root), "steps": [], "unit": "million instructions a page"}


def html_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.html") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("action", nargs="?", choices=("check", "record"), default="check")
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT)
    ap.add_argument("--pages", type=int, default=150)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--limit", type=float, default=5.0, help="per cent above the baseline that fails (5)")
    ap.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)  # --instructions' own runs: this many passes
    args = ap.parse_args()
    if args.child is not None:
        measure(args.root, args.pages, args.child)
        return
    unit = "million instructions a page" if args.instructions else "ms a page"
    key = f"{machine()} | {args.root} | {args.pages} pages | {unit}"
    path = baseline_path()
    try:
        baselines = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        baselines = {}
    if args.instructions:
        now = count_instructions(args.root, args.pages)
        print(f"{now['pages']} pages of {args.root}: {now['ms_a_page']:.3f} {unit}")
    else:
        now = measure(args.root, args.pages, args.reps)
        print(f"{now['pages']} pages of {args.root}: {now['ms_a_page']:.3f} ms a page (least of {args.reps}: "
              f"{', '.join(f'{x:.3f}' for x in now['runs_ms_a_page'])}); steps {'+'.join(now['steps'])}")
    if args.action == "record":
        baselines[key] = {**now, "recorded": time.strftime("%Y-%m-%d %H:%M:%S")}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(baselines, indent=1))
        print(f"baseline recorded in {path}")
        return
    base = baselines.get(key)
    if base is None:
        print(f"no baseline for this machine and work in {path}: run `python -m bench.cpu_check record` first")
        sys.exit(2)
    growth = 100.0 * (now["ms_a_page"] / base["ms_a_page"] - 1.0)
    verdict = "FAIL" if growth > args.limit else "ok"
    print(f"baseline {base['ms_a_page']:.3f} {unit} ({base['recorded']}): {growth:+.1f} % -> {verdict} "
          f"(limit +{args.limit:g} %)")
    if verdict == "FAIL":
        sys.exit(1)


if __name__ == "__main__":
    main()
