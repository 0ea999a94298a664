#!/usr/bin/env python3
"""Deploy the crawler to scrapyd daemons and start a crawl there.

    python deploy/deploy.py [TARGET ...] [--target URL ...] [--targets-file FILE] [--jobs N]
        [-s NAME=VALUE ...] [-a NAME=VALUE ...] [--seeds URL,... | --seeds-file PATH]
        [--version V] [--egg FILE | --no-deploy] [--env-on-workers] [--json]
    python deploy/deploy.py --requirements      # what a worker machine installs besides scrapyd

In this order, stopping at the first failure (nothing is scheduled then):

1. The targets. The repository names none (its ``scrapy.cfg`` holds the
   project's name only): they are the user's, never a tracked file's.
   ``--target URL`` (repeatable) is one scrapyd, named by its host and
   port, with credentials from the URL (``http://USER:PASSWORD@HOST:6800/``)
   or the ``[deploy]`` section. ``[deploy:NAME]`` sections are read where
   scrapyd-client reads them, so that ``scrapyd-deploy NAME`` finds the same
   ones (``/etc/scrapy.cfg``, ``$XDG_CONFIG_HOME/scrapy.cfg``, ``~/.scrapy.cfg``,
   then the project's ``scrapy.cfg``; a ``[deploy]`` section is the base of
   every target; ``$VARS`` are expanded; ``username``/``password`` for basic
   auth), or from ``--targets-file FILE`` alone. The TARGETs named and the
   ``--target`` URLs; with neither, every ``[deploy:NAME]``. None at all is
   an error saying how to add one: never a default.
2. The job settings: ``-s NAME=VALUE``; ``REDIS_URL``, ``MONGO_URI`` and
   ``MONGO_DATABASE`` fall back to this shell's environment, as the workers'
   do. A crawl spread over machines needs a shared Redis: no ``REDIS_URL``
   is an error (each job would crawl alone on an embedded Redis). With
   ``--jobs 0`` and no seeds (new code for the machines, no crawl touched)
   neither this step nor the next is taken.
3. ``scrapy status`` with those settings, from this checkout: the crawl's
   Redis must be reachable from here to seed it, a crawl stopped with
   ``scrapy stop`` is refused (its jobs would exit at once; ``scrapy stop
   --clear`` first), and so is a crawl Redis does not hold, unless this run
   seeds it (``scrapy seed --new``).
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "crawler"
SHARED = ("REDIS_URL", "MONGO_URI", "MONGO_DATABASE")


class DeployError(Exception):
    """What went wrong, in one line."""


# -- targets --------------------------------------------------------------------------------

def config_sources() -> list[Path]:
    """Where scrapyd-client looks for ``[deploy]`` sections, later ones winning
    (scrapy.utils.conf.get_sources, with this checkout's scrapy.cfg as the
    closest: it gives the project's name, and no target)."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return [Path("/etc/scrapy.cfg"), Path(xdg) / "scrapy.cfg", Path("~/.scrapy.cfg").expanduser(),
            ROOT / "scrapy.cfg"]


def read_config(sources: list[Path]) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """The ``[deploy]`` base and ``{name: {"url", "project", ...}}``, as
    scrapyd-client reads them."""
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
    return base, targets


def read_targets(sources: list[Path]) -> dict[str, dict[str, str]]:
    return read_config(sources)[1]


def url_target(url: str, base: dict[str, str]) -> tuple[str, dict[str, str]]:
    """``--target URL``: its name (host:port) and target. The URL's user and
    password, if any, win over the ``[deploy]`` section's."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DeployError(f"--target {url!r}: give http://HOST:PORT/ (a scrapyd's address)")
    netloc = parts.netloc.rpartition("@")[2]
    target = {k: v for k, v in base.items() if k != "url"}
    if parts.username is not None:
        target["username"] = urllib.parse.unquote(parts.username)
        target["password"] = urllib.parse.unquote(parts.password or "")
    target["url"] = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/") + "/", "", ""))
    target.setdefault("project", PROJECT)
    return netloc, target


def no_target(config: Path | None) -> str:
    where = (f"no [deploy:NAME] target in {config}" if config else
             "no scrapyd target (the repository names none)")
    return (f"{where}: give --target http://HOST:6800/, or add a [deploy:NAME] section with its url to "
            "~/.scrapy.cfg (scrapyd-deploy NAME reads it too) or to a file given with --targets-file")


def select(targets: dict[str, dict[str, str]], names: list[str], sources: list[Path],
           urls: Sequence[str] = (), base: dict[str, str] | None = None,
           config: Path | None = None) -> dict[str, dict[str, str]]:
    """The TARGETs named and the ``--target`` URLs; with neither, every target
    found. Never none: that is an error saying how to add one."""
    where = ", ".join(str(p) for p in sources if p.exists()) or "no config file found"
    unknown = [n for n in names if n not in targets]
    if unknown:
        raise DeployError(f"unknown target{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                          f"{where} name{'s' if len(targets) != 1 else ''}: {', '.join(sorted(targets)) or 'none'}")
    chosen = {n: targets[n] for n in (names or ([] if urls else sorted(targets)))}
    for url in urls:
        name, target = url_target(url, base or {})
        chosen[name] = target
    if not chosen:
        raise DeployError(no_target(config))
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


def check_crawl(settings: dict[str, str], seeding: bool, spider: str) -> dict[str, Any]:
    """``scrapy status`` of the crawl. A crawl that does not exist yet is
    refused (a typo in CRAWL_NAME would start jobs on an empty crawl) unless
    this run seeds it: then ``{"crawl", "new": True}``."""
    try:
        status = scrapy(["status"], settings)
    except DeployError as exc:
        # The operator commands refuse a crawl Redis does not hold, in this line.
        if seeding and str(exc).startswith("scrapy status: no crawl "):
            return {"crawl": settings.get("CRAWL_NAME") or spider, "new": True}
        raise
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
    p.add_argument("targets", nargs="*", metavar="TARGET",
                   help="[deploy:TARGET] sections (default: all of them, unless --target is given)")
    p.add_argument("--target", dest="urls", action="append", default=[], metavar="URL",
                   help="a scrapyd to deploy to, http://HOST:6800/ (repeatable)")
    p.add_argument("--targets-file", "--config", dest="config", type=Path, metavar="FILE",
                   help="read the [deploy:NAME] targets from this file only (default: ~/.scrapy.cfg and the "
                        "other files scrapyd-client reads)")
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
    if opts.config and not opts.config.is_file():
        raise DeployError(f"--targets-file {opts.config}: no such file")
    sources = [opts.config] if opts.config else config_sources()
    base, found = read_config(sources)
    targets = select(found, opts.targets, sources, opts.urls, base, opts.config)
    args = pairs(opts.args, "-a")
    if {"seeds", "seeds_file"} & set(args):
        raise DeployError("seed with --seeds or --seeds-file (once, for every job), not -a seeds=")
    touches_crawl = bool(opts.jobs or opts.seeds or opts.seeds_file)
    settings = pairs(opts.settings, "-s")
    checked: dict[str, Any] = {}
    crawl = None
    if touches_crawl:
        settings = job_settings(settings, dict(os.environ))
        for warning in warnings_for(settings, targets):
            say(f"warning: {warning}")
        checked = check_crawl(settings, bool(opts.seeds or opts.seeds_file), opts.spider)
        crawl = checked["crawl"]
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
        if checked.get("new"):
            command.insert(1, "--new")  # the crawl starts here, on purpose
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
