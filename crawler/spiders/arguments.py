"""The ``site`` spider's arguments (``-a``), checked before anything starts
(``scrapy crawl`` runs ``SiteSpider.check_arguments``; the spider reads
them again when it is built): seeds, scope, follow policy, topic, URL
rules, sitemaps, languages, crawl order and rendering. Each bad one is a
``ConfigError`` whose message names it and says what is expected. No
settings, no stats.
"""

from __future__ import annotations

from typing import Any

from crawler.config import ConfigError
from crawler.following.follow import FOLLOW_MODES
from crawler.frontier.meta import ORDERS
from crawler.reading.language import parse_languages
from crawler.render.decide import RENDER_MODES
from crawler.scope.rules import RulesError, UrlRules, read_rules_file
from crawler.scope.seeds import read_seeds
from crawler.following.topic import Topic, TopicError, load_topic
from crawler.scope.urls import SCOPES, InvalidURL, normalize

__all__ = ["RUNNER_ARGUMENTS", "check_arguments", "crawl_languages", "read_sessions", "read_topic", "url_rules"]

# scrapyd passes its job id and, when the project was deployed with one, the
# version: neither is the spider's to read.
RUNNER_ARGUMENTS = frozenset({"_job", "_version"})


def check_arguments(name: str, arguments: tuple[str, ...], seeds: str | None = None, seeds_file: str | None = None,
                    scope: str | None = None, follow: str | None = None, topic: str | None = None,
                    allow: str | None = None, deny: str | None = None, rules: str | None = None,
                    sitemaps: str | None = None, languages: str | None = None, order: str | None = None,
                    render: str | None = None, **kwargs: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """The seeds (normal form) and the bad seeds with their reasons, for
    spider ``name`` taking ``arguments``; ``ConfigError`` for an argument
    the spider cannot run with."""
    unknown = sorted(set(kwargs) - RUNNER_ARGUMENTS - ({"sites"} & set(arguments)))
    if unknown:
        raise ConfigError(
            f"unknown spider argument{'s' if len(unknown) > 1 else ''} "
            f"{', '.join('-a ' + k for k in unknown)}; spider {name!r} takes "
            f"{', '.join('-a ' + a for a in arguments)}")
    read_sessions(kwargs.get("sites"))
    if scope is not None and scope not in SCOPES:
        raise ConfigError(f"-a scope={scope!r} is not one of {', '.join(SCOPES)}")
    if follow is not None and follow not in FOLLOW_MODES:
        raise ConfigError(f"-a follow={follow!r} is not one of {', '.join(FOLLOW_MODES)}")
    if sitemaps is not None and sitemaps not in ("0", "1"):
        raise ConfigError(f"-a sitemaps={sitemaps!r} is not 0 or 1")
    crawl_languages(languages)
    if render is not None and render not in RENDER_MODES:
        raise ConfigError(f"-a render={render!r} is not one of {', '.join(RENDER_MODES)}")
    if order is not None and order not in ORDERS:
        raise ConfigError(f"-a order={order!r} is not one of {', '.join(ORDERS)}")
    if order is not None and topic is not None:
        raise ConfigError("-a order and -a topic: a focused crawl keeps its topic order; give one of them")
    if topic is not None:
        read_topic(topic)
    raw_seeds = read_seeds(seeds, seeds_file)
    good: list[str] = []
    bad: list[tuple[str, str]] = []
    for raw in raw_seeds:
        try:
            good.append(normalize(raw))
        except InvalidURL as exc:
            bad.append((raw.strip(), str(exc)))
    if raw_seeds and not good:
        raise ConfigError(
            f"no valid seed ({bad[0][1]}{' ...' if len(bad) > 1 else ''}): give -a seeds=URL[,URL...] "
            "or -a seeds_file=PATH with absolute http:// or https:// URLs (or no seed at all, "
            "to join a running crawl)"
        )
    found = url_rules(allow, deny, rules)
    for seed in good:
        if found.verdict(seed) is not None:
            raise ConfigError(f"seed {seed} is excluded by the URL rules: {found.describe(seed)}")
    return list(dict.fromkeys(good)), bad


def crawl_languages(languages: str | None) -> str | None:
    """``-a languages=en,de`` as the crawl records it ("de,en"; None: not
    asked); ``ConfigError`` for an entry that is no language code."""
    if languages is None:
        return None
    try:
        return ",".join(parse_languages(languages)) or None
    except ValueError as exc:
        raise ConfigError(f"-a languages: {exc}") from None


def url_rules(allow: str | None, deny: str | None, rules: str | None) -> UrlRules:
    """The URL rules of ``-a allow``, ``-a deny`` and ``-a rules=PATH``
    (``crawler/scope/rules.py``); ``ConfigError`` for a pattern or file that
    cannot be used."""
    try:
        found = read_rules_file(rules) if rules is not None else UrlRules()
        return found.joined(UrlRules((allow,) if allow is not None else (), (deny,) if deny is not None else ()))
    except RulesError as exc:
        raise ConfigError(str(exc)) from None


def read_topic(path: str) -> Topic:
    """The topic of ``-a topic=PATH``; ``ConfigError`` for a file that is not one."""
    if not path.strip():
        raise ConfigError("-a topic= names no file: give the path of a topic file (JSON or YAML)")
    try:
        return load_topic(path)
    except TopicError as exc:
        raise ConfigError(f"-a topic: {exc}") from None


def read_sessions(path: str | None) -> tuple[str, dict[str, Any]] | None:
    """``-a sites``: the file's text (recorded in the crawl) and each site's
    session (``crawler/sessions/config.py``), its secrets resolved; None
    without the argument. ``ConfigError`` naming the file, the line and the
    problem."""
    if path is None:
        return None
    from crawler.sessions.config import SitesError, read_sites

    try:
        return read_sites(path)
    except SitesError as exc:
        raise ConfigError(str(exc)) from None
