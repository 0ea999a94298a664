"""The web console behind ``scrapy console``: one page, a JSON status, actions.

Endpoints (``crawler/commands/console.py`` starts the server):

- ``GET /``: the page (``crawler/data/console.html``: inline CSS and
  JavaScript, nothing fetched from elsewhere), polling ``/api/status``.
- ``GET /api/status``: ``ops.status(frontier, lease_timeout, top)`` plus
  ``history`` (pages/min per node over the last hour, for the chart); 503
  and ``{"error"}`` while Redis cannot be reached.
- ``POST /api/seed`` ``{"urls": [...]}``, ``POST /api/remove`` ``{"urls":
  [...], "sites": [...]}``, ``POST /api/stop`` ``{"now": bool}``, ``POST
  /api/clear`` ``{}``: what ``scrapy seed``, ``seed --remove`` and ``stop
  [--now|--clear]`` do, answering what they answer.

Actions are refused (403) unless the console was started with a token
(``--allow-actions``). Then each one must come with that token in the
``X-Console-Token`` header, a JSON body (``Content-Type: application/json``,
else 415: an HTML form of another site cannot send one), and no ``Origin``
other than the console's own (403). On a loopback address the ``Host``
header must name a loopback host too (403), so that a page of another site
whose name was rebound to 127.0.0.1 cannot read the console either. The
page never holds the token in its HTML: the operator opens it with
``#token=...`` (a URL fragment is never sent to a server) or pastes it.

One background thread samples the status every ``interval`` seconds and
``/api/status`` answers from the last sample: Redis's load does not grow
with the number of open pages, and the console answers at once while Redis
is away (it says so and keeps trying; redis-py reconnects by itself). Every
call into the frontier (the sampler's and the actions') holds one lock.

Why the standard library's ``ThreadingHTTPServer`` and not Twisted web: the
frontier's client is synchronous redis-py, so under Twisted every call would
go to a thread anyway; a thread per request and one lock say the same with
no reactor to start and stop around a command that only serves one page.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import math
import secrets
import socket
import socketserver
import threading
from collections import deque
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import redis
from redis.exceptions import RedisClusterException

from crawler import ops
from crawler.redis.client import RedisUnavailable

if TYPE_CHECKING:
    from crawler.frontier.frontier import Frontier

logger = logging.getLogger(__name__)

__all__ = ["ACTIONS", "Console", "ConsoleServer", "History", "TOKEN_HEADER", "is_loopback"]

T = TypeVar("T")

TOKEN_HEADER = "X-Console-Token"
ACTIONS = ("seed", "remove", "stop", "clear")
MAX_BODY = 1 << 20  # bytes of a POST body: about 10,000 URLs
MAX_URLS = 10_000
REDIS_ERRORS = (RedisUnavailable, redis.RedisError, RedisClusterException)


class History:
    """Each node's stored pages over the last ``window`` seconds (Redis's
    clock), and from them its pages/min between consecutive samples, thinned
    to ``points`` intervals at most, none shorter than ``resolution``
    seconds (workers acknowledge pages in batches: a rate over a second or
    two jumps between nothing and a batch), for the ``lines`` busiest nodes."""

    def __init__(self, window: float = 3600.0, points: int = 240, lines: int = 24, resolution: float = 5.0) -> None:
        self.window, self.points, self.lines, self.resolution = window, points, lines, resolution
        self._samples: deque[tuple[float, dict[str, int]]] = deque()

    def add(self, at: float, pages: Mapping[str, int]) -> None:
        if self._samples and at <= self._samples[-1][0]:
            return  # the same reading again, or Redis's clock went back
        self._samples.append((at, dict(pages)))
        while self._samples[0][0] < at - self.window:
            self._samples.popleft()

    def rates(self) -> dict[str, Any]:
        """``{"window", "from", "to", "nodes": [{"id", "points": [[time,
        pages_per_min], ...]}]}``; a point closes the interval it measures.
        A node gets points only between two samples that both hold it; a
        counter that went down (the crawl was reset) reads as 0."""
        samples = list(self._samples)
        if not samples:
            return {"window": self.window, "from": None, "to": None, "nodes": []}
        step = max(self.resolution, (samples[-1][0] - samples[0][0]) / self.points)
        kept = [samples[0]]
        for sample in samples[1:]:
            if sample[0] - kept[-1][0] >= step:
                kept.append(sample)
        if len(kept) > 1 and kept[-1] is not samples[-1]:
            kept[-1] = samples[-1]  # end at the latest reading
        lines: dict[str, list[list[float]]] = {}
        gained: dict[str, int] = {}
        for (t0, p0), (t1, p1) in zip(kept, kept[1:]):
            for node, pages in p1.items():
                if node in p0:
                    done = max(0, pages - p0[node])
                    gained[node] = gained.get(node, 0) + done
                    lines.setdefault(node, []).append([round(t1, 3), round(done * 60.0 / (t1 - t0), 2)])
        # In the order of their ids, so that a node keeps its colour.
        busiest = sorted(sorted(lines, key=lambda n: (-gained[n], n))[:self.lines])
        return {"window": self.window, "from": samples[0][0], "to": samples[-1][0],
                "nodes": [{"id": n, "points": lines[n]} for n in busiest]}


def _finite(obj: Any) -> Any:
    """``obj`` with infinite and NaN numbers (a node record in Redis may hold
    them) as None: browsers' JSON has no ``Infinity``."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


