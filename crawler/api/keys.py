"""Who may use the HTTP API, and how much: keys and their limits.

Keys come from ``API_KEYS_FILE`` (one a line; blank lines and ``#``
comments skipped; the file readable by its owner only, as the sessions'
secrets are) and from the environment variable ``CRAWLER_API_KEYS``
(comma-separated). A key is at least 16 characters without spaces. No key
at all, or a file that cannot be read, is refused before the server starts
(``ConfigError``: one line).

A key is never written anywhere: what Redis, the jobs and the logs know of
it is its *id*, the first 16 hex digits of its SHA-256. A request names its
key as Firecrawl's clients do, ``Authorization: Bearer KEY``; each known key
is compared in constant time.

Limits, per key, cluster-wide (counters in Redis): ``API_KEY_REQUESTS_PER_MINUTE``
requests a minute (a fixed window of the wall clock's minute), and
``API_KEY_CRAWLS`` crawl and batch jobs running at once (``jobs.py``
counts them).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import time
from pathlib import Path
from typing import Any

from crawler.config import ConfigError

__all__ = ["ENV", "ApiKeys", "key_id"]

ENV = "CRAWLER_API_KEYS"
MIN_LENGTH = 16


def key_id(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


class ApiKeys:
    def __init__(self, keys: list[str]) -> None:
        self._keys = [(k.encode("utf-8"), key_id(k)) for k in dict.fromkeys(keys)]

    def __len__(self) -> int:
        return len(self._keys)

    @classmethod
    def from_settings(cls, settings: Any, env: dict[str, str] | None = None) -> ApiKeys:
        env = dict(os.environ) if env is None else env
        keys: list[str] = []
        path = settings.get("API_KEYS_FILE")
        if path:
            keys += _read_file(Path(str(path)).expanduser())
        for n, raw in enumerate(env.get(ENV, "").split(","), 1):
            key = raw.strip()
            if key:
                _check(key, f"{ENV}, entry {n}")
                keys.append(key)
        if not keys:
            raise ConfigError(f"no API key: give -s API_KEYS_FILE=PATH (one key a line) or the environment variable "
                              f"{ENV}")
        return cls(keys)

    def identify(self, authorization: str | None) -> str | None:
        """The id of the key an ``Authorization`` header holds, or None."""
        if not authorization:
            return None
        scheme, _, given = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return None
        candidate = given.strip().encode("utf-8", "replace")
        found = None
        for key, ident in self._keys:  # every key compared: the time does not say which matched
            if hmac.compare_digest(key, candidate):
                found = ident
        return found


def _check(key: str, where: str) -> None:
    if len(key) < MIN_LENGTH or any(c.isspace() for c in key):
        raise ConfigError(f"API key at {where}: a key is at least {MIN_LENGTH} characters without spaces")


def _read_file(path: Path) -> list[str]:
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"API_KEYS_FILE: cannot read {path} ({exc})") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(f"API_KEYS_FILE: {path} is readable by others (chmod 600 {path})")
    keys = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if line and not line.startswith("#"):
            _check(line, f"{path} line {n}")
            keys.append(line)
    return keys


class RateLimit:
    """Requests a key may make a minute, counted in Redis for the cluster."""

    def __init__(self, client: Any, per_minute: int) -> None:
        self.client = client
        self.per_minute = per_minute

    def take(self, ident: str, now: float | None = None) -> float:
        """0 if the request may go; else the seconds until the next minute."""
        if self.per_minute <= 0:
            return 0.0
        now = time.time() if now is None else now
        minute = int(now // 60)
        counter = f"{{api}}:rate:{ident}:{minute}"
        pipe = self.client.pipeline(transaction=False)
        pipe.incr(counter)
        pipe.expire(counter, 120)
        count = pipe.execute()[0]
        if int(count) > self.per_minute:
            return (minute + 1) * 60 - now
        return 0.0
