"""One worker process against two (``CRAWL_PROCESSES``), in the same run.

    python -m bench.bench_processes [--root DIR] [--pages 3000] [--sites 1] [--runs 2] [--per-site 8]

Serves ``--root`` (default: OpenJDK 17's javadoc, ``apt-get install
openjdk-17-doc``: link-heavy pages; not the PostgreSQL or Python manuals, on
which the crawler is judged) on ``--sites`` loopback hosts (127.0.0.2 ...),
and crawls ``--pages`` pages of each with the full pipeline on embedded
defaults (``scrapy crawl site -a follow=all``, no delay,
``CONCURRENT_REQUESTS_PER_DOMAIN=--per-site``), alternating one process and
``-s CRAWL_PROCESSES=2``, ``--runs`` times each. Prints, per run, the crawl's
time (the server's first request to its last: start-up excluded, the same
for both), pages/s, and the CPU seconds of each worker, the embedded Redis
and the server; then the best of each and their ratio.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from bench.harness import ROOT, serve, process_cpu
from tests.support.crawl import crawl_cmd


def run(server, seeds: list[str], work: Path, processes: int, pages: int, per_site: int) -> dict:
    crawl_dir = work / f"p{processes}-{time.monotonic_ns()}"
    settings = {"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS_PER_DOMAIN": per_site, "CONCURRENT_REQUESTS": 16,
                "LOG_LEVEL": "INFO", "PROGRESS_INTERVAL": 0, "FRONTIER_MAX_PAGES_PER_SITE": pages,
                "CRAWL_PROCESSES": processes}
    mark = server.mark()
    proc = subprocess.Popen(crawl_cmd([f"seeds={','.join(seeds)}", "follow=all"], settings, crawl_dir), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    top = psutil.Process(proc.pid)
    started = time.time() - 1
    server_proc = psutil.Process(server.proc.pid)
    server_cpu0 = process_cpu(server_proc)
    seen: dict[int, tuple[str, float]] = {}
    while proc.poll() is None:
        try:
            procs = [top, *top.children(recursive=True)]
            # The crawl's embedded Redis: the redis-server started with it.
            procs += [p for p in psutil.process_iter(["name", "create_time"]) if p.info["name"] == "redis-server"
                      and p.info["create_time"] >= started]
            for p in procs:
                seen[p.pid] = ("redis" if p.name() == "redis-server" else "python", process_cpu(p))
        except psutil.Error:
            pass
        time.sleep(0.25)
    if proc.returncode != 0:
        raise SystemExit(f"the crawl failed (status {proc.returncode}); run it by hand to see why")
    reqs = [r for r in server.requests(mark) if not str(r["path"]).endswith("robots.txt")]
    span = max(r["t"] for r in reqs) - min(r["t"] for r in reqs)
    workers = sorted((c for name, c in seen.values() if name == "python" and c > 1.0), reverse=True)
    redis_cpu = sum(c for name, c in seen.values() if name == "redis")
    shutil.rmtree(crawl_dir, ignore_errors=True)
    return {"pages": len(reqs), "span": span, "rate": len(reqs) / span, "workers": workers, "redis": redis_cpu,
            "server": process_cpu(server_proc) - server_cpu0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path("/usr/share/doc/openjdk-17-jre-headless/api"))
    ap.add_argument("--pages", type=int, default=3000, help="pages crawled of each site")
    ap.add_argument("--sites", type=int, default=1)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--per-site", type=int, default=8, help="CONCURRENT_REQUESTS_PER_DOMAIN")
    args = ap.parse_args()
    if not (args.root / "index.html").exists():
        raise SystemExit(f"{args.root}/index.html not found: apt-get install openjdk-17-doc, or pass --root")
    hosts = [f"127.0.0.{2 + i}" for i in range(args.sites)]
    work = Path(tempfile.mkdtemp(prefix="bench-processes-"))
    server = serve(work, args.root, hosts)
    try:
        seeds = [f"http://{h}:{server.port}/index.html" for h in hosts]
        best: dict[int, dict] = {}
        for i in range(args.runs):
            for processes in (1, 2):
                r = run(server, seeds, work, processes, args.pages, args.per_site)
                print(f"run {i + 1}, {processes} process{'es' if processes > 1 else ''}: {r['pages']} pages in "
                      f"{r['span']:.1f} s = {r['rate']:.1f} pages/s; CPU s: workers "
                      f"{', '.join(f'{c:.1f}' for c in r['workers'])}, Redis {r['redis']:.1f}, "
                      f"server {r['server']:.1f}", flush=True)
                if processes not in best or r["rate"] > best[processes]["rate"]:
                    best[processes] = r
        print(json.dumps({"one": round(best[1]["rate"], 1), "two": round(best[2]["rate"], 1)}))
        print(f"best: one process {best[1]['rate']:.1f} pages/s, two {best[2]['rate']:.1f} pages/s: "
              f"{best[2]['rate'] / best[1]['rate']:.2f}x")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
