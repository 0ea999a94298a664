"""Posting a crawl's events to its webhook, in order, at least once.

One deliverer at a time per crawl holds ``{CRAWL}:webhook:lock`` (a token,
twice ``WEBHOOK_TIMEOUT`` and 5 s long, renewed at each post); whoever holds it posts the
stream's first event (``events.py``), and once the receiver answers 2xx
deletes it, checking in the same script that it still holds the lock. So
events reach the receiver in the crawl's order, one at a time; a receiver
that fails (an error status, no answer within ``WEBHOOK_TIMEOUT``, a
refused connection) gets the same event again after a backoff doubling from
``WEBHOOK_RETRY_MIN`` to ``WEBHOOK_RETRY_MAX`` seconds, for as long as it
takes: nothing is dropped. A deliverer killed mid-post leaves the event
first in the stream and the lock expiring: the next one posts it again.

Each post: ``POST`` the event as JSON with ``id`` (the API job's id, or the
crawl's name), ``metadata`` (an API crawl's webhook metadata) and
``eventId`` (its stream id: a receiver drops one it has seen), and the
header ``X-Firecrawl-Signature: sha256=HEX``, the HMAC-SHA256 of the body
with the webhook secret (``WEBHOOK_SECRET_FILE`` or ``CRAWLER_WEBHOOK_SECRET``),
as Firecrawl signs (``X-Crawler-Event-Id`` carries the id too).

The target is judged by the network policy (``NETWORK_ALLOWLIST``) as a
fetch is, at every post: its host is resolved, the address checked, and the
connection made to that address (no second lookup a rebinding name could
answer otherwise). A refused target is a failed post (logged once).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import secrets
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from crawler.network.policy import NetworkPolicy, ip_of_host
from crawler.webhooks.events import stream_key

logger = logging.getLogger(__name__)

__all__ = ["Deliverer", "DeliveryThread", "Target", "sign"]

LOCK_FLOOR_MS = 5_000
SIGNATURE_HEADER = "X-Firecrawl-Signature"

_DELETE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
return redis.call('XDEL', KEYS[2], ARGV[2])
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0
"""


def sign(secret: bytes, body: bytes) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


class TargetError(ValueError):
    """A webhook URL that cannot be posted to (one line)."""


@dataclass(frozen=True)
class Target:
    url: str
    scheme: str
    host: str
    port: int
    path: str

    @classmethod
    def parse(cls, url: str) -> Target:
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError as exc:
            raise TargetError(f"webhook URL {url[:200]!r}: {exc}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TargetError(f"webhook URL {url[:200]!r}: an http or https URL with a host")
        if parts.username or parts.password:
            raise TargetError("webhook URL: no credentials in it (the posts are signed with the webhook secret)")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(url.strip(), parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), path)

    def address(self, policy: NetworkPolicy) -> str:
        """The address to connect to, judged by ``policy`` (``TargetError``: refused)."""
        literal = ip_of_host(self.host)
        if literal is None:
            try:
                literal = ip_of_host(socket.gethostbyname(self.host))
            except (OSError, UnicodeError) as exc:
                raise TargetError(f"webhook host {self.host}: {exc}") from None
        assert literal is not None
        refused = policy.check(literal)
        if refused is not None:
            raise TargetError(f"webhook host {self.host}: refused by the network policy ({refused})")
        return str(literal)


def post(target: Target, address: str, body: bytes, headers: dict[str, str], timeout: float) -> int:
    """POST ``body`` to ``target`` at ``address``; the status."""
    conn: http.client.HTTPConnection
    if target.scheme == "https":
        conn = http.client.HTTPSConnection(target.host, target.port, timeout=timeout,
                                           context=ssl.create_default_context())
        raw = socket.create_connection((address, target.port), timeout)
        conn.sock = conn._context.wrap_socket(raw, server_hostname=target.host)  # type: ignore[attr-defined]
    else:
        conn = http.client.HTTPConnection(address, target.port, timeout=timeout)
    try:
        host = target.host if target.port in (80, 443) else f"{target.host}:{target.port}"
        conn.request("POST", target.path, body=body, headers={"Host": host, **headers})
        answer = conn.getresponse()
        answer.read(65536)
        return answer.status
    finally:
        conn.close()


