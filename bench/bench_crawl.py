"""Single-machine crawl speed: our full pipeline against plain Scrapy.

    python -m bench.bench_crawl [--root /usr/share/doc/python3.11/html] [--runs 2] [--mongo]

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
import ast
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.servers import start_server

ROOT = Path(__file__).resolve().parent.parent

COMMON = {"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
          "ROBOTSTXT_OBEY": True, "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": False,
          "REMOTE_CONTROL_ENABLED": False, "COOKIES_ENABLED": False}


def stats_of(log: str) -> dict:
    m = re.search(r"Dumping Scrapy stats:\n(\{.*?\})\n", log, re.S)
    if not m:
        raise RuntimeError("no stats in log:\n" + log[-3000:])
    text = re.sub(r"datetime\.datetime\([^)]*\)", "None", m.group(1))
    return ast.literal_eval(text)


def run(cmd: list[str], cwd: Path, stats: bool = True) -> dict:
    """The crawl's stats, its whole-process time (``wall``) and the CPU
    seconds its processes used (``cpu``, user and system); with
    ``stats`` False (several workers, each with its own), the time alone."""
    t0 = time.monotonic()
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=1800)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # every worker too: each was waited for
    cpu = after.ru_utime - used.ru_utime + after.ru_stime - used.ru_stime
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-3000:])
    return {**(stats_of(proc.stderr + proc.stdout) if stats else {}), "wall": wall, "cpu": cpu}


def settings_args(settings: dict) -> list[str]:
    return [a for k, v in settings.items() for a in ("-s", f"{k}={v}")]


def crawl_ours(seed: str, work: Path, mongo_uri: str | None = None, processes: int = 1) -> tuple[dict, int]:
    crawl_dir = work / "ours"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    settings = {**COMMON, "CRAWL_DIR": crawl_dir, "NETWORK_ALLOWLIST": "127.0.0.0/8"}  # loopback sites
    if processes > 1:
        settings["CRAWL_PROCESSES"] = processes
    database = f"bench{time.monotonic_ns()}"
    if mongo_uri:
        settings.update(MONGO_URI=mongo_uri, MONGO_DATABASE=database)
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"seeds={seed}", "-a", "follow=all",
           *settings_args(settings)]
    stats = run(cmd, ROOT, stats=processes == 1)
    if mongo_uri:
        return stats, check_mongo(mongo_uri, database)
    return stats, check_store(crawl_dir / "site.sqlite3")


def check_mongo(uri: str, database: str) -> int:
    import pymongo

    with pymongo.MongoClient(uri) as client:
        db = client[database]
        pages = db.pages.count_documents({"state": "C"})
        distinct = len(db.pages.distinct("url", {"state": "C"}))
        assert pages == distinct, (pages, distinct)
        print(f"  MongoDB: stored {pages} pages once each, {db.links.estimated_document_count()} links")
        client.drop_database(database)
    return pages


def check_store(path: Path) -> int:
    """Every page stored once, with type, title, text and in-links."""
    db = sqlite3.connect(path)
    pages = db.execute("SELECT COUNT(*), COUNT(DISTINCT url) FROM pages WHERE state = 'C'").fetchone()
    assert pages[0] == pages[1], pages
    html = "(url LIKE '%.html' OR url LIKE '%/')"
    missing = db.execute(
        f"SELECT COUNT(*) FROM pages WHERE state = 'C' AND {html} AND "
        "(page_type IS NULL OR title = '' OR text = '')").fetchone()[0]
    orphans = db.execute(
        "SELECT COUNT(*) FROM pages p WHERE state = 'C' AND depth > 0 AND "
        "NOT EXISTS (SELECT 1 FROM links l WHERE l.dst = p.url)").fetchone()[0]
    types = dict(db.execute("SELECT page_type, COUNT(*) FROM pages WHERE state = 'C' GROUP BY page_type"))
    print(f"  stored {pages[0]} pages once each; {missing} HTML pages without type/title/text; "
          f"{orphans} without in-links; types {types}")
    return int(pages[0])


def crawl_plain(seed: str, work: Path) -> dict:
    # Run outside the project so that none of our settings apply.
    cmd = [sys.executable, "-m", "scrapy", "runspider", str(ROOT / "bench/plain_spider.py"),
           "-a", f"seed={seed}", *settings_args(COMMON)]
    return run(cmd, work)


def rate(stats: dict) -> float:
    return stats["response_received_count"] / stats["elapsed_time_seconds"]


def whole(stats: dict, pages: int) -> float:
    """Pages a second of the whole process, launch to exit."""
    return pages / stats["wall"]


def cpu_ms(stats: dict, pages: int) -> float:
    """CPU milliseconds a page, launch to exit: steadier than pages/s on a
    shared machine. Neither the test server's CPU nor the embedded Redis
    server's (a daemon, not waited for) is in it."""
    return 1000 * stats["cpu"] / max(pages, 1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path("/usr/share/doc/python3.11/html"))
    ap.add_argument("--runs", type=int, default=2)
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
    server = start_server(work, hosts="127.0.0.1", root=args.root)
    seed = server.url("/index.html")
    best_ours = best_plain = best_mongo = 0.0
    whole_ours = whole_plain = whole_multi = 0.0
    cpu_ours = cpu_plain = float("inf")
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
            wp, wo = whole(plain, plain["response_received_count"]), whole(ours, ours["response_received_count"])
            whole_plain, whole_ours = max(whole_plain, wp), max(whole_ours, wo)
            print(f"run {i + 1}, whole process: plain {plain['wall']:.2f}s = {wp:.1f} pages/s | ours "
                  f"{ours['wall']:.2f}s = {wo:.1f} pages/s | ratio {wo / wp:.2f}x", flush=True)
            cp, co = cpu_ms(plain, plain["response_received_count"]), cpu_ms(ours, ours["response_received_count"])
            cpu_plain, cpu_ours = min(cpu_plain, cp), min(cpu_ours, co)
            print(f"run {i + 1}, CPU a page (start-up included): plain {cp:.2f} ms | ours {co:.2f} ms | "
                  f"ratio {cp / co:.2f}x", flush=True)
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


if __name__ == "__main__":
    main()
