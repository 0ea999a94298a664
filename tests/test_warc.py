"""WARC output end to end (-s WARC_DIR, crawler/warc/): a crawl against a
real server archives every fetch (robots.txt, sitemap, pages, a redirect,
a 404, an exact copy as a revisit, a response cut by DOWNLOAD_MAXSIZE),
warcio checks the files, the store finds each page's record, pywb replays
the pages from our CDXJ index; a re-crawl's 304 is a revisit pywb resolves
to the original; a worker SIGKILLed mid-crawl leaves one .open file whose
records read back, and the resumed crawl archives every stored page; bodies
cut by size or time as they arrive keep what came; two workers crawling two
identical hosts at once archive each payload once, every copy a revisit."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler.store import SQLiteStore
from crawler.warc.files import OPEN_SUFFIX, complete_length
from crawler.warc.records import payload_digest
from tests.support import ROOT
from tests.support.crawl import crawl_cmd, run_crawl, stop_embedded_redis
from tests.support.pywb import Pywb
from tests.support.servers import start_server

pytestmark = pytest.mark.slow

TEXT = " ".join(f"word{i % 97} term{i % 13}" for i in range(400))


def page(title: str, links: list[str], text: str = TEXT) -> bytes:
    items = "".join(f'<li><a href="{u}">{u}</a></li>' for u in links)
    return (f"<html><head><title>{title}</title></head><body><p>{title} {text}</p><ul>{items}</ul>"
            "</body></html>").encode()


A = page("A", [])
SITE = {
    "index.html": page("Index", ["/a.html", "/b.html", "/old.html", "/missing.html", "/big.html"]),
    "a.html": A,
    "b.html": A,  # the same bytes: a revisit of a.html
    "c.html": page("C", [], "something else entirely " * 50),
    "big.html": page("Big", [], "x" * 300_000),  # over DOWNLOAD_MAXSIZE, announced by Content-Length
}
MAXSIZE = 100_000


def read_records(directory: Path) -> list[dict]:
    out = []
    for path in sorted(directory.glob("*.warc.gz")):
        with open(path, "rb") as f:
            it = ArchiveIterator(f)
            for r in it:
                h = r.rec_headers
                body = (r.raw_stream if r.rec_type == "warcinfo" else r.content_stream()).read()
                out.append({"file": path.name, "offset": it.get_record_offset(), "type": r.rec_type,
                            "uri": h.get_header("WARC-Target-URI"), "id": h.get_header("WARC-Record-ID"),
                            "to": h.get_header("WARC-Concurrent-To"), "ip": h.get_header("WARC-IP-Address"),
                            "profile": h.get_header("WARC-Profile"), "truncated": h.get_header("WARC-Truncated"),
                            "refers": h.get_header("WARC-Refers-To-Target-URI"),
                            "refers_date": h.get_header("WARC-Refers-To-Date"),
                            "date": h.get_header("WARC-Date"), "digest": h.get_header("WARC-Payload-Digest"),
                            "status": r.http_headers.get_statuscode() if r.http_headers else None,
                            "method": r.http_headers.protocol if r.rec_type == "request" and r.http_headers else None,
                            "body": body})
    return out


def record_at(directory: Path, name: str, offset: int) -> dict:
    with open(directory / name, "rb") as f:
        f.seek(offset)
        r = next(iter(ArchiveIterator(f)))
        return {"type": r.rec_type, "uri": r.rec_headers.get_header("WARC-Target-URI"),
                "digest": r.rec_headers.get_header("WARC-Payload-Digest")}


def warcio_check(directory: Path) -> None:
    files = sorted(str(p) for p in directory.glob("*.warc.gz"))
    assert files
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", *files], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr[-3000:]
    assert "digest fail" not in check.stdout


def export_cdxj(crawl_dir: Path, warc_dir: Path, out: Path) -> list[tuple[str, str, dict]]:
    res = subprocess.run([sys.executable, "-m", "scrapy", "export", "--cdxj", "-o", str(out), "-s",
                          f"CRAWL_DIR={crawl_dir}", "-s", f"WARC_DIR={warc_dir}"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = [ln.split(" ", 2) for ln in out.read_text().splitlines()]
    assert lines == sorted(lines, key=lambda x: (x[0], x[1]))  # sorted as pywb reads it
    return [(k, ts, json.loads(j)) for k, ts, j in lines]


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    for name, body in SITE.items():
        (root / name).write_bytes(body)
    (root / "_moves.json").write_text(json.dumps({"/old.html": "/c.html"}))
    server = start_server(tmp_path, hosts="127.0.0.1", root=root, validators=True)
    base = server.url("/")
    (root / "robots.txt").write_text(f"User-agent: *\nAllow: /\nSitemap: {base}sitemap.xml\n")
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"<url><loc>{base}c.html</loc></url></urlset>")
    try:
        yield server, root
    finally:
        server.stop()


def test_a_crawl_archives_every_fetch_and_pywb_replays_it(site, tmp_path):
    server, root = site
    crawl_dir, warc_dir = tmp_path / "crawl", tmp_path / "warc"
    settings = {"WARC_DIR": warc_dir, "DOWNLOAD_MAXSIZE": MAXSIZE, "SITEMAP_ENABLED": True}
    try:
        mark = server.mark()
        result = run_crawl(server, crawl_dir, [f"seeds={server.url('/index.html')}", "follow=all"], settings)
        assert result.returncode == 0, result.log[-3000:]
        served = [(r["method"], r["path"], r["status"]) for r in server.requests(mark)]
        assert sorted(served) == sorted([
            ("GET", "/robots.txt", 200), ("GET", "/sitemap.xml", 200), ("GET", "/index.html", 200),
            ("GET", "/a.html", 200), ("GET", "/b.html", 200), ("GET", "/old.html", 301), ("GET", "/c.html", 200),
            ("GET", "/missing.html", 404), ("GET", "/big.html", 200)])
        assert not list(warc_dir.glob("*" + OPEN_SUFFIX)) and len(list(warc_dir.glob("*.warc.gz"))) == 1
        warcio_check(warc_dir)
        recs = read_records(warc_dir)
        url = server.url
        main = {r["uri"]: r for r in recs if r["type"] in ("response", "revisit")}
        requests = [r for r in recs if r["type"] == "request"]
        # Every fetch: one response (or revisit) and one request record, paired.
        assert sorted(main) == sorted(url(p) for _, p, _ in served)
        assert len([r for r in recs if r["type"] in ("response", "revisit")]) == len(served) == len(requests)
        assert {r["to"] for r in requests} == {r["id"] for r in main.values()}
        # warcio's own index lists every fetch: a request and its response or revisit.
        listed = subprocess.run([sys.executable, "-m", "warcio.cli", "index", "-f", "warc-type,warc-target-uri",
                                 *map(str, sorted(warc_dir.glob("*.warc.gz")))], capture_output=True, text=True)
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        assert sorted((r["warc-type"], r["warc-target-uri"]) for r in rows if r["warc-type"] != "warcinfo") == sorted(
            [("request", url(p)) for _, p, _ in served]
            + [("revisit" if p == "/b.html" else "response", url(p)) for _, p, _ in served])
        # The address the response came from (Scrapy does not tell it for a response stopped at its headers).
        assert {r["ip"] for r in recs if r["type"] != "warcinfo" and r["uri"] != url("/big.html")} == {"127.0.0.1"}
        assert recs[0]["type"] == "warcinfo" and b"robots: obey" in recs[0]["body"]
        # What the server sent, byte for byte, with its digest.
        for name in ("index.html", "a.html", "c.html"):
            rec = main[url("/" + name)]
            assert (rec["type"], rec["status"], rec["body"]) == ("response", "200", SITE[name])
            assert rec["digest"] == payload_digest(SITE[name])
        assert (main[url("/old.html")]["status"], main[url("/missing.html")]["status"]) == ("301", "404")
        # The exact copy: a revisit naming a.html's record.
        b, a = main[url("/b.html")], main[url("/a.html")]
        assert (b["type"], b["profile"], b["refers"], b["refers_date"], b["digest"], b["body"]) == (
            "revisit", "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest", url("/a.html"),
            a["date"], a["digest"], b"")
        # Cut by DOWNLOAD_MAXSIZE (announced): its headers, marked, and the page an error as without WARC.
        big = main[url("/big.html")]
        assert (big["type"], big["truncated"], big["status"], big["body"]) == ("response", "length", "200", b"")
        with SQLiteStore(result.store_path) as store:
            pages = {p["url"]: p for p in store.iter_pages()}
        assert pages[url("/big.html")]["error"] == "download cancelled (over DOWNLOAD_MAXSIZE, or crawl stopped)"
        missing = pages[url("/missing.html")]  # an error page with a response: stored with its record
        assert (missing["state"], missing["status"]) == ("E", 404)
        assert record_at(warc_dir, missing["warc_file"], missing["warc_offset"])["uri"] == url("/missing.html")
        # The store finds each stored page's record.
        stored_c = [u for u, p in pages.items() if p["state"] == "C"]
        assert sorted(stored_c) == sorted(url(p) for p in ("/index.html", "/a.html", "/b.html", "/old.html",
                                                             "/c.html"))
        for u in stored_c:
            p = pages[u]
            assert record_at(warc_dir, p["warc_file"], p["warc_offset"]) == {
                "type": main[u]["type"], "uri": u, "digest": main[u]["digest"]}
            assert (p["warc_date"], p["warc_digest"]) == (main[u]["date"], main[u]["digest"])
        assert "'warc/responses': 8," in result.log and "'warc/revisits': 1," in result.log
        # pywb replays the pages from our CDXJ index: the bytes served, the copy resolved to its original.
        index = export_cdxj(crawl_dir, warc_dir, tmp_path / "index.cdxj")
        assert len(index) == len(served) and {e["filename"] for _, _, e in index} == {p["warc_file"] for p in
                                                                                       pages.values() if
                                                                                       p["warc_file"]}
        stamp = {e["url"]: ts for _, ts, e in index}
        with Pywb(tmp_path / "pywb", sorted(warc_dir.glob("*.warc.gz")), cdxj=tmp_path / "index.cdxj") as pywb:
            for name in ("index.html", "a.html", "c.html"):
                assert pywb.get(url("/" + name), stamp[url("/" + name)])[::2] == (200, SITE[name])
            assert pywb.get(url("/b.html"), stamp[url("/b.html")])[::2] == (200, A)
            status, headers, _ = pywb.get(url("/old.html"), stamp[url("/old.html")])
            assert status == 301 and headers["location"].endswith("/c.html")
    finally:
        stop_embedded_redis(crawl_dir)


def test_a_recrawls_304_is_a_revisit_that_pywb_resolves_to_the_original(site, tmp_path):
    server, root = site
    crawl_dir, warc_dir = tmp_path / "crawl", tmp_path / "warc"
    settings = {"WARC_DIR": warc_dir, "DOWNLOAD_MAXSIZE": MAXSIZE}
    try:
        first = run_crawl(server, crawl_dir, [f"seeds={server.url('/index.html')}", "follow=all"], settings)
        assert first.returncode == 0, first.log[-3000:]
        with SQLiteStore(first.store_path) as store:
            before = {p["url"]: p for p in store.iter_pages()}
        changed = page("C", [], "a new version of the page " * 50)
        (root / "c.html").write_bytes(changed)
        os.utime(root / "c.html", (time.time() + 5, time.time() + 5))
        time.sleep(1.1)  # the revisits' WARC-Dates differ from the originals' by the second pywb keys on
        mark = server.mark()
        again = run_crawl(server, crawl_dir, ["all=1"], settings, spider="recrawl")
        assert again.returncode == 0, again.log[-3000:]
        served = {r["path"]: (r["method"], r["status"]) for r in server.requests(mark) if r["path"] != "/robots.txt"}
        assert served["/a.html"] == ("GET", 304) and served["/c.html"] == ("GET", 200)
        warcio_check(warc_dir)
        recs = read_records(warc_dir)
        a_url, c_url = server.url("/a.html"), server.url("/c.html")
        a_recs = [r for r in recs if r["uri"] == a_url and r["type"] != "request"]
        assert [r["type"] for r in a_recs] == ["response", "revisit"]
        original, revisit = a_recs
        assert (revisit["profile"], revisit["refers"], revisit["refers_date"], revisit["digest"], revisit["body"]) == (
            "http://netpreserve.org/warc/1.1/revisit/server-not-modified", a_url, original["date"],
            original["digest"], b"")
        # b.html was stored as a copy of a.html (a revisit): its 304 names a.html's response, not a chain.
        b_url = server.url("/b.html")
        assert served["/b.html"] == ("GET", 304)
        b_recs = [r for r in recs if r["uri"] == b_url and r["type"] == "revisit"]
        assert [(r["profile"].rsplit("/", 1)[1], r["refers"], r["refers_date"]) for r in b_recs] == [
            ("identical-payload-digest", a_url, original["date"]), ("server-not-modified", a_url, original["date"])]
        c_new = [r for r in recs if r["uri"] == c_url and r["type"] == "response"][-1]
        assert c_new["body"] == changed
        with SQLiteStore(first.store_path) as store:
            after = {p["url"]: p for p in store.iter_pages()}
        # The 304 leaves the page's record as it was (the original's bytes); the changed page has its new one.
        assert [after[a_url][k] for k in ("warc_file", "warc_offset", "warc_date", "warc_digest")] == \
            [before[a_url][k] for k in ("warc_file", "warc_offset", "warc_date", "warc_digest")]
        assert record_at(warc_dir, after[c_url]["warc_file"], after[c_url]["warc_offset"])["digest"] == \
            payload_digest(changed)
        index = export_cdxj(crawl_dir, warc_dir, tmp_path / "index.cdxj")
        a_stamps = sorted(ts for _, ts, e in index if e["url"] == a_url)
        assert len(a_stamps) == 2 and a_stamps[0] < a_stamps[1]
        for cdxj in (tmp_path / "index.cdxj", None):  # our index, then pywb's own indexing
            with Pywb(tmp_path / f"pywb-{cdxj is None}", sorted(warc_dir.glob("*.warc.gz")), cdxj=cdxj) as pywb:
                assert pywb.get(a_url, a_stamps[1])[::2] == (200, A)  # the 304's capture: the original's body
                assert pywb.get(a_url, a_stamps[0])[::2] == (200, A)
                b_last = max(ts for _, ts, e in index if e["url"] == b_url)
                assert pywb.get(b_url, b_last)[::2] == (200, A)
    finally:
        stop_embedded_redis(crawl_dir)


def test_a_worker_killed_mid_crawl_leaves_whole_records_and_the_resumed_crawl_archives_every_page(tmp_path):
    server = start_server(tmp_path, hosts="127.0.0.5", latency=0.02, grid_pages=120)  # a grid site
    crawl_dir, warc_dir = tmp_path / "crawl", tmp_path / "warc"
    settings = {"WARC_DIR": warc_dir}
    try:
        mark = server.mark()
        cmd = crawl_cmd([f"seeds={server.url('/', host='127.0.0.5')}", "follow=all"], settings, crawl_dir)
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while len(server.requests(mark)) < 40 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(server.requests(mark)) >= 40, "the crawl did not get going"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        left = list(warc_dir.glob("*" + OPEN_SUFFIX))
        assert len(left) == 1 and not list(warc_dir.glob("*.warc.gz"))
        with open(left[0], "rb") as f:
            whole = complete_length(f)
            f.seek(0)
            data = f.read(whole)
        import io

        kinds = [r.rec_type for r in ArchiveIterator(io.BytesIO(data))]
        assert kinds[0] == "warcinfo" and kinds.count("response") >= 10
        assert kinds.count("request") == kinds.count("response") + kinds.count("revisit")
        # Resumed: the dead worker's file is closed (cut after its last whole record), new ones written.
        result = run_crawl(server, crawl_dir, [f"seeds={server.url('/', host='127.0.0.5')}", "follow=all"], settings,
                           timeout=180)
        assert result.returncode == 0, result.log[-3000:]
        assert "'warc/salvaged_files': 1," in result.log
        assert not list(warc_dir.glob("*" + OPEN_SUFFIX)) and len(list(warc_dir.glob("*.warc.gz"))) == 2
        warcio_check(warc_dir)
        with SQLiteStore(result.store_path) as store:
            stored = [p for p in store.iter_pages() if p["state"] == "C"]
        assert len(stored) == 121  # / and the 120 grid pages
        for p in stored:
            assert record_at(warc_dir, p["warc_file"], p["warc_offset"])["uri"] == p["url"]
    finally:
        server.stop()
        stop_embedded_redis(crawl_dir)


class _Streams(BaseHTTPRequestHandler):
    """/chunked: 300 KB in chunks of 2 KB, no Content-Length; /drip: 512
    bytes every 0.05 s for ever (under DOWNLOAD_MAXSIZE for minutes);
    robots.txt 404."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        if self.path not in ("/chunked", "/drip"):
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for i in range(300 if self.path == "/chunked" else 10_000):
                data = chunk(i) if self.path == "/chunked" else chunk(i)[:512]
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
                if self.path == "/drip":
                    time.sleep(0.05)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass


