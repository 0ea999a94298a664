"""Rendering pages whose content scripts build (``-a render``, issue 41):
which pages the auto rule picks, what ``auto`` costs a static site, and a
long ``render=always`` crawl's speed and memory; PDFs through the worker.

    python -m bench.bench_render [--rule] [--static] [--always] [--pdf] [--quick]

No part flag: every part, one after the other (never two at once: the
machine's two cores are shared). ``--quick``: small runs, for development.

``--rule``: ``crawler/render/decide.py``'s rule on pages it was not tuned
on. Every ``.html`` file of the static documentation trees in ``TREES``
(Debian packages: ``apt-get install sphinx-doc cmake-doc libglib2.0-doc
openjdk-17-doc libsigc++-2.0-doc``; the PostgreSQL and Python manuals are
refused, whatever ``--tree`` says) is read as the spider reads a page
(``decode_html``, ``parse_html``, ``analyze``), its shape built with
``shape_of`` from its bytes, ``len(page.text)`` and ``len(page.links)``,
and judged by ``looks_scripted``. Then the application site of
``tests/support/app_server.py``: its shells (``/`` and ``/docs/<n>``,
fetched with urllib from a running server), its other script-written
pages, and its one static page. Prints, per tree, pages, pages with a
script, pages flagged (by reason) with examples, and the time of
``shape_of`` + ``looks_scripted`` a page (mean and 99th percentile, us)
beside the extraction's; then what the rule would flag with its noscript
clause read otherwise (what-if figures for the thresholds, on these same
pages: not held-out evidence). Target: (near) 0 % of static pages
flagged, 100 % of shells.

``--static``: the cost of ``-a render=auto`` on a site with nothing to
render. CMake's manual (``--root``, a few thousand fetches, ``apt-get
install cmake-doc``) served on 127.0.0.1 and crawled with ``-a
follow=all`` and ``bench_crawl``'s settings (16 requests, 16 a site, no
delay, robots.txt obeyed), ``render=never`` and ``render=auto`` ``--runs``
(3) times each, the order reversed every other round; and both again on a
copy of the tree without the pages the rule flags ("no candidate": the
rule's cost alone, no browser launched). The anchor is ``render=never`` on
the same tree in the same run: prints pages/s (Scrapy's clock),
whole-process pages/s and CPU a page (the crawl's processes, the
browser's included), best of each, and the ratios auto / never (target >=
0.95 on pages/s); the pages ``auto`` took as candidates and rendered
(``render/candidates``, ``render/pages``: expected about 0) and whether it
launched the browser (``render/browser_launches``). A machine shared with
other work moves pages/s by 5-10 % from run to run: the 1-minute load
average is printed with each run.

``--always``: ``-a render=always`` on the application site served on
``--hosts`` (8 loopback addresses; seeds: each host's ``/``, whose
rendered page links every document) with ``--docs`` documents a host, at
least ``--pages`` pages in all (5,000), once for each ``RENDER_CONCURRENCY``
in ``--concurrency`` (2 and 4; one value an invocation keeps the run
under an hour, and the CSV keeps the other invocations' runs). Run as a
user runs it
(``tests.support.crawl.crawl_cmd``: one request at a time a site, no
delay). Every ``--every`` seconds (5) a sample: the pages in the crawl's
store (``site.sqlite3``, read-only) and the memory of the crawl's process
and all its descendants (the Playwright driver ``node``, every Chromium
process; psutil): RSS summed, and PSS summed (shared pages counted once:
Chromium's processes share much of theirs, so summed RSS overstates).
Samples go to ``--csv`` (``bench/render-rss.csv``), with the 1-minute
load average. Prints pages/s (stored pages over Scrapy's elapsed time,
and over the whole process), the CPU a page (every process of the crawl,
the browser's included, as the parents reaped them),
memory after the first tenth of the pages (500 of 5,000), at half (2,500)
and at the end, the peak, and whether it is flat: the mean of the samples
in the last fifth of the pages (the last 1,000) within ``FLAT`` (10 %) of
the mean of those between a fifth and two fifths (pages 1,000-2,000);
a fifth spans several browser restarts (``RENDER_PAGES_PER_BROWSER``,
200), whose saw-tooth the means smooth out. The anchor, first in the same
run: the same pages with ``render=never`` (seeds: every page, since a
shell has no link; the same fetches of the pages themselves, without their
scripts' requests), pages/s and the ratio. Also the render stats of each
crawl (failures, escapes, time-outs) and the log's ERROR lines.
``--keep`` keeps the work directory (servers' and crawls' logs).

``--pdf``: PDFs through ``crawler.reading.pdfworker.PdfWorker`` (a spawned child
a document), documents/s, on text PDFs made by ``tests/support/pdfs.py``
(1, 10 and 50 pages); the anchor is ``crawler.reading.pdf.extract`` in this
process on the same bytes (what the child costs). With ``PDF_PROCESSES``
1 and 2.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime
import os
import re
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import psutil

from bench.harness import COMMON, LOOPBACK, ROOT, ChildTime, cpu_ms, rate, run, scrapy_crawl, serve, stats_of, whole
from crawler.reading.encoding import decode_html
from crawler.reading.extract import analyze
from crawler.reading.html import parse_html
from crawler.render.decide import NOSCRIPT_LINKS, NOSCRIPT_TEXT, THIN_LINKS, THIN_TEXT, Shape, looks_scripted, shape_of
from tests.support.crawl import crawl_cmd
from tests.support.servers import launch

MIB = 2 ** 20

# Static documentation trees: (Debian package: part, directory). None of
# them set the rule's thresholds.
TREES = (
    ("sphinx-doc", "/usr/share/doc/sphinx-doc/html"),
    ("cmake-doc", "/usr/share/doc/cmake-data/html"),
    ("libglib2.0-doc: glib", "/usr/share/gtk-doc/html/glib"),
    ("libglib2.0-doc: gio", "/usr/share/gtk-doc/html/gio"),
    ("libglib2.0-doc: gobject", "/usr/share/gtk-doc/html/gobject"),
    ("openjdk-17-doc (javadoc)", "/usr/share/doc/openjdk-17-jre-headless/api"),
    ("libsigc++-2.0-doc (Doxygen)", "/usr/share/doc/libsigc++-2.0-doc"),
    ("docutils-doc", "/usr/share/doc/docutils-doc"),
    ("python-requests-doc", "/usr/share/doc/python-requests-doc/html"),
    ("valgrind", "/usr/share/doc/valgrind/html"),
)
# Never measured here: the trees other work was tuned on.
FORBIDDEN = re.compile(r"postgresql|/python3(?:\.\d+)?(?:-doc)?/|/python3\.\d+/")
STATIC_TARGET = 0.95
FLAT = 0.10
APP_HOSTS = ",".join(f"127.0.0.{i}" for i in range(2, 10))
# The application site's pages whose scripts write their content, beside the shells.
APP_SCRIPTED = ("/leak", "/robots-test", "/stall", "/download", "/popup", "/nav", "/spin", "/hog")
RENDER_ERRORS = ("render/failed", "render/gave_up", "render/escaped", "render/load_timeout",
                 "render/request_errors", "render/refused", "render/navigations")
COLUMNS = ("run", "seconds", "pages", "rss_mib", "pss_mib", "crawl_mib", "node_mib", "chromium_mib", "other_mib",
           "processes", "chromium_processes", "load1")


def header(part: str, argv: list[str]) -> None:
    print(f"\n== {part}: {shlex.join(['python', '-m', 'bench.bench_render', *argv])}  "
          f"({datetime.datetime.now():%Y-%m-%d %H:%M})", flush=True)


# -- --rule ----------------------------------------------------------------------------------
def judge(body: bytes, url: str, content_type: str | None = None) -> tuple[str | None, Any, float, float]:
    """The rule's verdict on one page as the spider reads it: (reason or
    None, its shape, seconds extracting, seconds judging)."""
    t0 = time.perf_counter()
    text, _ = decode_html(body, content_type)
    page = analyze(parse_html(text), url)
    t1 = time.perf_counter()
    shape = shape_of(body, len(page.text), len(page.links))
    why = looks_scripted(shape)
    return why, shape, t1 - t0, time.perf_counter() - t1


class Tally:
    """One row of the rule's table."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pages = self.scripted = 0
        self.why: Counter[str] = Counter()
        self.examples: dict[str, list[str]] = defaultdict(list)
        self.judge_us: list[float] = []
        self.extract_us: list[float] = []
        self.shapes: list[Shape] = []

    def add(self, label: str, body: bytes, url: str, content_type: str | None = None) -> None:
        why, shape, extract_s, judge_s = judge(body, url, content_type)
        self.pages += 1
        self.scripted += shape.scripts > 0
        self.judge_us.append(judge_s * 1e6)
        self.extract_us.append(extract_s * 1e6)
        self.shapes.append(shape)
        if why is not None:
            self.why[why] += 1
            if len(self.examples[why]) < 3:
                self.examples[why].append(f"{label} ({shape.text_chars} chars, {shape.links} links"
                                          f"{', noscript warning' if shape.noscript else ''})")

    def row(self) -> str:
        flagged = sum(self.why.values())
        p99 = sorted(self.judge_us)[int(0.99 * (len(self.judge_us) - 1))] if self.judge_us else 0.0
        reasons = ", ".join(f"{k} {v}" for k, v in self.why.most_common()) or "-"
        return (f"| {self.name} | {self.pages:,} | {self.scripted:,} | {flagged:,} "
                f"({100 * flagged / max(self.pages, 1):.1f} %) | {reasons} | "
                f"{statistics.fmean(self.judge_us or [0]):.1f} / {p99:.1f} | "
                f"{statistics.fmean(self.extract_us or [0]) / 1000:.2f} |")


