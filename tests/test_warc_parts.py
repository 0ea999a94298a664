"""WARC output's parts on their own: records as warcio reads and checks
them, files named, rotated and salvaged after a kill, and the cluster's
archived payloads in a real Redis (crawler/warc/): claimed before they are
written, by writers that interleave, fail or are killed between the two."""

from __future__ import annotations

import io
import random
import re
import subprocess
import sys
import time

import pytest
import redis
from pathlib import Path
from warcio.archiveiterator import ArchiveIterator

from crawler.redis.keys import Keys
from crawler.warc.digests import ArchiveIndex
from crawler.warc.files import OPEN_SUFFIX, WarcFiles, complete_length, salvage
from crawler.warc.records import (NOT_MODIFIED_PROFILE, Exchange, NotModified, Original, RecordMaker,
                                  payload_digest, warc_date)

URL = "http://127.0.0.2:8000/a.html?x=1"
BODY = b"<html><body>caf\xc3\xa9 \r\n</body></html>"


def exchange(url: str = URL, body: bytes = BODY, status: int = 200, **kw: object) -> Exchange:
    return Exchange(url=url, method="GET", request_headers=[(b"User-Agent", b"t/1"), (b"Accept-Encoding", b"gzip")],
                    request_body=b"", protocol="HTTP/1.1", status=status,
                    response_headers=[(b"Content-Type", b"text/html"), (b"Transfer-Encoding", b"chunked")],
                    body=body, ip="127.0.0.2", fetched_at=1_764_331_200.25, **kw)  # type: ignore[arg-type]


def records(data: bytes) -> list:
    out = []
    for r in ArchiveIterator(io.BytesIO(data)):
        body = r.content_stream().read()
        out.append((r.rec_type, r.rec_headers, r.http_headers, body))
    return out


def test_a_fetch_is_a_response_and_its_request_that_warcio_checks(tmp_path):
    maker = RecordMaker()
    built = maker.build(exchange())
    data = maker.warcinfo("x.warc.gz", {"software": "t"}) + b"".join(built.members)
    (tmp_path / "x.warc.gz").write_bytes(data)
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", "-v", str(tmp_path / "x.warc.gz")],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("digest pass") == 3
    (t0, _, _, _), (t1, resp, http, body), (t2, req, req_http, _) = records(data)
    assert (t0, t1, t2) == ("warcinfo", "response", "request")
    assert body == BODY and built.kind == "response" and built.digest == payload_digest(BODY)
    assert resp.get_header("WARC-Target-URI") == URL and resp.get_header("WARC-IP-Address") == "127.0.0.2"
    assert resp.get_header("WARC-Date") == warc_date(1_764_331_200.25) == "2025-11-28T12:00:00.250000Z"
    assert resp.get_header("WARC-Payload-Digest") == payload_digest(BODY)
    assert req.get_header("WARC-Concurrent-To") == resp.get_header("WARC-Record-ID")
    assert http.statusline == "200 OK" and http.get_header("Content-Type") == "text/html"
    # The body is stored de-chunked: the framing header is kept under another name.
    assert http.get_header("Transfer-Encoding") is None and http.get_header("X-Crawler-Transfer-Encoding") == "chunked"
    assert req_http.protocol == "GET" and req_http.statusline == "/a.html?x=1 HTTP/1.1"
    assert req_http.headers[:2] == [("Host", "127.0.0.2:8000"), ("User-Agent", "t/1")]


def test_revisits_name_their_original_and_a_cut_response_says_so():
    maker = RecordMaker()
    original = maker.build(exchange())
    copy = maker.build(exchange("http://127.0.0.2:8000/b.html"), Original(URL, original.date), original.digest)
    nm = maker.build(exchange(status=304, body=b"",
                              not_modified=NotModified(URL, original.date, original.digest or "")))
    cut = maker.build(exchange("http://127.0.0.2:8000/big", b"x" * 10, truncated="length"))
    (_, c, c_http, c_body), _ = records(b"".join(copy.members))
    assert copy.kind == "revisit" and c_body == b""
    assert (c.get_header("WARC-Profile"), c.get_header("WARC-Refers-To-Target-URI"),
            c.get_header("WARC-Refers-To-Date"), c.get_header("WARC-Payload-Digest")) == (
        "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest", URL, original.date, original.digest)
    assert c_http.statusline == "200 OK"  # the copy's own headers
    (_, n, n_http, n_body), _ = records(b"".join(nm.members))
    assert nm.kind == "revisit" and n.get_header("WARC-Profile") == NOT_MODIFIED_PROFILE
    assert n.get_header("Content-Length") == "0" and not n_http and n_body == b""
    assert n.get_header("WARC-Payload-Digest") == original.digest
    (_, t, _, t_body), _ = records(b"".join(cut.members))
    assert t.get_header("WARC-Truncated") == "length" and t_body == b"x" * 10


