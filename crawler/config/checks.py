"""What a good value of each setting is: the check of every setting the
crawler reads (``SPECS``: the setting's name to a function that returns
the complaint, or None for a good value), the pairs whose first may not
exceed the second (``ORDERED``), and the kinds of check they are built
from (numbers in a range, choices, URLs, names, paths ...).
``crawler/config.py`` applies them at start, with the checks that relate
settings to each other; ``crawler.config`` re-exports ``SPECS``,
``ORDERED`` and ``product_token``.

A setting added to ``crawler/settings.py`` gets its line in ``SPECS``
(``tests/test_config.py`` fails until it has one).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

__all__ = ["ORDERED", "RENDER_TYPES", "SPECS", "Check", "product_token"]


Check = Callable[[Any], str | None]  # the complaint, or None when the value is fine


def _number(kind: type, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False, optional: bool = False) -> Check:
    def check(value: Any) -> str | None:
        if value is None or value == "":
            return None if optional else "must be set"
        if isinstance(value, bool):
            return f"must be {'an integer' if kind is int else 'a number'}"
        try:
            number = kind(value)
        except (TypeError, ValueError):
            return f"must be {'an integer' if kind is int else 'a number'}"
        if kind is float and not math.isfinite(number):
            return "must be a finite number"
        if kind is int and isinstance(value, float) and value != number:
            return "must be an integer"
        if lo is not None and (number < lo or (lo_open and number == lo)):
            return f"must be {'above' if lo_open else 'at least'} {lo:g}"
        if hi is not None and number > hi:
            return f"must be at most {hi:g}"
        return None
    return check


def _bool(value: Any) -> str | None:
    if isinstance(value, bool) or value in (0, 1, "0", "1", "True", "False", "true", "false"):
        return None
    return "must be True or False (1 or 0)"


def _off(value: Any) -> str | None:
    """Scrapy's remote control and telnet console: not loaded here."""
    if value in (False, 0, "0", "False", "false", None, ""):
        return None
    return ("must stay False: Scrapy's endpoint that runs Python code sent to it is not loaded in this "
            "project (scrapy status, scrapy stop and scrapy console control a crawl)")