def _thin(s: Shape) -> bool:
    return s.scripts > 0 and (s.app_root or (s.text_chars < THIN_TEXT and s.links < THIN_LINKS))


# The rule's noscript clause read otherwise: which pages each would flag.
VARIANTS = {
    "the crawler's rule (noscript: text < NOSCRIPT_TEXT and links < NOSCRIPT_LINKS)":
        lambda s: looks_scripted(s) is not None,
    "noscript: text < NOSCRIPT_TEXT or links < NOSCRIPT_LINKS (the rule before 05b7840)": lambda s: _thin(s) or (
        s.scripts > 0 and s.noscript and (s.text_chars < NOSCRIPT_TEXT or s.links < NOSCRIPT_LINKS)),
    "noscript: text < THIN_TEXT": lambda s: _thin(s) or (s.scripts > 0 and s.noscript and s.text_chars < THIN_TEXT),
    "no noscript clause": _thin,
}


def html_files(root: Path) -> list[Path]:
    out = []
    for d, _, files in os.walk(root, followlinks=True):
        out += [Path(d) / f for f in files if f.endswith(".html")]
    return sorted(out)


def app_pages(work: Path, docs: int) -> list[Tally]:
    """The application site's pages as the crawl fetches them."""
    server = launch([sys.executable, "-m", "tests.support.app_server", "--hosts", "127.0.0.2",
                     "--log", str(work / "app.jsonl"), "--docs", str(docs)], work / "app.jsonl")
    rows = [Tally(f"app site shells (/, /docs/0-{docs - 1})"), Tally("app site, other script-written pages"),
            Tally("app site, /static.html (control: no script)")]
    try:
        paths = [["/", *(f"/docs/{i}" for i in range(docs))], list(APP_SCRIPTED), ["/static.html"]]
        for tally, group in zip(rows, paths):
            for path in group:
                url = server.url(path, host="127.0.0.2")
                with urllib.request.urlopen(url, timeout=10) as r:
                    tally.add(path, r.read(), url, r.headers.get("Content-Type"))
    finally:
        server.stop()
    return rows