def test_files_rotate_and_a_closed_file_never_ends_open(tmp_path):
    maker = RecordMaker()
    files = WarcFiles(tmp_path, "crawl", 3000, lambda name: maker.warcinfo(name, {}), host="node_1", pid=42)
    bodies = [random.Random(i).randbytes(2000) for i in range(4)]  # incompressible
    built = [maker.build(exchange(f"http://127.0.0.2/{i}.html", body)) for i, body in enumerate(bodies)]
    places = [files.write(b.members) for b in built]
    files.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 4 and not any(n.endswith(OPEN_SUFFIX) for n in names)
    assert all(re.fullmatch(r"crawl-\d{17}-\d{5}-42~node-1\.warc\.gz", n) for n in names)
    assert [p[0] for p in places] == names  # one record a file: each past 3,000 bytes
    for (name, offset, length), i in zip(places, range(4)):
        with open(tmp_path / name, "rb") as f:
            f.seek(offset)
            rec = next(iter(ArchiveIterator(f)))
            assert rec.rec_headers.get_header("WARC-Target-URI") == f"http://127.0.0.2/{i}.html"
            assert rec.content_stream().read() == bodies[i]
        assert length == len(built[i].members[0])
        with open(tmp_path / name, "rb") as f:  # a file opens with its warcinfo; the response follows
            it = ArchiveIterator(f)
            kinds = [(r.rec_type, it.get_record_offset(), r.rec_headers.get_header("WARC-Filename")) for r in it]
        assert kinds[:2] == [("warcinfo", 0, name), ("response", offset, None)]


