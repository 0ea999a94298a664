"""A real HTTP server for tests and benchmarks, run as a subprocess.

    python -m tests.support.mockserver --hosts 127.0.0.1,127.0.0.2 --log requests.jsonl [--root DIR]

Binds port 0 on the first host and the same port on the others, prints one
JSON line ``{"port": P, "hosts": [...]}`` and serves until killed. Every
request is appended to the log as a JSON line (time, host, path, user agent)
so that tests can assert exactly what was fetched, how often and when.

Without ``--root`` it serves the generated test site of ``SITE`` below on
every host; with ``--root`` it serves that directory's files (benchmarks),
or a host's own directory ``ROOT/<host>`` when there is one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

LOREM = (
    "The crawler reads this paragraph as the body of an article. It is long "
    "enough to look like real prose, with several sentences that carry no links "
    "at all, so the page reads as an information page rather than a list of "
    "links. Each article repeats it with its own opening words. "
)
CHINESE = (
    "网络爬虫是一种按照一定的规则自动抓取万维网信息的程序。它从一个或若干初始网页的地址开始，"
    "获得初始网页上的地址，在抓取网页的过程中，不断从当前页面上抽取新的地址放入队列，"
    "直到满足系统的一定停止条件。分布式爬虫把任务分给多台机器，共享待抓取的地址队列。"
)

JAPANESE = (
    "ウェブクローラーは、ウェブページを自動的に巡回して情報を収集するプログラムである。"
    "クローラーは一つまたは複数の初期アドレスから始まり、ページの中のリンクを抽出して待ち行列に加え、"
    "停止条件を満たすまで巡回を続ける。分散型のクローラーは複数の機械で作業を分担し、"
    "取得済みのアドレスの集合を共有する。礼儀正しいクローラーは同じサーバーへの要求の間に待ち時間を置き、"
    "サーバーに過大な負荷を掛けないようにする。重複したページは指紋の比較で見つけ、二度と処理しない。"
)
JAPANESE_TITLE = "ウェブクローラー"


_VOCABULARY = (
    "site page link frontier queue robot delay server worker crawl index article text "
    "parser lease redis store graph topic search engine cluster machine seed host domain "
    "request response header status content encoding retry backoff politeness schedule "
    "memory fingerprint duplicate sentence paragraph reader writer network latency"
).split()


def prose(seed: str, words: int = 60) -> str:
    """Deterministic text of its own for each seed, so that distinct test
    articles are not near-duplicates of each other."""
    import random

    rnd = random.Random(seed)
    out = []
    for i in range(words):
        word = rnd.choice(_VOCABULARY)
        out.append(word.capitalize() if i % 12 == 0 else word)
        if i % 12 == 11:
            out[-1] += "."
    return " ".join(out) + "."


def index_page(title: str, links: list[tuple[str, str]], extra: str = "", head: str = "") -> str:
    items = "\n".join(f'<li><a href="{href}">{text}</a></li>' for href, text in links)
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title>{head}</head><body>"
        f'<nav><a href="/">Home</a></nav><h1>{title}</h1><ul>{items}</ul>{extra}</body></html>'
    )


def article_page(title: str, opening: str, links: list[tuple[str, str]] = (), head: str = "",
                 paragraphs: int = 6) -> str:
    body = "".join(f"<p>{opening} {LOREM}{prose(title + str(i))}</p>" for i in range(paragraphs))
    more = "".join(f'<p>See also <a href="{h}">{t}</a>.</p>' for h, t in links)
    return (
        f"<!DOCTYPE html><html><head><title>{title}</title>{head}</head><body>"
        f'<nav><a href="/">Home</a></nav><article><h1>{title}</h1>{body}{more}</article></body></html>'
    )


def build_site(port: int) -> dict[str, tuple[int, dict[str, str], bytes]]:
    """path -> (status, headers, body) of the generated site on 127.0.0.1."""
    other = f"http://127.0.0.2:{port}/"
    html = {"Content-Type": "text/html; charset=utf-8"}
    pages: dict[str, tuple[int, dict[str, str], bytes]] = {}

    def add(path: str, body: str, status: int = 200, headers: dict[str, str] | None = None,
            raw: bytes | None = None) -> None:
        pages[path] = (status, headers or html, raw if raw is not None else body.encode("utf-8"))

    add("/robots.txt", "User-agent: *\nDisallow: /private/\n", headers={"Content-Type": "text/plain"})
    add("/", index_page("Home", [
        ("/news/", "News"), ("/docs/", "Documentation"), ("/cn/", "中文"),
        ("/private/secret.html", "Private"), ("/missing.html", "Missing"),
        ("/broken.html", "Broken"), ("/redirect/1", "Moved"), ("/calendar?month=0", "Calendar"),
        ("/robots/", "Robots"), (other, "Partner site"), ("/news/#top", "News again"),
        ("mailto:someone@example.invalid", "Mail"), ("javascript:void(0)", "JS"),
        ("/image.png", "A picture"),
    ]))
    add("/news/", index_page("News", [
        ("/news/2024/05/first-article-on-crawling.html", "First"),
        ("/news/2024/05/second-article-on-politeness.html", "Second"),
        ("/news/2024/06/third-article-on-frontiers.html", "Third"),
        ("/news/page/2/", "Older news"),
    ]))
    add("/news/page/2/", index_page("Older news", [
        ("/news/2023/12/old-article-about-robots.html", "Old"),
        ("/news/", "Newer news"),
    ]))
    for path, title in [
        ("/news/2024/05/first-article-on-crawling.html", "First article on crawling"),
        ("/news/2024/05/second-article-on-politeness.html", "Second article on politeness"),
        ("/news/2024/06/third-article-on-frontiers.html", "Third article on frontiers"),
        ("/news/2023/12/old-article-about-robots.html", "Old article about robots"),
    ]:
        # Information pages link on; those links are recorded, not followed.
        add(path, article_page(title, title + ".", [("/news/only-linked-from-articles.html", "More")]))
    add("/news/only-linked-from-articles.html",
        article_page("Only linked from articles", "Reached with follow=all only."))
    add("/docs/", index_page("Docs", [
        ("guide/intro-to-the-crawler.html", "Intro"), ("./guide/../guide/setup-and-install.html", "Setup"),
        ("/docs/guide/", "Guide"),
    ]))
    add("/docs/guide/", index_page("Guide", [
        ("intro-to-the-crawler.html", "Intro"), ("setup-and-install.html", "Setup"), ("../", "Up"),
    ]))
    add("/docs/guide/intro-to-the-crawler.html", article_page("Introduction to the crawler", "Welcome."))
    add("/docs/guide/setup-and-install.html", article_page("Setup and install", "Install it."))
    # Chinese (GBK, Big5) and Japanese (Shift_JIS, EUC-JP) pages, charset in
    # the header, in a meta tag only, nowhere.
    cn_links = []
    big5_text = ("網路爬蟲是一種按照一定的規則自動抓取全球資訊網資訊的程式。它從一個或若干初始網頁的位址開始，"
                 "獲得初始網頁上的位址，在抓取網頁的過程中，不斷從當前頁面上抽取新的位址放入佇列，直到滿足系統的一定停止條件。")
    for enc, codec in (("gbk", "gbk"), ("big5", "big5"), ("shift_jis", "shift_jis"), ("euc-jp", "euc_jp")):
        text = {"gbk": CHINESE, "big5": big5_text}.get(enc, JAPANESE)
        for where in ("header", "meta", "none"):
            path = f"/cn/{enc}-{where}.html"
            cn_links.append((path, f"{enc} {where}"))
            meta = f'<meta charset="{enc}">' if where == "meta" else ""
            title = {"gbk": "网络爬虫", "big5": "網路爬蟲"}.get(enc, JAPANESE_TITLE)
            body = article_page(title, text, head=meta)
            ctype = f"text/html; charset={enc}" if where == "header" else "text/html"
            add(path, "", headers={"Content-Type": ctype}, raw=body.encode(codec))
    add("/cn/", index_page("中文", cn_links))
    add("/missing.html", index_page("Not found", []), status=404)
    add("/broken.html", "<html><body>Internal error</body></html>", status=500)
    # A redirect chain, ending at a page also linked from elsewhere.
    pages["/redirect/1"] = (302, {"Location": "/redirect/2"}, b"")
    pages["/redirect/2"] = (301, {"Location": "/redirect/final.html"}, b"")
    add("/redirect/final.html", article_page("Final destination", "Arrived."))
    # Robots meta and header directives.
    add("/robots/", index_page("Robots", [
        ("/robots/noindex.html", "noindex"), ("/robots/nofollow/", "nofollow"),
        ("/robots/header-noindex.html", "header"),
    ]))
    add("/robots/noindex.html", index_page("Not for the index", [("/robots/from-noindex.html", "child")],
                                           head='<meta name="robots" content="noindex">'))
    add("/robots/from-noindex.html", article_page("Child of a noindex page", "Followed."))
    add("/robots/nofollow/", index_page("Do not follow", [("/robots/never.html", "never")],
                                        head='<meta name="robots" content="nofollow">'))
    add("/robots/never.html", article_page("Never fetched", "Nobody should see this."))
    add("/robots/header-noindex.html", index_page("Header noindex", []),
        headers={**html, "X-Robots-Tag": "noindex"})
    add("/private/secret.html", article_page("Secret", "Forbidden by robots.txt."))
    # Duplicates (not linked from "/": seed /dups/). Originals come first.
    add("/dups/", index_page("Duplicates", [
        ("/dups/article-v1.html", "v1"), ("/dups/template-a.html", "a"), ("/dups/cn.html", "cn"),
        ("/dups/distinct.html", "distinct"), ("/dups/article-v2.html", "v2"),
        ("/dups/template-b.html", "b"), ("/dups/cn-copy.html", "cn copy"), ("/dups/ja.html", "ja"),
        ("/dups/ja-copy.html", "ja copy"),
    ]))
    release = article_page("Release notes", "The crawler got faster.", [("/dups/from-original.html", "more")])
    add("/dups/article-v1.html", release.replace("</article>", "<p>Published 2024-05-01.</p></article>"))
    add("/dups/article-v2.html", article_page(
        "Release notes", "The crawler got faster.", [("/dups/only-from-v2.html", "more")]
    ).replace("</article>", "<p>Published 2024-06-02.</p></article>"))
    add("/dups/from-original.html", article_page("Linked from an original", "Fetched."))
    add("/dups/only-from-v2.html", article_page("Only linked from a copy", "Never fetched."))
    guide = article_page("Installation guide", "Install it with pip.")
    add("/dups/template-a.html", guide)
    add("/dups/template-b.html", guide.replace(
        '<nav><a href="/">Home</a></nav>',
        '<nav><a href="/">Start</a> <a href="/dups/only-from-template-b.html">Other section</a></nav>'
        '<aside class="sidebar"><a href="/news/">Latest news</a> and more links</aside>'))
    add("/dups/only-from-template-b.html", article_page("Only from template b", "Never fetched."))
    add("/dups/cn.html", article_page("网络爬虫", CHINESE))
    add("/dups/cn-copy.html", article_page("网络爬虫", CHINESE).replace(
        '<nav><a href="/">Home</a></nav>',
        '<nav><a href="/">首页</a> <a href="/dups/only-from-cn-copy.html">转载</a></nav>'))
    add("/dups/only-from-cn-copy.html", article_page("Only from the copy", "Never fetched."))
    add("/dups/ja.html", article_page(JAPANESE_TITLE, JAPANESE))
    add("/dups/ja-copy.html", article_page(JAPANESE_TITLE, JAPANESE.replace("。", "。 ")).replace(
        '<nav><a href="/">Home</a></nav>',
        '<nav><a href="/">ホーム</a> <a href="/dups/only-from-ja-copy.html">転載</a></nav>'))
    add("/dups/only-from-ja-copy.html", article_page("Only from the Japanese copy", "Never fetched."))
    add("/dups/distinct.html", article_page("A different article", "Something else entirely."))
    # The partner site on 127.0.0.2 (another site: another IP).
    return pages


def partner_site() -> dict[str, tuple[int, dict[str, str], bytes]]:
    html = {"Content-Type": "text/html; charset=utf-8"}
    return {
        "/robots.txt": (404, html, b"not here"),
        "/": (200, html, index_page("Partner", [("/partner-article.html", "Article")]).encode()),
        "/partner-article.html": (200, html, article_page("Partner article", "Partner.").encode()),
    }


GRID_PAGES = 30  # pages per grid site
GRID_HOSTS = ("127.0.0.5", "127.0.0.6", "127.0.0.7", "127.0.0.8")


def grid_links(n: int, pages: int = GRID_PAGES) -> list[int]:
    """Pages /g/<k>/ that page /g/<n>/ links to; every page is reachable from 0."""
    out = [(2 * n + 1) % pages, (2 * n + 2) % pages]
    if n + 1 < pages:
        out.append(n + 1)
    return out


def grid_paths(pages: int = GRID_PAGES) -> list[str]:
    return ["/"] + [f"/g/{n}/" for n in range(pages)]


def grid_page(path: str, port: int, pages: int = GRID_PAGES) -> bytes | None:
    """The grid sites on GRID_HOSTS: index pages linking within the site and,
    off-site, to the same page of the next grid site."""
    if path == "/":
        return index_page("Grid", [("/g/0/", "Start")]).encode()
    parts = path.strip("/").split("/")
    if len(parts) != 2 or parts[0] != "g" or not parts[1].isdigit() or int(parts[1]) >= pages:
        return None
    n = int(parts[1])
    links = [(f"/g/{k}/", f"Page {k}") for k in grid_links(n, pages)]
    links.append((f"http://127.0.0.9:{port}/g/{n}/", "Elsewhere"))
    return index_page(f"Grid page {n}", links).encode()


def calendar(month: int) -> bytes:
    return index_page(f"Calendar {month}", [
        (f"/calendar?month={month - 1}", "Previous month"),
        (f"/calendar?month={month + 1}", "Next month"),
    ]).encode()


# --- /trap/: path-level spider traps (tests/test_traps.py) -------------------
# /trap/ links to two endless chains. /trap/s/<token>/ links to the next
# session path, whose token is derived from this one (a server that issues a
# fresh session id on every page); /trap/x1/y2/z3/... adds a numbered level
# per page. Neither links anywhere else, so a crawl seeded at /trap/ fetches
# exactly what the trap guard lets through.
TRAP_SESSION_START = "3f9a2c7e1b0d4e5f"


def next_session_token(token: str) -> str:
    import hashlib

    return hashlib.sha256(token.encode()).hexdigest()[:16]


def trap_page(path: str) -> bytes | None:
    def page(title: str, href: str) -> bytes:
        return (f"<!DOCTYPE html><html><head><title>{title}</title></head><body>"
                f'<h1>{title}</h1><p><a href="{href}">Next</a></p></body></html>').encode()

    parts = path.split("/")[2:]  # "/trap/x1/y2/" -> ["x1", "y2", ""]
    if parts == [""]:
        return (b"<!DOCTYPE html><html><head><title>Traps</title></head><body><h1>Traps</h1>"
                + f'<a href="/trap/s/{TRAP_SESSION_START}/">Session</a> '.encode()
                + b'<a href="/trap/x1/">Levels</a></body></html>')
    if len(parts) == 3 and parts[0] == "s" and parts[2] == "":
        return page(f"Session {parts[1]}", f"/trap/s/{next_session_token(parts[1])}/")
    levels = parts[:-1]
    if parts[-1] == "" and all(level == "xyz"[i % 3] + str(i + 1) for i, level in enumerate(levels)):
        n = len(levels) + 1
        return page(f"Level {n - 1}", "xyz"[(n - 1) % 3] + f"{n}/")  # relative: one level deeper
    return None


def make_app(port_holder: dict[str, int], log_path: Path | None, root: Path | None,
             latency: float = 0.0, grid_pages: int = GRID_PAGES, validators: bool = False) -> web.Application:
    log = open(log_path, "a", buffering=1) if log_path else None  # noqa: SIM115
    sites: dict[str, dict[str, tuple[int, dict[str, str], bytes]]] = {}
    flaky: dict[str, int] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        host = (request.host or "").rsplit(":", 1)[0]
        if log is not None and not (root is not None and validators):  # serve_changing logs its answer
            log.write(json.dumps({"t": time.time(), "host": host, "path": request.path_qs,
                                  "ua": request.headers.get("User-Agent", "")}) + "\n")
        if root is not None:
            if validators:
                return serve_changing(root, request, log)
            # A directory named after the host (bench_crawl --hosts): that host's own tree.
            own = root / host
            return serve_file(own if host and own.is_dir() else root, request.path)
        if request.path.startswith("/trap/"):
            body = trap_page(request.path)
            if body is None:
                return web.Response(status=404, text="not found")
            return web.Response(body=body, content_type="text/html")
        if request.path == "/calendar":
            try:
                month = int(request.query.get("month", "0"))
            except ValueError:
                month = 0
            return web.Response(body=calendar(month), content_type="text/html")
        if request.path == "/slow.html":
            await asyncio.sleep(float(request.query.get("s", "5")))
            return web.Response(text="<html><body>late</body></html>", content_type="text/html")
        if request.path == "/endless.html":  # never ends: DOWNLOAD_MAXSIZE must cut it
            resp = web.StreamResponse(headers={"Content-Type": "text/html"})
            await resp.prepare(request)
            chunk = b"<p>" + b"endless " * 8192 + b"</p>"
            for _ in range(100_000):
                await resp.write(chunk)
            return resp
        if request.path == "/reset.html":  # the connection is dropped mid-answer
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        if host in GRID_HOSTS:
            if latency:
                await asyncio.sleep(latency)
            body = grid_page(request.path, port_holder["port"], grid_pages)
            if body is None:
                return web.Response(status=404, text="not found")
            return web.Response(body=body, content_type="text/html")
        if request.path.startswith("/flaky/"):  # 503 twice, then the page
            flaky[request.path] = flaky.get(request.path, 0) + 1
            if flaky[request.path] <= 2:
                return web.Response(status=503, text="try later")
            return web.Response(body=article_page("Flaky", "Third time lucky.").encode(),
                                content_type="text/html")
        if request.path == "/robots.txt" and host == "127.0.0.3":
            return web.Response(status=503, text="overloaded")
        if request.path == "/robots.txt" and host == "127.0.0.4":
            await asyncio.sleep(30)
        key = "main" if host == "127.0.0.1" else "partner"
        if key not in sites:
            sites[key] = partner_site() if key == "partner" else build_site(port_holder["port"])
        return answer(sites[key], request)

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)  # and HEAD (allow_head)
    return app


def answer(pages: dict[str, tuple[int, dict[str, str], bytes]], request: web.Request) -> web.Response:
    """The page at the request's path and query (else its path), or a 404."""
    entry = pages.get(request.path_qs) or pages.get(request.path)
    if entry is None:
        return web.Response(status=404, text="not found")
    status, headers, body = entry
    return web.Response(status=status, headers=headers, body=body)


