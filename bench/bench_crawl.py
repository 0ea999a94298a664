"""Single-machine crawl speed: our full pipeline against plain Scrapy.

    python -m bench.bench_crawl [--root /usr/share/doc/python3.11/html] [--runs 2] [--mongo] [--hosts N]

Serves ``--root`` (real HTML documentation: ``apt-get install python3.11-doc``)
from a local HTTP server on 127.0.0.1 and crawls it, in the same run:

- ours: ``scrapy crawl site -a follow=all`` with every default stage
  (classifier, text extraction, link topology, SQLite store, resume state);
- plain: a Scrapy ``CrawlSpider`` with a ``LinkExtractor`` and no pipeline.

With ``--mongo``, ours is run a third time into MongoDB (a SecantusDB
server started for the run, or ``$MONGO_URI``).

``--setting NAME=VALUE`` (repeatable) sets a Scrapy setting for both
crawls, to weigh a change of Scrapy's own machinery on either side.

With ``--processes N`` (N > 1), ours is run once more with
``-s CRAWL_PROCESSES=N``: N worker processes of the one crawl, which plain
Scrapy has no way to do.

Both with the same concurrency (16 requests, 16 per site), no delay, robots.txt
obeyed. Prints pages, pages/s (from Scrapy's own elapsed time) and the ratio,
best of ``--runs``; then the same for the whole process (launch to exit:
start-up and shutdown included, what a user waits for), and the CPU a page
each used (user and system time of the crawl's processes over pages
fetched: what decides the pace when the crawl is CPU-bound, and steadier
than pages/s when other work shares the machine). Both crawls must fetch
the same pages.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import (
    COMMON, LOOPBACK, ROOT, check_mongo, check_store, cpu_ms, loopback_hosts, plain_crawl, query, rate, run,
    scrapy_crawl, serve, settings_args, store_path, whole)


def crawl_ours(seed: str, work: Path, mongo_uri: str | None = None, processes: int = 1) -> tuple[dict, int]:
    crawl_dir = work / "ours"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    settings = {**COMMON, "CRAWL_DIR": crawl_dir, "NETWORK_ALLOWLIST": LOOPBACK}  # loopback sites
    if processes > 1:
        settings["CRAWL_PROCESSES"] = processes
    database = f"bench{time.monotonic_ns()}"
    if mongo_uri:
        settings.update(MONGO_URI=mongo_uri, MONGO_DATABASE=database)
    stats = run(scrapy_crawl([f"seeds={seed}", "follow=all"], settings), ROOT, stats=processes == 1)
    if mongo_uri:
        return stats, check_mongo(mongo_uri, database)
    return stats, check_store(store_path(crawl_dir))


_TEXT = re.compile(r">([^<]+)<")
_WORD = re.compile(r"\b([A-Za-z]{3,})\b")


def make_variant(root: Path, out: Path, n: int) -> None:
    """A copy of ``root``'s tree whose HTML text has one word in three
    changed (``n``'s own suffix): every word 3-shingle differs from the
    other variants', so no host's page is a near copy of another host's
    (the duplicate check would leave a mirror's links unfollowed); the
    markup, links and sizes stay as they were."""
    def words(m: re.Match[str]) -> str:
        count = iter(range(1 << 30))
        return ">" + _WORD.sub(lambda w: w.group(1) + f"v{n}" if next(count) % 3 == 0 else w.group(1), m.group(1)) + "<"

    for path in root.rglob("*"):
        target = out / path.relative_to(root)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif path.suffix in (".html", ".htm"):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(_TEXT.sub(words, path.read_text(errors="replace")))
        elif path.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)


def crawl_floor(urls: Path, work: Path) -> dict:
    """The do-nothing spider (bench/floor_spider.py) over every page ours fetched."""
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(ROOT / "bench/floor_spider.py"), "-a", f"urls={urls}",
           *settings_args(COMMON)]
    return run(cmd, work)


def crawl_plain(seed: str, work: Path) -> dict:
    return run(plain_crawl(seed, COMMON), work)  # outside the project: none of our settings apply


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path("/usr/share/doc/python3.11/html"))
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--floor", action="store_true",
                    help="also run a do-nothing Scrapy spider over the same pages (bench/floor_spider.py): the "
                         "CPU a page Scrapy itself costs, and ours / floor")
    ap.add_argument("--hosts", type=int, default=1,
                    help="serve --root on N loopback hosts (127.0.0.2 ...), each a variant of its own (its words "
                         "changed, so that no host's pages are copies of another's): N sites crawled at once")
    ap.add_argument("--mongo", action="store_true",
                    help="also crawl into MongoDB (a SecantusDB server started here, or $MONGO_URI)")
    ap.add_argument("--processes", type=int, default=1,
                    help="also crawl with -s CRAWL_PROCESSES=N (N > 1): whole-process figures only")
    ap.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                    help="a Scrapy setting for both crawls, ours and plain (repeatable): to weigh a change "
                         "of Scrapy's own, e.g. ASYNCIO_EVENT_LOOP=uvloop.Loop")
    args = ap.parse_args()
    for item in args.setting:
        name, sep, value = item.partition("=")
        if not sep or not name:
            sys.exit(f"--setting {item!r}: expected NAME=VALUE")
        COMMON[name] = value
    if not (args.root / "index.html").exists():
        sys.exit(f"{args.root}/index.html not found: apt-get install python3.11-doc, or pass --root")
    # Our modules' bytecode, as an installed package has it (pip compiles
    # what it installs; an editable checkout under PYTHONDONTWRITEBYTECODE
    # would compile every module again at every launch).
    compileall.compile_dir(ROOT / "crawler", quiet=1)
    work = Path(tempfile.mkdtemp(prefix="bench-"))
    if args.hosts > 1:
        hosts = loopback_hosts(args.hosts)
        for i, host in enumerate(hosts):
            make_variant(args.root, work / "www" / host, i)
        server = serve(work, work / "www", hosts)
        seed = ",".join(server.url("/index.html", host=host) for host in hosts)
    else:
        server = serve(work, args.root)
        seed = server.url("/index.html")
    best_ours = best_plain = best_mongo = 0.0
    whole_ours = whole_plain = whole_multi = 0.0
    cpu_ours = cpu_plain = cpu_floor = float("inf")
    mongo_uri, mongo_proc = os.environ.get("MONGO_URI"), None
    if args.mongo and not mongo_uri:
        from tests.support.servers import start_secantus

        (work / "mongo").mkdir()
        mongo_proc, port = start_secantus(work / "mongo")
        mongo_uri = f"mongodb://127.0.0.1:{port}"
    try:
        for i in range(args.runs):
            plain = crawl_plain(seed, work)
            ours, stored = crawl_ours(seed, work)
            p, o = rate(plain), rate(ours)
            best_plain, best_ours = max(best_plain, p), max(best_ours, o)
            n = max(ours["response_received_count"], 1)
            hrefs = ours.get("frontier/hrefs_found", 0) / n
            links = ours.get("frontier/links_found", 0) / n
            print(f"run {i + 1}: plain {plain['response_received_count']} pages in "
                  f"{plain['elapsed_time_seconds']:.2f}s = {p:.1f} pages/s | ours "
                  f"{ours['response_received_count']} pages ({stored} stored, {hrefs:.0f} hrefs and {links:.0f} distinct links a page) in "
                  f"{ours['elapsed_time_seconds']:.2f}s = {o:.1f} pages/s | ratio {o / p:.2f}x | "
                  f"{ours.get('frontier/redis_round_trips', 0) / n:.2f} Redis round trips a page", flush=True)
            steps = sorted(((k.rsplit("/", 1)[1], v) for k, v in ours.items() if k.startswith("page/step_ms/")),
                           key=lambda x: -x[1])
            print(f"run {i + 1}, ours' page steps, CPU ms a page ({sum(v for _, v in steps):.2f} in all): "
                  + ", ".join(f"{k} {v:.3f}" for k, v in steps)
                  + f" | Python's collector: {ours.get('gc/collections', 0)} collections, "
                    f"{ours.get('gc/cpu_seconds', 0) * 1000.0 / n:.3f} ms a page", flush=True)
            wp, wo = whole(plain, plain["response_received_count"]), whole(ours, ours["response_received_count"])
            whole_plain, whole_ours = max(whole_plain, wp), max(whole_ours, wo)
            print(f"run {i + 1}, whole process: plain {plain['wall']:.2f}s = {wp:.1f} pages/s | ours "
                  f"{ours['wall']:.2f}s = {wo:.1f} pages/s | ratio {wo / wp:.2f}x", flush=True)
            cp, co = cpu_ms(plain, plain["response_received_count"]), cpu_ms(ours, ours["response_received_count"])
            cpu_plain, cpu_ours = min(cpu_plain, cp), min(cpu_ours, co)
            print(f"run {i + 1}, CPU a page (start-up included): plain {cp:.2f} ms | ours {co:.2f} ms | "
                  f"ratio {cp / co:.2f}x", flush=True)
            if args.floor:
                urls = work / "urls.txt"
                urls.write_text("\n".join(u for (u,) in query(store_path(work / "ours"), "SELECT url FROM pages")))
                floor = crawl_floor(urls, work)
                cf = cpu_ms(floor, floor["response_received_count"])
                cpu_floor = min(cpu_floor, cf)
                print(f"run {i + 1}, CPU a page: floor (do-nothing spider, {floor['response_received_count']} "
                      f"pages) {cf:.2f} ms | ours / floor {co / cf:.2f}x | plain / floor {cp / cf:.2f}x", flush=True)
            if args.processes > 1:
                multi, stored = crawl_ours(seed, work, processes=args.processes)
                wm = whole(multi, stored)
                whole_multi = max(whole_multi, wm)
                print(f"run {i + 1}, whole process: ours with CRAWL_PROCESSES={args.processes} {stored} pages stored "
                      f"in {multi['wall']:.2f}s = {wm:.1f} pages/s | ratio to plain {wm / wp:.2f}x", flush=True)
            if args.mongo:
                mongo, stored = crawl_ours(seed, work, mongo_uri)
                m = rate(mongo)
                best_mongo = max(best_mongo, m)
                print(f"run {i + 1}: ours into MongoDB {mongo['response_received_count']} pages ({stored} stored) in "
                      f"{mongo['elapsed_time_seconds']:.2f}s = {m:.1f} pages/s | ratio to plain {m / p:.2f}x; "
                      f"{mongo.get('store/pages_written', 0) / mongo['elapsed_time_seconds']:.1f} pages/s written",
                      flush=True)
    finally:
        server.stop()
        if mongo_proc is not None:
            from tests.support.servers import stop_secantus

            stop_secantus(mongo_proc)
        shutil.rmtree(work, ignore_errors=True)
    print(f"best: plain {best_plain:.1f} pages/s, ours {best_ours:.1f} pages/s, ratio {best_ours / best_plain:.2f}x"
          + (f"; ours into MongoDB {best_mongo:.1f} pages/s, ratio {best_mongo / best_plain:.2f}x" if args.mongo else ""))
    print(f"best, whole process: plain {whole_plain:.1f} pages/s, ours {whole_ours:.1f} pages/s, ratio "
          f"{whole_ours / whole_plain:.2f}x"
          + (f"; ours with CRAWL_PROCESSES={args.processes} {whole_multi:.1f} pages/s, ratio "
             f"{whole_multi / whole_plain:.2f}x" if args.processes > 1 else ""))
    print(f"best, CPU a page: plain {cpu_plain:.2f} ms, ours {cpu_ours:.2f} ms, ratio {cpu_plain / cpu_ours:.2f}x")
    if args.floor:
        print(f"best, CPU a page: floor {cpu_floor:.2f} ms, ours / floor {cpu_ours / cpu_floor:.2f}x "
              "(target at most 1.6x)")


if __name__ == "__main__":
    main()
