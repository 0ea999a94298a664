"""Faults together: a crawl of a generated web while workers, Redis masters
and the store fail at random, then checked against the server's log, Redis
and the store.

    python -m bench.chaos [--minutes 20] [--pages 50000] [--sites 250] [--seed 1]
                          [--every 8] [--finish 15] [--delay 0.1] [--groups 2] [--processes 2]
                          [--no-wait]

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
  (it rejoins as a replica); a master frozen (SIGSTOP) for 0.3-1.5 s, below
  the cluster's node timeout (Redis unreachable, no failover); the network
  to a master cut (its clients' connections reset with ``CLIENT KILL``,
  then every command held for 1-5 s with ``CLIENT PAUSE``); the store's
  server stopped and started again 3-15 s later; through the fault proxy
  (``bench/faultproxy.py``) between the workers and the web: the network
  slowed (every chunk 50-500 ms late) for 5-20 s, cut (connections reset,
  new ones refused) for 2-10 s, or one site hanging (requests taken, never
  answered) for 5-30 s; the WARC directory's file system (a 2 GiB tmpfs
  mounted for the run, where the machine allows a mount: else
  ``disk_full_unavailable`` is counted) filled for 5-20 s. At most one
  fault of each kind but the workers' at a time, one master at a time.
- **The end**: after ``--minutes`` (or once every group ended with status
  0: the crawl is done) the faults stop, everything is brought back, and
  the crawl runs to its end (at most ``--finish`` minutes more, 15). A group whose
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
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from bench.faultproxy import FaultProxy
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
        self.timeline: list[tuple[float, float, str]] = []  # (from, to, kind): wall-clock times of each fault
        self.later: list[tuple[float, str, Any]] = []  # (when, what, on) to undo
        self.master_down: int | None = None
        self.on: set[str] = set()  # the faults other than a worker's going on now

    def start(self) -> None:
        a = self.args
        self.web = Web(a.pages, a.sites, a.seed)
        self.server = serve_web(self.work, a.pages, a.sites, a.seed)
        # The workers reach the web through the fault proxy (its port in every URL).
        self.proxy = FaultProxy(self.web.hosts(), self.server.port).start()
        self.warc_dir = self.work / "warc"
        self.warc_dir.mkdir()
        self.small_disk = self.mount_small_disk()
        self.cluster = start_cluster(self.work / "redis", masters=3, replicas=1)
        self.mongo_dir = self.work / "mongo"
        self.mongo, self.mongo_port = start_secantus(self.mongo_dir)
        seeds = self.work / "seeds.txt"
        seeds.write_text("".join(u + "\n" for u in self.web.seeds(self.proxy.port)))
        self.settings = {
            "REDIS_URL": self.cluster.url, "MONGO_URI": f"mongodb://127.0.0.1:{self.mongo_port}/",
            "MONGO_DATABASE": "chaos", "WARC_DIR": str(self.warc_dir), "DOWNLOAD_TIMEOUT": 15, "CRAWL_DIR": str(self.work / "crawl"),
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
    KINDS = ("kill_worker", "stop_worker", "kill_master", "freeze_master", "redis_cut", "store_down", "web_slow",
             "web_cut", "web_hang", "disk_full")

    def fault(self) -> str | None:
        """Inject one fault drawn at random (None: that kind is on already,
        or cannot be had here); its end is put in ``later``."""
        kind = self.rng.choice(self.KINDS)
        now = time.monotonic()
        if kind in ("kill_worker", "stop_worker"):
            alive = workers(self.groups)
            if not alive:
                return None
            victim = self.rng.choice(alive)
            try:
                if kind == "kill_worker":
                    victim.send_signal(signal.SIGKILL)
                    gap = 0.0
                else:
                    victim.send_signal(signal.SIGSTOP)
                    gap = self.rng.uniform(2, 10)
                    self.later.append((now + gap, "cont", victim))
            except psutil.Error:
                return None
        elif kind in self.on:
            return None
        elif kind in ("kill_master", "freeze_master"):
            if self.master_down is not None:
                return None
            masters = [n.index for n in self.cluster.nodes if n.running and n.role == "master"]
            with_replica = [i for i in masters if any(r.follows == i and r.running for r in self.cluster.nodes)]
            if not with_replica:
                return None
            i = self.rng.choice(with_replica)
            if kind == "kill_master":  # its replica is promoted; it comes back as a replica
                self.cluster.kill_node(i)
                gap = self.rng.uniform(10, 30)
            else:  # frozen below the cluster's node timeout: Redis unreachable for a while, no failover
                self.cluster.nodes[i].process.send_signal(signal.SIGSTOP)
                gap = self.rng.uniform(0.3, 1.5)
            self.master_down = i
        elif kind == "redis_cut":  # a master's clients cut off: connections reset, then held unanswered
            node = self.rng.choice([n for n in self.cluster.nodes if n.running and n.role == "master"])
            gap = self.rng.uniform(1, 5)
            try:
                client = node.connect(2.0)
                client.execute_command("CLIENT", "KILL", "TYPE", "normal")
                client.execute_command("CLIENT", "PAUSE", int(gap * 1000), "ALL")
                client.close()
            except Exception:  # noqa: BLE001 - it cut this connection too: the pause is what matters
                pass
        elif kind == "store_down":
            stop_process(self.mongo)
            gap = self.rng.uniform(3, 15)
        elif kind == "web_slow":  # every chunk to and from the web 50-500 ms late
            self.proxy.slow(self.rng.uniform(0.05, 0.5))
            gap = self.rng.uniform(5, 20)
        elif kind == "web_cut":  # every connection to the web reset, new ones refused
            self.proxy.cut()
            gap = self.rng.uniform(2, 10)
        elif kind == "web_hang":  # one site takes requests and never answers
            self.proxy.hang(self.rng.choice(self.web.hosts()))
            gap = self.rng.uniform(5, 30)
        elif kind == "disk_full":  # the WARC directory's file system full
            if self.small_disk is None:
                self.injected["disk_full_unavailable"] += 1
                return None
            self.fill_disk()
            gap = self.rng.uniform(5, 20)
        if kind not in ("kill_worker", "stop_worker"):
            self.on.add(kind)
            self.later.append((now + gap, "end", kind))
        self.injected[kind] += 1
        self.mark(kind, gap)
        return kind

    def mark(self, kind: str, seconds: float) -> None:
        now = time.time()
        self.timeline.append((now, now + seconds, kind))

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
                continue
            self.on.discard(on)
            if on == "kill_master":
                self.cluster.start_node(self.master_down)
                self.master_down = None
            elif on == "freeze_master":
                self.cluster.nodes[self.master_down].process.send_signal(signal.SIGCONT)
                self.master_down = None
            elif on == "store_down":
                self.mongo, _ = start_secantus(self.mongo_dir, port=self.mongo_port)
            elif on in ("web_slow", "web_cut", "web_hang"):
                if not self.on & {"web_slow", "web_cut", "web_hang"}:
                    self.proxy.mend()
            elif on == "disk_full":
                (self.warc_dir / "filler").unlink(missing_ok=True)
        self.later = keep

    # -- the small disk ---------------------------------------------------------------------------
    def mount_small_disk(self) -> str | None:
        """The WARC directory on a file system of its own (a tmpfs of 2 GiB,
        which the filler fills): None where the machine refuses a mount (not
        root, or no CAP_SYS_ADMIN in a container); the disk_full fault is
        then counted as unavailable."""
        if os.geteuid() != 0 or not shutil.which("mount"):
            return None
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g", "chaos-warc", str(self.warc_dir)],
                              capture_output=True, text=True)
        return str(self.warc_dir) if done.returncode == 0 else None

    def fill_disk(self) -> None:
        free = shutil.disk_usage(self.warc_dir).free
        with open(self.warc_dir / "filler", "wb", buffering=0) as f:
            try:
                os.posix_fallocate(f.fileno(), 0, free)
            except OSError:
                pass
            # what fallocate's rounding left: written until the file system refuses
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass

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
        end = time.monotonic() + self.args.finish * 60
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

        finished = self.finished()
        stuck = [g.pid for g in self.groups if g.poll() is None] + [p.pid for p in workers(self.groups)]
        for g in self.groups:
            if g.poll() is None:
                g.kill()
        port = self.proxy.port
        reachable = {f"http://{site_host(p.site)}:{port}{p.path}" for p in self.web.pages}
        client: Any = pymongo.MongoClient(self.settings["MONGO_URI"], serverSelectionTimeoutMS=10_000)
        stored: dict[str, dict[str, Any]] = {}
        for doc in client["chaos"]["pages"].find({"state": {"$exists": True}},
                                                  {"url": 1, "state": 1, "warc_file": 1, "status": 1}):
            stored[doc["url"]] = doc
        client.close()
        done = {u for u, d in stored.items() if d.get("state") == "C"}
        queued, leased = self.pending()
        pending = queued | leased
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
        why = self.why_twice(requests)
        (self.work / "faults.json").write_text(json.dumps(self.timeline))
        # Lost: not stored, not in the frontier, yet linked from a page that
        # was processed (stored, or fetched and leased still) or a seed. A
        # run cut short leaves the rest undiscovered, not lost.
        urls = [f"http://{site_host(p.site)}:{port}{p.path}" for p in self.web.pages]
        index = {u: i for i, u in enumerate(urls)}
        discovered = {f"http://{site_host(s)}:{port}/" for s in range(self.web.sites)}
        for u in done | leased:
            if u in index:
                discovered.update(urls[j] for j in self.web.out_links(index[u]))
        lost = (reachable - done - pending) & discovered
        return {"reachable": len(reachable), "stored": len(done), "finished": finished,
                "pending": len((reachable - done) & pending), "undiscovered": len(reachable - done - pending - discovered),
                "lost": sorted(lost)[:20], "lost_count": len(lost), "errors": sum(d.get("state") == "E" for d in stored.values()),
                "no_warc": sum(1 for u in done if not stored[u].get("warc_file")),
                "fetched_twice": len(twice), "extra_fetches": sum(n - 1 for n in twice.values()),
                "extra_by_fault": why,
                "requests": len(requests), "violations": violations, "closest_gap": closest,
                "stuck": stuck, "faults": dict(self.injected), "seed": self.args.seed}

    def pending(self) -> tuple[set[str], set[str]]:
        """The URLs still in the frontier (queued, waiting for a retry, or
        leased), read from every master: a run cut short by ``--finish``
        shows which pages it had not reached, as opposed to lost. (queued
        or waiting for a retry, leased)."""
        queued: set[str] = set()
        leased: set[str] = set()

        def url(entry: bytes, out: set[str]) -> None:
            text = entry.decode("utf-8", "replace").split("\n", 1)[-1]  # "<site>\n<entry>" in delayed and leases
            try:
                value = json.loads(text).get("u")
            except (ValueError, AttributeError):
                return
            if isinstance(value, str):
                out.add(value)

        for node in self.cluster.nodes:
            if not (node.running and node.role == "master"):
                continue
            client = node.connect(10.0)
            for key in client.scan_iter(match="*", count=1000):
                name = key.decode("utf-8", "replace")
                kind = client.type(key)
                if ":q:" in name and kind == b"list":
                    for entry in client.lrange(key, 0, -1):
                        url(entry, queued)
                elif ":q:" in name and kind == b"zset" or name.endswith(":delayed"):
                    for entry in client.zrange(key, 0, -1):
                        url(entry, queued)
                elif ":leases:" in name and kind == b"hash":
                    for entry in client.hvals(key):
                        url(entry, leased)
            client.close()
        return queued, leased

    def why_twice(self, requests: list[dict[str, Any]]) -> dict[str, int]:
        """Each fetch of a page after its first, by the faults that began
        between the fetch before it (less a second) and it: the faults that
        can have sent the page back to the frontier ("none": no fault did)."""
        last: dict[tuple[str, str], float] = {}
        why: collections.Counter[str] = collections.Counter()
        starts = sorted(self.timeline)
        for r in sorted(requests, key=lambda r: float(r["t"])):
            key, t = (r["host"], r["path"]), float(r["t"])
            if key in last:
                kinds = sorted({k for a, _, k in starts if last[key] - 1 <= a <= t})
                why["+".join(kinds) or "none"] += 1
            last[key] = t
        return dict(why.most_common())

    def stop(self) -> None:
        for g in self.groups:
            if g.poll() is None:
                g.kill()
        for log in self.logs:
            log.close()
        self.cluster.stop()
        stop_process(self.mongo)
        self.proxy.stop()
        self.server.stop()
        if self.small_disk is not None:
            # The WARC files, kept with the logs: copied off the small disk before it goes.
            keep = self.work / "warc-files"
            shutil.copytree(self.warc_dir, keep, ignore=shutil.ignore_patterns("filler"))
            subprocess.run(["umount", "-l", self.small_disk], check=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--pages", type=int, default=50_000)
    ap.add_argument("--sites", type=int, default=250)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--every", type=float, default=8.0)
    ap.add_argument("--finish", type=float, default=15, help="minutes the crawl may take to end after the faults")
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
    sound = result["lost_count"] == 0 and result["violations"] == 0 and result["no_warc"] == 0
    ok = sound and result["finished"] and not result["stuck"]
    verdict = "PASS" if ok else "CUT SHORT, nothing lost" if sound and not result["finished"] else "FAIL"
    print(f"chaos, seed {args.seed}: {result['reachable']:,} pages reachable, {result['stored']:,} stored"
          + ("" if result["finished"] else f" and {result['pending']:,} still in the frontier (the run was cut "
             f"short by --finish: not finished)") + f", {result['lost_count']} lost, {result['no_warc']} without a WARC record, {result['fetched_twice']} fetched "
          f"more than once ({result['extra_fetches']} extra fetches of {result['requests']:,}), "
          f"{result['violations']} politeness violations (closest gap {result['closest_gap']:.3f} s), "
          f"{len(result['stuck'])} workers left running; faults {result['faults']}: {verdict}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
