"""The cost of WARC output: the same crawl with and without ``-s WARC_DIR``,
in the same run, with plain Scrapy as the anchor.

    python -m bench.bench_warc [--root /usr/share/doc/cmake-data/html] [--runs 3]
    python -m bench.bench_warc --copies [--root /usr/share/doc/postgresql-doc-15/html] [--processes 2]

Serves ``--root`` (a real documentation tree from disk; by default CMake's,
``apt-get install cmake-doc``) on 127.0.0.1 and crawls it ``--runs`` times
each way, alternating which goes first: ours without WARC, ours with
``WARC_DIR`` (every fetch archived, a revisit for each exact copy), and
plain Scrapy (``bench/plain_spider.py``). The settings are
``bench/bench_crawl.py``'s (16 requests, no delay, robots.txt obeyed).
Prints, best of the runs, pages/s by Scrapy's own clock and for the whole
process (launch to exit: the writer's last flush and close included), the
CPU a page, the ratio with / without WARC (target: at least 0.90 on both
pages/s figures) and ours / plain; then what the archive holds (files,
bytes, records, revisits) and ``warcio check`` over it.

``--copies`` (issue 48, item 12) serves ``--root`` identically on two
hosts (127.0.0.2 and 127.0.0.3) and crawls both at once, in one crawl
(``--processes`` workers), with WARC: of the exact copies (every record
of a payload after the first), how many are identical-payload revisits
(target: at least 90 %), and how many revisits name a response that is
not in the archive (target: none).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import (
    COMMON, LOOPBACK, ROOT, check_store, cpu_ms, loopback_hosts, plain_crawl, rate, run, scrapy_crawl, serve,
    store_path, whole)

TARGET = 0.90


def crawl_ours(seed: str, work: Path, warc: Path | None) -> tuple[dict, int]:
    crawl_dir = work / "ours"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    settings = {**COMMON, "CRAWL_DIR": crawl_dir, "NETWORK_ALLOWLIST": LOOPBACK}
    if warc is not None:
        shutil.rmtree(warc, ignore_errors=True)
        settings["WARC_DIR"] = warc
    stats = run(scrapy_crawl([f"seeds={seed}", "follow=all"], settings), ROOT)
    return stats, check_store(store_path(crawl_dir))


def copies(root: Path, start: str, processes: int, delay: float) -> None:
    """The ``--copies`` measure (see the module)."""
    from warcio.archiveiterator import ArchiveIterator

    work = Path(tempfile.mkdtemp(prefix="bench-warc-copies-"))
    warc = work / "warc"
    hosts = loopback_hosts(2)
    server = serve(work, root, hosts)
    seeds = ",".join(server.url("/" + start, host) for host in hosts)
    settings = {**COMMON, "CRAWL_DIR": work / "ours", "NETWORK_ALLOWLIST": LOOPBACK, "WARC_DIR": warc,
                "CRAWL_PROCESSES": processes}
    if delay > 0:  # each host paced alike: the workers fetch the same pages at the same moments
        settings.update(DOWNLOAD_DELAY=delay, CONCURRENT_REQUESTS_PER_DOMAIN=1)
    try:
        run(scrapy_crawl([f"seeds={seeds}", "follow=all"], settings), ROOT, stats=processes == 1)
        files = sorted(warc.glob("*.warc.gz"))
        by_digest: dict[str, list[str]] = {}  # payload digest -> the kinds of its records
        responses: set[tuple[str, str, str]] = set()  # (uri, date, digest) of each response
        revisits: list[tuple[str, str, str]] = []  # what each identical-payload revisit names
        for path in files:
            with open(path, "rb") as f:
                for r in ArchiveIterator(f):
                    h = r.rec_headers
                    digest = h.get_header("WARC-Payload-Digest")
                    if r.rec_type not in ("response", "revisit") or not digest or r.http_headers is None \
                            or r.http_headers.get_statuscode() != "200":
                        continue
                    by_digest.setdefault(digest, []).append(r.rec_type)
                    if r.rec_type == "response":
                        responses.add((h.get_header("WARC-Target-URI"), h.get_header("WARC-Date"), digest))
                    else:
                        revisits.append((h.get_header("WARC-Refers-To-Target-URI"),
                                         h.get_header("WARC-Refers-To-Date"), digest))
        copied = {d: kinds for d, kinds in by_digest.items() if len(kinds) > 1}
        n_copies = sum(len(k) - 1 for k in copied.values())
        n_revisits = sum(k.count("revisit") for k in copied.values())
        dangling = sum(1 for r in revisits if r not in responses)
        check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", *map(str, files)],
                               capture_output=True, text=True)
        print(f"{root}, two hosts at once, {processes} worker(s), delay {delay} s: {len(copied)} payloads archived more than once; "
              f"of their {n_copies} exact copies {n_revisits} are revisits ({100 * n_revisits / max(n_copies, 1):.1f} %,"
              f" target >= 90 %); {dangling} of {len(revisits)} revisits name no response in the archive; "
              f"warcio check {'passed' if check.returncode == 0 else 'FAILED: ' + check.stdout[-500:]}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--start", default="index.html")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--copies", action="store_true", help="revisits of copies fetched at once (see above)")
    ap.add_argument("--processes", type=int, default=1, help="workers of the --copies crawl")
    ap.add_argument("--delay", type=float, default=0.0, help="DOWNLOAD_DELAY of the --copies crawl (and one "
                    "request at a time a host)")
    args = ap.parse_args()
    if args.copies:
        root = args.root or Path("/usr/share/doc/postgresql-doc-15/html")
        if not (root / args.start).is_file():
            sys.exit(f"{root / args.start} not found (apt-get install postgresql-doc-15)")
        return copies(root, args.start, args.processes, args.delay)
    args.root = args.root or Path("/usr/share/doc/cmake-data/html")
    if not (args.root / args.start).is_file():
        sys.exit(f"{args.root / args.start} not found (apt-get install cmake-doc)")
    work = Path(tempfile.mkdtemp(prefix="bench-warc-"))
    warc = work / "warc"
    server = serve(work, args.root)
    seed = server.url("/" + args.start)
    rows: dict[str, list[tuple[float, float, float, int]]] = {"without": [], "with": [], "plain": []}
    print(f"{args.root}: {args.runs} runs each, alternating", flush=True)
    try:
        for i in range(args.runs):
            order = ["without", "with"] if i % 2 == 0 else ["with", "without"]
            for name in order:
                stats, pages = crawl_ours(seed, work, warc if name == "with" else None)
                rows[name].append((rate(stats), whole(stats, pages), cpu_ms(stats, pages), pages))
                print(f"  run {i + 1} {name:>7} WARC: {pages} pages, {rate(stats):.1f} pages/s, "
                      f"whole {whole(stats, pages):.1f} pages/s, {cpu_ms(stats, pages):.2f} ms CPU a page",
                      flush=True)
            stats = run(plain_crawl(seed, COMMON), work)  # outside the project: none of our settings apply
            pages = stats["response_received_count"]
            rows["plain"].append((rate(stats), whole(stats, pages), cpu_ms(stats, pages), pages))
            print(f"  run {i + 1}   plain: {pages} responses, {rate(stats):.1f} pages/s", flush=True)
        best = {k: (max(r[0] for r in v), max(r[1] for r in v), min(r[2] for r in v), v[0][3])
                for k, v in rows.items()}
        print(f"\n{'crawl':<16}{'pages':>7}{'pages/s':>10}{'whole/s':>10}{'CPU ms/page':>13}")
        for k, (r, w, c, p) in best.items():
            print(f"{k + ' WARC' if k != 'plain' else 'plain Scrapy':<16}{p:>7}{r:>10.1f}{w:>10.1f}{c:>13.2f}")
        (r1, w1, c1, _), (r0, w0, c0, _), (rp, _, _, _) = best["with"], best["without"], best["plain"]
        ok = r1 / r0 >= TARGET and w1 / w0 >= TARGET
        print(f"\nwith / without WARC: {r1 / r0:.3f}x pages/s, {w1 / w0:.3f}x whole process, CPU a page "
              f"{c1 / c0:.3f}x (target >= {TARGET} on both pages/s figures: {'met' if ok else 'NOT MET'})")
        print(f"ours / plain Scrapy: without WARC {r0 / rp:.3f}x, with {r1 / rp:.3f}x pages/s")
        files = sorted(warc.glob("*.warc.gz"))
        size = sum(f.stat().st_size for f in files)
        t0 = time.monotonic()
        check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", *map(str, files)],
                               capture_output=True, text=True)
        index = subprocess.run([sys.executable, "-m", "warcio.cli", "index", "-f", "warc-type", *map(str, files)],
                               capture_output=True, text=True).stdout
        kinds = {k: index.count(f'"{k}"') for k in ("response", "revisit", "request")}
        print(f"archive of the last run: {len(files)} file(s), {size / 1e6:.1f} MB, {kinds}; warcio check "
              f"{'passed' if check.returncode == 0 else 'FAILED: ' + check.stdout[-500:]} "
              f"({time.monotonic() - t0:.1f} s)")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
