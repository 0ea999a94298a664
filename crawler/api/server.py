"""The HTTP face of the API (``scrapy serve``): Firecrawl v2's routes.

    GET    /health, /                        {"status": "ok"}: no key needed, nothing else told
    POST   /v2/scrape                        scrape one URL (waits for it)
    POST   /v2/crawl                         start a crawl: {"success", "id", "url"}
    GET    /v2/crawl/active                  the key's running crawls
    GET    /v2/crawl/ID[?skip=N]             status and a page of results, "next" for the rest
    DELETE /v2/crawl/ID                      cancel (409 once it has ended)
    GET    /v2/crawl/ID/errors               the pages that could not be had
    POST   /v2/batch/scrape                  scrape many URLs as one job
    GET    /v2/batch/scrape/ID[?skip=N]      as a crawl's
    DELETE /v2/batch/scrape/ID
    POST   /v2/map                           the URLs of a site: its sitemaps and links

and the same under ``/v1/`` for v1's clients (LangChain's loader, older
SDKs): the bodies are read alike (v1's ``maxDepth``, ``ignoreSitemap`` and
``allowBackwardLinks`` too); v1's map answers a list of URLs.

Every other route needs ``Authorization: Bearer KEY`` (401 without a known
key) and counts towards the key's requests a minute (429 past them, with
``Retry-After``). A body is JSON (415 otherwise), at most ``MAX_BODY`` bytes
(413). A request the API cannot do is 400 naming the field; a URL the
network policy refuses is 403 before anything is fetched; an unknown job,
or another key's, 404. Errors never carry a traceback: an unexpected one is
500 with one line, and logged.

Why the standard library's ``ThreadingHTTPServer``: each request is a few
Redis and store reads, or a wait for a scrape's worker; a thread each says
that plainly (as ``scrapy console`` does), and the crawling happens in the
jobs' own processes.
"""

from __future__ import annotations

import json
import logging
import re
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import redis

from crawler.api.asks import BadAsk

if TYPE_CHECKING:
    from crawler.api.keys import ApiKeys, RateLimit
    from crawler.api.service import Api, Reply

logger = logging.getLogger(__name__)

__all__ = ["ApiServer"]

MAX_BODY = 4 << 20
_JOB = r"([0-9a-fA-F-]{1,64})"
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("POST", re.compile(r"/v[12]/scrape"), "scrape"),
    ("POST", re.compile(r"/v[12]/crawl"), "crawl"),
    ("GET", re.compile(r"/v[12]/crawl/active"), "active"),
    ("GET", re.compile(rf"/v[12]/crawl/{_JOB}/errors"), "errors"),
    ("GET", re.compile(rf"/v[12]/crawl/{_JOB}"), "crawl_status"),
    ("DELETE", re.compile(rf"/v[12]/crawl/{_JOB}"), "crawl_cancel"),
    ("POST", re.compile(r"/v[12]/batch/scrape"), "batch"),
    ("GET", re.compile(rf"/v[12]/batch/scrape/{_JOB}/errors"), "errors"),
    ("GET", re.compile(rf"/v[12]/batch/scrape/{_JOB}"), "batch_status"),
    ("DELETE", re.compile(rf"/v[12]/batch/scrape/{_JOB}"), "batch_cancel"),
    ("POST", re.compile(r"/v[12]/map"), "map"),
]


class ApiServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64  # socketserver's 5 refuses a burst of clients

    def __init__(self, address: tuple[str, int], api: Api, keys: ApiKeys, rate: RateLimit) -> None:
        self.api, self.keys, self.rate = api, keys, rate
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: ApiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logger.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _reply(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> tuple[Any, Reply | None]:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return None, (400, {"success": False, "error": "Content-Length is not a number"})
        if length > MAX_BODY:
            return None, (413, {"success": False, "error": f"the body is over {MAX_BODY} bytes"})
        raw = self.rfile.read(length) if length > 0 else b""
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if raw and ctype != "application/json":
            return None, (415, {"success": False, "error": "send the body as application/json"})
        try:
            return (json.loads(raw) if raw else {}), None
        except (ValueError, RecursionError):
            return None, (400, {"success": False, "error": "the body is not valid JSON"})

    def _serve(self, method: str) -> None:
        split = urlsplit(self.path)
        path = split.path.rstrip("/") or "/"
        if method == "GET" and path in ("/", "/health"):
            self._reply(200, {"status": "ok"})
            return
        body: Any = {}
        if method == "POST":
            body, problem = self._body()
            if problem is not None:
                self._reply(*problem)
                return
        route = next(((name, m) for verb, pattern, name in ROUTES if verb == method
                      for m in [pattern.fullmatch(path)] if m), None)
        server = self.server
        key = server.keys.identify(self.headers.get("Authorization"))
        if key is None:
            self._reply(401, {"success": False, "error": "Unauthorized: give a known API key as "
                                                         "'Authorization: Bearer KEY'"})
            return
        if route is None:
            self._reply(404, {"success": False, "error": f"no route {method} {path}"})
            return
        try:
            wait = server.rate.take(key)
            if wait:
                self._reply(429, {"success": False, "error": "Rate limit exceeded: this key's requests a minute "
                                                             "(API_KEY_REQUESTS_PER_MINUTE)"},
                            {"Retry-After": str(int(wait) + 1)})
                return
            self._reply(*self._dispatch(route[0], route[1], key, body, split.query))
        except BadAsk as exc:
            self._reply(400, {"success": False, "error": str(exc)})
        except (redis.RedisError, OSError) as exc:
            logger.warning("API %s %s: %s", method, path, exc)
            self._reply(503, {"success": False, "error": f"the crawler's Redis or store is out of reach: {exc}"})
        except Exception as exc:
            logger.exception("API %s %s failed", method, path)
            self._reply(500, {"success": False, "error": f"internal error: {type(exc).__name__}"})

    def _base(self) -> str:
        host = self.headers.get("Host") or ""
        if not re.fullmatch(r"[A-Za-z0-9.\-]+(:\d{1,5})?|\[[0-9A-Fa-f:.]+\](:\d{1,5})?", host):
            host = self.server.url.split("://", 1)[1]
        return f"http://{host}"

    def _dispatch(self, name: str, match: re.Match[str], key: str, body: Any, query: str) -> Reply:
        api = self.server.api
        if name == "scrape":
            return api.scrape(key, body)
        if name == "crawl":
            return api.crawl(key, body, self._base())
        if name == "batch":
            return api.batch(key, body, self._base())
        if name == "map":
            return api.map(key, body, v1=self.path.startswith("/v1/"))
        if name == "active":
            return api.active(key)
        job_id = match.group(1)
        if name == "errors":
            return api.errors(key, job_id)
        kind = "crawl" if name.startswith("crawl") else "batch"
        if name.endswith("_cancel"):
            return api.cancel(key, job_id, kind)
        skip_raw = parse_qs(query).get("skip", ["0"])[0]
        if not skip_raw.isdigit():
            raise BadAsk(f"skip: a number, not {skip_raw!r}")
        return api.status(key, job_id, int(skip_raw), self._base(), kind)

