"""A hostile HTTP server for tests, run as a subprocess like mockserver.py:

    python -m tests.support.hostile_server --hosts 127.0.0.1,127.0.0.2,127.0.0.3 --log requests.jsonl

Prints one JSON line ``{"port": P}`` and serves until killed, logging every
request as mockserver.py does. What it serves, by host:

- 127.0.0.1, the site under attack: redirect loops, endless redirect chains,
  a redirect without Location, redirects and meta refreshes off-site and to
  cloud-metadata and private addresses, a gzip bomb, a page and its copy
  under a second URL with short text, a hub whose copy 127.0.0.3 published.
- 127.0.0.2: an innocent other site (redirect targets that must not be fetched).
- 127.0.0.3: a copier: the hub of 127.0.0.1, word for word, linking to
  nothing of its own.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path

from aiohttp import web

from tests.support.mockserver import answer, article_page, index_page, run, serve

HUB_ARTICLES = [f"/hub/article-{i}.html" for i in range(3)]
BOMB_BYTES = 64 * 1024 * 1024  # decompressed; a few tens of KiB on the wire


def hub_page() -> bytes:
    # A list of links, as hubs are; their long titles give the page enough
    # text to be fingerprinted (a hub padded with paragraphs of prose reads,
    # rightly, as an information page to a classifier that knows the site).
    links = [(p, f"Article {i} of the hub, in the order the site published them, with a title long enough "
                 f"to describe it") for i, p in enumerate(HUB_ARTICLES)]
    extra = ("<p>This hub lists the site's articles in the order they were published. Older articles are kept "
             "in the archive, every article links back here, and the list is updated whenever an article "
             "appears on the site.</p>")
    return index_page("The hub", links, extra=extra).encode()


def main_site(port: int) -> dict[str, tuple[int, dict[str, str], bytes]]:
    html = {"Content-Type": "text/html; charset=utf-8"}
    other = f"http://127.0.0.2:{port}"
    pages: dict[str, tuple[int, dict[str, str], bytes]] = {}

    def redirect(path: str, to: str | None, status: int = 302) -> None:
        pages[path] = (status, {"Location": to} if to is not None else {}, b"")

    pages["/robots.txt"] = (200, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow:\n")
    pages["/"] = (200, html, index_page("Hostile", [
        ("/loop/a", "Loop"), ("/chain/0", "Chain"), ("/nolocation", "No location"),
        ("/off-site", "Off-site redirect"), ("/meta-off-site.html", "Off-site refresh"),
        ("/metadata", "Metadata"), ("/private-net", "Private"), ("/bomb.html", "Bomb"),
        ("/short/", "Short"), ("/short/index.html", "Short again"), ("/hub/", "Hub"),
        ("/formfeed.html", "Form feed"), ("/badlinks.html", "Bad links"), ("/latin1.html", "Latin-1"),
        ("/gbk.html", "GBK"), ("/refresh/0.html", "Refresh chain"), ("/reload.html", "Reloads itself"),
    ]).encode())
    # An endless chain of meta refreshes, and a page that only reloads itself.
    for n in range(30):
        pages[f"/refresh/{n}.html"] = (200, html, index_page(
            f"Refresh {n}", [], head=f'<meta http-equiv="refresh" content="0; url=/refresh/{n + 1}.html">').encode())
    pages["/reload.html"] = (200, html, index_page(
        "Live", [], head='<meta http-equiv="refresh" content="300">').encode())
    # A form feed in <pre> and control characters in a title and an anchor.
    pages["/formfeed.html"] = (200, html, (
        "<html><head><title>Form\x0bfeed\x01</title></head><body><h1>Report</h1>"
        "<pre>page 1\x0cpage 2</pre><ul><li><a href='/ff-child.html'>Child\x02</a></li></ul>"
        "</body></html>").encode())
    pages["/ff-child.html"] = (200, html, article_page("Child of the form feed", "Reached."))
    # Malformed bracketed hosts, in links and in <base href>: only the good link counts.
    pages["/badlinks.html"] = (200, html, (
        "<html><head><base href='http://[::1.]/'><title>Bad links</title></head><body><ul>"
        "<li><a href='http://[::1.]/x'>a</a></li><li><a href='http://2001::1]/'>b</a></li>"
        "<li><a href='//[::1.]/y'>c</a></li><li><a href='/bl-child.html'>good</a></li></ul></body></html>").encode())
    pages["/bl-child.html"] = (200, html, article_page("Child of the bad links", "Reached."))
    # No charset anywhere: ISO-8859-1 French, and a short GBK page with lang.
    french = ("<html><head><title>Crème brûlée</title></head><body><p>Voilà où l'été a commencé: "
              "à Noël, déjà, la forêt était blanche et les élèves français étaient très contents.</p>"
              "</body></html>")
    pages["/latin1.html"] = (200, {"Content-Type": "text/html"}, french.encode("iso-8859-1"))
    chinese = "<html lang='zh'><head><title>网络爬虫</title></head><body><p>欢迎光临</p></body></html>"
    pages["/gbk.html"] = (200, {"Content-Type": "text/html"}, chinese.encode("gbk"))
    redirect("/loop/a", "/loop/b")
    redirect("/loop/b", "/loop/a", 301)
    for n in range(30):  # an endless chain, as far as a crawler with 10 hops can tell
        redirect(f"/chain/{n}", f"/chain/{n + 1}")
    redirect("/nolocation", None)
    redirect("/off-site", f"{other}/landing.html")
    pages["/meta-off-site.html"] = (200, html, index_page(
        "Moved", [], head=f'<meta http-equiv="refresh" content="0; url={other}/refreshed.html">').encode())
    redirect("/metadata", "http://169.254.169.254/latest/meta-data/")
    redirect("/private-net", "http://10.0.0.1/admin")
    bomb = gzip.compress(b"<html><body>" + b"\0" * BOMB_BYTES, compresslevel=9)
    pages["/bomb.html"] = (200, {**html, "Content-Encoding": "gzip"}, bomb)
    short = index_page("Short", [("/short/a.html", "A")]).encode()
    pages["/short/"] = (200, html, short)
    pages["/short/index.html"] = (200, html, short)
    pages["/short/a.html"] = (200, html, article_page("A", "Reached from the short page."))
    pages["/hub/"] = (200, html, hub_page())
    for i, path in enumerate(HUB_ARTICLES):
        pages[path] = (200, html, article_page(f"Hub article {i}", f"Article number {i} of the hub."))
    return {k: (s, h, b if isinstance(b, bytes) else b.encode()) for k, (s, h, b) in pages.items()}


def other_site() -> dict[str, tuple[int, dict[str, str], bytes]]:
    html = {"Content-Type": "text/html; charset=utf-8"}
    return {"/robots.txt": (404, html, b""),
            "/landing.html": (200, html, article_page("Landing", "Never to be fetched.").encode()),
            "/refreshed.html": (200, html, article_page("Refreshed", "Never to be fetched.").encode())}


def copier_site() -> dict[str, tuple[int, dict[str, str], bytes]]:
    html = {"Content-Type": "text/html; charset=utf-8"}
    # Links that resolve on the copier itself, all broken: a copy, not a site.
    return {"/robots.txt": (404, html, b""), "/": (200, html, hub_page())}


def make_app(port_holder: dict[str, int], log_path: Path) -> web.Application:
    log = open(log_path, "a", buffering=1)  # noqa: SIM115
    sites: dict[str, dict[str, tuple[int, dict[str, str], bytes]]] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        host = (request.host or "").rsplit(":", 1)[0]
        log.write(json.dumps({"t": time.time(), "host": host, "path": request.path_qs,
                              "ua": request.headers.get("User-Agent", "")}) + "\n")
        if host not in sites:
            sites[host] = {"127.0.0.1": lambda: main_site(port_holder["port"]), "127.0.0.2": other_site,
                           "127.0.0.3": copier_site}.get(host, dict)()
        return answer(sites[host], request)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    return app


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="127.0.0.1,127.0.0.2,127.0.0.3")
    ap.add_argument("--log", type=Path, required=True)
    args = ap.parse_args()
    holder: dict[str, int] = {}
    await serve(make_app(holder, args.log), args.hosts.split(","), holder)


if __name__ == "__main__":
    run(main)
