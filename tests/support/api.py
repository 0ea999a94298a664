"""The HTTP API in tests: a generated site to crawl and ``scrapy serve``
run as a user runs it, with the official Firecrawl SDK as its client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import ROOT
from tests.support.mockserver import prose

KEY = "test-key-0123456789abcdef"
OTHER_KEY = "other-key-0123456789abcdef"


def api_site(root: Path, sections: int = 20, per_section: int = 10) -> list[str]:
    """A site of a home page, ``sections`` section pages and
    ``per_section`` articles each, a robots.txt and a sitemap listing every
    page: the paths, home first."""
    paths = ["/"]
    home = ['<html><head><title>Home</title></head><body><h1>Home</h1><ul>']
    for s in range(sections):
        home.append(f'<li><a href="/s{s}/">Section {s}</a></li>')
        links = []
        for a in range(per_section):
            path = f"/s{s}/a{a}.html"
            links.append(f'<li><a href="{path}">Article {a} of section {s}</a></li>')
            body = "".join(f"<p>{prose(f'{s}-{a}-{k}')}</p>" for k in range(3))
            _write(root, path, f'<html><head><title>Article {a} of section {s}</title>'
                               f'<meta name="description" content="About article {a} of section {s}.">'
                               f'<meta property="og:title" content="OG article {s}/{a}"></head>'
                               f'<body><nav><a href="/">Home</a> <a href="/s{s}/">Section {s}</a></nav>'
                               f'<article><h1>Article {a} of section {s}</h1>{body}'
                               f'<p>See <a href="/s{s}/a{(a + 1) % per_section}.html">the next one</a>.</p>'
                               f'</article><script>var tracking = 1;</script></body></html>')
        _write(root, f"/s{s}/index.html", f'<html><head><title>Section {s}</title></head><body><h1>Section {s}</h1>'
                                          f'<ul>{"".join(links)}</ul></body></html>')
        paths.append(f"/s{s}/")
        paths += [f"/s{s}/a{a}.html" for a in range(per_section)]
    home.append("</ul></body></html>")
    _write(root, "/index.html", "".join(home))
    _write(root, "/robots.txt", "User-agent: *\nAllow: /\nSitemap: /sitemap.xml\n")
    _write(root, "/_moves.json", json.dumps({"/old/section-3": "/s3/"}))  # a 301
    return paths


def write_sitemap(root: Path, base: str, paths: list[str]) -> None:
    entries = "".join(f"<url><loc>{base}{p}</loc></url>" for p in paths)
    _write(root, "/sitemap.xml", f'<?xml version="1.0" encoding="UTF-8"?>'
                                 f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>')


def _write(root: Path, path: str, text: str) -> None:
    f = root / path.lstrip("/")
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(text, encoding="utf-8")


@dataclass
class ApiServer:
    url: str
    proc: subprocess.Popen[str]
    crawl_dir: Path
    log: Path

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def serve(crawl_dir: Path, settings: dict[str, Any] | None = None, keys: str = f"{KEY},{OTHER_KEY}",
          env: dict[str, str] | None = None) -> ApiServer:
    """``scrapy serve --port 0 --json`` on embedded defaults in ``crawl_dir``."""
    base = {"CRAWL_DIR": str(crawl_dir), "NETWORK_ALLOWLIST": "127.0.0.2/32", "DOWNLOAD_DELAY": 0,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 4, "FRONTIER_DELAY_MARGIN": 0, "LOG_LEVEL": "INFO"}
    cmd = [sys.executable, "-m", "scrapy", "serve", "--port", "0", "--json"]
    for k, v in {**base, **(settings or {})}.items():
        cmd += ["-s", f"{k}={v}"]
    log = crawl_dir.parent / f"{crawl_dir.name}-serve.log"
    env = {**os.environ, "CRAWLER_API_KEYS": keys, **(env or {})}
    with open(log, "a") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.wait(30)
        raise AssertionError(f"scrapy serve did not start:\n{log.read_text()[-3000:]}")
    return ApiServer(json.loads(line)["url"], proc, crawl_dir, log)
