"""WARC/1.1 records of one fetch, built with warcio (pure: no Scrapy, no
Redis, no files).

A fetch is an ``Exchange``: what was sent and what came back, as the
downloader saw it before any middleware decoded it (the body still
content-encoded, as the server sent it). ``records`` turns it into the
records to write, each a complete gzip member (one member a record, so
that a record is found by its offset and a file cut anywhere keeps its
whole records readable):

- ``response`` (and its ``request``, ``WARC-Concurrent-To`` the response):
  the status line, the headers and the payload; ``WARC-Truncated`` when
  the download was cut (``length``: ``DOWNLOAD_MAXSIZE``; ``time``: the
  download timeout).
- ``revisit``, identical-payload-digest profile (``Original``): the payload
  is the one of an earlier response of the crawl; the record keeps this
  response's status line and headers and names the original's URI and date.
- ``revisit``, server-not-modified profile (``NotModified``: a re-crawl's
  304): the block is empty and the record names the stored original's URI,
  date and payload digest, so that replay tools serve the original's
  headers and body (pywb replays a revisit whose block holds a 304 status
  line as an empty 304).

What is kept of the HTTP messages: Scrapy's download handler does not keep
the raw header bytes, so the header block is rebuilt from the parsed
headers (names as Twisted canonicalises them, order kept; the reason phrase
from the status code). The body is kept as received after de-chunking: a
``Transfer-Encoding`` header is dropped, as the body no longer carries the
chunk framing (``X-Crawler-Transfer-Encoding`` keeps its value). The
request's block is the request line, ``Host`` and the headers Scrapy sent.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from http import HTTPStatus
from io import BytesIO
from typing import Any
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

__all__ = ["COMPRESS_LEVEL", "NOT_MODIFIED_PROFILE", "Built", "Exchange", "NotModified", "Original", "RecordMaker",
           "digest_ok", "gzip_member", "http_date_ok", "payload_digest", "uri_ok", "warc_date"]

NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
# gzip level of each record: warcio's own writer uses 9, which cost three
# times the CPU of 6 for a file 2 % smaller (bench/bench_warc.py).
COMPRESS_LEVEL = 6
_DROPPED = {"transfer-encoding"}


@dataclass(slots=True)
class Original:
    """The first response archived with a payload (``digests.ArchiveIndex``)."""

    uri: str
    date: str


@dataclass(slots=True)
class NotModified:
    """A re-crawl's 304: the stored original it confirms."""

    uri: str
    date: str
    digest: str


@dataclass(slots=True)
class Exchange:
    """One fetch, as the downloader saw it."""

    url: str
    method: str
    request_headers: list[tuple[bytes, bytes]]
    request_body: bytes
    protocol: str  # "HTTP/1.1"
    status: int
    response_headers: list[tuple[bytes, bytes]]
    body: bytes
    ip: str | None
    fetched_at: float  # seconds since the epoch
    truncated: str | None = None  # "length" or "time"
    not_modified: NotModified | None = None


@dataclass(slots=True)
class Built:
    """The gzip members of one fetch, the main record first (response or
    revisit), and what the store keeps of it."""

    members: list[bytes]
    kind: str  # "response" or "revisit"
    date: str
    digest: str | None  # the payload digest (a revisit: its original's)


def warc_date(at: float) -> str:
    """WARC/1.1's date: ISO 8601 in UTC with microseconds."""
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def http_date_ok(value: object) -> bool:
    """Whether ``value`` is a date as ``warc_date`` writes it."""
    if not isinstance(value, str) or len(value) != 27 or not value.endswith("Z"):
        return False
    try:
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return False
    return True


_URI = re.compile(r"https?://[!-~]+", re.IGNORECASE)  # printable ASCII: no CR, LF or space to break a header
_DIGEST = re.compile(r"sha1:[A-Z2-7]{32}")


def uri_ok(value: object) -> bool:
    """Whether ``value`` may stand in a WARC header as an http(s) URI."""
    return isinstance(value, str) and len(value) <= 8192 and _URI.fullmatch(value) is not None