class Deliverer:
    """Posts one crawl's events (see the module)."""

    def __init__(self, client: Any, crawl: str, target: Target, secret: bytes, policy: NetworkPolicy, *,
                 job_id: str | None = None, metadata: Any = None, types: set[str] | None = None,
                 timeout: float = 10.0, retry_min: float = 1.0, retry_max: float = 300.0,
                 user_agent: str = "site-crawler") -> None:
        self.client, self.crawl, self.target, self.secret, self.policy = client, crawl, target, secret, policy
        self.job_id, self.metadata, self.types = job_id, metadata, types
        self.timeout, self.retry_min, self.retry_max, self.user_agent = timeout, retry_min, retry_max, user_agent
        self.key = stream_key(crawl)
        self.lock = f"{{{crawl}}}:webhook:lock"
        self.token = secrets.token_hex(8)
        self.lock_ms = int(timeout * 2000) + LOCK_FLOOR_MS  # outlasts a post
        self._delete = client.register_script(_DELETE)
        self._renew = client.register_script(_RENEW)
        self.delay = 0.0  # seconds to wait before the next try (a failure's backoff)
        self.delivered = 0
        self.failures = 0
        self._said: set[str] = set()

    def holds(self) -> bool:
        return bool(self._renew(keys=[self.lock], args=[self.token, self.lock_ms]))

    def release(self) -> None:
        self.client.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
                         "return 0", 1, self.lock, self.token)

    def pending(self) -> int:
        return int(self.client.xlen(self.key))

    def step(self) -> bool:
        """Post the first event if this deliverer holds the lock; True when
        one was delivered (or skipped, not asked for), False otherwise."""
        if not self.holds():
            return False
        entries = self.client.xrange(self.key, "-", "+", count=1)
        if not entries:
            return False
        entry_id, fields = entries[0]
        entry_id = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        raw = fields.get(b"e", fields.get("e", b"{}"))
        try:
            event = json.loads(raw)
            if not isinstance(event, dict):
                raise ValueError("not an object")
        except (ValueError, RecursionError):
            logger.error("Webhook of crawl %s: event %s is not JSON; dropped", self.crawl, entry_id)
            self._delete(keys=[self.lock, self.key], args=[self.token, entry_id])
            return True
        if self.types is not None and event.get("type", "").split(".")[-1] not in self.types:
            self._delete(keys=[self.lock, self.key], args=[self.token, entry_id])
            return True
        event.update(id=self.job_id or self.crawl, metadata=self.metadata, eventId=entry_id)
        body = json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        headers = {"Content-Type": "application/json", SIGNATURE_HEADER: sign(self.secret, body),
                   "X-Crawler-Event-Id": entry_id, "User-Agent": self.user_agent}
        try:
            status = post(self.target, self.target.address(self.policy), body, headers, self.timeout)
            problem = None if 200 <= status < 300 else f"HTTP {status}"
        except (OSError, http.client.HTTPException, ValueError) as exc:
            problem = str(exc) or type(exc).__name__
        if problem is not None:
            self.failures += 1
            self.delay = min(self.retry_max, max(self.retry_min, self.delay * 2))
            if problem not in self._said:
                self._said.add(problem)
                logger.warning("Webhook of crawl %s: %s; event %s kept, posted again in %.0f s", self.crawl,
                               problem, entry_id, self.delay)
            return False
        self.delay = 0.0
        self._delete(keys=[self.lock, self.key], args=[self.token, entry_id])
        self.delivered += 1
        return True


class DeliveryThread:
    """Runs deliverers in the background: a worker's one, or the API
    server's one a job; never in the way of the crawl."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.deliverers: dict[str, Deliverer] = {}
        self._next: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, name: str, deliverer: Deliverer) -> None:
        with self._lock:
            self.deliverers[name] = deliverer

    def remove(self, name: str) -> None:
        with self._lock:
            gone = self.deliverers.pop(name, None)
        if gone is not None:
            gone.release()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                items = list(self.deliverers.items())
            busy = False
            for name, deliverer in items:
                if time.monotonic() < self._next.get(name, 0.0):
                    continue
                try:
                    while not self._stop.is_set() and deliverer.step():
                        busy = True
                except Exception as exc:  # Redis away: try again later
                    logger.warning("Webhook of crawl %s: %s", deliverer.crawl, exc)
                    deliverer.delay = max(deliverer.retry_min, deliverer.delay * 2 or 1.0)
                self._next[name] = time.monotonic() + deliverer.delay
            if not busy:
                self._stop.wait(self.interval)

    def flush(self, timeout: float) -> int:
        """Wait up to ``timeout`` seconds for every deliverer's stream to
        empty; the events left."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                left = sum(d.pending() for d in self.deliverers.values())
            if left == 0 or time.monotonic() >= deadline:
                return left
            time.sleep(0.1)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        with self._lock:
            names = list(self.deliverers)
        for name in names:
            self.remove(name)
