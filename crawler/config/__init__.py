"""Every setting the crawler reads, checked once, at start, in one place.

A bad value (a typo, a wrong type, a number out of range) stops the start
with one line naming the setting and the value: a crawl must never run with
a required part (the store, the frontier, robots.txt, the trap guard)
switched off because one of its settings was wrong. ``NotConfigured`` is
left to optional features that a setting turns off on purpose.

``check_settings(settings)`` raises :class:`ConfigError`; the
``SettingsCheck`` extension (enabled first in ``EXTENSIONS``) runs it for
every crawler, whatever starts it (``scrapy crawl``, scrapyd, a script), and
the ``crawl`` command runs it before anything starts.

Each setting's own check is in ``crawler/config/checks.py`` (``SPECS``);
this module applies them and the checks that relate settings to each
other, and tells a misspelled ``-s`` name from a setting of a component of
the user's own. The defaults themselves live in ``crawler/settings.py``;
``REDIS_URL``, ``MONGO_URI`` and ``MONGO_DATABASE`` default to the
environment variables of the same names there.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from crawler.config.checks import ORDERED, SPECS, product_token

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = ["ORDERED", "SPECS", "ConfigError", "SettingsCheck", "check_setting_names", "check_settings",
           "known_settings", "misspelled", "product_token"]


class ConfigError(ValueError):
    """A setting or argument with a bad value; the message names it."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def problems(settings: BaseSettings) -> list[str]:
    """One complaint per bad setting, each naming the setting and its value."""
    out: list[str] = []
    for name, check in SPECS.items():
        value = settings.get(name)
        complaint = check(value)
        if complaint:
            out.append(f"{name}={_show(value)} {complaint}")
    if out:
        return out  # relations only between values that are each valid
    for small, large in ORDERED:
        if float(settings.get(small)) > float(settings.get(large)):
            out.append(f"{small}={_show(settings.get(small))} must be at most "
                       f"{large}={_show(settings.get(large))}")
    if (settings.getbool("ROBOTSTXT_OBEY") and not settings.get("ROBOTSTXT_USER_AGENT")
            and not product_token(str(settings.get("USER_AGENT") or ""))):
        out.append(f"USER_AGENT={_show(settings.get('USER_AGENT'))} has no product token to match "
                   "robots.txt groups with: set USER_AGENT or ROBOTSTXT_USER_AGENT")
    if settings.get("PROXY_LIST"):
        from crawler.network.proxies import check_proxies, parse_proxy_list

        complaint = check_proxies(parse_proxy_list(settings.get("PROXY_LIST")), settings.get("NETWORK_ALLOWLIST"))
        if complaint:
            out.append(f"PROXY_LIST: {complaint}")
    if settings.get("WEBHOOK_URL"):
        complaint = _webhook(settings)
        if complaint:
            out.append(complaint)
    if settings.getfloat("FRONTIER_HEARTBEAT_INTERVAL") >= settings.getfloat("FRONTIER_LEASE_TIMEOUT"):
        out.append(f"FRONTIER_HEARTBEAT_INTERVAL={_show(settings.get('FRONTIER_HEARTBEAT_INTERVAL'))} "
                   f"must be below FRONTIER_LEASE_TIMEOUT={_show(settings.get('FRONTIER_LEASE_TIMEOUT'))}")
    return out


def _webhook(settings: BaseSettings) -> str | None:
    """What stops ``WEBHOOK_URL`` from working: no secret, credentials in
    it, a host the network policy refuses (crawler/webhooks/)."""
    from crawler.network.policy import NetworkPolicy, parse_networks
    from crawler.webhooks.delivery import Target, TargetError
    from crawler.webhooks.extension import SECRET_ENV, webhook_secret

    try:
        if webhook_secret(settings) is None:
            return f"WEBHOOK_URL needs a secret to sign with: -s WEBHOOK_SECRET_FILE=PATH or {SECRET_ENV}"
        Target.parse(str(settings.get("WEBHOOK_URL"))).address(NetworkPolicy(parse_networks(
            settings.get("NETWORK_ALLOWLIST"))))
    except (TargetError, ConfigError) as exc:
        return str(exc)
    return None