def chunk(i: int) -> bytes:
    return hashlib.sha256(str(i).encode()).hexdigest().encode() * 32  # 2,048 bytes


def test_bodies_cut_as_they_arrive_keep_what_came(tmp_path):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Streams)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    crawl_dir, warc_dir = tmp_path / "crawl", tmp_path / "warc"
    try:
        cmd = crawl_cmd([f"seeds={base}/chunked,{base}/drip"],
                        {"WARC_DIR": warc_dir, "DOWNLOAD_MAXSIZE": MAXSIZE, "DOWNLOAD_TIMEOUT": 3, "RETRY_TIMES": 1},
                        crawl_dir)
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        warcio_check(warc_dir)
        recs = [r for r in read_records(warc_dir) if r["type"] == "response"]
        stream = b"".join(chunk(i) for i in range(10_000))
        chunked = [r for r in recs if r["uri"] == f"{base}/chunked"]
        drip = [r for r in recs if r["uri"] == f"{base}/drip"]
        assert [(r["truncated"], r["body"]) for r in chunked] == [("length", stream[:MAXSIZE])]  # not retried
        # Cut at 90 % of the 3 s timeout: about 54 chunks of 512 bytes came by then (fewer on a loaded machine).
        dripped = b"".join(chunk(i)[:512] for i in range(100))
        # The time cut is retried as a timeout is: RETRY_TIMES 1, two fetches, each archived.
        assert len(drip) == 2 and all(r["truncated"] == "time" and 512 <= len(r["body"]) <= 60 * 512
                            and dripped.startswith(r["body"]) for r in drip), [(r["truncated"], len(r["body"]))
                                                                               for r in drip]
        with SQLiteStore(crawl_dir / "site.sqlite3") as store:
            pages = {p["url"]: p for p in store.iter_pages()}
        assert pages[f"{base}/chunked"]["error"] == "download cancelled (over DOWNLOAD_MAXSIZE, or crawl stopped)"
        assert pages[f"{base}/drip"]["state"] == "E" and "timeout" in pages[f"{base}/drip"]["error"].lower()
    finally:
        httpd.shutdown()
        stop_embedded_redis(crawl_dir)


