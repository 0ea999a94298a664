"""Modules moved into capability packages (issue 49): their old paths still
import for one release, each with a DeprecationWarning naming the new one."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from crawler.moved import MOVED


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_every_old_path_is_the_new_module(old, new):
    assert importlib.import_module(new).__name__ == new


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code],
                          capture_output=True, text=True, timeout=60)


def test_a_class_path_of_the_old_layout_in_settings_loads_with_a_warning():
    ok = subprocess.run([sys.executable, "-W", "always", "-c",
                         "from scrapy.utils.misc import load_object\n"
                         "c = load_object('crawler.netguard.NetworkGuardMiddleware')\n"
                         "print(c.__module__, c.__name__)"], capture_output=True, text=True, timeout=60)
    assert ok.stdout.strip() == "crawler.network.guard NetworkGuardMiddleware", ok.stderr
    assert "DeprecationWarning: crawler.netguard moved to crawler.network.guard; the old path goes in the next " \
           "release" in ok.stderr
    failed = run("import crawler.netguard")
    assert failed.returncode == 1 and "crawler.netguard moved to crawler.network.guard" in failed.stderr


def test_a_name_of_a_module_that_is_now_a_package_still_resolves_with_a_warning():
    failed = run("from crawler.recrawl import first_visit")
    assert failed.returncode == 1
    assert "crawler.recrawl.first_visit moved to crawler.recrawl.merge.first_visit" in failed.stderr
    ok = run("from crawler.recrawl import plan, due\nimport crawler.sitemaps.parse\nprint(plan.__name__, due.__name__)")
    assert ok.stdout.strip() == "crawler.recrawl.plan crawler.recrawl.due", ok.stderr  # submodules: no warning


def test_new_code_imports_no_old_path():
    ok = run("import crawler.spiders.site, crawler.spiders.recrawl, crawler.pipelines, crawler.middlewares, "
             "crawler.operations.ops, crawler.commands.crawl, crawler.frontier.scheduler")
    assert ok.returncode == 0, ok.stderr[-2000:]