def part_rule(args: argparse.Namespace, work: Path) -> None:
    trees = [(name, Path(d)) for name, d in TREES] + [(str(t), t) for t in args.tree]
    print("| Pages | HTML pages | with a script | flagged | by reason | rule us a page (mean / p99) | "
          "extraction ms a page |")
    print("|---|---|---|---|---|---|---|")
    rows: list[Tally] = []
    for name, root in trees:
        if FORBIDDEN.search(str(root.resolve()) + "/"):
            print(f"| {name} | refused: a tuning tree |")
            continue
        files = html_files(root)
        if not files:
            print(f"| {name} | not installed: {root} |", flush=True)
            continue
        if args.quick:
            files = files[:: max(1, len(files) // 100)]
        tally = Tally(name)
        for f in files:
            rel = f.relative_to(root).as_posix()
            tally.add(rel, f.read_bytes(), f"http://127.0.0.1/{rel}")
        rows.append(tally)
        print(tally.row(), flush=True)
    static = Tally("all static trees")
    for t in rows:
        static.pages += t.pages
        static.scripted += t.scripted
        static.why.update(t.why)
        static.judge_us += t.judge_us
        static.extract_us += t.extract_us
        static.shapes += t.shapes
    print(static.row())
    apps = app_pages(work, 20 if args.quick else 200)
    for t in apps:
        print(t.row())
    print("\nFlagged pages (up to 3 a tree and reason):")
    for t in [*rows, *apps]:
        for why, examples in t.examples.items():
            print(f"  {t.name}, {why}: " + "; ".join(examples))
    print("\nThe rule's noscript clause read otherwise (what-if figures beside the crawler's rule):")
    for name, variant in VARIANTS.items():
        got = [sum(variant(x) for x in t.shapes) for t in (static, *apps)]
        print(f"  {name}: static trees {got[0]} ({100 * got[0] / max(static.pages, 1):.2f} %), "
              f"shells {got[1]} of {apps[0].pages}, other script-written {got[2]} of {apps[1].pages}, "
              f"control {got[3]}")
    flagged = sum(static.why.values())
    shells = apps[0]
    print(f"\nstatic trees: {flagged} of {static.pages:,} pages flagged ({100 * flagged / max(static.pages, 1):.2f} %; "
          f"target about 0); shells: {sum(shells.why.values())} of {shells.pages} (target all); "
          f"the rule {statistics.fmean(static.judge_us or [0]):.1f} us a static page, "
          f"{100 * sum(static.judge_us) / max(sum(static.extract_us), 1):.1f} % of its extraction's time")


# -- --static --------------------------------------------------------------------------------
def crawl_static(seed: str, work: Path, mode: str, cap: int) -> dict[str, Any]:
    crawl_dir = work / f"static-{mode.replace(' ', '-').replace(',', '')}"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    settings = {**COMMON, "CRAWL_DIR": crawl_dir, "NETWORK_ALLOWLIST": LOOPBACK}
    if cap:
        settings["CLOSESPIDER_PAGECOUNT"] = cap
    cmd = scrapy_crawl([f"seeds={seed}", "follow=all", f"render={mode.split(',')[0]}"], settings)
    return run(cmd, ROOT, log=work / f"static-{mode.replace(' ', '-').replace(',', '')}.log", timeout=3600)


def without_flagged(root: Path, to: Path) -> list[str]:
    """A copy of ``root`` without the pages the rule flags (their links
    then answer 404): what ``auto`` costs a site with no candidate at all,
    the rule alone, no browser. Returns the pages left out."""
    flagged = []
    for f in html_files(root):
        rel = f.relative_to(root).as_posix()
        if judge(f.read_bytes(), f"http://127.0.0.1/{rel}")[0] is not None:
            flagged.append(rel)
    shutil.copytree(root, to, symlinks=False, ignore_dangling_symlinks=True,
                    ignore=lambda d, names: [n for n in names
                                             if (Path(d) / n).relative_to(root).as_posix() in flagged])
    return flagged


def part_static(args: argparse.Namespace, work: Path) -> None:
    if not (args.root / "index.html").is_file():
        sys.exit(f"{args.root}/index.html not found (apt-get install cmake-doc), or pass --root")
    bare = work / "bare"
    left_out = without_flagged(args.root, bare)
    print(f"{args.root}: the rule flags {len(left_out)} page(s): {', '.join(left_out[:5]) or '-'} "
          f"(left out of the copy crawled as 'auto, no candidate')", flush=True)
    server = serve(work, args.root)
    (work / "bare-log").mkdir()
    bare_server = serve(work / "bare-log", bare)
    seeds = {"never": server.url("/index.html"), "auto": server.url("/index.html"),
             "never, no candidate": bare_server.url("/index.html"),
             "auto, no candidate": bare_server.url("/index.html")}
    cap = 300 if args.quick else args.cap
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in seeds}
    try:
        for i in range(1 if args.quick else args.runs):
            for mode in (list(seeds) if i % 2 == 0 else list(seeds)[::-1]):
                s = crawl_static(seeds[mode], work, mode, cap)
                runs[mode].append(s)
                print(f"  run {i + 1} render={mode:<18}: {s['response_received_count']} responses in "
                      f"{s['elapsed_time_seconds']:.1f} s = {rate(s):.1f} pages/s; whole process {s['wall']:.1f} s = "
                      f"{whole(s, s['response_received_count']):.1f} pages/s; CPU a page "
                      f"{cpu_ms(s, s['response_received_count']):.2f} ms; load {os.getloadavg()[0]:.1f}; "
                      + (", ".join(f"{k} {v}" for k, v in sorted(s.items()) if k.startswith("render/")) or
                         "no render/ stat"), flush=True)
    finally:
        server.stop()
        bare_server.stop()
    best = {m: (max(rate(s) for s in r), max(whole(s, s["response_received_count"]) for s in r),
                min(cpu_ms(s, s["response_received_count"]) for s in r)) for m, r in runs.items()}
    print("\n| render | pages/s (best) | whole process pages/s (best) | CPU ms a page (best) | / never: pages/s, "
          "whole process, CPU a page (never / auto) |\n|---|---|---|---|---|")
    for m, (r, w, c) in best.items():
        never = best[m.replace("auto", "never")]
        print(f"| {m} | {r:.1f} | {w:.1f} | {c:.2f} | {r / never[0]:.3f}x, {w / never[1]:.3f}x, "
              f"{never[2] / c:.3f}x |")
    never = best["never"]
    ratio, ratio_whole = best["auto"][0] / never[0], best["auto"][1] / never[1]
    auto = runs["auto"]
    print(f"auto / never: {ratio:.3f}x pages/s, {ratio_whole:.3f}x whole process (target >= {STATIC_TARGET}: "
          f"{'met' if min(ratio, ratio_whole) >= STATIC_TARGET else 'NOT MET'}); auto took "
          f"{[s.get('render/candidates', 0) for s in auto]} candidates, rendered "
          f"{[s.get('render/pages', 0) for s in auto]} pages, launched the browser "
          f"{[s.get('render/browser_launches', 0) for s in auto]} times (a run each); without a candidate: "
          f"{[s.get('render/browser_launches', 0) for s in runs['auto, no candidate']]} launches")


# -- --always --------------------------------------------------------------------------------
def memory(root: psutil.Process) -> dict[str, float]:
    """RSS and PSS (MiB) of ``root`` and every descendant, by kind."""
    got = {"rss_mib": 0.0, "pss_mib": 0.0, "crawl_mib": 0.0, "node_mib": 0.0, "chromium_mib": 0.0,
           "other_mib": 0.0, "processes": 0, "chromium_processes": 0}
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return got
    for p in procs:
        try:
            info = p.memory_full_info()
            cmdline = p.cmdline()
            name = Path(cmdline[0]).name if cmdline else p.name()
        except psutil.Error:
            continue
        rss = info.rss / MIB
        got["rss_mib"] += rss
        got["pss_mib"] += getattr(info, "pss", info.rss) / MIB
        got["processes"] += 1
        if p.pid == root.pid:
            got["crawl_mib"] += rss
        elif name.startswith("chrom") or name == "headless_shell":
            got["chromium_mib"] += rss
            got["chromium_processes"] += 1
        elif name == "node":
            got["node_mib"] += rss
        else:
            got["other_mib"] += rss
    return got


def stored(db: Path) -> tuple[int, int, int]:
    """(pages, rendered, with text) in the crawl's store, read-only; zeros
    before the store exists."""
    if not db.exists():
        return 0, 0, 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            row = con.execute("SELECT COUNT(*), COALESCE(SUM(rendered), 0), COALESCE(SUM(text != ''), 0) "
                              "FROM pages").fetchone()
        return int(row[0]), int(row[1]), int(row[2])
    except sqlite3.Error:
        return 0, 0, 0


def crawl_app(run: str, args_: list[str], settings: dict[str, object], work: Path, every: float,
              samples: list[dict[str, Any]]) -> dict[str, Any]:
    """One crawl of the application site, sampled every ``every`` seconds."""
    crawl_dir = work / run.replace(" ", "-").replace("=", "")
    shutil.rmtree(crawl_dir, ignore_errors=True)
    cmd = crawl_cmd(args_, {"PROGRESS_INTERVAL": 0, **settings}, crawl_dir)
    print(f"  {run}: {shlex.join(cmd[2:])}", flush=True)
    log = crawl_dir.with_suffix(".log")
    db = crawl_dir / "site.sqlite3"
    t0 = time.monotonic()
    with ChildTime() as took, log.open("w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        root = psutil.Process(proc.pid)
        try:
            while proc.poll() is None:
                sample = {"run": run, "seconds": round(time.monotonic() - t0, 1), "pages": stored(db)[0],
                          **memory(root), "load1": os.getloadavg()[0]}
                if proc.poll() is None:
                    samples.append(sample)
                deadline = time.monotonic() + every
                while proc.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
        except BaseException:
            proc.terminate()
            proc.wait(30)
            raise
    # Every process of the crawl was waited for by its parent (the
    # browser's by the driver, the driver by the crawl): all are counted.
    wall, cpu = took.wall, took.cpu
    text = log.read_text()
    if proc.returncode != 0:
        raise RuntimeError(f"{run} failed ({proc.returncode}), log {log}:\n{text[-3000:]}")
    pages, rendered, with_text = stored(db)
    errors = [line for line in text.splitlines() if " ERROR: " in line or "Traceback" in line]
    return {**stats_of(text), "wall": wall, "cpu": cpu, "pages": pages, "rendered": rendered,
            "with_text": with_text, "errors": errors}


def at_pages(samples: list[dict[str, Any]], pages: float, key: str) -> float:
    """``key`` of the first sample with at least ``pages`` pages stored."""
    return next((s[key] for s in samples if s["pages"] >= pages), float("nan"))


def mean_between(samples: list[dict[str, Any]], lo: float, hi: float, key: str) -> float:
    got = [s[key] for s in samples if lo <= s["pages"] <= hi]
    return statistics.fmean(got) if got else float("nan")


def report_memory(run: str, samples: list[dict[str, Any]], total: int) -> None:
    mine = [s for s in samples if s["run"] == run]
    if not mine:
        print(f"  {run}: no sample")
        return
    for key in ("rss_mib", "pss_mib"):
        early = mean_between(mine, 0.2 * total, 0.4 * total, key)
        late = mean_between(mine, 0.8 * total, total, key)
        drift = late / early - 1
        print(f"  {run}, {key[:3].upper()} MiB: after {total // 10:,} pages {at_pages(mine, total / 10, key):.0f}, "
              f"at {total // 2:,} {at_pages(mine, total / 2, key):.0f}, at the end {mine[-1][key]:.0f}, "
              f"peak {max(s[key] for s in mine):.0f}; mean of pages {total // 5:,}-{2 * total // 5:,} {early:.0f}, "
              f"of the last {total // 5:,} {late:.0f} ({100 * drift:+.1f} %: "
              f"{'flat' if abs(drift) <= FLAT else 'NOT flat'}, |change| <= {100 * FLAT:.0f} %)")
    last = mine[-1]
    print(f"  {run}, at the end by process (RSS MiB): crawl {last['crawl_mib']:.0f}, node {last['node_mib']:.0f}, "
          f"Chromium {last['chromium_mib']:.0f} in {last['chromium_processes']} processes, other "
          f"{last['other_mib']:.0f}; peak processes {max(s['processes'] for s in mine)}")


def render_summary(s: dict[str, Any]) -> str:
    keys = sorted(k for k in s if k.startswith("render/"))
    return ", ".join(f"{k.removeprefix('render/')} {s[k]}" for k in keys) or "no render/ stat"


def part_always(args: argparse.Namespace, work: Path) -> None:
    hosts = args.hosts.split(",")
    wanted = 300 if args.quick else args.pages
    docs = -(-wanted // len(hosts)) - 1  # each host's / is a page too
    total = len(hosts) * (docs + 1)
    server = launch([sys.executable, "-m", "tests.support.app_server", "--hosts", args.hosts,
                     "--log", str(work / "app.jsonl"), "--docs", str(docs)], work / "app.jsonl")
    print(f"application site: {len(hosts)} hosts x ({docs} documents + /) = {total:,} pages", flush=True)
    home = [server.url("/", host=h) for h in hosts]
    every_page = work / "every-page.txt"
    every_page.write_text("".join(f"{server.url(p, host=h)}\n" for h in hosts
                                  for p in ["/", *(f"/docs/{i}" for i in range(docs))]))
    samples: list[dict[str, Any]] = []
    results: dict[str, dict[str, Any]] = {}
    # The anchor first: a few seconds, and every later line can give its ratio.
    runs: list[tuple[str, list[str], dict[str, object]]] = [
        ("render=never", [f"seeds_file={every_page}", "follow=all"], {})]
    runs += [(f"render=always c={c}", [f"seeds={','.join(home)}", "follow=all", "render=always"],
              {"RENDER_CONCURRENCY": c}) for c in args.concurrency]
    try:
        for run, crawl_args, settings in runs:
            got = crawl_app(run, crawl_args, settings, work, args.every, samples)
            results[run] = got
            r = got["pages"] / got["elapsed_time_seconds"]
            anchor = results["render=never"]
            print(f"  {run}: {got['pages']:,} pages stored ({got['rendered']:,} rendered, {got['with_text']:,} with "
                  f"text) in {got['elapsed_time_seconds']:.0f} s = {r:.2f} pages/s (whole process {got['wall']:.0f} s "
                  f"= {got['pages'] / got['wall']:.2f}); / render=never "
                  f"{r / (anchor['pages'] / anchor['elapsed_time_seconds']):.4f}x; "
                  f"{1000 * got['cpu'] / max(got['pages'], 1):.0f} ms CPU a page; "
                  f"{got.get('response_received_count', 0):,} responses; {render_summary(got)}; "
                  f"{len(got['errors'])} ERROR lines" + (f", first: {got['errors'][0][:300]}" if got["errors"] else ""),
                  flush=True)
            if sum(x["run"] == run for x in samples) >= 5:  # render=never is over in seconds
                report_memory(run, samples, total)
            if args.csv:
                write_csv(args.csv, samples)
    finally:
        server.stop()
    never = results["render=never"]
    print("\n| run | pages | pages/s | whole process pages/s | CPU ms a page | / render=never | load (1 min) |\n"
          "|---|---|---|---|---|---|---|")
    for run, got in results.items():
        r = got["pages"] / got["elapsed_time_seconds"]
        loads = [x["load1"] for x in samples if x["run"] == run]
        print(f"| {run} | {got['pages']:,} | {r:.2f} | {got['pages'] / got['wall']:.2f} | "
              f"{1000 * got['cpu'] / max(got['pages'], 1):.0f} | "
              f"{r / (never['pages'] / never['elapsed_time_seconds']):.4f}x | "
              f"{statistics.fmean(loads or [float('nan')]):.1f} |")
    if args.csv:
        print(f"samples: {args.csv}")


def write_csv(path: Path, samples: list[dict[str, Any]]) -> None:
    """The samples, after those of other runs the file holds (an earlier
    invocation's, e.g. another ``--concurrency``)."""
    ours = {s["run"] for s in samples}
    kept = []
    if path.exists():
        with path.open(newline="") as f:
            kept = [row for row in csv.DictReader(f) if row.get("run") not in ours]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(kept)
        for s in samples:
            w.writerow({k: round(v, 1) if isinstance(v, float) else v for k, v in s.items()})


# -- --pdf -----------------------------------------------------------------------------------
def part_pdf(args: argparse.Namespace) -> None:
    from crawler.reading.pdf import extract
    from crawler.reading.pdfworker import PdfWorker
    from tests.support.pdfs import text_pdf

    line = "The quick brown fox jumps over the lazy dog, a line of a report read by the crawl."
    count = 10 if args.quick else 60
    for pages in (1, 10, 50):
        docs = [text_pdf([[f"{i}.{p}.{k} {line}" for k in range(40)] for p in range(pages)], title=f"Doc {i}",
                         links=[(0, f"http://127.0.0.1/doc/{i + 1}", (72, 700, 300, 720))], compress=True)
                for i in range(count)]
        t0 = time.perf_counter()
        for body in docs:
            extract(body)
        inline = count / (time.perf_counter() - t0)
        figures = []
        for processes in (1, 2):
            async def through(n: int = processes) -> float:
                worker = PdfWorker(processes=n)
                try:
                    await worker.extract(docs[0])  # the children's start, not timed
                    if n > 1:
                        await asyncio.gather(*(worker.extract(d) for d in docs[:n]))
                    t = time.perf_counter()
                    await asyncio.gather(*(worker.extract(d) for d in docs))
                    return count / (time.perf_counter() - t)
                finally:
                    worker.close()

            figures.append(asyncio.run(through()))
        size = statistics.fmean(len(d) for d in docs) / 1024
        print(f"| {pages} page(s), {size:.0f} KB | {inline:.1f} | {figures[0]:.1f} | {figures[1]:.1f} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rule", action="store_true", help="the auto rule on static trees and app shells")
    ap.add_argument("--static", action="store_true", help="render=auto against render=never on a static tree")
    ap.add_argument("--always", action="store_true", help="render=always on the application site: speed, memory")
    ap.add_argument("--pdf", action="store_true", help="documents/s through crawler.reading.pdfworker")
    ap.add_argument("--quick", action="store_true", help="small runs, for development")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (servers' and crawls' logs)")
    ap.add_argument("--tree", type=Path, action="append", default=[], help="--rule: one more static tree")
    ap.add_argument("--root", type=Path, default=Path("/usr/share/doc/cmake-data/html"), help="--static's tree")
    ap.add_argument("--runs", type=int, default=3, help="--static: crawls of each mode")
    ap.add_argument("--cap", type=int, default=0, help="--static: CLOSESPIDER_PAGECOUNT (0: the whole tree)")
    ap.add_argument("--hosts", default=APP_HOSTS, help="--always: the application site's addresses")
    ap.add_argument("--pages", type=int, default=5000, help="--always: pages at least, over every host")
    ap.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[2, 4],
                    help="--always: RENDER_CONCURRENCY values, comma-separated")
    ap.add_argument("--every", type=float, default=5.0, help="--always: seconds between samples")
    ap.add_argument("--csv", type=lambda s: Path(s) if s else None, default=ROOT / "bench/render-rss.csv",
                    help="--always: the samples ('': none)")
    args = ap.parse_args()
    argv = sys.argv[1:]
    parts = [p for p in ("rule", "static", "always", "pdf") if getattr(args, p)] or ["rule", "static", "always", "pdf"]
    if args.quick and args.csv == ROOT / "bench/render-rss.csv":
        args.csv = None  # a smoke run leaves the committed samples alone
    work = Path(tempfile.mkdtemp(prefix="bench-render-"))
    if args.keep:
        print(f"work directory (kept): {work}")
    try:
        for part in parts:
            header(part, argv)
            if part == "rule":
                part_rule(args, work)
            elif part == "static":
                part_static(args, work)
            elif part == "always":
                part_always(args, work)
            else:
                print("| PDF | in this process, docs/s | PdfWorker, 1 child, docs/s | 2 children |\n|---|---|---|---|")
                part_pdf(args)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