def test_salvage_keeps_whole_records_and_leaves_a_live_writers_file(tmp_path):
    maker = RecordMaker()
    live = WarcFiles(tmp_path, "live", 10**9, lambda name: maker.warcinfo(name, {}), pid=1)
    live.write(maker.build(exchange()).members)
    dead = WarcFiles(tmp_path, "dead", 10**9, lambda name: maker.warcinfo(name, {}), pid=2)
    dead.write(maker.build(exchange()).members)
    dead_path = tmp_path / (dead.current + OPEN_SUFFIX)
    whole = dead_path.stat().st_size
    partial = maker.build(exchange("http://127.0.0.2/cut.html")).members[0]
    with open(dead_path, "ab") as f:  # a record cut short, as a SIGKILL mid-write leaves it
        f.write(partial[: len(partial) // 2])
    assert complete_length(open(dead_path, "rb")) == whole
    dead._f.close()  # the dead writer's lock goes with its file  # type: ignore[union-attr]
    done = salvage(tmp_path)
    assert done == [(dead.current, whole, len(partial) // 2)]
    final = tmp_path / dead.current
    assert final.stat().st_size == whole and not dead_path.exists()
    assert [r.rec_type for r in ArchiveIterator(open(final, "rb"))] == ["warcinfo", "response", "request"]
    assert (tmp_path / (live.current + OPEN_SUFFIX)).exists()  # its writer holds the lock
    live.close()
    # Another machine's file on a shared directory is its own to close (flock may not reach across).
    other = WarcFiles(tmp_path, "other", 10**9, lambda name: maker.warcinfo(name, {}), host="elsewhere", pid=3)
    other.write(maker.build(exchange()).members)
    other._f.close()  # type: ignore[union-attr]
    assert salvage(tmp_path) == [] and (tmp_path / (other.current + OPEN_SUFFIX)).exists()
    assert not list(tmp_path.glob(".*"))  # no file left half made


def test_the_archive_index_names_the_first_response_and_ignores_what_it_did_not_write(redis_url, crawl_name):
    client = redis.Redis.from_url(redis_url)
    keys = Keys(crawl_name, 4)
    index = ArchiveIndex(client, keys, 8)
    digest = payload_digest(BODY)
    assert index.lookup(digest) is None
    index.register(digest, URL, "2025-11-28T12:00:00.250000Z")
    index.register(digest, "http://127.0.0.2/later.html", "2025-11-28T13:00:00.000000Z")  # not the first
    assert index.lookup(digest) == Original(URL, "2025-11-28T12:00:00.250000Z")
    other = payload_digest(b"other")
    key, field, _ = index._where(other)
    for bad in (b"garbage", b"WRONGREST0000000 2025-11-28T12:00:00.250000Z http://x/",
                f"{other[5 + 16:]} yesterday http://127.0.0.2/".encode(),
                f"{other[5 + 16:]} 2025-11-28T12:00:00.250000Z file:///etc/passwd".encode(),
                f"{other[5 + 16:]} 2025-11-28T12:00:00.250000Z http://x/\r\nWARC-Type: response".encode()):
        client.hset(key, field, bad)
        assert index.lookup(other) is None
    assert index.malformed == 5
    client.close()


@pytest.mark.parametrize("setting, value", [("WARC_MAX_SIZE", "0"), ("WARC_MAX_SIZE", "1GB"), ("WARC_PREFIX", "a/b"),
                                            ("WARC_PREFIX", "..")])
def test_malformed_warc_settings_are_refused_with_one_line(tmp_path, setting, value):
    from tests.support import ROOT

    out = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "site", "-a", "seeds=http://127.0.0.2/",
                          "-s", f"CRAWL_DIR={tmp_path}", "-s", f"{setting}={value}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    line = out.stderr.strip().splitlines()
    assert len(line) == 1 and line[0].startswith(f"Error: bad setting: {setting}={value!r} must be"), out.stderr


def test_the_writer_makes_copies_revisits_and_archives_in_full_without_redis(tmp_path, redis_url, crawl_name):
    from crawler.warc.writer import WarcWriter

    maker = RecordMaker()

    def files(d: Path) -> WarcFiles:
        return WarcFiles(d, "w", 10**9, lambda name: maker.warcinfo(name, {}), pid=7)

    def index() -> ArchiveIndex:
        return ArchiveIndex(redis.Redis.from_url(redis_url), Keys(crawl_name, 2), 4)

    writer = WarcWriter(files(tmp_path / "a"), index)
    first = [writer.submit(exchange(f"http://127.0.0.2/{i}.html")) for i in range(3)]  # one payload, three URLs
    head = writer.submit(Exchange(url=URL, method="HEAD", request_headers=[], request_body=b"", protocol="HTTP/1.1",
                                  status=200, response_headers=[], body=BODY, ip=None, fetched_at=0.0), dedup=False)
    writer.close()
    kinds = [f.result().kind for f in first]
    assert kinds == ["response", "revisit", "revisit"] and head.result().kind == "response"
    assert (writer.counts.responses, writer.counts.revisits, writer.counts.index_errors) == (2, 2, 0)
    # Another worker later: the payload is known cluster-wide.
    later = WarcWriter(files(tmp_path / "b"), index)
    again = later.submit(exchange("http://127.0.0.2/later.html")).result(timeout=30)
    later.close()
    assert (again.kind, again.digest) == ("revisit", payload_digest(BODY))

    def unreachable() -> ArchiveIndex:
        return ArchiveIndex(redis.Redis(unix_socket_path=str(tmp_path / "none.sock")), Keys(crawl_name, 2), 4)

    alone = WarcWriter(files(tmp_path / "c"), unreachable)
    results = [alone.submit(exchange(f"http://127.0.0.2/x{i}.html")).result(timeout=30) for i in range(2)]
    alone.close()
    # Redis away: each archived in full (written one after the other, so no batch held both), nothing lost.
    assert [r.kind for r in results] == ["response", "response"]
    assert (alone.counts.index_errors, alone.error) == (2, None)


def test_a_304s_original_is_read_only_as_what_a_record_may_name():
    from scrapy import Request

    from crawler.warc.service import ORIGINAL_META, _original

    date, digest = "2025-11-28T12:00:00.250000Z", payload_digest(BODY)
    good = Request(URL, meta={ORIGINAL_META: [URL, date, digest]})
    assert _original(good) == NotModified(URL, date, digest)
    for bad in ([URL + "\r\nWARC-Type: response", date, digest], ["file:///etc/passwd", date, digest],
                [URL, "yesterday", digest], [URL, date, digest + "\r\nX: y"], [URL, date, "md5:abc"], [URL, date],
                "http://x/"):
        assert _original(Request(URL, meta={ORIGINAL_META: bad})) is None


def _writer_files(d: Path, pid: int, warcinfo: object = None) -> WarcFiles:
    maker = RecordMaker()
    return WarcFiles(d, "w", 10**9, warcinfo or (lambda name: maker.warcinfo(name, {})), pid=pid)  # type: ignore[arg-type]


def _main_records(directory: Path) -> list[tuple[str, str, str, str | None, str | None]]:
    """(type, URI, WARC-Date, refers-to URI, refers-to date) of every response and revisit under ``directory``."""
    out = []
    for path in sorted(directory.rglob("*.warc.gz*")):
        with open(path, "rb") as f:
            for r in ArchiveIterator(f):
                h = r.rec_headers
                if r.rec_type in ("response", "revisit"):
                    out.append((r.rec_type, h.get_header("WARC-Target-URI"), h.get_header("WARC-Date"),
                                h.get_header("WARC-Refers-To-Target-URI"), h.get_header("WARC-Refers-To-Date")))
    return out


def test_copies_in_flight_in_two_writers_at_once_are_revisits_of_records_on_disk(tmp_path, redis_url, crawl_name):
    """Two workers' writers archive the same two payloads at the same time,
    interleaved: A claims P1 and is held before its record is written; B
    meanwhile archives P2 in full and gets a copy of P1, which waits for
    A's record rather than being archived in full again (or naming a record
    not yet on disk); A's copy of P2 is a revisit of B's record."""
    import threading

    from crawler.warc.writer import WarcWriter

    p1, p2 = BODY, b"<html><body>another page</body></html>"
    held, opening = threading.Event(), threading.Event()
    maker = RecordMaker()

    def held_open(name: str) -> bytes:
        opening.set()  # A has claimed P1 and is opening its file to write it
        assert held.wait(60)
        return maker.warcinfo(name, {})

    def index() -> ArchiveIndex:
        # Claims outlive the test however loaded the machine: none expires here.
        return ArchiveIndex(redis.Redis.from_url(redis_url), Keys(crawl_name, 2), 4, ttl_ms=300_000)

    look = index()
    a = WarcWriter(_writer_files(tmp_path / "a", 1, held_open), index)
    b = WarcWriter(_writer_files(tmp_path / "b", 2), index)
    a1 = a.submit(exchange("http://127.0.0.2/p1.html", p1))
    assert opening.wait(60)
    b2 = b.submit(exchange("http://127.0.0.3/p2.html", p2))
    b1 = b.submit(exchange("http://127.0.0.3/p1.html", p1))
    assert b2.result(timeout=60).kind == "response"
    deadline = time.monotonic() + 60
    # B's copy of P1 found A's claim, and B's record of P2 is settled (after its future).
    while (b.counts.waits < 1 or look.lookup(payload_digest(p2)) is None) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert b.counts.waits == 1 and not b1.done() and not a1.done()
    a2 = a.submit(exchange("http://127.0.0.2/p2.html", p2))
    held.set()
    kinds = [f.result(timeout=60).kind for f in (a1, a2, b2, b1)]
    a.close()
    b.close()
    assert kinds == ["response", "revisit", "response", "revisit"]
    records = _main_records(tmp_path)
    responses = {(uri, date) for kind, uri, date, _, _ in records if kind == "response"}
    revisits = {uri: (to, to_date) for kind, uri, _, to, to_date in records if kind == "revisit"}
    assert revisits == {"http://127.0.0.2/p2.html": ("http://127.0.0.3/p2.html", b2.result().date),
                        "http://127.0.0.3/p1.html": ("http://127.0.0.2/p1.html", a1.result().date)}
    assert set(revisits.values()) <= responses
    assert (a.counts.waits, a.counts.claims_taken_over, b.counts.claims_taken_over) == (0, 0, 0)
    # Both claims settled: the index names each payload's record on disk.
    assert look.lookup(payload_digest(p1)) == Original("http://127.0.0.2/p1.html", a1.result().date)
    assert look.lookup(payload_digest(p2)) == Original("http://127.0.0.3/p2.html", b2.result().date)


KILLED_WRITER = '''
import sys, time
import redis
from pathlib import Path
from crawler.redis.keys import Keys
from crawler.warc.digests import ArchiveIndex
from crawler.warc.files import WarcFiles
from crawler.warc.records import Exchange
from crawler.warc.writer import WarcWriter

url, name, directory, body = sys.argv[1:5]

def opening(filename):
    # Its payload is claimed; its record is about to be written: killed here.
    print("claimed", flush=True)
    time.sleep(600)

index = lambda: ArchiveIndex(redis.Redis.from_url(url), Keys(name, 2), 4, ttl_ms=1500)
writer = WarcWriter(WarcFiles(Path(directory), "w", 10**9, opening), index)
writer.submit(Exchange(url="http://127.0.0.2/p1.html", method="GET", request_headers=[], request_body=b"",
                       protocol="HTTP/1.1", status=200, response_headers=[], body=body.encode(), ip=None,
                       fetched_at=time.time()))
time.sleep(600)
'''


@pytest.mark.slow
def test_a_writer_killed_between_claim_and_write_leaves_no_revisit_of_nothing(tmp_path, redis_url, crawl_name):
    """A worker SIGKILLed after claiming a payload and before its record is
    on disk: a copy elsewhere waits for that record, then, once the claim
    has expired, takes it over and archives the payload in full; later
    copies are revisits of that record. No revisit names the dead worker's
    record, which was never written."""
    from tests.support import ROOT

    from crawler.warc.writer import WarcWriter

    body = "<html><body>the same page on two hosts</body></html>"
    child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, redis_url, crawl_name, str(tmp_path / "dead"), body],
                             cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "claimed"
    finally:
        child.kill()
        child.wait(30)
    index = ArchiveIndex(redis.Redis.from_url(redis_url), Keys(crawl_name, 2), 4)
    assert index.lookup(payload_digest(body.encode())) is None  # claimed, never written: no original
    writer = WarcWriter(_writer_files(tmp_path / "live", 2),
                        lambda: ArchiveIndex(redis.Redis.from_url(redis_url), Keys(crawl_name, 2), 4))
    copy = writer.submit(exchange("http://127.0.0.3/p1.html", body.encode()))
    first = copy.result(timeout=60)
    later = writer.submit(exchange("http://127.0.0.4/p1.html", body.encode())).result(timeout=60)
    writer.close()
    assert (first.kind, later.kind) == ("response", "revisit")
    assert (writer.counts.waits, writer.counts.claims_taken_over, writer.counts.index_errors) == (1, 1, 0)
    assert _main_records(tmp_path) == [
        ("response", "http://127.0.0.3/p1.html", first.date, None, None),
        ("revisit", "http://127.0.0.4/p1.html", later.date, "http://127.0.0.3/p1.html", first.date)]
    assert index.lookup(payload_digest(body.encode())) == Original("http://127.0.0.3/p1.html", first.date)


def test_a_claim_whose_record_could_not_be_written_is_released_at_once(tmp_path, redis_url, crawl_name):
    """A writer that fails to write a record it claimed (its directory is a
    file) removes its claim: another writer's copy is archived in full
    straight away, not after waiting for the claim to expire."""
    from crawler.warc.writer import WarcWriter

    def index() -> ArchiveIndex:
        return ArchiveIndex(redis.Redis.from_url(redis_url), Keys(crawl_name, 2), 4)

    (tmp_path / "not-a-dir").write_text("")
    broken = WarcWriter(_writer_files(tmp_path / "not-a-dir", 1), index)
    with pytest.raises(OSError):
        broken.submit(exchange("http://127.0.0.2/p1.html")).result(timeout=60)
    broken.close()
    key, field, _ = index()._where(payload_digest(BODY))
    assert redis.Redis.from_url(redis_url).hget(key, field) is None
    writer = WarcWriter(_writer_files(tmp_path / "ok", 2), index)
    copy = writer.submit(exchange("http://127.0.0.3/p1.html")).result(timeout=60)
    writer.close()
    assert (copy.kind, writer.counts.waits, writer.counts.claims_taken_over) == ("response", 0, 0)


@pytest.mark.slow
def test_claims_on_a_redis_cluster_land_on_each_payloads_own_master(redis_cluster):
    """The claim and settle scripts touch only the key they are given: on a
    cluster of three masters, one round trip claims payloads spread over
    every master; another writer then finds them pending, and written once
    settled."""
    import uuid

    from crawler.frontier.frontier import Frontier

    redis_cluster.wait_ok()
    name = f"warc_{uuid.uuid4().hex[:6]}"
    keys = Keys(name, 16)
    a = ArchiveIndex(redis_cluster.client(), keys, 4, owner="a")
    b = ArchiveIndex(redis_cluster.client(), keys, 4, owner="b")
    bodies = [f"page {i}".encode() for i in range(60)]
    todo = [(payload_digest(x), f"http://127.0.0.2/{i}.html", warc_date(1_764_331_200 + i))
            for i, x in enumerate(bodies)]
    try:
        claims, _ = a.ask(todo, [])
        assert [c.state for c in claims] == ["claimed"] * 60
        masters = {redis_cluster.node_of_key(a._where(d)[0]).port for d, _, _ in todo}
        assert len(masters) == 3
        seen, _ = b.ask(todo, [])
        assert {(c.state, c.mine) for c in seen} == {("pending", False)}
        assert [c.original for c in seen] == [Original(u, d) for _, u, d in todo]
        a.settle_many([(d, c, True) for (d, _, _), c in zip(todo, claims)])
        seen, found = b.ask(todo[:30], [d for d, _, _ in todo[30:]])
        assert {c.state for c in seen} == {"written"}
        assert found == [Original(u, d) for _, u, d in todo[30:]]
    finally:
        redis_cluster.wait_ok()
        Frontier(redis_cluster.client(), name).views.delete_all()