def digest_ok(value: object) -> bool:
    """Whether ``value`` is a digest as ``payload_digest`` writes it."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def payload_digest(body: bytes) -> str:
    """The WARC payload digest of ``body``: sha1 in base 32, as warcio and pywb write it."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body, usedforsecurity=False).digest()).decode()


def gzip_member(data: bytes, level: int = COMPRESS_LEVEL) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, zlib.MAX_WBITS + 16)
    return compressor.compress(data) + compressor.flush()


def _text(value: bytes) -> str:
    return value.decode("latin-1")


def _response_headers(protocol: str, status: int, headers: list[tuple[bytes, bytes]]) -> StatusAndHeaders:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    kept: list[tuple[str, str]] = []
    for name, value in headers:
        n = _text(name)
        if n.lower() in _DROPPED:
            kept.append(("X-Crawler-" + n, _text(value)))
        else:
            kept.append((n, _text(value)))
    return StatusAndHeaders(f"{status} {reason}".rstrip(), kept, protocol=protocol or "HTTP/1.1")


def _request_headers(method: str, url: str, headers: list[tuple[bytes, bytes]]) -> StatusAndHeaders:
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    kept = [("Host", parts.netloc)] + [(_text(n), _text(v)) for n, v in headers if n.lower() != b"host"]
    return StatusAndHeaders(f"{method} {target} HTTP/1.1", kept, is_http_request=True)


def _serialise(writer: WARCWriter, buffer: BytesIO, record: Any) -> bytes:
    buffer.seek(0)
    buffer.truncate()
    writer.write_record(record)
    return gzip_member(buffer.getvalue())


class RecordMaker:
    """Builds records (one per thread: it reuses one warcio writer)."""

    def __init__(self) -> None:
        self._buffer = BytesIO()
        self._writer = WARCWriter(self._buffer, gzip=False, warc_version="1.1")

    def build(self, ex: Exchange, original: Original | None = None, digest: str | None = None) -> Built:
        """The members of ``ex``: a revisit of ``original`` (its payload is
        the same: ``digest``), a 304's revisit, or a response."""
        w = self._writer
        date = warc_date(ex.fetched_at)
        common = {"WARC-Date": date}
        if ex.ip:
            common["WARC-IP-Address"] = ex.ip
        nm = ex.not_modified
        if nm is not None:
            main = w.create_warc_record(ex.url, "revisit", warc_headers_dict={
                **common, "WARC-Profile": NOT_MODIFIED_PROFILE, "WARC-Refers-To-Target-URI": nm.uri,
                "WARC-Refers-To-Date": nm.date, "WARC-Payload-Digest": nm.digest})
            kind, digest = "revisit", nm.digest
        elif original is not None and digest is not None:
            main = w.create_revisit_record(ex.url, digest, original.uri, original.date,
                                           http_headers=_response_headers(ex.protocol, ex.status,
                                                                          ex.response_headers),
                                           warc_headers_dict=common)
            kind = "revisit"
        else:
            if digest is None:
                digest = payload_digest(ex.body)
            headers = dict(common)
            headers["WARC-Payload-Digest"] = digest
            if ex.truncated:
                headers["WARC-Truncated"] = ex.truncated
            main = w.create_warc_record(ex.url, "response", payload=BytesIO(ex.body), length=len(ex.body),
                                        http_headers=_response_headers(ex.protocol, ex.status,
                                                                       ex.response_headers),
                                        warc_headers_dict=headers)
            kind = "response"
        request = w.create_warc_record(ex.url, "request", payload=BytesIO(ex.request_body),
                                       length=len(ex.request_body),
                                       http_headers=_request_headers(ex.method, ex.url, ex.request_headers),
                                       warc_headers_dict={**common, "WARC-Concurrent-To":
                                                          main.rec_headers.get_header("WARC-Record-ID")})
        return Built([_serialise(w, self._buffer, main), _serialise(w, self._buffer, request)], kind, date, digest)

    def warcinfo(self, filename: str, info: dict[str, str]) -> bytes:
        record = self._writer.create_warcinfo_record(filename, info)
        return _serialise(self._writer, self._buffer, record)
