"""Golden crawls: proof that a refactor left the crawler's behaviour as it was.

    python -m bench.golden capture OUT.json [--code DIR] [--only NAME,...]
    python -m bench.golden compare A.json B.json

``capture`` runs the crawls of ``bench/golden_sites.py`` (``CRAWLS``: each
page branch, the focused and importance orders, a re-crawl, WARC output)
with the crawler found in ``DIR`` (default: this repository; another
checkout of it, such as a git worktree at an older commit, to capture the
code before a change). The crawls are ``scrapy``/``python -m``
subprocesses run with ``cwd=DIR`` and ``PYTHONPATH=DIR``, so that DIR's
``crawler`` package is imported; the capture checks which one was and
refuses to go on with another. The servers, the sites and this script
are always this repository's: both captures crawl the same bytes.

Each crawl is deterministic: one request at a time (``CONCURRENT_REQUESTS``
1), a Redis server of the capture's own (``tests.support.redis_server``),
flushed before each crawl, with the same ``CRAWL_NAME``, and the embedded
SQLite store in the crawl's temp directory. After each step it records:
every stored row of every table (``read_store``), ``scrapy export`` of the
pages (JSON lines) and, with WARC on, the CDXJ index and the WARC records,
the stats and the log's warnings and errors, the order of the requests the
server saw, every Redis key (type, expiry, value) and the Redis commands
the crawl sent (MONITOR: counts by command and keys, the script calls among
them, and the commands Lua ran). Time- and run-dependent values are
normalized (``bench/golden_record.py`` says which).

``compare`` prints each difference (its path and both values) and exits 1
if there is any; the ``meta`` section (where the code came from) is shown,
not compared.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.golden_record import (
    Normalizer, count_commands, drop_revisit_fingerprints, dump_redis, log_lines, read_jsonl, read_stats, read_store,
    read_warc)
from bench.golden_sites import CRAWLS, Crawl, Step
from bench.harness import serve
from tests.support import ROOT
from tests.support.crawl import crawl_cmd
from tests.support.redis_server import RedisServer, start_redis
from tests.support.servers import Server

CRAWL_NAME = "golden"
# The servers' port: fixed, so that URLs and all hashed from them (fingerprints,
# shards, Redis keys) are the same in every capture; outside Linux's ephemeral
# range (32768-60999), so no server binding port 0 can hold it.
PORT = 28961


def child_env(code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MONGO_URI", "SCRAPY_SETTINGS_MODULE")}
    return {**env, "PYTHONPATH": str(code), "PYTHONHASHSEED": "0"}


def run_in(code: Path, cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=code, env=child_env(code), capture_output=True, text=True, timeout=timeout)


def code_meta(code: Path) -> dict[str, str]:
    """Where the crawler the crawls import comes from; refuses another checkout's."""
    found = run_in(code, [sys.executable, "-c", "import crawler; print(crawler.__file__)"])
    imported = found.stdout.strip()
    if found.returncode != 0 or not imported.startswith(str(code.resolve()) + os.sep):
        raise SystemExit(f"crawls from {code} would import crawler from {imported or found.stderr[-500:]}")
    # The fingerprint module's place before the packages (issue 49) and after.
    impl = (run_in(code, [sys.executable, "-m", "crawler.duplicates.fingerprint"]).stdout.strip()
            or run_in(code, [sys.executable, "-m", "crawler.fingerprint"]).stdout.strip())
    commit = subprocess.run(["git", "-C", str(code), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(code), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return {"code": str(code), "crawler": imported, "commit": commit.stdout.strip(), "dirty": bool(dirty),
            "fingerprint": impl, "python": sys.version.split()[0]}


class Monitor:
    """Redis MONITOR in a thread: every command, as its arguments, and
    whether a client sent it or a Lua script ran it."""

    def __init__(self, redis: RedisServer) -> None:
        self.redis = redis
        self.client = redis.client()
        self.events: list[tuple[str, list[str]]] = []  # ("sent" or "lua", arguments), in order
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def _run(self) -> None:
        with self.client.monitor() as m:
            self.ready.set()
            while True:
                line = m.connection.read_response()
                line = line.decode("utf-8", "backslashreplace") if isinstance(line, bytes) else str(line)
                found = re.match(r"[\d.]+ \[\d+ (.*?)\] (.*)", line)
                if not found:
                    continue
                args = [a.replace('\\"', '"') for a in re.findall(r'"(.*?)(?<!\\)"', found.group(2))]
                if args[:2] == ["ECHO", "golden-monitor-stop"]:
                    return
                self.events.append(("lua" if found.group(1) == "lua" else "sent", args))

    def stop(self) -> None:
        self.redis.client().echo("golden-monitor-stop")
        self.thread.join(30)


def fill(text: str, server: Server, tmp: Path) -> str:
    text = text.replace("{tmp}", str(tmp))
    return re.sub(r"\{url:([^}]*)\}", lambda m: server.url(m.group(1)), text)


def requests_seen(server: Server, mark: int, norm: Normalizer) -> list[Any]:
    drop = ("t",)
    return [norm.value({k: v for k, v in r.items() if k not in drop}) for r in server.requests(mark)]


def run_step(code: Path, crawl: Crawl, step: Step, server: Server, redis: RedisServer, tmp: Path,
             norm: Normalizer) -> dict[str, Any]:
    crawl_dir = tmp / "crawl"
    if step.before is not None:
        step.before(tmp / "www", server.url)
    time.sleep(step.wait)
    # No heartbeat within a crawl (they take seconds): its Redis calls would
    # come as many times as the crawl took 5 s.
    settings = {"CONCURRENT_REQUESTS": 1, "LOG_LEVEL": "INFO", "REDIS_URL": redis.url, "CRAWL_NAME": CRAWL_NAME,
                "FRONTIER_HEARTBEAT_INTERVAL": 50,
                **{k: fill(str(v), server, tmp) for k, v in step.settings.items()}}
    args = [fill(a, server, tmp) for a in step.args]
    cmd = crawl_cmd(args, settings, crawl_dir, step.spider)
    mark = server.mark()
    redis.client().script_flush()  # every script loaded again: MONITOR sees its source, so its name
    monitor = Monitor(redis)
    proc = subprocess.Popen(cmd, cwd=code, env=child_env(code), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    log, _ = proc.communicate(timeout=600)
    monitor.stop()
    norm.pids.add(str(proc.pid))
    out: dict[str, Any] = {
        "spider": step.spider, "args": [norm.text(a) for a in args], "returncode": proc.returncode,
        "requests": requests_seen(server, mark, norm), "stats": read_stats(log, norm),
        "warnings": log_lines(log, norm),
        "store": read_store(crawl_dir / f"{CRAWL_NAME}.sqlite3", norm),
        "redis": dump_redis(redis.client(), norm),
        "redis_commands": count_commands(monitor.events, norm, code),
    }
    base = ["-s", f"CRAWL_DIR={crawl_dir}", "-s", f"CRAWL_NAME={CRAWL_NAME}", "-s", f"REDIS_URL={redis.url}"]
    export = tmp / "export.jsonl"
    done = run_in(code, [sys.executable, "-m", "scrapy", "export", "-o", str(export), *base])
    out["export"] = read_jsonl(export, norm) if done.returncode == 0 else [f"<failed: {done.returncode}>"]
    if "WARC_DIR" in settings:
        cdxj = tmp / "index.cdxj"
        done = run_in(code, [sys.executable, "-m", "scrapy", "export", "--cdxj", "-o", str(cdxj), *base,
                             "-s", f"WARC_DIR={settings['WARC_DIR']}"])
        out["cdxj"] = [[norm.text(surt), norm.text(at), norm.value(json.loads(fields))] for surt, at, fields in
                       (line.split(" ", 2) for line in cdxj.read_text().splitlines())] if done.returncode == 0 else \
            [f"<failed: {done.returncode}>"]
        out["warc"] = read_warc(Path(str(settings["WARC_DIR"])), norm)
    return out


def capture_crawl(code: Path, crawl: Crawl, redis: RedisServer, tmp: Path, port: int) -> dict[str, Any]:
    redis.client().flushall()
    root = tmp / "www"
    root.mkdir(parents=True)
    server = serve(tmp, root if crawl.build else None, crawl.hosts, validators=crawl.validators, port=port)
    try:
        norm = Normalizer(tmp, code)
        if crawl.build is not None:
            crawl.build(root, server.url)
        steps: list[dict[str, Any]] = []
        for step in crawl.steps:
            steps.append(run_step(code, crawl, step, server, redis, tmp, norm))
            if step.spider == "recrawl" and len(steps) > 1:
                steps[-1]["redis"] = drop_revisit_fingerprints(steps[-1]["redis"], steps[-2]["redis"])
    finally:
        server.stop()
    return {"covers": crawl.covers, "steps": steps}


def capture(out: Path, code: Path, only: set[str] | None, port: int = PORT) -> None:
    meta = {**code_meta(code), "port": str(port)}
    crawls: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="golden-") as tmpdir:
        redis = start_redis(Path(tmpdir) / "redis")
        try:
            for crawl in CRAWLS:
                if only and crawl.name not in only:
                    continue
                started = time.monotonic()
                crawls[crawl.name] = capture_crawl(code, crawl, redis, Path(tmpdir) / crawl.name, port)
                codes = [s["returncode"] for s in crawls[crawl.name]["steps"]]
                print(f"{crawl.name}: exit {codes}, {time.monotonic() - started:.1f} s", file=sys.stderr)
        finally:
            redis.stop()
    out.write_text(json.dumps({"meta": meta, "crawls": crawls}, indent=1, sort_keys=True, ensure_ascii=False))


def differences(a: Any, b: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """Every place ``a`` and ``b`` differ: (path, a's value, b's value);
    ``<absent>`` for a key one side lacks."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += differences(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        out = [(f"{path}/<length>", len(a), len(b))] if len(a) != len(b) else []
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            out += differences(x, y, f"{path}[{i}]")
        return out
    return [] if a == b else [(path, a, b)]


def short(v: Any, limit: int = 400) -> str:
    text = json.dumps(v, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


def compare(a_path: Path, b_path: Path, ignore: str | None = None) -> int:
    a, b = json.loads(a_path.read_text()), json.loads(b_path.read_text())
    for side, doc in (("A", a), ("B", b)):
        print(f"{side}: {short(doc.get('meta'))}")
    found = [d for d in differences(a.get("crawls"), b.get("crawls")) if not (ignore and re.search(ignore, d[0]))]
    for path, x, y in found:
        print(f"{path}\n  A: {short(x)}\n  B: {short(y)}")
    print(f"{len(found)} difference(s)")
    return 1 if found else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.golden", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture", help="run the golden crawls, write what they left to OUT")
    cap.add_argument("out", type=Path)
    cap.add_argument("--code", type=Path, default=ROOT, help="the checkout whose crawler runs (default: this one)")
    cap.add_argument("--only", help="these crawls only (comma-separated names)")
    cap.add_argument("--port", type=int, default=PORT, help=f"the servers' port (default {PORT}; the same in "
                     "captures to compare)")
    cmp = sub.add_parser("compare", help="print the differences of two captures; exit 1 if any")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    cmp.add_argument("--ignore", help="a regular expression: differences at paths it finds are not shown")
    args = ap.parse_args(argv)
    if args.command == "compare":
        return compare(args.a, args.b, args.ignore)
    capture(args.out, args.code.resolve(), set(args.only.split(",")) if args.only else None, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
