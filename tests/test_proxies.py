"""Proxy pools (PROXY_LIST, crawler/network/proxies.py): each site through
one proxy, a failing proxy cooled down and its sites moved, credentials
kept out of logs and WARC, and a list that cannot work refused at start.
The crawls go through real proxies: Debian's tinyproxy on loopback."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from crawler.network.proxies import ProxyPool, check_proxies, parse_proxy_list
from crawler.scope.urls import host_of
from crawler.store.sqlite import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import crawl_cmd
from tests.support.proxies import start_tinyproxy
from tests.support.servers import launch


# -- the list ---------------------------------------------------------------------------------------


def test_a_list_is_read_with_credentials_from_the_url_or_the_environment():
    proxies = parse_proxy_list("http://u%40x:p%3Aw@127.0.0.1:3128, https://10.0.0.2:8443,http://127.0.0.1:3128",
                               env={"PROXY_USERNAME": "env", "PROXY_PASSWORD": "secret"})
    assert [(p.label, p.url) for p in proxies] == [
        ("http://127.0.0.1:3128", "http://u%40x:p%3Aw@127.0.0.1:3128"),  # the same proxy twice: once
        ("https://10.0.0.2:8443", "https://env:secret@10.0.0.2:8443"),
    ]


def test_a_file_is_read_line_by_line(tmp_path):
    f = tmp_path / "proxies.txt"
    f.write_text("# our proxies\nhttp://127.0.0.1:3128\n\nhttp://127.0.0.1:8888  # the second\n")
    assert [p.label for p in parse_proxy_list(str(f), env={})] == ["http://127.0.0.1:3128", "http://127.0.0.1:8888"]


@pytest.mark.parametrize(("text", "complaint"), [
    ("http://127.0.0.1:3128\nsocks5://user:pw@127.0.0.1:1080\n",
     "{f} line 2: 'socks5://127.0.0.1:1080': socks5 proxies are not supported (Scrapy's downloader speaks to "
     "http and https proxies only)"),
    ("http://127.0.0.1\n", "{f} line 1: 'http://127.0.0.1': needs a host and a port (scheme://host:port)"),
    ("ftp://127.0.0.1:21\n", "{f} line 1: 'ftp://127.0.0.1:21': scheme 'ftp' is not http or https"),
    ("http://127.0.0.1:99999\n", "{f} line 1: 'http://127.0.0.1:99999': its port is not a number from 0 to 65535"),
    ("127.0.0.1:3128\n", "{f} line 1: '127.0.0.1:3128': '127.0.0.1:3128' is not a proxy URL (scheme://host:port)"),
    ("# none\n", "{f} names no proxy"),
])
def test_a_bad_file_names_its_line(tmp_path, text, complaint):
    f = tmp_path / "proxies.txt"
    f.write_text(text)
    with pytest.raises(ValueError) as caught:
        parse_proxy_list(str(f), env={})
    assert str(caught.value) == complaint.format(f=f)
    assert "pw" not in str(caught.value)  # credentials are never shown


def test_a_proxy_must_be_allowed_explicitly():
    proxies = parse_proxy_list("http://127.0.0.1:3128,http://93.184.215.14:8080", env={})
    assert check_proxies(proxies, "127.0.0.0/8") == (
        "proxy http://93.184.215.14:8080 (93.184.215.14) is not in NETWORK_ALLOWLIST: a proxy sees every request "
        "sent through it; allow its address explicitly (93.184.215.14/32)")
    assert check_proxies(proxies, "127.0.0.0/8,93.184.215.14/32") is None


# -- the pool ----------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def pool_of(n: int, clock: Clock) -> ProxyPool:
    return ProxyPool(parse_proxy_list(",".join(f"http://127.0.0.1:{9000 + i}" for i in range(n)), env={}),
                     max_failures=3, cooldown=30.0, clock=clock)


def test_each_site_sticks_to_one_proxy_and_a_cooled_one_moves_only_its_own():
    clock = Clock()
    pool = pool_of(4, clock)
    sites = [f"site{i}.example" for i in range(400)]
    first = {s: pool.choose(s).label for s in sites}
    assert first == {s: pool.choose(s, f"http://{s}/x").label for s in sites}  # the same every time
    assert set(collections.Counter(first.values()).values()) <= set(range(70, 131))  # spread over the four
    down = pool.by_label["http://127.0.0.1:9001"]
    for _ in range(3):
        pool.failed(down, "refused")
    moved = {s: pool.choose(s).label for s in sites}
    assert [s for s in sites if moved[s] != first[s]] == [s for s in sites if first[s] == down.label]
    assert down.label not in moved.values()
    clock.now += 30.1  # cooled down: its sites come back
    assert {s: pool.choose(s).label for s in sites} == first


def test_a_cooldown_doubles_until_a_success():
    clock = Clock()
    pool = pool_of(2, clock)
    p = pool.proxies[0]
    for expected in (30.0, 60.0, 120.0):
        for _ in range(3):
            pool.failed(p, "timeout")
        assert p.cool_until - clock.now == expected
    pool.succeeded(p)
    pool.failed(p, "407", at_once=True)  # refused credentials: at once
    assert p.cool_until - clock.now == 30.0
    pool.failed(pool.proxies[1], "refused", at_once=True)
    assert pool.choose("a.example").label == p.label  # both cooling: the one whose cooldown ends first


def test_a_wall_sends_the_urls_retry_through_another_proxy():
    clock = Clock()
    pool = pool_of(3, clock)
    url = "http://a.example/page"
    usual = pool.choose("a.example", url).label
    pool.met_wall(url, usual)
    assert pool.choose("a.example", url).label != usual
    assert pool.choose("a.example", "http://a.example/other").label == usual  # one failure: not cooled down


# -- crawls through real proxies -------------------------------------------------------------------------


def site_server(tmp_path, hosts: str, *args: str):
    log = tmp_path / "requests.jsonl"
    return launch([sys.executable, "-m", "tests.support.limited_server", "--hosts", hosts, "--log", str(log),
                   "--limit", "1000", "--latency", "0.005", "--per-request", "0", *args], log)


def crawl(tmp_path, seeds: list[str], settings: dict, env: dict | None = None, kill=None) -> tuple[int, str]:
    cmd = crawl_cmd([f"seeds={','.join(seeds)}", "follow=all"], settings, tmp_path / "crawl")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})
    if kill is not None:
        kill()
    out, _ = proc.communicate(timeout=300)
    return proc.returncode, out


def stored_urls(tmp_path, name: str) -> list[str]:
    with SQLiteStore(tmp_path / "crawl" / f"{name}.sqlite3") as store:
        return sorted(r["url"] for r in store.iter_pages() if r["state"] == "C")


@pytest.mark.slow
def test_sites_go_through_their_proxy_and_a_dead_one_loses_nothing(tmp_path, frontier_settings):
    """Two sites, two proxies; the proxy of the first site dies after its
    tenth request. Every page is stored once; before the death each site's
    requests went through its own proxy only, after it the first site's go
    through the other."""
    hosts = [f"127.0.0.{i}" for i in range(2, 10)]
    server = site_server(tmp_path, ",".join(hosts), "--pages", "60")
    proxies = []
    try:
        for attempt in range(5):  # two sites of different proxies: all eight on one is a 1-in-128 chance
            proxies = [start_tinyproxy(tmp_path / "proxies", f"p{attempt}{i}") for i in range(2)]
            pool = ProxyPool(parse_proxy_list(",".join(p.url for p in proxies), env={}))
            chosen = {s: pool.choose(s).label for s in hosts}
            if len(set(chosen.values())) == 2:
                break
            for p in proxies:
                p.stop()
        first = hosts[0]
        sites = [first, next(s for s in hosts if chosen[s] != chosen[first])]
        by_label = {p.url: p for p in proxies}
        doomed = by_label[chosen[first]]

        def kill() -> None:
            deadline = time.monotonic() + 120
            while len(doomed.requests()) < 10 and time.monotonic() < deadline:
                time.sleep(0.02)
            doomed.stop()

        code, log = crawl(tmp_path, [server.url("/", host=s) for s in sites],
                          {**frontier_settings, "PROXY_LIST": ",".join(p.url for p in proxies),
                           "NETWORK_ALLOWLIST": "127.0.0.0/8", "DOWNLOAD_DELAY": 0, "RETRY_TIMES": 5,
                           "FRONTIER_RETRY_BACKOFF": 0.2, "PROXY_COOLDOWN": 300, "SITEMAP_ENABLED": False},
                          kill=kill)
        asked = [r for r in server.requests(0)]
    finally:
        for p in proxies:
            p.stop()
        server.stop()
    assert code == 0, log[-3000:]
    pages = ["/", *(f"/p/{n}" for n in range(1, 61))]
    assert stored_urls(tmp_path, frontier_settings["CRAWL_NAME"]) == sorted(f"http://{s}:{server.port}{p}" for s in sites for p in pages)
    through = {p.url: p.requests() for p in proxies}
    other = next(p for p in proxies if p is not doomed)
    # Every request the sites saw came through a proxy (one the dead proxy took as it died may not have
    # reached the site); the doomed proxy carried the first site's only.
    sent = collections.Counter(u.split("/", 3)[3] for v in through.values() for u in v)
    assert not collections.Counter(r["path"].lstrip("/") for r in asked) - sent
    assert {host_of(u) for u in through[doomed.url]} == {first}
    first_site_via_other = [u for u in through[other.url] if host_of(u) == first]
    assert first_site_via_other  # moved
    assert len(through[doomed.url]) + len(first_site_via_other) >= len(pages)
    assert "proxy/cooldowns': 1" in log
    assert f"Proxy {doomed.url} cools down for 300s" in log


@pytest.mark.slow
def test_credentials_reach_the_proxy_and_nowhere_else(tmp_path, frontier_settings):
    server = site_server(tmp_path, "127.0.0.2", "--pages", "3")
    proxy = start_tinyproxy(tmp_path / "proxies", "auth", auth=("crawler", "s3cret-pw"))
    try:
        code, log = crawl(tmp_path, [server.url("/", host="127.0.0.2")],
                          {**frontier_settings, "PROXY_LIST": proxy.url, "NETWORK_ALLOWLIST": "127.0.0.0/8",
                           "DOWNLOAD_DELAY": 0, "SITEMAP_ENABLED": False, "WARC_DIR": str(tmp_path / "warc"),
                           "LOG_LEVEL": "DEBUG"},
                          env={"PROXY_USERNAME": "crawler", "PROXY_PASSWORD": "s3cret-pw"})
        via = proxy.requests()
    finally:
        proxy.stop()
        server.stop()
    assert code == 0, log[-3000:]
    assert len(stored_urls(tmp_path, frontier_settings["CRAWL_NAME"])) == 4 and len(via) >= 4
    assert "s3cret-pw" not in log and "Y3Jhd2xlcjpzM2NyZXQtcHc" not in log  # nor its base64
    from warcio.archiveiterator import ArchiveIterator

    headers = []
    for path in sorted((tmp_path / "warc").rglob("*.warc.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type == "request":
                    headers.append(record.http_headers.get_header("Proxy-Authorization"))
    assert headers and set(headers) == {"[redacted]"}
    raw = b"".join(p.read_bytes() for p in (tmp_path / "warc").rglob("*"))
    assert b"s3cret" not in raw


@pytest.mark.slow
@pytest.mark.parametrize(("value", "line"), [
    ("http://127.0.0.1:3128,socks5://127.0.0.1:1080",
     "Error: bad setting: PROXY_LIST='http://127.0.0.1:3128,socks5://127.0.0.1:1080' entry 2: "
     "'socks5://127.0.0.1:1080': socks5 proxies are not supported (Scrapy's downloader speaks to http and https "
     "proxies only)"),
    ("http://127.0.0.1:3128",
     "Error: bad setting: PROXY_LIST: proxy http://127.0.0.1:3128 (127.0.0.1) is not in NETWORK_ALLOWLIST: a proxy "
     "sees every request sent through it; allow its address explicitly (127.0.0.1/32)"),
])
def test_a_list_that_cannot_work_is_one_line_and_exit_1(tmp_path, value, line):
    proc = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "site", "-a", "seeds=http://x/",
                           "-s", f"CRAWL_DIR={tmp_path}", "-s", f"PROXY_LIST={value}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [line]


class BadProxy:
    """A proxy that answers every request with bytes that are no HTTP
    (``garbage``), or accepts and never answers (``hang``)."""

    def __init__(self, mode: str) -> None:
        import socket
        import threading

        self.mode = mode
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.held: list[Any] = []
        self.asked = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.asked += 1
            if self.mode == "garbage":
                try:
                    conn.recv(65536)
                    conn.sendall(b"\x00\xff\xfe not a proxy \x01\r\n\r\n\x02")
                finally:
                    conn.close()
            else:
                self.held.append(conn)  # never answered

    def stop(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["garbage", "hang"])
def test_a_proxy_that_answers_garbage_or_hangs_costs_retries_not_pages(tmp_path, frontier_settings, mode):
    """A site's proxy answers garbage, or never answers: its requests fail
    (a retry each), it cools down after three, the site moves to the good
    proxy, and every page is stored once."""
    hosts = [f"127.0.0.{i}" for i in range(2, 10)]
    server = site_server(tmp_path, ",".join(hosts), "--pages", "20")
    good = start_tinyproxy(tmp_path / "proxies", "good")
    bad = BadProxy(mode)
    try:
        pool = ProxyPool(parse_proxy_list(f"{good.url},{bad.url}", env={}))
        site = next((s for s in hosts if pool.choose(s).label == bad.url), None)
        assert site is not None  # 8 sites, 2 proxies: all on the good one is a 1-in-256 chance
        code, log = crawl(tmp_path, [server.url("/", host=site)],
                          {**frontier_settings, "PROXY_LIST": f"{good.url},{bad.url}",
                           "NETWORK_ALLOWLIST": "127.0.0.0/8", "DOWNLOAD_DELAY": 0, "RETRY_TIMES": 5,
                           "FRONTIER_RETRY_BACKOFF": 0.2, "PROXY_COOLDOWN": 300, "DOWNLOAD_TIMEOUT": 2,
                           "SITEMAP_ENABLED": False})
        via_good = good.requests()
    finally:
        good.stop()
        bad.stop()
        server.stop()
    assert code == 0, log[-3000:]
    pages = ["/", *(f"/p/{n}" for n in range(1, 21))]
    assert stored_urls(tmp_path, frontier_settings["CRAWL_NAME"]) == sorted(
        f"http://{site}:{server.port}{p}" for p in pages)
    assert 1 <= bad.asked <= 3 + 8  # three failures cool it down (plus those already on their way)
    assert {u.split("/", 3)[3] for u in via_good} >= {p.lstrip("/") for p in pages}
    assert "'proxy/cooldowns': 1" in log
    assert f"Proxy {bad.url} cools down for 300s" in log
