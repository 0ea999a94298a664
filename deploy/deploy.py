#!/usr/bin/env python3
"""Deploy the crawler to every scrapyd of ``scrapy.cfg`` and start a crawl there.

    python deploy/deploy.py [TARGET ...] [--config FILE] [--jobs N]
        [-s NAME=VALUE ...] [-a NAME=VALUE ...] [--seeds URL,... | --seeds-file PATH]
        [--version V] [--egg FILE | --no-deploy] [--env-on-workers] [--json]
    python deploy/deploy.py --requirements      # what a worker machine installs besides scrapyd

In this order, stopping at the first failure (nothing is scheduled then):

1. The targets: the ``[deploy:NAME]`` sections of ``scrapy.cfg`` as
   scrapyd-client reads them (``/etc/scrapy.cfg``, ``~/.config/scrapy.cfg``,
   ``~/.scrapy.cfg``, then the project's; a ``[deploy]`` section is the base
   of every target; ``$VARS`` are expanded; ``username``/``password`` for
   basic auth), or those of ``--config FILE`` alone. The TARGETs named, else
   all of them.
2. The job settings: ``-s NAME=VALUE``; ``REDIS_URL``, ``MONGO_URI`` and
   ``MONGO_DATABASE`` fall back to this shell's environment, as the workers'
   do. A crawl spread over machines needs a shared Redis: no ``REDIS_URL``
   is an error (each job would crawl alone on an embedded Redis).
3. ``scrapy status`` with those settings, from this checkout: the crawl's
   Redis must be reachable from here to seed it, and a crawl stopped with
   ``scrapy stop`` is refused (its jobs would exit at once; ``scrapy stop
   --clear`` first).
4. Unless ``--no-deploy``: the egg, built once with ``scrapyd-deploy
   --build-egg`` (scrapyd-client) in a copy of the project (the checkout stays
   clean), or ``--egg FILE``; uploaded to every target (``addversion.json``)
   as version ``--version`` (default: the Unix time, so scrapyd's newest is
   the last deployed).
5. Seeds, once, for the whole cluster: ``scrapy seed`` (``--seeds`` or
   ``--seeds-file``, a file on this machine), before any job starts, so that
   no job finds an empty crawl and closes.
6. ``--jobs`` (1) jobs of the ``site`` spider on every target
   (``schedule.json``): each gets every setting as ``setting=NAME=VALUE`` and
   every ``-a`` as a spider argument, exactly as ``scrapy crawl site -s ...
   -a ...`` would. With ``--env-on-workers``, ``REDIS_URL``, ``MONGO_URI``
   and ``MONGO_DATABASE`` are used here only: the jobs read theirs from
   scrapyd's environment (its systemd ``EnvironmentFile``), so that no
   password shows in ``listjobs.json``, scrapyd's log or ``ps``.

Prints one line per upload and job, or with ``--json`` one object:
``{"version", "targets": {name: url}, "seeded": {...} | null, "jobs":
[{"target", "url", "jobid"}]}``. Exit status 1 on any failure, with one
line saying which target and what it answered.

Only the standard library: it runs wherever the checkout does.
"""

from __future__ import annotations

import argparse
import base64
import configparser
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "crawler"
SHARED = ("REDIS_URL", "MONGO_URI", "MONGO_DATABASE")


class DeployError(Exception):
    """What went wrong, in one line."""


# -- targets --------------------------------------------------------------------------------

