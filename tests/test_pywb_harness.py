"""The pywb harness (tests/support/pywb.py) on a WARC/1.1 file written here
with warcio: pywb, the real replay tool, serves its records, indexing them
itself or from an index made by cdxj-indexer. Three records: a response
for a.html; a revisit (identical-payload-digest) for b.html, with HTTP
headers of its own, pointing at a.html's response; and a revisit
(server-not-modified) for a.html a day later, with an empty block. In raw
mode (``id_``) each must replay as a 200 with a.html's payload byte for
byte, from the capture asked for (``Memento-Datetime``)."""

from __future__ import annotations

from datetime import datetime
from email.utils import format_datetime
from io import BytesIO
from pathlib import Path

import pytest
from cdxj_indexer.main import main as cdxj_indexer_main
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from tests.support.pywb import Pywb

pytestmark = pytest.mark.slow

A_URL = "http://127.0.0.2:8000/a.html"
B_URL = "http://127.0.0.2:8000/b.html"
# In the past: with no timestamp pywb serves the capture closest to now.
A_DATE, A_TS = "2025-03-01T12:00:00Z", "20250301120000"    # a.html: the response
B_DATE, B_TS = "2025-03-01T12:01:00Z", "20250301120100"    # b.html: identical payload
A2_DATE, A2_TS = "2025-03-02T12:00:00Z", "20250302120000"  # a.html: not modified
A_ID = "<urn:uuid:6a1f0d36-3c1e-4d57-9a36-0c4f3f2a0a01>"
SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
# Not ASCII, no final newline, a CR LF inside: any re-encoding shows.
BODY = "<!doctype html><title>A</title><p>caf\u00e9 \u2014 byte for byte</p>\r\n<p>end</p>".encode()


def _http_headers() -> StatusAndHeaders:
    return StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                       ("Content-Length", str(len(BODY)))], protocol="HTTP/1.1")


def _memento(iso: str) -> str:
    return format_datetime(datetime.fromisoformat(iso.replace("Z", "+00:00")), usegmt=True)


@pytest.fixture(scope="module")
def warc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("warc") / "crawl-00000.warc.gz"
    with path.open("wb") as f:
        writer = WARCWriter(f, gzip=True, warc_version="1.1")
        a = writer.create_warc_record(A_URL, "response", payload=BytesIO(BODY), http_headers=_http_headers(),
                                      warc_headers_dict={"WARC-Date": A_DATE, "WARC-Record-ID": A_ID})
        digest = a.rec_headers.get_header("WARC-Payload-Digest")
        assert digest and digest.startswith("sha1:")
        writer.write_record(a)
        b = writer.create_revisit_record(B_URL, digest, A_URL, A_DATE, http_headers=_http_headers(),
                                         warc_headers_dict={"WARC-Date": B_DATE, "WARC-Refers-To": A_ID})
        writer.write_record(b)
        # server-not-modified, block empty: no HTTP headers at all.
        a2 = writer.create_warc_record(A_URL, "revisit", warc_headers_dict={
            "WARC-Date": A2_DATE, "WARC-Profile": SERVER_NOT_MODIFIED, "WARC-Refers-To": A_ID,
            "WARC-Refers-To-Target-URI": A_URL, "WARC-Refers-To-Date": A_DATE,
            "WARC-Payload-Digest": digest})
        assert a2.length == 0
        writer.write_record(a2)
    return path


def _assert_replays(pywb: Pywb) -> None:
    cases = [  # (url, timestamp asked, capture served)
        (A_URL, A_TS, A_DATE),
        (B_URL, B_TS, B_DATE),
        (B_URL, "", B_DATE),      # the latest capture
        (A_URL, A2_TS, A2_DATE),  # the empty server-not-modified revisit
        (A_URL, "", A2_DATE),
    ]
    for url, ts, served in cases:
        status, headers, body = pywb.get(url, ts)
        where = f"{pywb.url(url, ts)}: {status} {headers}"
        assert status == 200, where
        assert body == BODY, where
        assert headers.get("content-type") == "text/html; charset=utf-8", where
        assert headers.get("memento-datetime") == _memento(served), where


def test_pywb_indexes(warc: Path, tmp_path: Path) -> None:
    with Pywb(tmp_path / "pywb", [warc]) as pywb:
        assert pywb.url(A_URL, A_TS) == f"http://127.0.0.1:{pywb.port}/crawl/{A_TS}id_/{A_URL}"
        _assert_replays(pywb)
        proc = pywb.proc
    assert proc is not None and proc.poll() is not None  # stopped on leaving


def test_cdxj_indexer_index(warc: Path, tmp_path: Path) -> None:
    cdxj = tmp_path / "index.cdxj"
    cdxj_indexer_main(["--sort", "-o", str(cdxj), str(warc)])  # the cdxj-indexer command
    lines = cdxj.read_text().splitlines()
    assert len(lines) == 3 and lines == sorted(lines), lines
    with Pywb(tmp_path / "pywb", [warc], cdxj=cdxj) as pywb:
        _assert_replays(pywb)
        assert (tmp_path / "pywb/collections/crawl/indexes/index.cdxj").read_text().splitlines() == lines
