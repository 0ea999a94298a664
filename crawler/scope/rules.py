"""URL rules: which URLs of its scope a crawl fetches. Pure logic, no Scrapy.

    -a allow=REGEX     only URLs matching it are fetched
    -a deny=REGEX      URLs matching it are never fetched
    -a rules=PATH      a JSON or YAML file: {"allow": [REGEX, ...], "deny": [REGEX, ...]}

Each pattern is a regular expression in Python's syntax, searched for in
the normalised URL (``search``, as Scrapy's ``LinkExtractor`` does: ``-a
deny=/search`` denies every URL whose path holds ``/search``). A URL is
fetched when no ``deny`` pattern matches it and, if there are ``allow``
patterns, one of them does. The file's lists and the arguments add up.

Patterns are compiled with the ``regex`` module (Python's syntax, and a
time limit on each match): a pattern that does not compile stops the start
with one line; a match that takes longer than ``MATCH_TIMEOUT`` (a pattern
that backtracks catastrophically on some URL) excludes that URL, counted
(``rules/timeout``), instead of holding a worker up. At most ``MAX_PATTERNS``
patterns of at most ``MAX_PATTERN_CHARS`` characters each.

The rules are the crawl's: recorded in its meta by the worker that starts
it (``UrlRules.to_json``), followed by every worker that joins without
rules, refused to a worker that brings others (``crawler/following/follow.py``,
``crawler/commands/crawl.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import regex

from crawler.datafile import DataFileError, read_data_file

__all__ = ["MATCH_TIMEOUT", "MAX_PATTERNS", "MAX_PATTERN_CHARS", "RulesError", "UrlRules", "read_rules_file"]

MATCH_TIMEOUT = 0.05  # seconds a pattern may take on one URL
MAX_PATTERNS = 200
MAX_PATTERN_CHARS = 1000


class RulesError(ValueError):
    """Rules that cannot be used; the message names the pattern or file."""


@dataclass(frozen=True)
class UrlRules:
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    _allow: tuple[Any, ...] = field(default=(), init=False, repr=False, compare=False)
    _deny: tuple[Any, ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.allow) + len(self.deny) > MAX_PATTERNS:
            raise RulesError(f"{len(self.allow) + len(self.deny)} patterns; at most {MAX_PATTERNS}")
        object.__setattr__(self, "_allow", tuple(_compile("allow", p) for p in self.allow))
        object.__setattr__(self, "_deny", tuple(_compile("deny", p) for p in self.deny))

    def __bool__(self) -> bool:
        return bool(self.allow or self.deny)

    def verdict(self, url: str) -> str | None:
        """None when ``url`` may be fetched; else why not: ``"denied"`` (a
        deny pattern matches), ``"not_allowed"`` (no allow pattern does) or
        ``"timeout"`` (a pattern took too long on it)."""
        try:
            if any(p.search(url, timeout=MATCH_TIMEOUT) for p in self._deny):
                return "denied"
            if self._allow and not any(p.search(url, timeout=MATCH_TIMEOUT) for p in self._allow):
                return "not_allowed"
        except TimeoutError:
            return "timeout"
        return None

    def describe(self, url: str) -> str:
        """Which pattern keeps ``url`` out, for an error line."""
        for pattern, compiled in zip(self.deny, self._deny):
            if _matches(compiled, url):
                return f"-a deny={pattern} matches it"
        return f"no -a allow pattern matches it ({', '.join(self.allow)})"

    def to_json(self) -> str:
        """The rules as recorded in the crawl's meta."""
        return json.dumps({"allow": list(self.allow), "deny": list(self.deny)}, ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> UrlRules:
        """Rules recorded in the crawl's meta (checked as a file's are)."""
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise RulesError(f"recorded rules are not JSON ({exc})") from None
        return cls.from_mapping(data, "the crawl's recorded rules")

    @classmethod
    def from_mapping(cls, data: Any, where: str) -> UrlRules:
        if not isinstance(data, dict):
            raise RulesError(f"{where}: rules are a mapping with 'allow' and 'deny' lists")
        unknown = sorted(set(data) - {"allow", "deny"})
        if unknown:
            raise RulesError(f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                             "(rules have 'allow' and 'deny')")
        lists = {}
        for name in ("allow", "deny"):
            value = data.get(name) or []
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
                raise RulesError(f"{where}: '{name}' must be a list of regular expressions")
            lists[name] = tuple(value)
        return cls(lists["allow"], lists["deny"])

    def joined(self, other: UrlRules) -> UrlRules:
        return UrlRules(tuple(dict.fromkeys(self.allow + other.allow)), tuple(dict.fromkeys(self.deny + other.deny)))


def _compile(kind: str, pattern: str) -> Any:
    if not pattern:
        raise RulesError(f"-a {kind}= is empty: give a regular expression")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise RulesError(f"-a {kind}={pattern[:40]}...: {len(pattern)} characters; at most {MAX_PATTERN_CHARS}")
    try:
        return regex.compile(pattern, flags=regex.VERSION0)
    except (regex.error, ValueError, OverflowError) as exc:
        raise RulesError(f"-a {kind}={pattern!r} is not a regular expression ({exc})") from None


def _matches(compiled: Any, url: str) -> bool:
    try:
        return compiled.search(url, timeout=MATCH_TIMEOUT) is not None
    except TimeoutError:
        return True


def read_rules_file(path: str) -> UrlRules:
    """The rules of a JSON or YAML file (``.yaml``/``.yml``: YAML)."""
    try:
        data = read_data_file(path, "rules file")
    except DataFileError as exc:
        raise RulesError(str(exc)) from None
    return UrlRules.from_mapping(data, f"rules file {path!r}")
