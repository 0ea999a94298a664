"""PDFs for tests/test_pdf.py, built in code: documents with text (a
Helvetica text stream on each page, which pypdf reads back), links,
metadata and encryption from pypdf's writer; a decompression bomb and
other hand-made files from ``raw_pdf``, which writes objects and a
cross-reference table as given."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Sequence

from pypdf import PdfWriter
from pypdf.annotations import Link
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

# Where text_pdf puts the lines of a page: the first baseline, and the
# distance between baselines (points).
LEFT, TOP, LEADING = 72, 720, 14

_HELVETICA = {"/Type": "/Font", "/Subtype": "/Type1", "/BaseFont": "/Helvetica",
              "/Encoding": "/WinAnsiEncoding"}


def line_rect(line: int, width: float = 300) -> tuple[float, float, float, float]:
    """The rectangle over line ``line`` (0-based) of a text_pdf page."""
    baseline = TOP - LEADING * line
    return (LEFT - 2, baseline - 3, LEFT + width, baseline + 10)


def pdf_string(text: str) -> bytes:
    """A PDF literal string of ``text`` in WinAnsiEncoding (cp1252)."""
    data = text.encode("cp1252").replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    return b"(" + data + b")"


def text_content(lines: Sequence[str]) -> bytes:
    """A content stream showing ``lines`` in 12 pt Helvetica, one under the other."""
    ops = [b"BT /F1 12 Tf %d TL %d %d Td" % (LEADING, LEFT, TOP)]
    ops += [(b"T* " if i else b"") + pdf_string(line) + b" Tj" for i, line in enumerate(lines)]
    ops.append(b"ET")
    return b"\n".join(ops)


def text_pdf(pages: Sequence[Sequence[str] | bytes], *, title: str | None = None,
             links: Sequence[tuple[int, str, tuple[float, float, float, float]]] = (),
             user_password: str | None = None, owner_password: str | None = None,
             algorithm: str = "AES-256", compress: bool = False) -> bytes:
    """A PDF of ``pages`` (each its lines, or a raw content stream), with
    /Title ``title``, /Link annotations ``(page, uri, rect)`` and, given a
    password, encrypted."""
    writer = PdfWriter()
    font = DictionaryObject({NameObject(k): NameObject(v) for k, v in _HELVETICA.items()})
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
        stream = DecodedStreamObject()
        stream.set_data(lines if isinstance(lines, bytes) else text_content(lines))
        page.replace_contents(stream)
        if compress:
            page.compress_content_streams()
    for page_index, uri, rect in links:
        writer.add_annotation(page_index, Link(rect=rect, url=uri))
    if title is not None:
        writer.add_metadata({"/Title": title})
    if user_password is not None or owner_password is not None:
        writer.encrypt(user_password=user_password or "", owner_password=owner_password,
                       algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def raw_pdf(objects: Sequence[bytes], *, header: bytes = b"%PDF-1.7\n", tail: bytes = b"") -> bytes:
    """A PDF of ``objects`` (the bodies of objects 1, 2, ...; object 1 is
    the catalog) with a correct cross-reference table, then ``tail``."""
    out = bytearray(header + b"%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, obj)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out) + tail


def stream(data: bytes, entries: bytes = b"") -> bytes:
    return b"<< /Length %d %s >>\nstream\n%s\nendstream" % (len(data), entries, data)


def one_page_raw_pdf(content: bytes, entries: bytes = b"") -> bytes:
    """A one-page PDF whose page content stream is ``content`` (with the
    stream dictionary ``entries``, e.g. its /Filter), Helvetica as /F1."""
    return raw_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        stream(content, entries),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ])


def deflated_spaces(size: int) -> bytes:
    """A zlib stream of ``size`` spaces (``size`` a multiple of 1 MiB), made
    without compressing them: one MiB compressed after a full flush (which
    empties the compressor's window, so the next MiB compresses to the same
    bytes) is repeated, and the stream is closed by an empty final block and
    the Adler-32 of ``size`` spaces. 2 GiB come to about 2 MB."""
    mib = 1 << 20
    if size % mib or size <= 0:
        raise ValueError(f"size ({size}) must be a positive multiple of 1 MiB")
    compressor = zlib.compressobj(9)
    first = compressor.compress(b" " * mib) + compressor.flush(zlib.Z_FULL_FLUSH)
    block = compressor.compress(b" " * mib) + compressor.flush(zlib.Z_FULL_FLUSH)
    # Adler-32 of n bytes of value v: A = 1 + n*v, B = n + v*n*(n+1)/2 (mod 65521).
    n, v = size, 0x20
    a = (1 + n * v) % 65521
    b = (n + v * n * (n + 1) // 2) % 65521
    return first + block * (size // mib - 1) + b"\x03\x00" + struct.pack(">I", (b << 16) | a)


def bomb_pdf(size: int = 2 << 30) -> bytes:
    """A one-page PDF whose content stream inflates to ``size`` spaces."""
    return one_page_raw_pdf(deflated_spaces(size), b"/Filter /FlateDecode")


def slow_pdf(operations: int = 300_000) -> bytes:
    """A one-page PDF that takes seconds to read (4 s for 300,000): that
    many text operators in one content stream (compressed: 4 KB)."""
    content = b"BT /F1 12 Tf 72 720 Td " + b"(a) Tj " * operations + b"ET"
    return one_page_raw_pdf(zlib.compress(content, 9), b"/Filter /FlateDecode")
