"""PDF documents as text: what a crawled PDF says, within limits. Pure
logic, no Scrapy; ``crawler/reading/pdfworker.py`` runs it in a child process with
a time and memory limit (docs/documents.md).

- ``is_pdf(body, content_type)``: a response to read as a PDF.
- ``extract(body, max_pages=, max_chars=, max_stream_bytes=)``: its text,
  title and links (``PdfText``), or a ``PdfError`` with a short reason.

Limits (the worker's settings pass them on):

- ``max_pages`` - pages read (``MAX_PAGES``); a longer document gives its
  first ``max_pages`` pages, ``pages_read < pages``: not an error.
- ``max_chars`` - characters of text kept (``MAX_CHARS``); pages after the
  cut are not read.
- ``max_stream_bytes`` - bytes one stream may decode to (pypdf's
  ``Configuration`` limits); beyond it the document is a ``limit`` error, so
  a decompression bomb costs that much memory, not gigabytes.

``PdfError.reason`` is one of ``REASONS``. A document is read whole or is
an error: a file cut short (no ``%%EOF`` after its last object) is
``truncated`` even where pypdf could rebuild part of it, so that half a
document is never indexed as the whole. A document with no text at all (a
scan) is not an error: its ``text`` is empty, its title and links are kept.

pypdf reports the repairs it makes to broken files on the ``pypdf``
logger; the worker drops them (``quiet_pypdf``). Python ``warnings`` raised
inside ``extract`` are ignored, so a deprecation in pypdf cannot turn into
an error (pytest runs with ``filterwarnings = error``); that switch is
process-wide, one more reason to call ``extract`` in the worker's
single-threaded child rather than in the crawl's process.
"""

from __future__ import annotations

import dataclasses
import io
import logging
import re
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # pypdf is imported on the first PDF read (0.25 s a worker's start
    # when imported with the crawler: most crawls read no PDF).
    import pypdf
    from pypdf import PageObject

__all__ = ["MAX_CHARS", "MAX_PAGES", "MAX_STREAM_BYTES", "REASONS", "PdfError", "PdfText",
           "extract", "is_pdf", "quiet_pypdf"]

logger = logging.getLogger(__name__)

MAX_PAGES = 500
MAX_CHARS = 2_000_000
MAX_STREAM_BYTES = 50_000_000
MAX_TITLE_CHARS = 1000
MAX_ANCHOR_CHARS = 1000
MAX_LINKS = 10_000  # distinct URIs a document
MAX_URI_CHARS = 8192
# Readers find the header anywhere in the first 1024 bytes (servers and
# scripts put a BOM, blank lines, even HTTP headers before it).
HEADER_WINDOW = 1024

REASONS: dict[str, str] = {
    "encrypted": "PDF is encrypted (a password is needed to read it)",
    "malformed": "PDF is malformed (not a PDF, or too broken to read)",
    "truncated": "PDF is truncated (the file ends before its end-of-file marker: a cut download?)",
    "limit": "PDF exceeds a reading limit (a stream decoding past the limit: a decompression bomb?)",
    "unsupported": "PDF uses a feature that cannot be read (an unknown encryption method)",
    "timeout": "PDF took too long to read",
    "memory": "PDF needed more memory than its worker may use",
    "crashed": "PDF worker process died",
}

_PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
# Types that say nothing about the body: a PDF is recognised by its header.
_UNTYPED = frozenset({"", "application/octet-stream", "binary/octet-stream",
                      "application/download", "application/x-download",
                      "application/force-download", "application/unknown"})
_SNIFF = re.compile(rb"(?:\xef\xbb\xbf|[\x00\t\n\f\r ])*%PDF-\d")
# After the last %%EOF, an object means more of the file was to come (a
# linearized file has an early %%EOF; so has every revision but the last).
_OBJECT = re.compile(rb"\d+[\x00\t\n\f\r ]+\d+[\x00\t\n\f\r ]+obj\b")
# Only the end marker itself is cut (``%%EO``): pypdf reads such a file whole.
_CUT_MARKER = re.compile(rb"startxref[\x00\t\n\f\r ]+\d+[\x00\t\n\f\r ]+%(?:%(?:EO?)?)?[\x00\t\n\f\r ]*\Z")
# Controls other than line breaks and tab, lone surrogates (pypdf's UTF-16
# decoding leaves them; they cannot be encoded), BOMs and noncharacters.
_DROP = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufeff\ufffe\uffff]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_WEB_SCHEMES = frozenset({"http", "https"})
# pypdf's output limits on decoded streams (fields of pypdf.Configuration
# since 6.18; those an older or newer pypdf lacks are skipped).
_STREAM_LIMITS = ("zlib_maximum_output_length", "lzw_maximum_output_length",
                  "run_length_maximum_output_length", "brotli_maximum_output_length",
                  "jbig2_maximum_output_length", "array_based_stream_maximum_output_length",
                  "image_maximum_buffer_size")


