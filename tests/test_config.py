"""Settings and arguments: every bad value stops the start with one line
naming it and exit status 1, never a traceback and never a crawl that runs
with a required part switched off."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import redis
from scrapy.settings import Settings

from crawler.config import ConfigError, check_settings, problems
from crawler.frontier import Frontier
from tests.support import ROOT
from tests.support.crawl import run_crawl


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def crawl(tmp_path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-s", f"CRAWL_DIR={tmp_path}", "-s", "SITEMAP_ENABLED=0",
           *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


CASES = [
    (["-a", "seed=http://127.0.0.1:1/"],
     "Error: unknown spider argument -a seed; spider 'site' takes -a seeds, -a seeds_file, -a scope, -a follow, -a topic, -a allow, -a deny, -a rules, -a sitemaps, -a languages, -a order, -a render, -a sites"),
    (["-a", "seeds=http://127.0.0.1:1/", "-a", "fooo=bar"],
     "Error: unknown spider argument -a fooo; spider 'site' takes -a seeds, -a seeds_file, -a scope, -a follow, -a topic, -a allow, -a deny, -a rules, -a sitemaps, -a languages, -a order, -a render, -a sites"),
    (["-a", "seeds=http://x/", "-s", "DOWNLOAD_DELAY=abc"], "Error: bad setting: DOWNLOAD_DELAY='abc' must be a number"),
    (["-a", "seeds=http://x/", "-s", "DOWNLOAD_DELAY=-1"], "Error: bad setting: DOWNLOAD_DELAY='-1' must be at least 0"),
    (["-a", "seeds=example.com"],
     "Error: no valid seed (no scheme in URL 'example.com' (expected http:// or https://)): give -a seeds=URL[,URL...] "
     "or -a seeds_file=PATH with absolute http:// or https:// URLs (or no seed at all, to join a running crawl)"),
    (["-a", "seeds=http://x/", "-a", "scope=domain"], "Error: -a scope='domain' is not one of site, host, prefix, any"),
    (["-a", "seeds_file=/nonexistent/seeds.txt"],
     "Error: -a seeds_file=/nonexistent/seeds.txt: cannot read it ([Errno 2] No such file or directory: "
     "'/nonexistent/seeds.txt')"),
    (["-a", "seeds=http://x/", "-s", "STORE_BATCH_SIZE=0"], "Error: bad setting: STORE_BATCH_SIZE='0' must be at least 1"),
    (["-a", "seeds=http://x/", "-s", "FRONTIER_QUEUE_BY=domain"],
     "Error: bad setting: FRONTIER_QUEUE_BY='domain' must be one of site, host"),
    (["-a", "seeds=http://x/", "-s", "CLASSIFIER_THRESHOLD=2"],
     "Error: bad setting: CLASSIFIER_THRESHOLD='2' must be at most 1"),
    (["-a", "seeds=http://x/", "-s", "SIMHASH_MAX_DISTANCE=65", "-s", "TRAP_MAX_SHAPE_RUN=-1"],
     "Error: bad settings: TRAP_MAX_SHAPE_RUN='-1' must be at least 0; SIMHASH_MAX_DISTANCE='65' must be at most 64"),
    (["-a", "seeds=http://x/", "-s", "NEARDUP_SKETCH_BITS=500", "-s", "NEARDUP_RESEMBLANCE=0"],
     "Error: bad settings: NEARDUP_RESEMBLANCE='0' must be above 0; NEARDUP_SKETCH_BITS='500' must be one of "
     "512, 1024, 2048, 4096"),
    (["-a", "seeds=http://x/", "-s", "FRONTIER_HEARTBEAT_INTERVAL=90"],
     "Error: bad setting: FRONTIER_HEARTBEAT_INTERVAL='90' must be below FRONTIER_LEASE_TIMEOUT=60.0"),
    (["-a", "seeds=http://x/", "-s", "ROBOTSTXT_OBEY=maybe"],
     "Error: bad setting: ROBOTSTXT_OBEY='maybe' must be True or False (1 or 0)"),
    (["-a", "seeds=http://x/", "-s", "NETWORK_ALLOWLIST=10.0.0.0/33"],
     "Error: bad setting: NETWORK_ALLOWLIST='10.0.0.0/33' entry '10.0.0.0/33' is not an IP address or network (CIDR)"),
    (["-a", "seeds=http://x/", "-s", "NETWORK_ALLOWLST=127.0.0.0/8"],
     "Error: unknown setting NETWORK_ALLOWLST; did you mean NETWORK_ALLOWLIST?"),
    (["-a", "seeds=http://x/", "-s", "REDIS_URL=http://127.0.0.1/"],
     "Error: bad setting: REDIS_URL='http://127.0.0.1/' must be a URL starting with redis:// or rediss:// or unix://"),
    (["-a", "seeds=http://x/", "-s", "GC_THRESHOLD=0,10,10"],
     "Error: bad setting: GC_THRESHOLD='0,10,10' must be three numbers of at least 1 (0 would turn the collector off)"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("args", "line"), CASES, ids=[c[1][7:40] for c in CASES])
def test_a_bad_value_is_one_line_and_exit_1(tmp_path, args, line):
    proc = crawl(tmp_path, *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-2000:]
    # Alone: not after Scrapy's version banner (the crawler process is made
    # once the checks pass).
    assert proc.stderr.strip().splitlines() == [line]
    assert "Traceback" not in out
    assert not (tmp_path / "site.sqlite3").exists()  # nothing ran


@pytest.mark.slow
def test_unreachable_redis_and_mongodb_are_one_line(tmp_path):
    port = closed_port()
    proc = crawl(tmp_path, "-a", "seeds=http://x/", "-s", f"REDIS_URL=redis://127.0.0.1:{port}/0")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"Error: cannot reach Redis at redis://127.0.0.1:{port}/0: Error 111 connecting to 127.0.0.1:{port}. "
        "Connection refused."]
    assert "Traceback" not in proc.stdout + proc.stderr
    proc = crawl(tmp_path, "-a", "seeds=http://x/", "-s", f"MONGO_URI=mongodb://u:secret@127.0.0.1:{port}",
                 "-s", "MONGO_TIMEOUT=1")
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"Error: cannot reach MongoDB at mongodb://***@127.0.0.1:{port} within 1 s: ")
    assert "secret" not in proc.stdout + proc.stderr and "Traceback" not in proc.stdout + proc.stderr


def test_the_defaults_pass_and_every_setting_is_checked():
    from crawler import settings as defaults

    settings = Settings()
    settings.setmodule(defaults)
    assert problems(settings) == []
    ours = {name for name in vars(defaults) if name.isupper()} - {
        # Scrapy's and plumbing, not values an operator tunes.
        "BOT_NAME", "SPIDER_MODULES", "NEWSPIDER_MODULE", "COMMANDS_MODULE", "USER_AGENT", "SCHEDULER",
        "REQUEST_FINGERPRINTER_CLASS", "REMOTE_CONTROL_ENABLED", "TELNETCONSOLE_ENABLED", "SPIDER_MIDDLEWARES",
        "DOWNLOADER_MIDDLEWARES", "ITEM_PIPELINES", "EXTENSIONS", "EXTENSIONS_BASE", "FEED_EXPORT_ENCODING", "FEED_EXPORTERS", "LOG_LEVEL",
        "DOWNLOAD_HANDLERS",
        "HTTPERROR_ALLOWED_CODES", "METAREFRESH_ENABLED", "TWISTED_DNS_RESOLVER", "META_COPY_WARN_SKIP_KEYS"}
    from crawler.config import SPECS

    assert ours - set(SPECS) == set()
    settings.set("STORE_RETRY_DELAY", 60)
    with pytest.raises(ConfigError, match=r"^bad setting: STORE_RETRY_DELAY=60 must be at most "
                                          r"STORE_RETRY_MAX_DELAY=5\.0$"):
        check_settings(settings)


def test_redis_url_and_mongo_uri_come_from_the_environment(server, tmp_path, redis_url, crawl_name, mongo_uri):
    """Twelve-factor deployments export REDIS_URL; -s still wins."""
    env = {"REDIS_URL": redis_url, "MONGO_URI": mongo_uri, "MONGO_DATABASE": crawl_name}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        result = run_crawl(server, tmp_path, [f"seeds={server.url('/docs/guide/intro-to-the-crawler.html')}"], {"CRAWL_NAME": crawl_name})
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert result.returncode == 0, result.log[-3000:]
    client = redis.Redis.from_url(redis_url)
    assert Frontier(client, crawl_name).views.stats()["done"] == 1  # an information page: links not followed
    client.close()
    assert f"Storing pages in MongoDB at {mongo_uri}, database {crawl_name}" in result.log
    assert not (tmp_path / "redis").exists()  # no embedded Redis was started
    assert not (tmp_path / f"{crawl_name}.sqlite3").exists()


def test_a_worker_with_another_shard_count_stops_with_one_line(tmp_path, redis_url, crawl_name):
    from tests.support import ROOT
    from tests.support.crawl import crawl_cmd

    settings = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name}
    client = redis.Redis.from_url(redis_url)
    Frontier(client, crawl_name, shards=16).check_layout()
    proc = subprocess.run(crawl_cmd(["seeds=http://127.0.0.1:9/"], {**settings, "FRONTIER_SHARDS": 4}, tmp_path),
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        f"Error: crawl '{crawl_name}' was started with FRONTIER_SHARDS=16; this worker has FRONTIER_SHARDS=4: "
        "set it to 16 to join the crawl")


@pytest.mark.parametrize("name", ["REMOTE_CONTROL_ENABLED", "TELNETCONSOLE_ENABLED"])
def test_scrapys_code_endpoints_are_not_loaded_and_cannot_be_switched_on(name):
    from scrapy.utils.conf import build_component_list

    from crawler import settings as defaults

    settings = Settings()
    settings.setmodule(defaults)
    loaded = build_component_list(settings.getwithbase("EXTENSIONS"))
    assert not any("remote_control" in str(x) or "telnet" in str(x) for x in loaded)
    settings.set(name, True)
    with pytest.raises(ConfigError, match=rf"^bad setting: {name}=True must stay False: Scrapy's endpoint "):
        check_settings(settings)
