"""Faults together: a crawl of a generated web while workers, Redis masters
and the store fail at random, then checked against the server's log, Redis
and the store.

    python -m bench.chaos [--minutes 20] [--pages 50000] [--sites 250] [--seed 1]
                          [--every 8] [--delay 0.1] [--groups 2] [--processes 2] [--no-wait]

- **The web**: ``bench.webgen``'s (``--pages`` over ``--sites`` loopback
  hosts, 127.0.1.1 ...), every page reachable from its site's home page;
  every request logged by the server.
- **The cluster**: a Redis Cluster of 3 masters with a replica each
  (append-only files on), the MongoDB store (SecantusDB), WARC on;
  ``--groups`` commands of ``CRAWL_PROCESSES=--processes`` workers, ``-a
  follow=all``, ``DOWNLOAD_DELAY=--delay`` a site, ``REDIS_WAIT_REPLICAS=1``
  (``--no-wait``: 0).
- **The faults**, one every ``--every`` seconds on average (exponential
  gaps), drawn with the seed, overlapping: a worker SIGKILLed (its
  supervisor starts it again); a worker SIGSTOPped for 2-10 s; a Redis
  master SIGKILLed (its replica promoted) and started again 10-30 s later
  (it rejoins as a replica); the store's server stopped and started again
  3-15 s later. At most one master and one store outage at a time. Not yet:
  a network cut or slowed, a full disk, a hanging web server.
- **The end**: after ``--minutes`` (or once every group ended with status
  0: the crawl is done) the faults stop, everything is brought back, and
  the crawl runs to its end (at most 15 minutes more). A group whose
  supervisor gave up on a worker killed too often (its crash limit) is
  started again, as a service manager would (counted ``group_restarted``).

Printed, and checked: pages reachable, stored (state C), lost (reachable,
not stored), stored without a WARC record, fetched more than once (and how
many times), politeness violations (two requests to one site closer than
``--delay`` less 10 ms, at the server), workers left running, the faults
injected by kind, and the seed that replays the draw.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.harness import ROOT, scrapy_crawl, serve_web
from bench.webgen import Web, site_host
from tests.support.redis_cluster import start_cluster
from tests.support.servers import start_secantus, stop_process


def workers(groups: list[subprocess.Popen[bytes]]) -> list[psutil.Process]:
    """The worker processes (not the supervisors) alive now."""
    out = []
    for group in groups:
        try:
            for child in psutil.Process(group.pid).children():
                if child.status() != psutil.STATUS_ZOMBIE:
                    out.append(child)
        except psutil.Error:
            pass
    return out


class Chaos:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args, self.work = args, work
        self.rng = random.Random(f"chaos:{args.seed}")
        self.injected: collections.Counter[str] = collections.Counter()
        self.later: list[tuple[float, str, Any]] = []  # (when, what, on) to undo
        self.master_down: int | None = None
        self.store_down = False

    def start(self) -> None:
        a = self.args
        self.web = Web(a.pages, a.sites, a.seed)
        self.server = serve_web(self.work, a.pages, a.sites, a.seed)
        self.cluster = start_cluster(self.work / "redis", masters=3, replicas=1)
        self.mongo_dir = self.work / "mongo"
        self.mongo, self.mongo_port = start_secantus(self.mongo_dir)
        seeds = self.work / "seeds.txt"
        seeds.write_text("".join(u + "\n" for u in self.web.seeds(self.server.port)))
        self.settings = {
            "REDIS_URL": self.cluster.url, "MONGO_URI": f"mongodb://127.0.0.1:{self.mongo_port}/",
            "MONGO_DATABASE": "chaos", "WARC_DIR": str(self.work / "warc"), "CRAWL_DIR": str(self.work / "crawl"),
            "NETWORK_ALLOWLIST": "127.0.0.0/8", "DOWNLOAD_DELAY": a.delay, "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
            "FRONTIER_DELAY_MARGIN": 0.01, "CRAWL_PROCESSES": a.processes, "FRONTIER_LEASE_TIMEOUT": 10,
            "FRONTIER_HEARTBEAT_INTERVAL": 2, "REDIS_WAIT_REPLICAS": 0 if a.no_wait else 1,
            "SITEMAP_ENABLED": False, "LOG_LEVEL": "INFO", "RETRY_TIMES": 10, "MONGO_TIMEOUT": 5,
        }
        self.logs = [open(self.work / f"group{g}.log", "wb") for g in range(a.groups)]  # noqa: SIM115
        self.groups = []
        for g in range(a.groups):
            args = [f"seeds_file={seeds}", "follow=all"] if g == 0 else []
            self.groups.append(subprocess.Popen(scrapy_crawl(args, self.settings), cwd=ROOT, stdout=self.logs[g],
                                                stderr=subprocess.STDOUT))
            time.sleep(3 if g == 0 else 0)  # the first records the crawl; the others join it

    # -- faults -----------------------------------------------------------------------------
    def fault(self) -> str | None:
        kinds = ["kill_worker", "stop_worker", "kill_master", "store_down"]
        kind = self.rng.choice(kinds)
        now = time.monotonic()
        alive = workers(self.groups)
        if kind in ("kill_worker", "stop_worker") and alive:
            victim = self.rng.choice(alive)
            try:
                if kind == "kill_worker":
                    victim.send_signal(signal.SIGKILL)
                else:
                    victim.send_signal(signal.SIGSTOP)
                    self.later.append((now + self.rng.uniform(2, 10), "cont", victim))
            except psutil.Error:
                return None
        elif kind == "kill_master" and self.master_down is None:
            masters = [n.index for n in self.cluster.nodes if n.running and n.role == "master"]
            with_replica = [i for i in masters if any(r.follows == i and r.running for r in self.cluster.nodes)]
            if not with_replica:
                return None
            i = self.rng.choice(with_replica)
            self.cluster.kill_node(i)
            self.master_down = i
            self.later.append((now + self.rng.uniform(10, 30), "start_node", i))
        elif kind == "store_down" and not self.store_down:
            stop_process(self.mongo)
            self.store_down = True
            self.later.append((now + self.rng.uniform(3, 15), "start_store", None))
        else:
            return None
        self.injected[kind] += 1
        return kind

    def undo(self, force: bool = False) -> None:
        now = time.monotonic()
        keep = []
        for when, what, on in self.later:
            if not force and when > now:
                keep.append((when, what, on))
                continue
            if what == "cont":
                try:
                    on.send_signal(signal.SIGCONT)
                except psutil.Error:
                    pass
            elif what == "start_node":
                self.cluster.start_node(on)
                self.master_down = None
            elif what == "start_store":
                self.mongo, _ = start_secantus(self.mongo_dir, port=self.mongo_port)
                self.store_down = False
        self.later = keep

    def run(self) -> None:
        deadline = time.monotonic() + self.args.minutes * 60
        next_fault = time.monotonic() + self.rng.expovariate(1 / self.args.every)
        while time.monotonic() < deadline and not self.finished():
            self.undo()
            self.keep_groups()
            if time.monotonic() >= next_fault:
                self.fault()
                next_fault = time.monotonic() + self.rng.expovariate(1 / self.args.every)
            time.sleep(0.2)
        self.undo(force=True)
        self.cluster.refresh()
        end = time.monotonic() + 15 * 60
        while time.monotonic() < end and not self.finished():
            self.keep_groups()
            time.sleep(1)

    def finished(self) -> bool:
        """Every group ended with status 0 (its workers found nothing left)."""
        return all(g.poll() == 0 for g in self.groups)

    def keep_groups(self) -> None:
        """A group whose supervisor gave up (a worker killed more often than
        its crash limit, MAX_RESTARTS in RESTART_WINDOW) is started again, as
        an operator's service manager would: it joins the crawl."""
        for g, group in enumerate(self.groups):
            if group.poll() not in (None, 0):
                self.injected["group_restarted"] += 1
                self.groups[g] = subprocess.Popen(scrapy_crawl([], self.settings), cwd=ROOT, stdout=self.logs[g],
                                                  stderr=subprocess.STDOUT)

    # -- the check ------------------------------------------------------------------------------
    def check(self) -> dict[str, Any]:
        import pymongo

        stuck = [g.pid for g in self.groups if g.poll() is None] + [p.pid for p in workers(self.groups)]
        for g in self.groups:
            if g.poll() is None:
                g.kill()
        port = self.server.port
        reachable = {f"http://{site_host(p.site)}:{port}{p.path}" for p in self.web.pages}
        client: Any = pymongo.MongoClient(self.settings["MONGO_URI"], serverSelectionTimeoutMS=10_000)
        stored: dict[str, dict[str, Any]] = {}
        for doc in client["chaos"]["pages"].find({"state": {"$exists": True}},
                                                  {"url": 1, "state": 1, "warc_file": 1, "status": 1}):
            stored[doc["url"]] = doc
        client.close()
        done = {u for u, d in stored.items() if d.get("state") == "C"}
        requests = [r for r in self.server.requests(0) if r["path"] != "/robots.txt"]
        counts = collections.Counter((r["host"], r["path"]) for r in requests)
        twice = {k: n for k, n in counts.items() if n > 1}
        violations = 0
        by_host: dict[str, list[float]] = collections.defaultdict(list)
        for r in requests:
            by_host[r["host"]].append(float(r["t"]))
        closest = float("inf")
        for times in by_host.values():
            times.sort()
            for a, b in zip(times, times[1:]):
                closest = min(closest, b - a)
                violations += b - a < self.args.delay - 0.01
        return {"reachable": len(reachable), "stored": len(done), "lost": sorted(reachable - done)[:20],
                "lost_count": len(reachable - done), "errors": sum(d.get("state") == "E" for d in stored.values()),
                "no_warc": sum(1 for u in done if not stored[u].get("warc_file")),
                "fetched_twice": len(twice), "extra_fetches": sum(n - 1 for n in twice.values()),
                "requests": len(requests), "violations": violations, "closest_gap": closest,
                "stuck": stuck, "faults": dict(self.injected), "seed": self.args.seed}

    def stop(self) -> None:
        for g in self.groups:
            if g.poll() is None:
                g.kill()
        for log in self.logs:
            log.close()
        self.cluster.stop()
        stop_process(self.mongo)
        self.server.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--pages", type=int, default=50_000)
    ap.add_argument("--sites", type=int, default=250)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--every", type=float, default=8.0)
    ap.add_argument("--delay", type=float, default=0.1)
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--no-wait", action="store_true", help="REDIS_WAIT_REPLICAS=0")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="chaos-"))
    chaos = Chaos(args, work)
    started = time.monotonic()
    try:
        chaos.start()
        chaos.run()
        result = chaos.check()
    finally:
        chaos.stop()
    result["minutes"] = round((time.monotonic() - started) / 60, 1)
    result["work"] = str(work)
    print(json.dumps(result, indent=1))
    ok = result["lost_count"] == 0 and result["violations"] == 0 and not result["stuck"] and result["no_warc"] == 0
    print(f"chaos, seed {args.seed}: {result['reachable']:,} pages reachable, {result['stored']:,} stored, "
          f"{result['lost_count']} lost, {result['no_warc']} without a WARC record, {result['fetched_twice']} fetched "
          f"more than once ({result['extra_fetches']} extra fetches of {result['requests']:,}), "
          f"{result['violations']} politeness violations (closest gap {result['closest_gap']:.3f} s), "
          f"{len(result['stuck'])} workers left running; faults {result['faults']}: {'PASS' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