# A crawl started by a program of its own (CrawlerProcess: no `scrapy crawl`, so no start checks).
_SCRIPT = """
import json, sys
from scrapy.crawler import CrawlerProcess
from scrapy.utils.project import get_project_settings
settings = get_project_settings()
settings.setdict(json.loads(sys.argv[1]), priority="cmdline")
process = CrawlerProcess(settings)
process.crawl("site", seeds=sys.argv[2], follow="all")
process.start()
"""


def test_a_warc_dir_that_cannot_be_written_stops_the_crawl_before_a_page_is_stored(site, tmp_path):
    """Refused at start by `scrapy crawl` (one line, exit 1: tests/test_startup.py);
    a crawl started without its checks stops at its first step instead."""
    server, _ = site
    crawl_dir, not_a_dir = tmp_path / "crawl", tmp_path / "file"
    not_a_dir.write_text("a file where the directory should be")
    try:
        result = run_crawl(server, crawl_dir, [f"seeds={server.url('/index.html')}", "follow=all"],
                           {"WARC_DIR": not_a_dir})
        assert result.returncode == 1, result.log[-3000:]
        assert result.log.splitlines() == [f"Error: WARC_DIR='{not_a_dir}' is a file, not a directory"]
        assert result.fetched == [] and not crawl_dir.exists()
        settings = {"CRAWL_DIR": str(crawl_dir), "WARC_DIR": str(not_a_dir), "NETWORK_ALLOWLIST": "127.0.0.0/8",
                    "DOWNLOAD_DELAY": 0, "SITEMAP_ENABLED": False}
        proc = subprocess.run([sys.executable, "-c", _SCRIPT, json.dumps(settings), server.url("/index.html")],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        log = proc.stdout + proc.stderr
        assert "'finish_reason': 'warc_write_failed'" in log, log[-3000:]
        assert "WARC: cannot write" in log
        with SQLiteStore(crawl_dir / "site.sqlite3") as store:
            assert [p for p in store.iter_pages() if p["state"] == "C"] == []
    finally:
        stop_embedded_redis(crawl_dir)


def test_two_workers_fetching_the_same_pages_on_two_hosts_at_once_archive_each_payload_once(tmp_path):
    """One site served identically on two hosts, crawled at once by two
    workers (issue 48, item 12): whichever worker fetches a page first, and
    however the copies interleave, each payload is archived in full once and
    every other copy is a revisit naming that response, which is in the
    archive."""
    root = tmp_path / "www"
    root.mkdir()
    names = [f"p{i}.html" for i in range(20)]
    (root / "index.html").write_bytes(page("Index", names))
    for i, name in enumerate(names):
        # Large and random: a writer takes a while over each, so copies in flight overlap.
        noise = base64.b64encode(random.Random(i).randbytes(300_000)).decode()
        (root / name).write_bytes(page(f"Page {i}", [], f"page {i} " + TEXT + f"<!-- {noise} -->"))
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    server = start_server(tmp_path, hosts="127.0.0.2,127.0.0.3", root=root, latency=0.05)
    crawl_dir, warc_dir = tmp_path / "crawl", tmp_path / "warc"
    try:
        seeds = ",".join(server.url("/index.html", host) for host in ("127.0.0.2", "127.0.0.3"))
        result = run_crawl(server, crawl_dir, [f"seeds={seeds}", "follow=all"],
                           {"WARC_DIR": warc_dir, "CRAWL_PROCESSES": 2, "CONCURRENT_REQUESTS_PER_DOMAIN": 8},
                           timeout=300)
        assert result.returncode == 0, result.log[-3000:]
        fetched = sorted(zip(result.hosts, result.fetched))
        assert fetched == sorted((h, "/" + n) for h in ("127.0.0.2", "127.0.0.3")
                                 for n in ["robots.txt", "index.html", *names])
        warcio_check(warc_dir)
        main = [r for r in read_records(warc_dir) if r["type"] in ("response", "revisit")]
        assert len(main) == len(fetched)
        by_digest: dict[str, list[dict]] = {}
        for r in main:
            by_digest.setdefault(r["digest"], []).append(r)
        assert len(by_digest) == 22  # robots.txt, the index and 20 pages: each on both hosts
        for copies in by_digest.values():
            assert sorted(r["type"] for r in copies) == ["response", "revisit"]
            original, = [r for r in copies if r["type"] == "response"]
            revisit, = [r for r in copies if r["type"] == "revisit"]
            assert (revisit["refers"], revisit["refers_date"]) == (original["uri"], original["date"])
            assert {urlsplit(r["uri"]).path for r in copies} == {urlsplit(original["uri"]).path}
        # pywb replays a copy from the other host's record: the bytes that host served.
        index = export_cdxj(crawl_dir, warc_dir, tmp_path / "index.cdxj")
        stamp = {e["url"]: ts for _, ts, e in index}
        copied = [r["uri"] for r in main if r["type"] == "revisit" and r["uri"].endswith("/p7.html")]
        assert len(copied) == 1
        with Pywb(tmp_path / "pywb", sorted(warc_dir.glob("*.warc.gz")), cdxj=tmp_path / "index.cdxj") as pywb:
            for uri in copied:
                assert pywb.get(uri, stamp[uri])[::2] == (200, (root / "p7.html").read_bytes())
    finally:
        server.stop()
        stop_embedded_redis(crawl_dir)
