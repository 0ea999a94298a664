"""Operator commands and ``-s`` names as a new user types them: a crawl
that does not exist, or a setting misspelled, is one line and exit status 1,
and nothing is created (issue 35, items 2 and 3)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from scrapy.settings import Settings

from crawler.config import ConfigError, check_settings, misspelled
from crawler.frontier import Frontier
from tests.support import ROOT

NO_CRAWL = "; `scrapy seed --new URL` starts a crawl without crawling"


def scrapy(*args: str, cwd: Path = ROOT, program: str = "scrapy") -> subprocess.CompletedProcess[str]:
    if program == "scrapy":
        cmd = [sys.executable, "-m", "scrapy", *args]
    else:
        cmd = [str(Path(sys.executable).parent / program), *args]
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert proc.stdout == "", proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


# -- misspelled settings (fast) --------------------------------------------------------------

def _given(**values: object) -> Settings:
    from crawler import settings as defaults

    settings = Settings()
    settings.setmodule(defaults, priority="project")
    for name, value in values.items():
        settings.set(name, value, priority="cmdline")
    return settings


def test_a_misspelled_setting_names_the_likely_one():
    settings = _given(NETWORK_ALLOWLST="127.0.0.0/8", DOWNLOAD_DELAY=0.5)
    with pytest.raises(ConfigError) as exc:
        check_settings(settings)
    assert str(exc.value) == "unknown setting NETWORK_ALLOWLST; did you mean NETWORK_ALLOWLIST?"
    with pytest.raises(ConfigError) as exc:
        check_settings(_given(DOWNLOAD_DELAI=1, CRAWL_NAM="x"))
    assert str(exc.value) == ("unknown setting CRAWL_NAM; did you mean CRAWL_NAME?; "
                              "unknown setting DOWNLOAD_DELAI; did you mean DOWNLOAD_DELAY?")


def test_settings_of_scrapy_scrapy_redis_and_ones_own_pass():
    # Scrapy's, scrapy-redis's, this crawler's, and a name close to none
    # (a component of the user's own may read it: a warning at start).
    settings = _given(AUTOTHROTTLE_ENABLED=True, SCHEDULER_IDLE_BEFORE_CLOSE=3, NETWORK_ALLOWLIST="10.0.0.0/8",
                      MYCOMPANY_AUDIT_URL="x")
    check_settings(settings)
    assert misspelled(settings) == [("MYCOMPANY_AUDIT_URL", None)]
    # A name set below the command line (a spider's custom_settings, an
    # add-on) is known: one a letter away from it is a likely typo of it.
    settings.set("MYCOMPANY_AUDIT_URLS", 1, priority="spider")
    assert misspelled(settings) == [("MYCOMPANY_AUDIT_URL", "MYCOMPANY_AUDIT_URLS")]


# -- operator commands (processes) -------------------------------------------------------------

@pytest.mark.slow
def test_a_misspelled_setting_stops_the_crawl_and_the_commands(tmp_path):
    proc = scrapy("crawl", "site", "-a", "seeds=http://127.0.0.2:1/", "-s", f"CRAWL_DIR={tmp_path}",
                  "-s", "NETWORK_ALLOWLST=127.0.0.0/8")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == \
        "Error: unknown setting NETWORK_ALLOWLST; did you mean NETWORK_ALLOWLIST?"
    assert list(tmp_path.iterdir()) == []  # nothing ran
    line = one_line(scrapy("status", "-s", f"CRAWL_DIR={tmp_path}", "-s", "CRAWL_NAM=site"))
    assert line == "scrapy status: unknown setting CRAWL_NAM; did you mean CRAWL_NAME?"


@pytest.mark.slow
def test_commands_on_a_crawl_that_does_not_exist_create_nothing(tmp_path, redis_url, crawl_name):
    client = redis.Redis.from_url(redis_url)
    real = Frontier(client, crawl_name)
    real.check_layout()  # the real crawl, as a worker leaves it
    typo = crawl_name + "e"
    settings = ["-s", f"REDIS_URL={redis_url}", "-s", f"CRAWL_NAME={typo}", "-s", f"CRAWL_DIR={tmp_path}"]
    for command in (["stop"], ["stop", "--now"], ["status"], ["status", "--json"], ["reset", "--yes"],
                    ["seed", "http://127.0.0.2:1/a"]):
        line = one_line(scrapy(*command, *settings))
        head = f"scrapy {command[0]}: no crawl {typo!r} at {redis_url}; the crawls there: "
        assert line.startswith(head) and line.endswith(f" (give -s CRAWL_NAME=NAME){NO_CRAWL}"), line
        assert crawl_name in line[len(head):].split(" (give")[0].split(", ")
    assert Frontier(client, typo).views.all_keys() == []  # nothing created
    assert real.control.stop_requested() is None  # the real crawl was not stopped
    # Seeding a new crawl on purpose.
    proc = scrapy("seed", "--new", "http://127.0.0.2:1/a", *settings)
    assert (proc.returncode, proc.stdout) == (0, f"crawl {typo}: added 1, already seen 0, refused 0\n"), proc.stderr
    assert Frontier(client, typo).meta.recorded_shards() == real.keys.shards
    proc = scrapy("status", "--json", *settings)
    assert proc.returncode == 0, proc.stderr
    Frontier(client, typo).views.delete_all()


@pytest.mark.slow
def test_commands_in_an_empty_directory_create_nothing(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    line = one_line(scrapy("status", cwd=empty, program="site-crawler"))
    assert one_line(scrapy("status", "--watch", cwd=empty, program="site-crawler")) == line  # not a traceback
    assert line == ("scrapy status: no crawl in .scrapy/crawl (CRAWL_DIR): give the crawl's -s CRAWL_DIR= or "
                    "-s REDIS_URL=, or start one with `scrapy crawl site -a seeds=URL`")
    assert list(empty.iterdir()) == []
    gone = tmp_path / "nothing-here"
    for command in (["stop"], ["seed", "http://127.0.0.2:1/"], ["reset", "--yes"]):
        line = one_line(scrapy(*command, "-s", f"CRAWL_DIR={gone}"))
        assert line.startswith(f"scrapy {command[0]}: no crawl in {gone} (CRAWL_DIR)"), line
    assert not gone.exists()