@dataclass(frozen=True, slots=True)
class PdfText:
    text: str  # page texts joined by "\n\n"; lines whitespace-normalised, no empty lines
    title: str  # /Title, else XMP dc:title, else ""
    links: list[tuple[str, str]]  # (uri, anchor): http(s) or relative, first occurrence first
    pages: int  # pages in the document
    pages_read: int  # pages whose text was read (< pages when cut by max_pages or max_chars)


class PdfError(Exception):
    """A PDF that could not be read; ``reason`` is one of ``REASONS``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown PdfError reason {reason!r}")
        super().__init__(reason, detail)
        self.reason = reason
        self.detail = detail

    def __str__(self) -> str:
        message = REASONS[self.reason]
        return f"{message}: {self.detail}" if self.detail else message


def is_pdf(body: bytes, content_type: str | None) -> bool:
    """Whether a response is a PDF: typed as one, or untyped (no type,
    ``application/octet-stream`` and the like) with a body that starts with
    a PDF header (after whitespace or a BOM, within the first 1024 bytes)."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime in _PDF_TYPES:
        return True
    return mime in _UNTYPED and _SNIFF.match(body[:HEADER_WINDOW]) is not None


def quiet_pypdf() -> None:
    """Drop pypdf's log records: warnings about each repair of a broken
    file, which would flood the crawl log (a file it cannot read is a
    ``PdfError`` anyway). Process-wide: the worker's child calls it."""
    pypdf_logger = logging.getLogger("pypdf")
    pypdf_logger.addHandler(logging.NullHandler())
    pypdf_logger.propagate = False


def extract(body: bytes, *, max_pages: int = MAX_PAGES, max_chars: int = MAX_CHARS,
            max_stream_bytes: int = MAX_STREAM_BYTES) -> PdfText:
    """The text, title and links of a PDF, or ``PdfError``. No time limit:
    run it in ``crawler.reading.pdfworker.PdfWorker`` for one."""
    for name, value in (("max_pages", max_pages), ("max_chars", max_chars),
                        ("max_stream_bytes", max_stream_bytes)):
        if value < 1:
            raise ValueError(f"{name} ({value!r}) must be at least 1.")
    if body.find(b"%PDF-", 0, HEADER_WINDOW) < 0:
        raise PdfError("malformed", f"no %PDF- header in the first {HEADER_WINDOW} bytes")
    if _truncated(body):
        raise PdfError("truncated")
    import pypdf
    from pypdf.errors import DependencyError, FileNotDecryptedError, LimitReachedError

    try:
        with warnings.catch_warnings(), pypdf.apply_configuration(**_limits(body, max_stream_bytes)):
            warnings.simplefilter("ignore")
            return _read(body, max_pages, max_chars)
    except PdfError:
        raise
    except MemoryError:
        # from None: the traceback would keep the frames holding the memory.
        raise PdfError("memory") from None
    except FileNotDecryptedError as exc:
        raise PdfError("encrypted") from exc
    except LimitReachedError as exc:
        raise PdfError("limit", _one_line(exc)) from exc
    except RecursionError as exc:
        raise PdfError("limit", "objects nested too deeply") from exc
    except (DependencyError, NotImplementedError) as exc:
        raise PdfError("unsupported", _one_line(exc)) from exc
    except Exception as exc:
        # pypdf on a broken file raises whatever Python raises (KeyError,
        # TypeError, struct.error...), not only PdfReadError.
        raise PdfError("malformed", _one_line(exc)) from exc


def _truncated(body: bytes) -> bool:
    eof = body.rfind(b"%%EOF")
    if eof < 0:
        return _CUT_MARKER.search(body[-200:]) is None
    return _OBJECT.search(body, eof) is not None


def _limits(body: bytes, max_stream_bytes: int) -> dict[str, Any]:
    import pypdf

    fields = {field.name for field in dataclasses.fields(pypdf.Configuration)}
    limits: dict[str, Any] = {name: max_stream_bytes for name in _STREAM_LIMITS if name in fields}
    # No stream is longer than the file; the declared /Length needs no other bound.
    limits["maximum_declared_stream_length"] = max(len(body), 1)
    if "disable_legacy_handling" in fields:
        limits["disable_legacy_handling"] = True  # we set no legacy module constants
    return limits


def _read(body: bytes, max_pages: int, max_chars: int) -> PdfText:
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(body))
    # The reader has tried the empty user password already ("owner password
    # only" files open for everyone); a document still locked needs a real one.
    if reader.is_encrypted and reader.decrypt("") == pypdf.PasswordType.NOT_DECRYPTED:
        raise PdfError("encrypted")
    pages = len(reader.pages)
    texts: list[str] = []
    links: dict[str, str] = {}
    chars = pages_read = 0
    for index in range(min(pages, max_pages)):
        if chars >= max_chars:
            break
        text = _page(reader.pages[index], links)
        pages_read += 1
        if text:
            chars += len(text) + 2 * bool(texts)
            texts.append(text)
    text = "\n\n".join(texts)
    if len(text) > max_chars:
        text = text[:max_chars].rstrip()
    return PdfText(text=text, title=_title(reader), links=list(links.items()),
                   pages=pages, pages_read=pages_read)