class Console:
    """The frontier, its lock, the sampler thread and its last sample."""

    def __init__(self, open_frontier: Callable[[], Frontier], lease_timeout: float, *, queue_by: str = "site",
                 interval: float = 2.0, top: int = 10, token: str | None = None,
                 audit: Callable[[str], None] | None = None) -> None:
        self._open = open_frontier
        self.lease_timeout, self.queue_by, self.interval, self.top = lease_timeout, queue_by, interval, top
        self.token = token
        self.audit = audit or (lambda line: None)
        self.history = History()
        self._frontier: Frontier | None = None
        self._redis = threading.Lock()  # every call into the frontier
        self._state = threading.Lock()  # the last sample, the error, the history
        self._status: dict[str, Any] | None = None
        self._error: tuple[int, str] | None = (503, "no sample yet")
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.page = (resources.files("crawler") / "data" / "console.html").read_text(encoding="utf-8")

    def _call(self, work: Callable[[Frontier], T]) -> T:
        with self._redis:
            if self._frontier is None:
                self._frontier = self._open()
            return work(self._frontier)

    def sample(self) -> str | None:
        """Read the status once; the error (one line) if it failed."""
        try:
            st = self._call(lambda f: ops.status(f, self.lease_timeout, top=self.top))
        except REDIS_ERRORS as exc:
            error: tuple[int, str] = (503, f"Redis unreachable: {_one_line(exc)}")
        except ops.NoSuchCrawl as exc:  # reset under the console, or named wrongly
            error = (404, _one_line(exc))
        except Exception as exc:  # hostile entries in Redis must not end the sampler
            logger.exception("Reading the crawl's status failed")
            error = (500, f"reading the status failed: {type(exc).__name__}: {_one_line(exc)}")
        else:
            with self._state:
                self._status, self._error = _finite(st), None
                self.history.add(float(st["time"]), {n["id"]: n["pages"] for n in st["nodes"]})
            return None
        with self._state:
            self._error = error
        return error[1]

    def error_status(self) -> int | None:
        """The HTTP status of the last sample's failure (None: it worked)."""
        with self._state:
            return self._error[0] if self._error is not None else None

    def _sample_forever(self) -> None:
        while not self._stopping.is_set():
            self.sample()
            self._wake.wait(self.interval)
            self._wake.clear()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._sample_forever, name="console-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)

    def status(self) -> tuple[int, dict[str, Any]]:
        """``/api/status``: the last sample and the history, or the error."""
        with self._state:
            if self._error is not None or self._status is None:
                code, message = self._error or (503, "no sample yet")
                return code, {"error": message, "retry_in": self.interval}
            return 200, {**self._status, "history": self.history.rates()}

    def act(self, action: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Run one action (its body checked); the answer and its status."""
        try:
            args = _checked(action, body)
        except ValueError as exc:
            return 400, {"error": str(exc)}

        def work(f: Frontier) -> dict[str, Any]:
            if action == "seed":
                return ops.seed(f, args["urls"], queue_by=self.queue_by)
            if action == "remove":
                return ops.remove(f, args["urls"], args["sites"], queue_by=self.queue_by)
            if action == "stop":
                return ops.request_stop(f, now=args["now"])
            return {"crawl": f.crawl, "cleared": f.control.clear_stop()}

        try:
            out = self._call(work)
        except REDIS_ERRORS as exc:
            return 503, {"error": f"Redis unreachable: {_one_line(exc)}"}
        except ops.NoSuchCrawl as exc:
            return 404, {"error": _one_line(exc)}
        self._wake.set()  # show its effect at the next poll
        return 200, out


def _checked(action: str, body: dict[str, Any]) -> dict[str, Any]:
    """An action's arguments from its JSON body; ValueError says what is wrong."""
    allowed = {"seed": {"urls"}, "remove": {"urls", "sites"}, "stop": {"now"}, "clear": set()}[action]
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ValueError(f"/api/{action} takes {sorted(allowed) or 'no field'}, not {unknown}")
    out: dict[str, Any] = {}
    for key in ("urls", "sites"):
        if key in allowed:
            value = body.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{key!r} must be a list of strings")
            if len(value) > MAX_URLS:
                raise ValueError(f"{key!r} holds {len(value)} items; at most {MAX_URLS} at once")
            out[key] = value
    if action == "seed" and not out["urls"]:
        raise ValueError("'urls' is empty: nothing to seed")
    if action == "remove" and not (out["urls"] or out["sites"]):
        raise ValueError("give 'urls' or 'sites' to remove")
    if action == "stop":
        if not isinstance(body.get("now", False), bool):
            raise ValueError("'now' must be true or false")
        out["now"] = body.get("now", False)
    return out


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ConsoleServer(ThreadingHTTPServer):
    """The HTTP server of one :class:`Console` (a thread per request)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], console: Console) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.console = console
        self.loopback = is_loopback(address[0])
        super().__init__(address, _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks the address's name up (getfqdn),
        # which can stall on a machine without DNS; nothing here needs it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), int(self.server_address[1])

    @property
    def url(self) -> str:
        host = str(self.server_address[0])
        return f"http://{'[' + host + ']' if ':' in host else host}:{self.server_address[1]}/"

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("Console request from %(client)s failed", {"client": client_address}, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: ConsoleServer
    server_version = "site-crawler-console"
    sys_version = ""
    timeout = 30  # a client that stops sending does not hold a thread for ever

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def _send(self, code: int, body: bytes, content_type: str, headers: Mapping[str, str] = {}) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, obj: Any, headers: Mapping[str, str] = {}) -> None:
        # ASCII escapes: whatever bytes came from Redis, the answer is valid JSON.
        body = json.dumps(obj, ensure_ascii=True, allow_nan=False).encode("ascii")
        self._send(code, body, "application/json; charset=utf-8", headers)

    def _host_refused(self) -> str | None:
        """Why the Host header is refused (DNS rebinding), or None."""
        host = self.headers.get("Host")
        if not self.server.loopback:
            return None
        name = urlsplit(f"//{host}").hostname if host else None
        if name is None or not is_loopback(name):
            return "this console answers to a loopback host name only (Host header)"
        return None

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        refused = self._host_refused()
        if refused:
            self._json(403, {"error": refused})
        elif path == "/":
            console = self.server.console
            nonce = secrets.token_urlsafe(16)
            page = (console.page.replace("__NONCE__", nonce)
                    .replace("__ACTIONS__", "on" if console.token else "off")
                    .replace("__INTERVAL_MS__", str(int(console.interval * 1000))))
            csp = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
                   "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
            self._send(200, page.encode("utf-8"), "text/html; charset=utf-8",
                       {"Content-Security-Policy": csp, "X-Frame-Options": "DENY"})
        elif path == "/api/status":
            self._json(*self.server.console.status())
        elif path.startswith("/api/") and path[5:] in ACTIONS:
            self._json(405, {"error": f"{path} takes POST"}, {"Allow": "POST"})
        else:
            self._json(404, {"error": "not found"})

    def do_POST(self) -> None:
        console = self.server.console
        path = urlsplit(self.path).path
        action = path[5:] if path.startswith("/api/") else ""
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            self._json(413 if length > MAX_BODY else 400, {"error": f"a body of 0 to {MAX_BODY} bytes, please"})
            return
        # Read the body before any answer: a socket closed on unread data
        # resets the connection, and the client would not see why.
        raw = self.rfile.read(length)
        code, out = self._refusal(action, raw)
        if code == 200:
            code, out = console.act(action, out)
        who = self.client_address[0]
        if action in ACTIONS:
            what = "done" if code == 200 else f"refused ({code}: {out.get('error')})"
            console.audit(f"POST /api/{action} from {who}: {what}")
        self._json(code, out)

    def _refusal(self, action: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        """(403/404/415/400, {"error"}) for a POST that may not act, else
        (200, its JSON body)."""
        console = self.server.console
        if action not in ACTIONS:
            return 404, {"error": "not found"}
        refused = self._host_refused()
        if refused:
            return 403, {"error": refused}
        if console.token is None:
            return 403, {"error": "actions are off: start scrapy console with --allow-actions"}
        origin, host = self.headers.get("Origin"), self.headers.get("Host")
        if origin is not None and (host is None or origin.lower() != f"http://{host}".lower()):
            return 403, {"error": "the request comes from another origin"}
        if self.headers.get_content_type() != "application/json":
            return 415, {"error": "actions take a JSON body (Content-Type: application/json)"}
        given = self.headers.get(TOKEN_HEADER, "").encode("utf-8", "replace")
        if not hmac.compare_digest(given, console.token.encode("utf-8")):
            return 403, {"error": f"a wrong or missing {TOKEN_HEADER} header"}
        try:
            body = json.loads(raw or b"{}")
        except (ValueError, UnicodeDecodeError):
            return 400, {"error": "the body is not JSON"}
        if not isinstance(body, dict):
            return 400, {"error": "the body must be a JSON object"}
        return 200, body
