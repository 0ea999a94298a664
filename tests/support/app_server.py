"""A site whose pages scripts build, for the rendering tests
(``tests/test_render.py``) and ``bench/bench_render.py``: run as ``python -m
tests.support.app_server --hosts 127.0.0.2,127.0.0.5 --log FILE``; prints
``{"port": P, ...}`` once it listens (``tests.support.servers.launch``).

- ``/`` and ``/docs/<n>`` (n < ``--docs``): an empty application shell
  (``<div id="root"></div>``, a ``<noscript>`` warning) whose script,
  ``/static/app.js``, asks ``/api/route?path=...`` for the page's title,
  paragraphs and links and writes them into the root.
- ``/static.html``: a page of plain HTML, text and links, no script.
- ``/leak``: its script fetches ``http://127.0.0.5:P/secret`` and
  ``http://169.254.169.254:P/latest/meta-data/`` (and writes its own text;
  the server listens on 169.254.169.254 too when given it in ``--hosts``).
- ``/robots-test``: its script fetches ``/private/data.json``, which
  robots.txt disallows.
- ``/stall``: writes its text, then loads ``/never.js``, which never
  answers: the page never finishes loading.
- ``/download``: clicks a download link (``/files/report.zip``) and frames
  ``/files/attach`` (``Content-Disposition: attachment``).
- ``/popup``: opens ``/docs/0`` in a new window.
- ``/spin``: a script that never yields (the page hangs its renderer).
- ``/hog``: a script that allocates without end (out of memory).
- ``/nav``: its script sends the browser to ``/docs/1`` after writing text.
- ``/chart``: an image (``image/png``) at a path with no suffix.
- Files put under ``--root`` are served as they are (PDFs: ``.pdf``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.support.mockserver import run, serve

WORDS = ("river stone lantern harbor meadow copper violet engine garden signal thunder orchard canyon "
         "marble falcon silver prairie glacier compass beacon willow ember tundra quartz").split()

APP_JS = """
(function () {
  var root = document.getElementById('root');
  fetch('/api/route?path=' + encodeURIComponent(location.pathname))
    .then(function (r) { return r.json(); })
    .then(function (d) {
      document.title = d.title;
      var html = '<h1>' + d.title + '</h1>';
      d.paragraphs.forEach(function (p) { html += '<p>' + p + '</p>'; });
      html += '<ul>';
      d.links.forEach(function (l) { html += '<li><a href="' + l + '">' + l + '</a></li>'; });
      root.innerHTML = html + '</ul>';
    });
})();
"""


def shell(title: str, extra: str = "") -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
            "<noscript>You need to enable JavaScript to run this app.</noscript><div id=\"root\"></div>"
            f"{extra}<script src=\"/static/app.js\"></script></body></html>")


def prose(seed: int, n: int = 90) -> str:
    return " ".join(WORDS[(seed * 7 + i * (seed % 5 + 2) + i // 3) % len(WORDS)] + ("s" if (i + seed) % 4 == 0 else "")
                    for i in range(n)) + f" doc{seed}"


def route(path: str, docs: int) -> dict[str, Any] | None:
    if path == "/":
        return {"title": "Home", "paragraphs": ["Welcome to the application."],
                "links": [f"/docs/{i}" for i in range(docs)]}
    if path.startswith("/docs/") and path[6:].isdigit() and int(path[6:]) < docs:
        n = int(path[6:])
        return {"title": f"Document {n}", "paragraphs": [prose(n * 3 + k) for k in range(3)],
                "links": [f"/docs/{(n + 1) % docs}", "/"]}
    return None


# A static reference manual as Doxygen writes one: an index page of links,
# and thin class pages whose menu a script writes, the same on every page
# (Doxygen's menu.js). REF_MENU's pages are linked from that menu only.
REF_CLASSES = 10
REF_MENU = ("/ref/files.html", "/ref/modules.html", "/ref/namespaces.html", "/ref/classlist.html")
MENU_JS = ("document.getElementById('menu').innerHTML = "
           + json.dumps("".join(f'<a href="{u}">{u[5:-5]}</a> ' for u in ("/ref/index.html", *REF_MENU))) + ";")


FRAMES = 60  # iframes of /frames (libstdc++'s inherits.html has 918)


def reference(path: str) -> str | None:
    if path == "/ref/index.html":
        links = "".join(f'<li><a href="/ref/class{i}.html">Class {i}</a></li>' for i in range(REF_CLASSES))
        return f"<html><head><title>Reference</title></head><body><h1>Classes</h1><ul>{links}</ul></body></html>"
    if path in REF_MENU:
        return (f"<html><head><title>{path[5:-5]}</title></head><body><p>{prose(len(path) * 11)}</p>"
                '<a href="/ref/index.html">Index</a></body></html>')
    if path.startswith("/ref/class") and path[10:-5].isdigit() and int(path[10:-5]) < REF_CLASSES:
        return (f"<html><head><title>Class {path[10:-5]}</title></head><body><div id=\"menu\"></div>"
                f"<p>Class {path[10:-5]} of the library.</p><a href=\"https://www.doxygen.org/\">doxygen</a>"
                '<script src="/ref/menu.js"></script></body></html>')
    return None


def page_with(title: str, script: str, text: str = "") -> str:
    return (f"<!doctype html><html><head><title>{title}</title></head><body><div id=\"root\"></div>"
            f"<script>{script}</script>{text}</body></html>")


def make_app(holder: dict[str, int], log_path: Path | None, root: Path | None, docs: int) -> web.Application:
    log = open(log_path, "a", buffering=1) if log_path else None  # noqa: SIM115

    def written(title: str) -> str:
        return (f"document.getElementById('root').innerHTML = '<h1>{title}</h1><p>' + "
                f"{json.dumps(prose(len(title) + 50, 60))} + '</p>';")

    async def handle(request: web.Request) -> web.StreamResponse:
        host = (request.host or "").rsplit(":", 1)[0]
        path = request.path
        if log is not None:
            log.write(json.dumps({"t": time.time(), "host": host, "path": request.path_qs,
                                  "method": request.method}) + "\n")
        port = holder.get("port", 0)
        html = "text/html"
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private/\n", content_type="text/plain")
        if path == "/static/app.js":
            return web.Response(text=APP_JS, content_type="application/javascript")
        if path == "/api/route":
            found = route(request.query.get("path", ""), docs)
            if found is None:
                return web.Response(status=404, text="{}", content_type="application/json")
            return web.Response(text=json.dumps(found), content_type="application/json")
        if path == "/" or (path.startswith("/docs/") and route(path, docs) is not None):
            return web.Response(text=shell("App"), content_type=html)
        if path == "/frames":
            frames = "".join(f'<iframe src="/frames/{i}"></iframe>' for i in range(FRAMES))
            return web.Response(text=page_with("Frames", written("Frames"), frames), content_type=html)
        if path.startswith("/frames/") and path[8:].isdigit():
            return web.Response(text=f"<html><body>frame {path[8:]}</body></html>", content_type=html)
        if path == "/ref/menu.js":
            return web.Response(text=MENU_JS, content_type="application/javascript")
        if reference(path) is not None:
            return web.Response(text=reference(path), content_type=html)
        if path == "/static.html":
            body = "".join(f"<p>{prose(900 + k)}</p>" for k in range(4))
            links = "".join(f'<li><a href="/docs/{i}">Document {i}</a></li>' for i in range(min(docs, 6)))
            return web.Response(text=f"<html><head><title>Static</title></head><body><h1>Static</h1>{body}"
                                     f"<ul>{links}</ul></body></html>", content_type=html)
        if path == "/leak":
            script = (f"fetch('http://127.0.0.5:{port}/secret').catch(function(){{}});"
                      f"fetch('http://169.254.169.254:{port}/latest/meta-data/').catch(function(){{}});"
                      + written("Leak"))
            return web.Response(text=page_with("Leak", script), content_type=html)
        if path == "/robots-test":
            script = "fetch('/private/data.json').catch(function(){});" + written("Robots")
            return web.Response(text=page_with("Robots", script), content_type=html)
        if path == "/private/data.json":
            return web.Response(text='{"secret": true}', content_type="application/json")
        if path == "/secret":
            return web.Response(text="secret", content_type="text/plain")
        if path == "/stall":
            return web.Response(text=page_with("Stall", written("Stall"), '<script src="/never.js"></script>'),
                                content_type=html)
        if path == "/never.js":
            await asyncio.sleep(3600)
            return web.Response(text="", content_type="application/javascript")
        if path == "/download":
            script = (written("Download") + "var a = document.createElement('a'); a.href = '/files/report.zip';"
                      "a.download = 'report.zip'; a.textContent = 'report'; document.body.appendChild(a); a.click();")
            return web.Response(text=page_with("Download", script, '<iframe src="/files/attach"></iframe>'),
                                content_type=html)
        if path == "/chart":  # an image at a path without a suffix: fetched, a record, not read
            return web.Response(body=b"\x89PNG\r\n\x1a\n" + b"\0" * 100, content_type="image/png")
        if path in ("/files/report.zip", "/files/attach"):
            return web.Response(body=b"PK\x03\x04" + b"\0" * 2000, content_type="application/zip",
                                headers={"Content-Disposition": "attachment; filename=report.zip"})
        if path == "/popup":
            return web.Response(text=page_with("Popup", written("Popup") + "window.open('/docs/0');"),
                                content_type=html)
        if path == "/nav":
            return web.Response(text=page_with("Nav", written("Nav") + "setTimeout(function(){location.href='/docs/1';}, 50);"),
                                content_type=html)
        if path == "/spin":
            return web.Response(text=page_with("Spin", written("Spin") + "setTimeout(function(){ while (true) {} }, 10);"),
                                content_type=html)
        if path == "/hog":
            script = (written("Hog") + "var keep = []; setTimeout(function grow() { "
                      "for (var i = 0; i < 200; i++) { keep.push(new Array(1e6).fill(i)); } setTimeout(grow, 0); }, 10);")
            return web.Response(text=page_with("Hog", script), content_type=html)
        if root is not None:
            target = (root / path.lstrip("/")).resolve()
            if target.is_file() and root.resolve() in target.parents:
                kind = "application/pdf" if target.suffix == ".pdf" else html
                return web.Response(body=target.read_bytes(), content_type=kind)
        return web.Response(status=404, text="not found", content_type="text/plain")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="127.0.0.2,127.0.0.5")
    ap.add_argument("--log", type=Path)
    ap.add_argument("--root", type=Path)
    ap.add_argument("--docs", type=int, default=8, help="documents of the application")
    args = ap.parse_args()
    holder: dict[str, int] = {}
    await serve(make_app(holder, args.log, args.root, args.docs), args.hosts.split(","), holder)


if __name__ == "__main__":
    run(main)
