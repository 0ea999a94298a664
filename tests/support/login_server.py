"""A site behind a login, for the session tests: run as ``python -m
tests.support.login_server --hosts 127.0.0.2 --log FILE --user U --password P``;
prints ``{"port": P, ...}`` once it listens.

- ``/login``: GET, a form with a CSRF token (hidden field, and the same in a
  cookie); POST with the right token, user and password sets ``sid`` and
  redirects to ``/``; wrong ones get the form again.
- Every other page needs a live ``sid``, else it redirects to ``/login``.
  A session ends after ``--expire-after`` pages.
- ``/`` links to ``/p/1`` .. ``/p/<fanout>``; ``/p/n`` to its children below
  ``--pages``; every page links to ``/logout``, which ends the session.

Each request is logged: time, path, method, status, whether its session
was live, and the ``X-Api-Key`` header it carried.
"""

from __future__ import annotations

import argparse
import json
import secrets
import time
from pathlib import Path

from aiohttp import web

from tests.support.mockserver import article_page, index_page, run, serve


def make_app(log_path: Path, user: str, password: str, pages: int, fanout: int, expire_after: int) -> web.Application:
    log = open(log_path, "a", buffering=1)  # noqa: SIM115
    live: dict[str, int] = {}  # sid -> pages served

    def children(n: int) -> list[tuple[str, str]]:
        return [(f"/p/{k}", f"Page {k}") for k in range(n * fanout + 1, n * fanout + fanout + 1) if k <= pages]

    def form(error: str = "") -> web.Response:
        token = secrets.token_hex(8)
        body = (f"<html><head><title>Log in</title></head><body><h1>Log in</h1><p>{error}</p>"
                f'<form method="post" action="/login"><input type="hidden" name="csrf" value="{token}">'
                '<input name="username"><input type="password" name="password"><button>Log in</button>'
                "</form></body></html>")
        response = web.Response(text=body, content_type="text/html")
        response.set_cookie("csrf", token)
        return response

    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        sid = request.cookies.get("sid")
        session_live = sid in live
        if path == "/robots.txt":
            response: web.StreamResponse = web.Response(text="User-agent: *\nAllow: /\n")
        elif path == "/login" and request.method == "POST":
            data = await request.post()
            if data.get("csrf") and data.get("csrf") == request.cookies.get("csrf") and \
                    data.get("username") == user and data.get("password") == password:
                new = secrets.token_hex(16)
                live[new] = 0
                response = web.HTTPFound("/")
                response.set_cookie("sid", new)
            else:
                response = form("Wrong user or password")
        elif path == "/login":
            response = form()
        elif not session_live:
            response = web.HTTPFound("/login")
        elif path == "/logout":
            live.pop(sid, None)
            response = web.HTTPFound("/login")
        else:
            live[sid] += 1
            if live[sid] >= expire_after:
                live.pop(sid, None)  # served, and the session ends with it
            logout = '<p><a href="/logout">Log out</a></p>'
            if path == "/":
                response = web.Response(text=index_page("Members", children(0), extra=logout),
                                        content_type="text/html")
            elif path.startswith("/p/") and path[3:].isdigit() and 1 <= int(path[3:]) <= pages:
                n = int(path[3:])
                response = web.Response(text=article_page(f"Member page {n}", f"Member page {n} opens here.",
                                                          children(n) + [("/logout", "Log out")]),
                                        content_type="text/html")
            else:
                response = web.Response(status=404, text="not found")
        log.write(json.dumps({"t": time.time(), "path": request.path_qs, "method": request.method,
                              "status": response.status, "live": session_live,
                              "key": request.headers.get("X-Api-Key")}) + "\n")
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", required=True)
    ap.add_argument("--pages", type=int, default=30)
    ap.add_argument("--fanout", type=int, default=3)
    ap.add_argument("--expire-after", type=int, default=1000)
    args = ap.parse_args()
    holder: dict[str, int] = {}
    await serve(make_app(args.log, args.user, args.password, args.pages, args.fanout, args.expire_after),
                args.hosts.split(","), holder)


if __name__ == "__main__":
    run(main)