def _choice(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        return None if str(value) in choices else f"must be one of {', '.join(choices)}"
    return check


def _url(*schemes: str, optional: bool = True) -> Check:
    def check(value: Any) -> str | None:
        if value in (None, ""):
            return None if optional else "must be set"
        if not isinstance(value, str) or not value.lower().startswith(tuple(s + "://" for s in schemes)):
            return f"must be a URL starting with {' or '.join(s + '://' for s in schemes)}"
        return None
    return check


def _redis_url(value: Any) -> str | None:
    """A single Redis (redis://, rediss://, unix://) or a Redis Cluster's
    startup nodes (redis+cluster://host:port[,host:port...])."""
    if isinstance(value, str) and value.partition("://")[0].lower() in ("redis+cluster", "rediss+cluster"):
        from crawler.redis.cluster import parse_cluster_url

        try:
            parse_cluster_url(value)
        except ValueError as exc:
            return str(exc)
        return None
    return _url("redis", "rediss", "unix")(value)


def _name(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", value) or value in (".", ".."):
        return "must be a plain name of letters, digits, '_', '.' or '-' (at most 64)"
    return None


def _path(value: Any) -> str | None:
    if value in (None, ""):
        return None
    return None if isinstance(value, str) and "\0" not in value else "must be a path"


def _dict(value: Any) -> str | None:
    if value in (None, "") or isinstance(value, dict):
        return None
    if isinstance(value, str):
        import json

        try:
            return None if isinstance(json.loads(value), dict) else "must be a JSON object"
        except ValueError:
            return "must be a JSON object"
    return "must be a dict"


def _steps(value: Any) -> str | None:
    """PAGE_STEPS: class paths to their place in the chain (None: taken out);
    each path is loaded when the chain is built (crawler/chain/)."""
    if value in (None, ""):
        return None
    if isinstance(value, str):
        import json

        try:
            value = json.loads(value)
        except ValueError:
            return "must be a JSON object of class paths to numbers"
    if not isinstance(value, dict):
        return "must be a dict of class paths to numbers"
    for path, place in value.items():
        if not isinstance(path, str) or "." not in path:
            return f"holds {path!r}, not a class path (module.Class)"
        if place is not None and (isinstance(place, bool) or not isinstance(place, (int, float))):
            return f"places {path} at {place!r}: give a number, or None to take it out"
    return None


def _networks(value: Any) -> str | None:
    if value in (None, "", []):
        return None
    from crawler.network.policy import parse_networks

    try:
        parse_networks(value)
    except ValueError as exc:
        return str(exc).removeprefix("NETWORK_ALLOWLIST: ")
    return None


def _address(value: Any) -> str | None:
    """An IP address to bind a server to."""
    import ipaddress

    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return "must be an IP address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface)"
    return None


_PRODUCT_TOKEN = re.compile(r"[^\s/]+")


def product_token(user_agent: str) -> str:
    """The product token of a User-Agent string: its first word up to ``/``
    (``site-crawler/0.1 (+https://...)`` -> ``site-crawler``); '' if none.
    robots.txt groups are matched on it (RFC 9309)."""
    m = _PRODUCT_TOKEN.match(user_agent.strip())
    return m.group() if m else ""


def _token(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not value.strip() or product_token(value) != value.strip():
        return (f"must be a product token such as {product_token(str(value)) or 'mybot'!r}: "
                "no version, no spaces")
    return None


# Playwright's resource types (Request.resource_type); "document" (frames) and
# "script", "xhr", "fetch" are what a page's content is built from.
RENDER_TYPES = ("stylesheet", "image", "media", "font", "script", "texttrack", "xhr", "fetch", "eventsource",
                "websocket", "manifest", "other", "ping", "beacon", "document", "prefetch", "signedexchange",
                "cspviolationreport", "preflight")


def _parsed(parse: Callable[[Any], Any]) -> Check:
    """A check that parses the value: its ValueError is the complaint."""
    def check(value: Any) -> str | None:
        try:
            parse(value)
        except ValueError as exc:
            return str(exc)
        return None
    return check


def _proxy_list(value: Any) -> str | None:
    from crawler.network.proxies import parse_proxy_list

    return _parsed(parse_proxy_list)(value)


def _gc_threshold(value: Any) -> str | None:
    from crawler.operations.collector import thresholds

    return _parsed(thresholds)(value)


def _render_types(value: Any) -> str | None:
    items = [v.strip() for v in value.split(",")] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or any(not isinstance(v, str) for v in items):
        return "must be a list of resource types"
    bad = [v for v in items if v and v not in RENDER_TYPES]
    if bad:
        return f"{bad[0]!r} is not a resource type ({', '.join(RENDER_TYPES)})"
    return None


SECONDS = _number(float, 0)
POSITIVE_SECONDS = _number(float, 0, lo_open=True)
COUNT = _number(int, 0)
POSITIVE_COUNT = _number(int, 1)

# name -> check. Scrapy's own settings that the crawler relies on are here
# too: a bad DOWNLOAD_DELAY otherwise fails deep inside the engine.
SPECS: dict[str, Check] = {
    "REMOTE_CONTROL_ENABLED": _off,
    "TELNETCONSOLE_ENABLED": _off,
    # Scrapy's
    "DOWNLOAD_DELAY": SECONDS,
    "CONCURRENT_REQUESTS": POSITIVE_COUNT,
    "CONCURRENT_REQUESTS_PER_DOMAIN": POSITIVE_COUNT,
    "CONCURRENT_ITEMS": POSITIVE_COUNT,
    "DOWNLOAD_TIMEOUT": POSITIVE_SECONDS,
    "DOWNLOAD_MAXSIZE": POSITIVE_COUNT,  # 0 would lift the cap on hostile responses
    "DOWNLOAD_WARNSIZE": COUNT,
    "REDIRECT_MAX_TIMES": _number(int, 0, 50),
    "RETRY_TIMES": COUNT,
    "DEPTH_LIMIT": COUNT, "REDIS_WAIT_REPLICAS": COUNT, "REDIS_WAIT_TIMEOUT": POSITIVE_SECONDS,
    "API_KEYS_FILE": _path,
    "API_KEY_REQUESTS_PER_MINUTE": COUNT,
    "API_KEY_CRAWLS": POSITIVE_COUNT,
    "API_CRAWL_LIMIT": POSITIVE_COUNT,
    "API_CRAWL_PROCESSES": _number(int, 1, 64),
    "API_PAGE_RESULTS": _number(int, 1, 10_000),
    "API_RESULTS_TTL": POSITIVE_SECONDS,
    "API_RESTARTS": COUNT,
    "API_SCRAPE_TIMEOUT": POSITIVE_SECONDS,
    "API_MAP_PAGES": POSITIVE_COUNT,
    "CLOSESPIDER_PAGECOUNT": COUNT,
    "URLLENGTH_LIMIT": COUNT,
    "ROBOTSTXT_OBEY": _bool,
    "ROBOTSTXT_USER_AGENT": _token,
    "COOKIES_ENABLED": _bool,
    # Identity and files
    "CRAWL_NAME": _name,
    "CRAWL_DIR": _path,
    "CRAWL_PROCESSES": lambda v: None if isinstance(v, str) and v.strip().lower() == "auto"
    else (None if _number(int, 1, 256)(v) is None else "must be a number of processes from 1 to 256, or auto"),
    "STORE_PATH": _path,
    "MAIN_CONTENT": _bool,
    "STORE_SPILL_PATH": _path,
    # WARC output (crawler/warc/)
    "WARC_DIR": _path,
    "WARC_MAX_SIZE": POSITIVE_COUNT,
    "WARC_PREFIX": _name,
    # robots.txt
    "ROBOTSTXT_DOWNLOAD_TIMEOUT": POSITIVE_SECONDS,
    "ROBOTSTXT_MAX_RETRY_TIMES": COUNT,
    "ROBOTSTXT_CACHE_TTL": POSITIVE_SECONDS,
    # The frontier
    "REDIS_URL": _redis_url,
    "REDIS_PARAMS": _dict,
    # A page's chain of steps
    "PAGE_STEPS": _steps,
    "PAGE_STEPS_BASE": _steps,
    "FRONTIER_QUEUE_BY": _choice("site", "host"),
    "FRONTIER_DELAY_MARGIN": SECONDS,
    "FRONTIER_MAX_PAGES_PER_SITE": COUNT,
    "FRONTIER_MAX_CRAWL_DELAY": SECONDS,
    "FRONTIER_BACKOFF_MIN": POSITIVE_SECONDS,
    "FRONTIER_BACKOFF_MAX": POSITIVE_SECONDS,
    "ADAPTIVE_RATE": _bool,
    "BLOCKED_PAGES": _bool,
    "PROXY_LIST": _proxy_list,
    "PROXY_MAX_FAILURES": POSITIVE_COUNT,
    "PROXY_COOLDOWN": POSITIVE_SECONDS,
    "ADAPTIVE_RATE_PAUSE": POSITIVE_SECONDS,
    "ADAPTIVE_RATE_MAX_DELAY": POSITIVE_SECONDS,
    "ADAPTIVE_RATE_LATENCY": _number(float, 0),
    "FRONTIER_RETRY_BACKOFF": SECONDS,
    "FRONTIER_RETRY_BACKOFF_MAX": SECONDS,
    "FRONTIER_LEASE_TIMEOUT": POSITIVE_SECONDS,
    "FRONTIER_HEARTBEAT_INTERVAL": POSITIVE_SECONDS,
    "FRONTIER_LEASE_BATCH": _number(int, 1, 1000),
    "FRONTIER_MAX_HELD": _number(int, 0, 100_000), "FRONTIER_MAX_UNSTORED": _number(int, 0, 1_000_000),
    "FRONTIER_WAIT_FOR_SEEDS": _bool,
    "FRONTIER_JOIN_WAIT": SECONDS,
    "REVISIT_MIN_INTERVAL": POSITIVE_SECONDS,
    "REVISIT_MAX_INTERVAL": POSITIVE_SECONDS,
    "REVISIT_DEFAULT_INTERVAL": POSITIVE_SECONDS,
    "REVISIT_HISTORY": _number(int, 2, 1000),
    "REVISIT_EVIDENCE": _number(int, 2, 100_000),
    # Each sampled page costs about 3 KB of arrays while a plan is made.
    "REVISIT_SAMPLE": _number(int, 100, 50_000),
    "REVISIT_PLAN_INTERVAL": _number(float, 1),
    "REVISIT_BUDGET": _number(float, 0),
    "RECRAWL_GONE_AFTER": _number(int, 1, 100),
    "CHANGES_ENABLED": _bool,
    "WEBHOOK_URL": _url("http", "https"),
    "WEBHOOK_EVENTS": _choice("None", "", "pages", "batch"),
    "WEBHOOK_SECRET_FILE": _path,
    "WEBHOOK_TIMEOUT": POSITIVE_SECONDS,
    "WEBHOOK_RETRY_MIN": POSITIVE_SECONDS, "WEBHOOK_RETRY_MAX": POSITIVE_SECONDS,
    "WEBHOOK_FLUSH_TIMEOUT": SECONDS,
    "CHANGES_MAX_DIFF": _number(int, 0, 10_000_000),
    "RECRAWL_CONTINUOUS": _bool,
    "RECRAWL_POLL_INTERVAL": POSITIVE_SECONDS,
    "RECRAWL_HEAD": _bool,
    "RECRAWL_HEAD_MIN_UNCHANGED": _number(float, 0, 1),
    "STOP_CLEAR": _bool,
    "PROGRESS_INTERVAL": SECONDS,
    "PROMETHEUS_PORT": _number(int, 0, 65535),
    "GC_THRESHOLD": _gc_threshold,
    "PROMETHEUS_BIND": _address,
    "DUPEFILTER_BUCKETS": _number(int, 1, 1 << 24),
    "FRONTIER_SHARDS": _number(int, 1, 1024),
    "FRONTIER_URL_CACHE": POSITIVE_COUNT,
    "NETWORK_ALLOWLIST": _networks,
    # Traps
    "TRAP_MAX_SHAPE_RUN": COUNT,
    "TRAP_MAX_REPEATED_SEGMENT": COUNT,
    "TRAP_MAX_DESCENT_RUN": COUNT,
    "TRAP_MAX_NUMBERED_RUN": COUNT,
    "TRAP_MAX_TOKEN_RUN": COUNT,
    "TRAP_MAX_TOKEN_VARIANTS": COUNT,
    "TRAP_HOSTS_TRACKED": POSITIVE_COUNT,
    # Classifier and duplicates
    "CLASSIFIER_THRESHOLD": _number(float, 0, 1, optional=True),
    "CLASSIFIER_TEMPLATE": _bool,
    "TOPIC_TUNNEL": _number(int, 0, 1000),
    "TOPIC_MIN_PRIORITY": _number(float, 0, 1),
    "TOPIC_TUNNEL_LINKS": _number(int, 0, 1000),
    "REVISIT_IMPORTANCE": _bool,
    "TOPIC_SIBLINGS": POSITIVE_COUNT,
    "SITEMAP_ENABLED": _bool,
    "SITEMAP_MAX_DEPTH": _number(int, 0, 7),
    "SITEMAP_MAX_FILES": COUNT,
    # The shared index finds near copies by four 16-bit blocks: exact
    # for distances up to 3 (pigeonhole), so no more can be asked of it.
    "SIMHASH_MAX_DISTANCE": _number(int, 0, 64),
    "NEARDUP_RESEMBLANCE": _number(float, 0, 1, lo_open=True),
    "NEARDUP_SKETCH_BITS": _choice("512", "1024", "2048", "4096"),
    "SIMHASH_MIN_CHARS": COUNT,
    "SIMHASH_MIRROR_SHARE": _number(float, 0, 1, lo_open=True),
    "SIMHASH_MIRROR_MIN_PAGES": POSITIVE_COUNT,
    # Store
    "MONGO_URI": _url("mongodb", "mongodb+srv"),
    "MONGO_DATABASE": _name,
    "MONGO_TIMEOUT": POSITIVE_SECONDS,
    "STORE_BATCH_SIZE": _number(int, 1, 100_000),
    "STORE_FLUSH_INTERVAL": POSITIVE_SECONDS,
    "STORE_RETRY_DELAY": POSITIVE_SECONDS,
    "STORE_RETRY_MAX_DELAY": POSITIVE_SECONDS,
    "STORE_CLOSE_TIMEOUT": SECONDS,
    "STORE_MAX_TEXT_CHARS": POSITIVE_COUNT,
    # Rendering (crawler/render/)
    "RENDER_BROWSER": _path,
    "RENDER_CONCURRENCY": _number(int, 1, 64),
    "RENDER_TIMEOUT": _number(float, 1, 600),
    "RENDER_SETTLE": _number(float, 0, 60),
    "RENDER_MAX_REQUESTS": _number(int, 0, 10_000),
    "RENDER_BLOCK": _render_types,
    "RENDER_OTHER_SITES": _bool,
    "RENDER_MEMORY_MB": _number(int, 64, 65_536),
    "RENDER_PAGES_PER_BROWSER": POSITIVE_COUNT,
    "RENDER_CACHE_MB": COUNT,
    "RENDER_AUTO_PROBE": POSITIVE_COUNT,
    # PDF documents (crawler/reading/documents.py)
    "PDF_TIMEOUT": _number(float, 0, 3600, lo_open=True),
    "PDF_MEMORY_MB": _number(int, 256, 65_536),
    "PDF_MAX_PAGES": _number(int, 1, 1_000_000),
    "PDF_PROCESSES": _number(int, 1, 64),
}

# (smaller, larger): the first may not exceed the second.
ORDERED = (
    ("FRONTIER_BACKOFF_MIN", "FRONTIER_BACKOFF_MAX"),
    ("FRONTIER_RETRY_BACKOFF", "FRONTIER_RETRY_BACKOFF_MAX"),
    ("STORE_RETRY_DELAY", "STORE_RETRY_MAX_DELAY"),
    ("REVISIT_MIN_INTERVAL", "REVISIT_DEFAULT_INTERVAL"),
    ("REVISIT_DEFAULT_INTERVAL", "REVISIT_MAX_INTERVAL"),
)
