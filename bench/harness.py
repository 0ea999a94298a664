"""What the benchmarks share: one way to serve a tree, run a crawl, read
the store and time it. Every benchmark that crawls goes through these, so
that its figures are taken the same way as the others'.

- **Serve**: ``serve(work, root, hosts)`` runs the test HTTP server
  (``tests.support.mockserver``) on a directory, on one or several loopback
  hosts (``loopback_hosts(n)``: ``127.0.0.2`` ...); ``serve_web`` the
  generated web of ``bench/webgen.py``. Each request is logged
  (``Server.requests(mark)``: the order and times of the fetches).
- **Crawl**: ``scrapy_crawl(args, settings)`` is the command a user types
  (``scrapy crawl site -a ... -s ...``), ``plain_crawl(seed)`` plain
  Scrapy's (``bench/plain_spider.py``, run outside the project);
  ``run(cmd)`` runs one and returns its closing stats (``stats_of``), its
  log, and its time.
- **Time**: ``ChildTime`` measures the wall time and the CPU (user and
  system) of the child processes waited for while it is open: the crawl
  and every worker it started, not the test server's or an embedded Redis
  server's (daemons, never waited for). ``process_cpu`` reads a running
  process tree's CPU (psutil), for benchmarks that watch a crawl as it runs.
- **Store**: ``store_path(crawl_dir)``, ``query(path, sql)`` (read-only),
  ``check_store`` / ``check_mongo`` (every page stored once; prints what
  was stored).
- **Figures**: ``rate`` (pages/s from Scrapy's elapsed time), ``whole``
  (pages/s launch to exit), ``cpu_ms`` (CPU ms a page).
"""

from __future__ import annotations

import ast
import re
import resource
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support import ROOT
from tests.support.servers import Server, launch, start_server

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import psutil

__all__ = ["COMMON", "LOOPBACK", "ROOT", "ChildTime", "Server", "check_mongo", "check_store", "cpu_ms", "loopback_hosts",
           "plain_crawl", "query", "rate", "run", "scrapy_crawl", "serve", "serve_web", "settings_args", "stats_of",
           "store_path", "process_cpu", "whole"]

# The settings bench_crawl's two crawls (ours and plain Scrapy's) share:
# the same concurrency, no delay, robots.txt obeyed.
COMMON: dict[str, object] = {
    "DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16, "ROBOTSTXT_OBEY": True,
    "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": False, "REMOTE_CONTROL_ENABLED": False, "COOKIES_ENABLED": False}
LOOPBACK = "127.0.0.0/8"  # NETWORK_ALLOWLIST for crawls of the loopback servers


# -- serve ----------------------------------------------------------------------------------------
def loopback_hosts(n: int, first: int = 2) -> list[str]:
    """``n`` loopback addresses from ``127.0.0.<first>``: one site each."""
    return [f"127.0.0.{first + i}" for i in range(n)]


def serve(work: Path, root: Path | None = None, hosts: str | Sequence[str] = "127.0.0.1", **options: Any) -> Server:
    """The test server on ``hosts`` (one port for all), serving ``root``
    (None: the generated test site), logging requests under ``work``;
    ``options`` as ``tests.support.servers.start_server`` takes them
    (``validators``, ``latency``, ``port`` ...)."""
    return start_server(work, hosts=hosts if isinstance(hosts, str) else ",".join(hosts), root=root, **options)


def serve_web(work: Path, pages: int, sites: int, seed: int, words: str | None = None,
              log_name: str = "requests.jsonl") -> Server:
    """``bench.webgen``'s generated web of ``pages`` over ``sites`` hosts
    (its own server: pages made on request), requests logged under ``work``."""
    log = work / log_name
    cmd = [sys.executable, "-m", "bench.webgen", "--pages", str(pages), "--sites", str(sites), "--seed", str(seed),
           "--log", str(log)]
    return launch(cmd + (["--words", words] if words else []), log)


# -- crawl ----------------------------------------------------------------------------------------
def settings_args(settings: Mapping[str, object]) -> list[str]:
    return [a for k, v in settings.items() for a in ("-s", f"{k}={v}")]


def scrapy_crawl(args: Sequence[str], settings: Mapping[str, object], spider: str = "site") -> list[str]:
    """``scrapy crawl SPIDER -a ARG ... -s NAME=VALUE ...`` as a user runs it."""
    return [sys.executable, "-m", "scrapy", "crawl", spider, *[x for a in args for x in ("-a", a)],
            *settings_args(settings)]


def plain_crawl(seed: str, settings: Mapping[str, object] = COMMON) -> list[str]:
    """Plain Scrapy's crawl of ``seed`` (a ``CrawlSpider``, no pipeline):
    run it outside the project (``cwd`` not the repository), so that none
    of our settings apply."""
    return [sys.executable, "-m", "scrapy", "runspider", str(ROOT / "bench/plain_spider.py"), "-a", f"seed={seed}",
            *settings_args(settings)]


