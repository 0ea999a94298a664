"""What a new user meets when starting a crawl, run as a user runs it (a
``scrapy crawl`` or ``site-crawler`` subprocess): a setting that cannot work
on this machine, or seeds the network policy refuses, are one line on stderr
and exit status 1 before the crawl is created (no crawl left for ``scrapy
status`` to list); a crawl without WARC says nothing of it; the installed
``site-crawler`` runs the README's quick start and every command from a
directory that is no checkout."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import redis

from crawler.operations.ops import crawl_names
from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import crawl_cmd, run_crawl

pytestmark = pytest.mark.slow


def start(args: list[str], settings: dict[str, object], crawl_dir: Path) -> subprocess.CompletedProcess[str]:
    cmd = crawl_cmd(args, settings, crawl_dir)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def registered(redis_url: str) -> list[str]:
    client = redis.Redis.from_url(redis_url)
    try:
        return crawl_names(client)
    finally:
        client.close()


def refused_start(proc: subprocess.CompletedProcess[str], line: str, redis_url: str, crawl_name: str) -> None:
    """Exit 1, ``line`` alone on stderr, nothing on stdout, no crawl recorded."""
    assert proc.returncode == 1, (proc.stdout + proc.stderr)[-3000:]
    assert proc.stderr.splitlines() == [line], proc.stderr[-3000:]
    assert proc.stdout == ""
    assert crawl_name not in registered(redis_url)


@pytest.fixture
def a_file(tmp_path: Path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a directory\n")
    return path


def test_a_warc_dir_that_is_a_file_is_refused_before_the_crawl_is_created(server, tmp_path, a_file, redis_url,
                                                                          crawl_name):
    settings = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name, "WARC_DIR": a_file}
    mark = server.mark()
    proc = start([f"seeds={server.url()}"], settings, tmp_path / "crawl")
    refused_start(proc, f"Error: WARC_DIR='{a_file}' is a file, not a directory", redis_url, crawl_name)
    proc = start([f"seeds={server.url()}"], {**settings, "WARC_DIR": a_file / "warc"}, tmp_path / "crawl")
    refused_start(proc, f"Error: WARC_DIR='{a_file / 'warc'}' cannot be made: {a_file} is a file, not a directory",
                  redis_url, crawl_name)
    assert server.requests(mark) == []
    assert not (tmp_path / "crawl").exists()  # nothing made: no store, no embedded Redis


@pytest.mark.parametrize("case", ["crawl_dir", "store_path", "log_file", "render", "prometheus_taken",
                                  "prometheus_processes"])
def test_a_setting_that_cannot_work_here_is_one_line_and_no_crawl(server, tmp_path, a_file, redis_url, crawl_name,
                                                                 case):
    settings: dict[str, object] = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name}
    args = [f"seeds={server.url()}"]
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(1)
    port = listening.getsockname()[1]
    if case == "crawl_dir":
        crawl_dir = a_file
        line = f"Error: CRAWL_DIR='{a_file}' is a file, not a directory"
    else:
        crawl_dir = tmp_path / "crawl"
    if case == "store_path":
        settings["STORE_PATH"] = a_file / "site.sqlite3"
        line = (f"Error: STORE_PATH='{a_file / 'site.sqlite3'}' cannot be written: its directory {a_file} is a "
                "file, not a directory")
    elif case == "log_file":  # Scrapy's: a traceback as its log handler opened it
        settings["LOG_FILE"] = tmp_path / "no-such-dir" / "crawl.log"
        line = (f"Error: LOG_FILE='{tmp_path / 'no-such-dir' / 'crawl.log'}' cannot be written: its directory "
                f"{tmp_path / 'no-such-dir'} does not exist")
    elif case == "render":
        args.append("render=always")
        settings["RENDER_BROWSER"] = str(tmp_path / "no-such-chromium")
        line = f"Error: RENDER_BROWSER='{tmp_path / 'no-such-chromium'}' is not an executable"
    elif case == "prometheus_taken":
        settings["PROMETHEUS_PORT"] = port
        line = f"Error: PROMETHEUS_PORT={port}: cannot listen on 127.0.0.1:{port} (in use); give a free port"
    elif case == "prometheus_processes":
        settings.update({"PROMETHEUS_PORT": 9410, "CRAWL_PROCESSES": 2})
        line = ("Error: PROMETHEUS_PORT=9410 with CRAWL_PROCESSES=2: each worker needs a port of its own; start the "
                "workers one by one, each with its own -s PROMETHEUS_PORT, or leave PROMETHEUS_PORT unset")
    mark = server.mark()
    try:
        proc = start(args, settings, crawl_dir)
    finally:
        listening.close()
    refused_start(proc, line, redis_url, crawl_name)
    assert server.requests(mark) == []


def test_a_crawl_whose_every_seed_the_network_policy_refuses_says_which_option_allows_it(server, tmp_path,
                                                                                         redis_url, crawl_name):
    settings = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name, "NETWORK_ALLOWLIST": ""}
    mark = server.mark()
    seed = server.url("/")
    proc = start([f"seeds={seed}"], settings, tmp_path)
    refused_start(proc, f"Error: nothing to crawl: seed {seed} is refused: 127.0.0.1 (loopback); allow it with "
                        "-s NETWORK_ALLOWLIST=127.0.0.0/8", redis_url, crawl_name)
    named = seed.replace("127.0.0.1", "localhost")
    proc = start([f"seeds={named},http://10.1.2.3/,http://[::1]:1/"], settings, tmp_path)
    refused_start(proc, "Error: nothing to crawl: every seed is refused by the network policy (3 seeds; localhost "
                        "resolves to 127.0.0.1 (loopback)); allow them with "
                        "-s NETWORK_ALLOWLIST=10.0.0.0/8,127.0.0.0/8,::1/128", redis_url, crawl_name)
    assert server.requests(mark) == []


def test_seeds_the_network_policy_refuses_among_others_are_named_and_the_rest_crawled(server, tmp_path):
    """The refused seed is one line, first on stderr, with the option to
    allow it; the other seed's site is crawled and the run exits 0."""
    refused = server.url("/", host="127.0.0.1")
    allowed = server.url("/", host="127.0.0.2")
    result = run_crawl(server, tmp_path, [f"seeds={refused},{allowed}"], {"NETWORK_ALLOWLIST": "127.0.0.2/32"})
    assert result.returncode == 0, result.log[-3000:]
    assert result.log.splitlines()[0] == (f"seed {refused} is refused: 127.0.0.1 (loopback); allow it with "
                                          "-s NETWORK_ALLOWLIST=127.0.0.0/8")
    assert Counter(zip(result.hosts, result.fetched)) == Counter(
        [("127.0.0.2", "/robots.txt"), ("127.0.0.2", "/"), ("127.0.0.2", "/partner-article.html")])
    with SQLiteStore(result.store_path) as store:
        page = store.get_page(refused)
    assert (page["state"], page["error"]) == (
        "E", "AddressRefused: refused 127.0.0.1 (loopback) for host 127.0.0.1; allow with NETWORK_ALLOWLIST")


