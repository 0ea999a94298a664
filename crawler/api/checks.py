"""What a job read back from Redis may give its worker (``check_job``),
and the helpers of ``crawler/api/runner.py``: nothing read from Redis
chooses code, a proxy or a download limit."""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

from crawler.api.jobs import Job

__all__ = ["FOLLOW_STEP", "HTML_STEP", "JobRefused", "SERVER_SECRETS", "alive", "check_job", "http_url",
           "passed_settings"]

SERVER_SECRETS = ("CRAWLER_API_KEYS", "CRAWLER_WEBHOOK_SECRET")
# What a job read back from Redis may give its worker (Runner.checked).
SPIDERS = ("site", "recrawl")
CRAWL_NAME = re.compile(r"api-(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|track-[0-9a-f]{24})")
ARGS = {"follow": ("index", "all"), "scope": ("prefix", "host", "site", "any"), "sitemaps": ("0", "1")}
SETTINGS: dict[str, type] = {"FRONTIER_MAX_PAGES_PER_SITE": int, "CLOSESPIDER_PAGECOUNT": int, "DEPTH_LIMIT": int,
                             "DOWNLOAD_DELAY": float, "CONCURRENT_REQUESTS_PER_DOMAIN": int, "CRAWL_PROCESSES": int,
                             "RECRAWL_GONE_AFTER": int}


# Counts a job may set, within what the server allows (API_CRAWL_LIMIT).
BOUNDS: dict[str, Any] = {
    "CLOSESPIDER_PAGECOUNT": lambda s: s.getint("API_CRAWL_LIMIT"),
    "FRONTIER_MAX_PAGES_PER_SITE": lambda s: s.getint("API_CRAWL_LIMIT") + 50,
    "DEPTH_LIMIT": lambda s: 1000,
}


class JobRefused(ValueError):
    """A job record whose arguments or settings are not what the API makes."""


def http_url(url: object) -> bool:
    return isinstance(url, str) and url.startswith(("http://", "https://")) and not any(c in url for c in "\n\r\0")

FOLLOW_STEP = "crawler.chain.follow.Follow"
HTML_STEP = "crawler.api.steps.KeepHtml"
# The server's own settings, not passed to its jobs' workers.
NOT_PASSED = ("CRAWL_NAME", "LOG_FILE", "MONGO_DATABASE", "STORE_PATH", "CLOSESPIDER_PAGECOUNT")


def passed_settings(settings: Any) -> dict[str, str]:
    """The settings given to the server with ``-s``, for its workers."""
    from scrapy.settings import SETTINGS_PRIORITIES

    out = {}
    for name in settings.attributes:
        if settings.getpriority(name) != SETTINGS_PRIORITIES["cmdline"]:
            continue
        if name.startswith(("API_", "WEBHOOK_")) or name in NOT_PASSED:
            continue
        value = settings.get(name)
        out[name] = value if isinstance(value, str) else json.dumps(value)
    return out



def check_job(job: Job, server: Any, directory: Path) -> tuple[dict[str, str], dict[str, str]]:
    """The job's arguments and settings for its worker, each checked: a
    job is read back from Redis, and nothing read there chooses code, a
    proxy or a download limit. Only these names pass, with values of
    their kind; the pace may only be slower and the concurrency lower
    than the server's (``JobRefused`` otherwise)."""
    if job.spider not in SPIDERS or not CRAWL_NAME.fullmatch(job.crawl):
        raise JobRefused(f"spider {job.spider!r}, crawl {job.crawl!r}")
    args: dict[str, str] = {}
    for name, value in job.args.items():
        if name == "rules" and value == str(directory / "rules.json"):
            args[name] = value
        elif name in ARGS and str(value) in ARGS[name]:
            args[name] = str(value)
        else:
            raise JobRefused(f"argument {name}={str(value)[:100]!r}")
    settings: dict[str, str] = {}
    for name, value in job.settings.items():
        if name == "WEBHOOK_EVENTS" and value in ("pages", "batch"):
            settings[name] = str(value)
            continue
        kind = SETTINGS.get(name)
        try:
            number = kind(value) if kind is not None and not isinstance(value, (bool, str)) else None
        except (TypeError, ValueError, OverflowError):
            number = None
        if number is None or not math.isfinite(number) or number < 0 or (
                name == "CRAWL_PROCESSES" and number > server.getint("API_CRAWL_PROCESSES")):
            raise JobRefused(f"setting {name}={str(value)[:100]!r}")
        bound = BOUNDS.get(name)
        if bound is not None:
            most = bound(server)
            if not 1 <= number <= most:
                raise JobRefused(f"setting {name}={number!r} (1 to {most})")
        if name == "DOWNLOAD_DELAY":
            number = max(number, server.getfloat("DOWNLOAD_DELAY"))
        elif name == "CONCURRENT_REQUESTS_PER_DOMAIN":
            number = max(1, min(number, server.getint("CONCURRENT_REQUESTS_PER_DOMAIN")))
        settings[name] = str(number)
    if not isinstance(job.limit, int) or isinstance(job.limit, bool) or not 0 <= job.limit <= server.getint(
            "API_CRAWL_LIMIT"):
        raise JobRefused(f"limit {job.limit!r}")
    return args, settings


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of this process is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True