def stats_of(log: str) -> dict[str, Any]:
    """The stats Scrapy dumps as a crawl closes (the first dump in ``log``;
    dates as None)."""
    m = re.search(r"Dumping Scrapy stats:\n(\{.*?\})\n", log, re.S)
    if not m:
        raise RuntimeError("no stats in log:\n" + log[-3000:])
    return dict(ast.literal_eval(re.sub(r"datetime\.datetime\([^)]*\)", "None", m.group(1))))


class ChildTime:
    """``with ChildTime() as t: ...``: then ``t.wall`` (seconds) and
    ``t.cpu`` (user + system seconds of the children waited for inside)."""

    wall = cpu = 0.0

    def __enter__(self) -> ChildTime:
        self._t0 = time.monotonic()
        self._used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.monotonic() - self._t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # every worker too: each was waited for
        self.cpu = after.ru_utime - self._used.ru_utime + after.ru_stime - self._used.ru_stime


def run(cmd: list[str], cwd: Path = ROOT, stats: bool = True, env: Mapping[str, str] | None = None,
        log: Path | None = None, timeout: float = 1800) -> dict[str, Any]:
    """Run a crawl command: its closing stats, ``wall`` (launch to exit),
    ``cpu`` (``ChildTime``) and ``log`` (its output; also written to
    ``log`` if given). With ``stats`` False (several workers, each with
    its own), no stats. A failed crawl raises with its last lines."""
    with ChildTime() as t:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)
    if log is not None:
        log.write_text(proc.stdout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[2:5])} exited {proc.returncode}:\n{proc.stdout[-3000:]}")
    return {**(stats_of(proc.stdout) if stats else {}), "wall": t.wall, "cpu": t.cpu, "log": proc.stdout}


def process_cpu(p: psutil.Process) -> float:
    """User + system CPU seconds of one running process (psutil)."""
    t = p.cpu_times()
    return float(t.user + t.system)


# -- store ----------------------------------------------------------------------------------------
def store_path(crawl_dir: Path, crawl_name: str = "site") -> Path:
    """The embedded SQLite store of a crawl in ``crawl_dir`` (its default place)."""
    return crawl_dir / f"{crawl_name}.sqlite3"


def query(store: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` on the store, opened read-only (the crawl may still run)."""
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def check_store(path: Path) -> int:
    """Every page stored once, with type, title, text and in-links; prints
    what was stored, returns the pages."""
    [pages] = query(path, "SELECT COUNT(*), COUNT(DISTINCT url) FROM pages WHERE state = 'C'")
    assert pages[0] == pages[1], pages
    html = "(url LIKE '%.html' OR url LIKE '%/')"
    [[missing]] = query(path, f"SELECT COUNT(*) FROM pages WHERE state = 'C' AND {html} AND "
                              "(page_type IS NULL OR title = '' OR text = '')")
    [[orphans]] = query(path, "SELECT COUNT(*) FROM pages p WHERE state = 'C' AND depth > 0 AND "
                              "NOT EXISTS (SELECT 1 FROM links l WHERE l.dst = p.url)")
    types = dict(query(path, "SELECT page_type, COUNT(*) FROM pages WHERE state = 'C' GROUP BY page_type"))
    print(f"  stored {pages[0]} pages once each; {missing} HTML pages without type/title/text; "
          f"{orphans} without in-links; types {types}")
    return int(pages[0])


def check_mongo(uri: str, database: str) -> int:
    """``check_store`` for a crawl into MongoDB; drops the database after."""
    import pymongo

    with pymongo.MongoClient(uri) as client:
        db = client[database]
        pages = db.pages.count_documents({"state": "C"})
        distinct = len(db.pages.distinct("url", {"state": "C"}))
        assert pages == distinct, (pages, distinct)
        print(f"  MongoDB: stored {pages} pages once each, {db.links.estimated_document_count()} links")
        client.drop_database(database)
    return int(pages)


# -- figures --------------------------------------------------------------------------------------
def rate(stats: Mapping[str, Any]) -> float:
    """Pages a second, from Scrapy's own elapsed time."""
    return float(stats["response_received_count"] / stats["elapsed_time_seconds"])


def whole(stats: Mapping[str, Any], pages: int) -> float:
    """Pages a second of the whole process, launch to exit."""
    return float(pages / stats["wall"])


def cpu_ms(stats: Mapping[str, Any], pages: int) -> float:
    """CPU milliseconds a page, launch to exit: steadier than pages/s on a
    shared machine. Neither the test server's CPU nor the embedded Redis
    server's (a daemon, not waited for) is in it."""
    return float(1000 * stats["cpu"] / max(pages, 1))