# Settings that scrapy-redis's parts read (scrapy_redis/defaults.py and
# its modules' reads): a name of theirs given with -s is not a typo.
_SCRAPY_REDIS = frozenset({
    "DUPEFILTER_DEBUG", "DUPEFILTER_KEY", "MAX_IDLE_TIME", "PIPELINE_KEY", "REDIS_CLS", "REDIS_CONCURRENT_REQUESTS",
    "REDIS_ENCODING", "REDIS_HOST", "REDIS_ITEMS_KEY", "REDIS_ITEMS_SERIALIZER", "REDIS_PORT",
    "REDIS_START_URLS_AS_SET", "REDIS_START_URLS_AS_ZSET", "REDIS_START_URLS_KEY", "SCHEDULER_DUPEFILTER_CLASS",
    "SCHEDULER_DUPEFILTER_KEY", "SCHEDULER_FLUSH_ON_START", "SCHEDULER_IDLE_BEFORE_CLOSE", "SCHEDULER_PERSIST",
    "SCHEDULER_QUEUE_CLASS", "SCHEDULER_QUEUE_KEY", "START_URLS_AS_SET", "START_URLS_AS_ZSET", "START_URLS_KEY",
    "STATS_KEY",
})
_CMDLINE = 40  # scrapy.settings.SETTINGS_PRIORITIES["cmdline"]: what -s sets


def known_settings(settings: BaseSettings) -> set[str]:
    """Every setting name this crawler, Scrapy or an installed component
    knows: Scrapy's defaults, this project's, the ones checked here,
    scrapy-redis's, and any the settings hold below the command line (a
    spider's ``custom_settings``, an add-on's defaults)."""
    import scrapy.settings.default_settings as scrapy_defaults

    from crawler import settings as ours

    names = {n for module in (scrapy_defaults, ours) for n in vars(module) if n.isupper()}
    names |= set(SPECS) | _SCRAPY_REDIS
    names |= {n for n in settings if settings.getpriority(n) is not None
              and int(settings.getpriority(n) or 0) < _CMDLINE}
    return names


def misspelled(settings: BaseSettings, names: Iterable[str] | None = None) -> list[tuple[str, str | None]]:
    """The command-line (``-s``) settings nobody knows, each with the known
    name it is closest to (None: close to none, perhaps a setting of a
    component of the user's own)."""
    given = [n for n in (settings if names is None else names) if settings.getpriority(n) == _CMDLINE]
    known = known_settings(settings)
    out: list[tuple[str, str | None]] = []
    for name in sorted(given):
        if name in known:
            continue
        close = difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.8)
        out.append((name, close[0] if close else None))
    return out


def check_setting_names(settings: BaseSettings) -> None:
    """Refuse a ``-s`` name that is no setting and is close to one that is
    (``NETWORK_ALLOWLST``: a typo that would otherwise be accepted in
    silence and leave the crawl without what it meant to set)."""
    typos = [(n, close) for n, close in misspelled(settings) if close is not None]
    if typos:
        raise ConfigError("; ".join(f"unknown setting {n}; did you mean {close}?" for n, close in typos))


def check_settings(settings: BaseSettings) -> None:
    check_setting_names(settings)
    found = problems(settings)
    if found:
        raise ConfigError("bad setting" + ("s" if len(found) > 1 else "") + ": " + "; ".join(found))


class SettingsCheck:
    """Extension: refuse to start a crawler whose settings are bad."""

    def __init__(self, crawler: Crawler) -> None:
        check_settings(crawler.settings)
        for name, _ in misspelled(crawler.settings):
            logger.warning("Setting %(name)s (given with -s) is not one this crawler, Scrapy or an installed "
                           "component reads: it has no effect unless a component of your own reads it",
                           {"name": name})

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)