def config_sources() -> list[Path]:
    """Where scrapyd-client looks for ``[deploy]`` sections, later ones winning."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return [Path("/etc/scrapy.cfg"), Path(xdg) / "scrapy.cfg", Path("~/.scrapy.cfg").expanduser(),
            ROOT / "scrapy.cfg"]


def read_targets(sources: list[Path]) -> dict[str, dict[str, str]]:
    """``{name: {"url", "project", ...}}`` as scrapyd-client reads them."""
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read([str(p) for p in sources])
    base = {k: os.path.expandvars(v) for k, v in cfg.items("deploy")} if cfg.has_section("deploy") else {}
    targets = {"default": dict(base)} if "url" in base else {}
    for section in cfg.sections():
        if section.startswith("deploy:"):
            targets[section[len("deploy:"):]] = {**base, **{k: os.path.expandvars(v)
                                                            for k, v in cfg.items(section)}}
    for name, target in targets.items():
        if not target.get("url"):
            raise DeployError(f"target {name!r} has no url")
        target["url"] = target["url"].rstrip("/") + "/"
        target.setdefault("project", PROJECT)
    return targets


def select(targets: dict[str, dict[str, str]], names: list[str], sources: list[Path]) -> dict[str, dict[str, str]]:
    where = ", ".join(str(p) for p in sources if p.exists()) or "no config file found"
    unknown = [n for n in names if n not in targets]
    if unknown:
        raise DeployError(f"unknown target{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                          f"{where} name{'s' if len(targets) != 1 else ''}: {', '.join(sorted(targets)) or 'none'}")
    chosen = {n: targets[n] for n in (names or sorted(targets))}
    if not chosen:
        raise DeployError(f"no [deploy:NAME] target in {where}")
    return chosen


# -- settings -------------------------------------------------------------------------------

def pairs(items: list[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise DeployError(f"{flag} {item!r}: give NAME=VALUE")
        out[name.strip()] = value
    return out


def job_settings(given: dict[str, str], env: dict[str, str]) -> dict[str, str]:
    settings = dict(given)
    for name in SHARED:
        if name not in settings and env.get(name):
            settings[name] = env[name]
    if not settings.get("REDIS_URL"):
        raise DeployError("no REDIS_URL (-s REDIS_URL=redis://HOST:6379/0, or the environment): every job "
                          "would start an embedded Redis of its own and crawl alone")
    return settings


def _local(url: str) -> bool:
    parsed = urllib.parse.urlsplit(url.split(",", 1)[0])
    if parsed.scheme == "unix" or not parsed.hostname:
        return True
    if parsed.hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(parsed.hostname).is_loopback
    except ValueError:
        return False


def warnings_for(settings: dict[str, str], targets: dict[str, dict[str, str]]) -> list[str]:
    """A loopback Redis or MongoDB given to jobs on other machines is theirs, not ours."""
    remote = [n for n, t in targets.items() if not _local(t["url"])]
    return [f"{name} {settings[name]} is local to each machine, but targets {', '.join(remote)} are not "
            "this machine: their jobs will not share it"
            for name in ("REDIS_URL", "MONGO_URI") if remote and settings.get(name) and _local(settings[name])]


# -- the scrapy commands of this checkout ---------------------------------------------------

def scrapy(command: list[str], settings: dict[str, str]) -> dict[str, Any]:
    """``scrapy COMMAND --json -s ...`` in the checkout: its JSON output."""
    cmd = [sys.executable, "-m", "scrapy", *command, "--json"]
    for name, value in settings.items():
        cmd += ["-s", f"{name}={value}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise DeployError((proc.stderr.strip().splitlines() or [f"scrapy {command[0]} failed"])[-1])
    return dict(json.loads(proc.stdout))


def check_crawl(settings: dict[str, str]) -> dict[str, Any]:
    status = scrapy(["status"], settings)
    if status.get("stop"):
        raise DeployError(f"crawl {status['crawl']} was stopped by `scrapy stop` ({status['stop'].get('by')}): "
                          "its jobs would exit at once. `scrapy stop --clear` (same -s settings) first")
    return status


# -- the egg --------------------------------------------------------------------------------

def build_egg(out_dir: Path) -> Path:
    """The project's egg, built once with scrapyd-client in a copy of the project."""
    exe = shutil.which("scrapyd-deploy") or str(Path(sys.executable).parent / "scrapyd-deploy")
    if not Path(exe).exists():
        raise DeployError("scrapyd-deploy not found: pip install scrapyd-client (or give --egg FILE)")
    src = out_dir / "project"
    src.mkdir()
    for name in ("scrapy.cfg", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "crawler", src / "crawler", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    egg = out_dir / f"{PROJECT}.egg"
    proc = subprocess.run([exe, "--build-egg", str(egg)], cwd=src, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 or not egg.exists():
        raise DeployError(f"scrapyd-deploy --build-egg failed: {(proc.stderr or proc.stdout).strip()[-2000:]}")
    return egg


# -- scrapyd's API --------------------------------------------------------------------------

def call(target: dict[str, str], endpoint: str, fields: list[tuple[str, str]] | None = None,
         egg: bytes | None = None, timeout: float = 120) -> dict[str, Any]:
    """POST (with fields) or GET an endpoint of a scrapyd; its JSON answer, or
    DeployError naming the target and what it said."""
    url = urllib.parse.urljoin(target["url"], endpoint)
    headers = {"Accept": "application/json"}
    if target.get("username"):
        token = f"{target['username']}:{target.get('password', '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(token).decode()
    data = None
    if egg is not None:
        boundary = uuid.uuid4().hex
        parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                 for k, v in fields or []]
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="egg"; filename="project.egg"\r\n'
                     "Content-Type: application/octet-stream\r\n\r\n".encode() + egg + b"\r\n")
        data = b"".join(parts) + f"--{boundary}--\r\n".encode()
        headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
    elif fields is not None:
        data = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as exc:
        raise DeployError(f"{url}: HTTP {exc.code} {exc.read()[:300].decode('utf-8', 'replace')}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise DeployError(f"{url}: {getattr(exc, 'reason', exc)}") from None
    except ValueError:
        raise DeployError(f"{url}: not a scrapyd (no JSON answer)") from None
    if answer.get("status") != "ok":
        raise DeployError(f"{url}: {answer.get('message', answer)}")
    return dict(answer)


def upload(target: dict[str, str], egg: bytes, version: str) -> int:
    answer = call(target, "addversion.json", [("project", target["project"]), ("version", version)], egg=egg)
    if not answer.get("spiders"):
        raise DeployError(f"{target['url']}: the egg was uploaded but scrapyd finds no spider in it")
    return int(answer["spiders"])


def schedule(target: dict[str, str], spider: str, settings: dict[str, str], args: dict[str, str]) -> str:
    fields = [("project", target["project"]), ("spider", spider)]
    fields += [("setting", f"{k}={v}") for k, v in settings.items()]
    fields += list(args.items())
    return str(call(target, "schedule.json", fields)["jobid"])


# -- the command ----------------------------------------------------------------------------

def requirements() -> list[str]:
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="deploy.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("targets", nargs="*", metavar="TARGET", help="[deploy:TARGET] sections (default: all)")
    p.add_argument("--config", type=Path, help="read the targets from this file only")
    p.add_argument("--jobs", type=int, default=1, help="jobs to start on each target (0: deploy only)")
    p.add_argument("-s", dest="settings", action="append", default=[], metavar="NAME=VALUE",
                   help="a setting of every job (REDIS_URL, MONGO_URI, CRAWL_NAME ...)")
    p.add_argument("-a", dest="args", action="append", default=[], metavar="NAME=VALUE",
                   help="a spider argument of every job (scope, follow)")
    p.add_argument("--seeds", help="URL[,URL...] added once with `scrapy seed` before the jobs start")
    p.add_argument("--seeds-file", type=Path, help="a file of seeds on this machine, one URL a line")
    p.add_argument("--env-on-workers", action="store_true",
                   help="do not send REDIS_URL, MONGO_URI, MONGO_DATABASE: scrapyd's environment has them")
    p.add_argument("--spider", default="site")
    p.add_argument("--version", help="the egg's version (default: the Unix time)")
    egg = p.add_mutually_exclusive_group()
    egg.add_argument("--egg", type=Path, help="upload this egg instead of building one")
    egg.add_argument("--no-deploy", action="store_true", help="schedule on what the targets already have")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--requirements", action="store_true",
                   help="print what a worker machine installs besides scrapyd, and exit")
    opts = p.parse_args(argv)
    if opts.jobs < 0:
        p.error("--jobs must be 0 or more")
    if opts.seeds and opts.seeds_file:
        p.error("give --seeds or --seeds-file, not both")
    return opts


