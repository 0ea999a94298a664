"""A site that limits its rate, for the adaptive-rate tests and
``bench/bench_rate.py``: run as ``python -m tests.support.limited_server
--hosts 127.0.0.2 --log FILE --limit N --pages P``; prints ``{"port": P, ...}``
once it listens (``tests.support.servers.launch``).

- Each host answers 429 Too Many Requests, without ``Retry-After``, to a
  request that arrives when more than ``--limit`` requests reached that host
  in the second before it (a sliding window; refused requests count too, as
  on a real limiter). robots.txt is never refused.
- Each answer takes ``--latency`` seconds plus ``--per-request`` for every
  other request of that host in flight: it grows with the crawler's
  concurrency.
- ``/`` links to ``/p/1`` .. ``/p/<fanout>``; ``/p/n`` is an article (its
  words its host's own: no host is a mirror of another) that links
  to ``/p/(n*fanout+1)`` .. ``/p/(n*fanout+fanout)`` below ``--pages``: a tree
  of ``--pages`` pages, each page once.
- ``--refuse-all``: every request but robots.txt answered 429 (a site that
  keeps refusing).
- ``--wall-every K``: ``/p/n`` with n a multiple of K answers its first
  request with a bot wall (200, a challenge page whose link leads to
  ``/trap``), later ones with the page; ``--wall-forever N``: ``/p/N``
  answers a wall every time.

Every request is logged as a JSON line: time, host, path, status.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import time
from pathlib import Path

from aiohttp import web

from tests.support.mockserver import article_page, index_page, run, serve


WALL = ('<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>'
        '<h1>Checking your browser before accessing the site.</h1>'
        '<p>This process is automatic. <a href="/trap">Why am I seeing this?</a></p>'
        '<script src="/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1?ray=8"></script></body></html>')


def make_app(log_path: Path | None, limit: int, pages: int, fanout: int, latency: float, per_request: float,
             refuse_all: bool, wall_every: int = 0, wall_forever: int = 0) -> web.Application:
    log = open(log_path, "a", buffering=1) if log_path else None  # noqa: SIM115
    recent: dict[str, collections.deque[float]] = collections.defaultdict(collections.deque)
    inflight: collections.Counter[str] = collections.Counter()
    asked: collections.Counter[str] = collections.Counter()

    def children(n: int) -> list[tuple[str, str]]:
        return [(f"/p/{k}", f"Page {k}") for k in range(n * fanout + 1, n * fanout + fanout + 1) if k <= pages]

    async def handle(request: web.Request) -> web.Response:
        host = (request.host or "").rsplit(":", 1)[0]
        now = time.monotonic()
        path = request.path
        status = 200
        concurrent = 0
        if path == "/robots.txt":
            body, ctype = "User-agent: *\nAllow: /\n", "text/plain"
        else:
            window = recent[host]
            while window and window[0] <= now - 1.0:
                window.popleft()
            window.append(now)
            if refuse_all or len(window) > limit:
                status = 429
            inflight[host] += 1
            concurrent = inflight[host]
            try:
                await asyncio.sleep(latency + per_request * (inflight[host] - 1))
            finally:
                inflight[host] -= 1
            body, ctype = "", "text/html"
            if status == 429:
                body, ctype = "Too many requests", "text/plain"
            elif path == "/":
                body = index_page("Home", children(0))
            elif path.startswith("/p/") and path[3:].isdigit() and 1 <= int(path[3:]) <= pages:
                n = int(path[3:])
                asked[path] += 1
                if n == wall_forever or (wall_every and n % wall_every == 0 and asked[path] == 1):
                    body = WALL
                else:
                    # Each host's text its own (prose is seeded by the title): no host a mirror of another.
                    body = article_page(f"Page {n} of {host}", f"Page {n} opens here.", children(n))
            else:
                status, body, ctype = 404, "not found", "text/plain"
        if log is not None:
            log.write(json.dumps({"t": time.time(), "host": host, "path": request.path_qs, "status": status,
                                  "inflight": concurrent if path != "/robots.txt" else 0}) + "\n")
        return web.Response(status=status, text=body, content_type=ctype)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return app


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--log", type=Path)
    ap.add_argument("--limit", type=int, default=5, help="requests a second a host answers; more get 429")
    ap.add_argument("--pages", type=int, default=300)
    ap.add_argument("--fanout", type=int, default=4)
    ap.add_argument("--latency", type=float, default=0.01)
    ap.add_argument("--per-request", type=float, default=0.005)
    ap.add_argument("--refuse-all", action="store_true")
    ap.add_argument("--wall-every", type=int, default=0)
    ap.add_argument("--wall-forever", type=int, default=0)
    args = ap.parse_args()
    holder: dict[str, int] = {}
    await serve(make_app(args.log, args.limit, args.pages, args.fanout, args.latency, args.per_request,
                         args.refuse_all, args.wall_every, args.wall_forever), args.hosts.split(","), holder)


if __name__ == "__main__":
    run(main)