def _page(page: PageObject, links: dict[str, str]) -> str:
    """The page's text; its links added to ``links`` (uri -> anchor)."""
    targets = _page_links(page)
    chunks: list[tuple[float, float, str]] = []

    def visit(text: str, cm: list[float], tm: list[float], font: object, size: object) -> None:
        if text.strip():
            # Where the text starts: the text matrix's origin in page space.
            x = tm[4] * cm[0] + tm[5] * cm[2] + cm[4]
            y = tm[4] * cm[1] + tm[5] * cm[3] + cm[5]
            chunks.append((x, y, text))

    text = page.extract_text(visitor_text=visit if targets else None)
    for uri, rect in targets:
        anchor = ""
        if rect is not None:
            x1, y1, x2, y2 = rect
            anchor = _line(" ".join(t for x, y, t in chunks
                                    if x1 - 1 <= x <= x2 + 1 and y1 - 1 <= y <= y2 + 1))
            anchor = anchor[:MAX_ANCHOR_CHARS].rstrip()
        if uri not in links:
            if len(links) < MAX_LINKS:
                links[uri] = anchor
        elif not links[uri]:
            links[uri] = anchor
    return _normalise(text)


def _page_links(page: PageObject) -> list[tuple[str, tuple[float, float, float, float] | None]]:
    """The page's /Link annotations with a /URI action to a web URI, with
    their rectangles (None where unreadable)."""
    from pypdf.generic import ArrayObject, DictionaryObject

    annots = page.get("/Annots")
    annots = annots.get_object() if annots is not None else None
    if not isinstance(annots, ArrayObject):
        return []
    found: list[tuple[str, tuple[float, float, float, float] | None]] = []
    for ref in annots:
        annot = ref.get_object()
        if not isinstance(annot, DictionaryObject) or annot.get("/Subtype") != "/Link":
            continue
        action = annot.get("/A")
        action = action.get_object() if action is not None else None
        if not isinstance(action, DictionaryObject) or action.get("/S") != "/URI":
            continue
        uri = _uri(action.get("/URI"))
        if uri:
            found.append((uri, _rect(annot.get("/Rect"))))
    return found


def _uri(value: object) -> str:
    value = value.get_object() if hasattr(value, "get_object") else value
    if isinstance(value, bytes):
        value = value.decode("latin-1")  # URIs are 7-bit ASCII (ISO 32000-2, 12.6.4.8)
    if not isinstance(value, str):
        return ""
    # Browsers drop tabs and line breaks inside a URL and trim spaces and
    # controls around it (WHATWG URL).
    uri = _DROP.sub("", value.replace("\t", "").replace("\n", "").replace("\r", "")).strip()
    scheme = _SCHEME.match(uri)
    if not uri or len(uri) > MAX_URI_CHARS or (scheme and scheme.group(1).lower() not in _WEB_SCHEMES):
        return ""  # javascript:, file:, mailto:...
    return uri


def _rect(value: object) -> tuple[float, float, float, float] | None:
    value = value.get_object() if hasattr(value, "get_object") else value
    if not isinstance(value, list) or len(value) != 4:
        return None
    try:
        x1, y1, x2, y2 = (float(n) for n in value)
    except (TypeError, ValueError):
        return None
    return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)


def _title(reader: pypdf.PdfReader) -> str:
    """/Title from the document information, else XMP's dc:title; a
    broken information dictionary costs the title, not the document."""
    try:
        info = reader.metadata
        title: object = info.title if info is not None else None
        if not title:
            xmp = reader.xmp_metadata
            titles = xmp.dc_title if xmp is not None else None
            if titles:
                title = titles.get("x-default") or next(iter(titles.values()))
    except MemoryError:
        raise
    except Exception:
        return ""
    if isinstance(title, bytes):
        title = title.decode("latin-1")
    if not isinstance(title, str):
        return ""
    return _line(title)[:MAX_TITLE_CHARS].rstrip()


def _normalise(text: str) -> str:
    """Controls dropped, each line's whitespace collapsed, empty lines dropped
    (an empty line would read as the page break)."""
    lines = (" ".join(line.split()) for line in _DROP.sub("", text).splitlines())
    return "\n".join(line for line in lines if line)


def _line(text: str) -> str:
    return " ".join(_DROP.sub("", text).split())


def _one_line(exc: BaseException) -> str:
    return _line(f"{type(exc).__name__}: {exc}")[:300]