def run(opts: argparse.Namespace, say: Any) -> dict[str, Any]:
    sources = [opts.config] if opts.config else config_sources()
    targets = select(read_targets(sources), opts.targets, sources)
    settings = job_settings(pairs(opts.settings, "-s"), dict(os.environ))
    args = pairs(opts.args, "-a")
    if {"seeds", "seeds_file"} & set(args):
        raise DeployError("seed with --seeds or --seeds-file (once, for every job), not -a seeds=")
    for warning in warnings_for(settings, targets):
        say(f"warning: {warning}")
    crawl = check_crawl(settings)["crawl"]
    result: dict[str, Any] = {"version": None, "targets": {n: t["url"] for n, t in targets.items()},
                              "crawl": crawl, "seeded": None, "jobs": []}
    if not opts.no_deploy:
        version = opts.version or str(int(time.time()))
        with tempfile.TemporaryDirectory(prefix="crawler-egg-") as tmp:
            egg = (opts.egg or build_egg(Path(tmp))).read_bytes()
            for name, target in targets.items():
                spiders = upload(target, egg, version)
                say(f"{name}: deployed {target['project']} version {version} to {target['url']} "
                    f"({spiders} spider{'s' if spiders > 1 else ''})")
        result["version"] = version
    if opts.seeds or opts.seeds_file:
        # scrapy runs in the checkout: the seeds file's path must not depend on where we are.
        command = ["seed", *opts.seeds.split(",")] if opts.seeds else ["seed", "--file",
                                                                        str(opts.seeds_file.resolve())]
        seeded = scrapy(command, settings)
        for refused in seeded["refused"]:
            say(f"seed refused: {refused['url']} ({refused['reason']})")
        say(f"crawl {crawl}: seeded {seeded['added']} URLs ({seeded['seen']} already seen)")
        result["seeded"] = seeded
    sent = {k: v for k, v in settings.items() if not (opts.env_on_workers and k in SHARED)}
    for name, target in targets.items():
        for _ in range(opts.jobs):
            jobid = schedule(target, opts.spider, sent, args)
            result["jobs"].append({"target": name, "url": target["url"], "jobid": jobid})
            say(f"{name}: scheduled {opts.spider} job {jobid} ({target['url']}jobs)")
    return result


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    if opts.requirements:
        print("\n".join(requirements()))
        return 0

    def say(line: str) -> None:
        print(line, file=sys.stderr if opts.json else sys.stdout, flush=True)

    try:
        result = run(opts, say)
    except DeployError as exc:
        print(f"deploy: {exc}", file=sys.stderr)
        return 1
    if opts.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