def serve_file(root: Path, path: str) -> web.StreamResponse:
    target = (root / path.lstrip("/")).resolve()
    if not str(target).startswith(str(root.resolve())):
        return web.Response(status=403)
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        return web.Response(status=404, text="not found")
    ctype = {".html": "text/html", ".htm": "text/html", ".txt": "text/plain", ".xml": "application/xml",
             ".gz": "application/gzip"}.get(target.suffix, "application/octet-stream")
    return web.Response(body=target.read_bytes(), content_type=ctype)


def serve_changing(root: Path, request: web.Request, log: Any) -> web.Response:
    """``--root`` with ``--validators``: a site the test edits between
    crawls. Files are served with an ``ETag`` (a hash of the bytes) and a
    ``Last-Modified`` (the file's time), except under ``/novalid/``; a
    matching ``If-None-Match`` or ``If-Modified-Since`` gets a 304;
    ``_moves.json`` (``{"/old": "/new"}``) answers 301; a missing file 404.
    A HEAD gets the headers a GET would (``Content-Length`` included), except
    in a ``/nohead/`` directory, which answers a HEAD 405. The log line carries the
    method, the status and the validators the request sent."""
    import email.utils
    import hashlib

    path = request.path
    moves = root / "_moves.json"
    status, headers, body = 404, {}, b"not found"
    target = (root / path.lstrip("/")).resolve()
    if request.method == "HEAD" and "/nohead/" in path:
        status, headers, body = 405, {"Allow": "GET"}, b""
    elif moves.is_file() and path in json.loads(moves.read_text()):
        status, headers, body = 301, {"Location": json.loads(moves.read_text())[path]}, b""
    elif str(target).startswith(str(root.resolve())) and (target / "index.html" if target.is_dir() else
                                                          target).is_file():
        target = target / "index.html" if target.is_dir() else target
        body = target.read_bytes()
        status = 200
        headers = {"Content-Type": "text/html" if target.suffix == ".html" else "text/plain"}
        if not path.startswith("/novalid/"):
            etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
            mtime = int(target.stat().st_mtime)
            headers["ETag"] = etag
            headers["Last-Modified"] = email.utils.formatdate(mtime, usegmt=True)
            inm = request.headers.get("If-None-Match")
            ims = request.headers.get("If-Modified-Since")
            since = email.utils.parsedate_to_datetime(ims).timestamp() if ims else None
            if (inm is not None and inm == etag) or (inm is None and since is not None and mtime <= since):
                status, body = 304, b""
    if log is not None:
        log.write(json.dumps({"t": time.time(), "host": (request.host or "").rsplit(":", 1)[0],
                              "path": request.path_qs, "status": status, "method": request.method,
                              "inm": request.headers.get("If-None-Match"),
                              "ims": request.headers.get("If-Modified-Since")}) + "\n")
    return web.Response(status=status, headers=headers, body=body)