def test_a_crawl_without_warc_says_nothing_of_it_and_names_where_its_redis_is(server, tmp_path):
    """No WARNING in the log of a plain crawl (WARC off said two), and the
    embedded Redis named by its data directory as well as its socket."""
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/', host='127.0.0.2')}"])
    assert result.returncode == 0, result.log[-3000:]
    assert [line for line in result.log.splitlines() if " WARNING: " in line or "WARC" in line] == []
    data = (tmp_path / "redis").resolve()
    assert re.search(rf"INFO: Frontier site on the embedded Redis of {re.escape(str(data))} "
                     r"\(socket /\S+/redis\.socket\) \(16 shards\)", result.log), result.log[-3000:]


def quick_start(readme: str) -> list[str]:
    """The README's quick-start crawl command, as words."""
    block = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    commands = [part.strip() for line in lines for part in line.split("&&") if "crawl site" in part]
    assert len(commands) == 1, block
    return commands[0].split()


def test_the_installed_site_crawler_runs_the_quick_start_and_every_command_from_any_directory(server, tmp_path):
    """From a directory with no scrapy.cfg above it, the README's quick
    start (with the test site's seed) crawls, keeping its files in
    ./.scrapy/crawl there, and the operator commands find that crawl."""
    exe = shutil.which("site-crawler", path=str(Path(sys.executable).parent))
    assert exe is not None, "site-crawler is not installed beside this Python (pip install -e .)"
    work = tmp_path / "anywhere"
    work.mkdir()
    assert not any((d / "scrapy.cfg").exists() for d in (work, *work.parents))
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "SCRAPY_SETTINGS_MODULE")}
    env["PATH"] = f"{Path(exe).parent}{os.pathsep}{env.get('PATH', '')}"

    def run(*words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(words), cwd=work, env=env, capture_output=True, text=True, timeout=120)

    words = quick_start((ROOT / "README.md").read_text(encoding="utf-8"))  # as written, seed aside
    seed = server.url("/", host="127.0.0.2")
    words = [re.sub(r"^seeds=\S+", f"seeds={seed}", w) for w in words]
    mark = server.mark()
    crawl = run(*words, "-s", "NETWORK_ALLOWLIST=127.0.0.0/8", "-s", "DOWNLOAD_DELAY=0", "-s", "SITEMAP_ENABLED=0",
                "-s", "LOG_LEVEL=WARNING")
    assert crawl.returncode == 0, crawl.stderr[-3000:]
    assert Counter(str(r["path"]) for r in server.requests(mark)) == Counter(
        ["/robots.txt", "/", "/partner-article.html"])
    assert (work / ".scrapy" / "crawl" / "site.sqlite3").is_file()
    assert (work / ".scrapy" / "crawl" / "redis").is_dir()

    status = run("site-crawler", "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["totals"]["pages"] == 2
    export = run("site-crawler", "export", "-o", "pages.jsonl")
    assert (export.returncode, export.stdout.strip()) == (0, "wrote pages.jsonl: 2 pages"), export.stderr
    assert sorted(json.loads(line)["url"] for line in (work / "pages.jsonl").read_text().splitlines()) == [
        seed, server.url("/partner-article.html", host="127.0.0.2")]
    graph = run("site-crawler", "graph", "-o", "links.csv")
    assert graph.returncode == 0 and (work / "links.csv").is_file(), graph.stderr
    mark = server.mark()
    recrawl = run("site-crawler", "crawl", "recrawl", "-a", "all=1", "-s", "NETWORK_ALLOWLIST=127.0.0.0/8",
                  "-s", "DOWNLOAD_DELAY=0", "-s", "LOG_LEVEL=WARNING")
    assert recrawl.returncode == 0, recrawl.stderr[-3000:]
    assert Counter(str(r["path"]) for r in server.requests(mark) if r["path"] != "/robots.txt") == Counter(
        ["/", "/partner-article.html"])
    seeded = run("site-crawler", "seed", server.url("/nowhere.html", host="127.0.0.2"))
    assert (seeded.returncode, seeded.stdout.strip()) == (0, "crawl site: added 1, already seen 0, refused 0")
    for words in (["stop"], ["stop", "--clear"], ["reset", "--yes"]):
        done = run("site-crawler", *words)
        assert done.returncode == 0, (words, done.stderr)
    assert sorted(p.name for p in work.iterdir()) == [".scrapy", "links.csv", "pages.jsonl"]
