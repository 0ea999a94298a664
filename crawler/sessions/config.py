"""``-a sites=sites.yaml``: what a site needs to be crawled as a visitor
with an account would be: headers, cookies, a login. Pure logic.

    sites:
      - site: https://intranet.example.com      # scheme://host[:port]
        headers:
          Accept-Language: en
          X-Api-Key: {env: INTRANET_KEY}         # a secret: from the environment
        cookies:
          consent: "yes"
        login:
          url: https://intranet.example.com/login   # the page with the login form
          fields:
            username: {env: INTRANET_USER}
            password: {file: ~/.intranet-password}  # a file only its owner may read
          logged_out: /login                     # a page at (or redirected to) this path: log in again
        never: [/logout, /account/delete]        # paths never fetched

A value is a string, or ``{env: NAME}`` (an environment variable) or
``{file: PATH}`` (a file's first line; refused when the file is readable
by its group or others). A login field, and a header or cookie whose name
says it is a secret (authorization, cookie, token, key, secret, password,
session), must come from the environment or a file: the file itself then
holds no secret, and may be recorded in the crawl (Redis) for the workers
that join it. With a login, paths holding logout, log-out, signout,
sign-out or logoff are never fetched either.

``read_sites(path)`` returns the ``SiteSession`` of each site, with the
secrets resolved (kept in memory only); ``SitesError`` names the file, the
line and the problem.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

__all__ = ["SECRET_NAME", "SiteSession", "SitesError", "parse_sites", "read_sites"]

SECRET_NAME = re.compile(r"authorization|cookie|token|key|secret|passw|session|auth", re.I)
_LOGOUT = re.compile(r"log-?out|sign-?out|log-?off", re.I)
_SITE_KEYS = {"site", "headers", "cookies", "login", "never"}
_LOGIN_KEYS = {"url", "fields", "logged_out"}


class SitesError(ValueError):
    """A sites file that cannot work: file, line and problem."""


@dataclass
class SiteSession:
    origin: str  # scheme://host[:port], lower case
    headers: dict[str, str] = field(default_factory=dict)
    cookies: dict[str, str] = field(default_factory=dict)
    login_url: str | None = None
    login_fields: dict[str, str] = field(default_factory=dict)
    logged_out: str | None = None  # a path prefix
    never: tuple[str, ...] = ()

    def never_fetched(self, path: str) -> bool:
        return any(path.startswith(p) for p in self.never) or (
            self.login_url is not None and _LOGOUT.search(path) is not None)

    def secret(self) -> bytes:
        """What only those who hold the site's secrets know (the key of its
        shared cookies, ``crawler/sessions/middleware.py``)."""
        parts = [self.origin, *sorted(f"{k}={v}" for k, v in self.login_fields.items()),
                 *sorted(f"{k}={v}" for k, v in self.headers.items() if SECRET_NAME.search(k))]
        return "\n".join(parts).encode("utf-8", "surrogatepass")


class _Loader(yaml.SafeLoader):  # type: ignore[misc]
    """Safe YAML, each mapping with the line it starts on (``__line__``)."""


def _mapping(loader: _Loader, node: yaml.MappingNode) -> dict[str, Any]:
    out: dict[str, Any] = loader.construct_mapping(node, deep=True)
    out["__line__"] = node.start_mark.line + 1
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def origin_of(url: str) -> str | None:
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    default = {"http": 80, "https": 443}[parts.scheme.lower()]
    host = parts.hostname.lower()
    return f"{parts.scheme.lower()}://{host}" + (f":{port}" if port not in (None, default) else "")


def parse_sites(text: str, where: str, env: dict[str, str] | None = None) -> dict[str, SiteSession]:
    """The sessions of a sites file's ``text`` (``where``: its name in messages)."""
    env = dict(os.environ) if env is None else env

    def fail(line: Any, problem: str) -> SitesError:
        return SitesError(f"{where} line {line}: {problem}" if line else f"{where}: {problem}")

    try:
        doc = yaml.load(text, Loader=_Loader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise fail(mark.line + 1 if mark else None, f"not YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("sites"), list):
        raise fail(None, "expected a mapping with a list under 'sites:'")

    def value(raw: Any, line: Any, what: str, secret: bool) -> str:
        if isinstance(raw, dict):
            keys = set(raw) - {"__line__"}
            if keys == {"env"}:
                name = str(raw["env"])
                if name not in env:
                    raise fail(line, f"{what}: the environment variable {name} is not set")
                return env[name]
            if keys == {"file"}:
                path = Path(str(raw["file"])).expanduser()
                try:
                    mode = path.stat().st_mode
                    content = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise fail(line, f"{what}: cannot read {path} ({exc})") from None
                if mode & (stat.S_IRWXG | stat.S_IRWXO):
                    raise fail(line, f"{what}: {path} is readable by others (chmod 600 {path})")
                return content.splitlines()[0].strip() if content else ""
            raise fail(line, f"{what}: give a string, {{env: NAME}} or {{file: PATH}}")
        if isinstance(raw, (dict, list)) or raw is None:
            raise fail(line, f"{what}: give a string, {{env: NAME}} or {{file: PATH}}")
        if secret:
            raise fail(line, f"{what} is a secret: give it as {{env: NAME}} or {{file: PATH}}, not in the file")
        return str(raw)

    sessions: dict[str, SiteSession] = {}
    for entry in doc["sites"]:
        if not isinstance(entry, dict):
            raise fail(None, "each entry under 'sites:' is a mapping with 'site:'")
        line = entry.get("__line__")
        unknown = sorted(set(entry) - _SITE_KEYS - {"__line__"})
        if unknown:
            raise fail(line, f"unknown key {unknown[0]!r} (expected {', '.join(sorted(_SITE_KEYS))})")
        origin = origin_of(str(entry.get("site") or ""))
        if origin is None:
            raise fail(line, f"site {entry.get('site')!r} is not an http(s) origin (scheme://host[:port])")
        if origin in sessions:
            raise fail(line, f"site {origin} is given twice")
        session = SiteSession(origin)
        for kind in ("headers", "cookies"):
            given = entry.get(kind) or {}
            if not isinstance(given, dict):
                raise fail(line, f"{kind}: expected a mapping of names to values")
            target = session.headers if kind == "headers" else session.cookies
            for name, raw in given.items():
                if name == "__line__":
                    continue
                target[str(name)] = value(raw, given.get("__line__", line), f"{kind[:-1]} {name}",
                                          SECRET_NAME.search(str(name)) is not None)
        login = entry.get("login")
        if login is not None:
            if not isinstance(login, dict):
                raise fail(line, "login: expected a mapping (url, fields, logged_out)")
            lline = login.get("__line__", line)
            unknown = sorted(set(login) - _LOGIN_KEYS - {"__line__"})
            if unknown:
                raise fail(lline, f"login: unknown key {unknown[0]!r} (expected url, fields, logged_out)")
            url = str(login.get("url") or "")
            if origin_of(url) != origin:
                raise fail(lline, f"login url {url!r} is not on {origin}")
            session.login_url = url
            fields = login.get("fields") or {}
            if not isinstance(fields, dict) or not (set(fields) - {"__line__"}):
                raise fail(lline, "login: fields: expected the form's fields (name: value)")
            for name, raw in fields.items():
                if name != "__line__":
                    session.login_fields[str(name)] = value(raw, fields.get("__line__", lline),
                                                            f"login field {name}", True)
            session.logged_out = str(login.get("logged_out") or urlsplit(url).path or "/")
        never = entry.get("never") or []
        if not isinstance(never, list) or not all(isinstance(p, str) and p.startswith("/") for p in never):
            raise fail(line, "never: expected a list of paths, each starting with /")
        session.never = tuple(never)
        sessions[origin] = session
    return sessions


def read_sites(path: str, env: dict[str, str] | None = None) -> tuple[str, dict[str, SiteSession]]:
    """The file's text (what is recorded in the crawl) and its sessions."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SitesError(f"-a sites={path}: cannot read it ({exc})") from None
    return text, parse_sites(text, path, env)