async def serve(app: web.Application, hosts: list[str], holder: dict[str, int], port: int = 0) -> None:
    """Bind ``port`` (0: any free one) on the first host and the same port on
    the others, put the port in ``holder``, print ``{"port": P, "hosts": [...]}``
    and serve."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    first = web.TCPSite(runner, hosts[0], port)
    await first.start()
    port = first._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    holder["port"] = port
    for host in hosts[1:]:
        await web.TCPSite(runner, host, port).start()
    print(json.dumps({"port": port, "hosts": hosts}), flush=True)
    await asyncio.Event().wait()


def run(main: Any) -> None:
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="127.0.0.1")
    ap.add_argument("--log", type=Path)
    ap.add_argument("--root", type=Path)
    ap.add_argument("--port", type=int, default=0,
                    help="0 (default): any free port; a fixed one for crawls compared byte for byte (bench/golden.py)")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to grid pages")
    ap.add_argument("--grid-pages", type=int, default=GRID_PAGES, help="pages per grid site")
    ap.add_argument("--validators", action="store_true",
                    help="with --root: ETag, Last-Modified, 304s, _moves.json (serve_changing)")
    args = ap.parse_args()
    holder: dict[str, int] = {}
    await serve(make_app(holder, args.log, args.root, args.latency, args.grid_pages, args.validators),
                args.hosts.split(","), holder, args.port)


if __name__ == "__main__":
    run(main)
