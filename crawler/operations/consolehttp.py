"""The web console's HTTP face: the server ``scrapy console`` starts, its
endpoints, and the checks an action passes before the console
(``crawler/operations/console.py``, the sampler and the actions) runs it.

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
import secrets
import socket
import socketserver
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from crawler.operations.console import Console

logger = logging.getLogger(__name__)

__all__ = ["ACTIONS", "ConsoleServer", "TOKEN_HEADER", "is_loopback"]

TOKEN_HEADER = "X-Console-Token"
ACTIONS = ("seed", "remove", "stop", "clear")
MAX_BODY = 1 << 20  # bytes of a POST body: about 10,000 URLs


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
