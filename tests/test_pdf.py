"""PDF text, title and links (crawler/reading/pdf.py) and the child processes that
read them within a time and memory limit (crawler/reading/pdfworker.py). The PDFs
are built by tests/support/pdfs.py."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import time
from pathlib import Path

import pytest

from crawler.reading.pdf import REASONS, PdfError, PdfText, extract, is_pdf
from crawler.reading.pdfworker import PdfWorker
from tests.support.pdfs import bomb_pdf, deflated_spaces, line_rect, one_page_raw_pdf, raw_pdf, slow_pdf, text_pdf

PAGES = [["Hello world.", "Second line   of\tpage one."],
         ["Caf\u00e9 cr\u00e8me, na\u00efve \u2013 \u20ac5 (brackets) and back\\slash."],
         ["Third page."]]
TEXT = ("Hello world.\nSecond line of page one.\n\n"
        "Caf\u00e9 cr\u00e8me, na\u00efve \u2013 \u20ac5 (brackets) and back\\slash.\n\n"
        "Third page.")


def reason(body: bytes, **limits: int) -> str:
    with pytest.raises(PdfError) as info:
        extract(body, **limits)
    return info.value.reason


# is_pdf

@pytest.mark.parametrize("body, content_type, expected", [
    (b"%PDF-1.7\n", "application/pdf", True),
    (b"<html>", "application/pdf", True),  # the type says so: extract() tells it is not
    (b"%PDF-1.4", "Application/X-PDF; charset=binary", True),
    (b"%PDF-1.4\n...", None, True),
    (b"%PDF-1.4\n...", "", True),
    (b"%PDF-2.0\n...", "application/octet-stream", True),
    (b"\xef\xbb\xbf\r\n %PDF-1.4", "binary/octet-stream", True),
    (b"\x00" * 1000 + b"%PDF-1.4", "application/download", True),
    (b"\n" * 1024 + b"%PDF-1.4", None, False),  # beyond the first 1024 bytes
    (b"%PDF-x", None, False),
    (b"<html>%PDF-1.4", "application/octet-stream", False),
    (b"GIF89a", None, False),
    (b"%PDF-1.4\n...", "text/html", False),
    (b"%PDF-1.4\n...", "image/png", False),
])
def test_is_pdf(body, content_type, expected):
    assert is_pdf(body, content_type) is expected


# Text, title, pages

def test_text_of_each_page_title_and_page_counts():
    doc = extract(text_pdf(PAGES, title="  A\ttest \x00document\n"))
    assert doc == PdfText(text=TEXT, title="A test document", links=[], pages=3, pages_read=3)


def test_compressed_content_streams_read_the_same():
    assert extract(text_pdf(PAGES, compress=True)).text == TEXT


def test_title_from_xmp_when_the_information_dictionary_has_none():
    import io

    from pypdf import PdfReader, PdfWriter
    from pypdf.xmp import XmpInformation

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(text_pdf([["x"]]))))
    xmp = XmpInformation.create()
    xmp.dc_title = {"x-default": " XMP\n title "}
    writer.xmp_metadata = xmp
    out = io.BytesIO()
    writer.write(out)
    assert extract(out.getvalue()).title == "XMP title"


def test_a_long_title_is_cut_at_1000_characters():
    assert extract(text_pdf([["x"]], title="word " * 400)).title == ("word " * 200).rstrip()


def test_control_characters_are_dropped_and_whitespace_collapsed_per_line():
    content = b"BT /F1 12 Tf 14 TL 72 720 Td (a\x00b\x01c  d\te) Tj T* (   ) Tj T* (f\xa0g) Tj ET"
    assert extract(text_pdf([content])).text == "abc d e\nf g"


def test_a_document_without_text_is_not_an_error():
    assert extract(text_pdf([[], b""], title="Scan")) == PdfText(
        text="", title="Scan", links=[], pages=2, pages_read=2)


def test_empty_pages_add_no_page_break():
    assert extract(text_pdf([["one"], [], ["three"]])).text == "one\n\nthree"


def test_more_pages_than_max_pages_gives_the_first_ones():
    pages = [[f"Page {n}."] for n in range(1, 8)]
    links = [(n, f"/p{n + 1}", line_rect(0)) for n in range(7)]
    doc = extract(text_pdf(pages, links=links), max_pages=3)
    assert doc == PdfText(text="Page 1.\n\nPage 2.\n\nPage 3.", title="",
                          links=[("/p1", "Page 1."), ("/p2", "Page 2."), ("/p3", "Page 3.")],
                          pages=7, pages_read=3)


def test_max_chars_cuts_the_text_and_stops_reading_pages():
    pages = [["a" * 40], ["b" * 40], ["c" * 40]]
    doc = extract(text_pdf(pages), max_chars=50)
    assert (doc.text, doc.pages, doc.pages_read) == ("a" * 40 + "\n\n" + "b" * 8, 3, 2)
    assert extract(text_pdf(pages), max_chars=40).pages_read == 1


def test_a_document_of_no_pages():
    doc = extract(raw_pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 0 >>"]))
    assert doc == PdfText(text="", title="", links=[], pages=0, pages_read=0)


def test_limits_below_one_are_refused():
    with pytest.raises(ValueError, match=r"max_pages \(0\) must be at least 1"):
        extract(text_pdf([["x"]]), max_pages=0)


# Links

def test_web_and_relative_links_are_kept_in_page_order_with_their_anchor():
    links = [(0, "https://example.com/a", line_rect(0)),
             (0, "../relative/b.html", line_rect(1)),
             (0, "javascript:alert(1)", line_rect(0)),
             (1, "file:///etc/passwd", line_rect(0)),
             (1, "mailto:a@example.com", line_rect(0)),
             (1, " HTTP://Example.com/c\n", (300, 300, 400, 400)),  # no text under it
             (1, "https://example.com/a", line_rect(0))]  # again: once
    doc = extract(text_pdf([["Example site", "The next chapter"], ["Other"]], links=links))
    assert doc.links == [("https://example.com/a", "Example site"),
                         ("../relative/b.html", "The next chapter"),
                         ("HTTP://Example.com/c", "")]


def test_links_only_from_the_pages_read():
    links = [(0, "/one", line_rect(0)), (1, "/two", line_rect(0))]
    assert extract(text_pdf([["1"], ["2"]], links=links), max_pages=1).links == [("/one", "1")]


# Encryption

@pytest.mark.parametrize("algorithm", ["RC4-40", "RC4-128", "AES-128", "AES-256"])
def test_a_document_needing_a_password_is_encrypted(algorithm):
    body = text_pdf(PAGES, user_password="secret", owner_password="owner", algorithm=algorithm)
    with pytest.raises(PdfError) as info:
        extract(body)
    assert info.value.reason == "encrypted"
    assert str(info.value) == "PDF is encrypted (a password is needed to read it)"


@pytest.mark.parametrize("algorithm", ["RC4-128", "AES-256"])
def test_a_document_with_an_owner_password_only_is_read(algorithm):
    body = text_pdf(PAGES, title="Locked?", user_password="", owner_password="owner", algorithm=algorithm)
    assert extract(body) == PdfText(text=TEXT, title="Locked?", links=[], pages=3, pages_read=3)


# Truncated, malformed

def test_a_document_cut_short_is_truncated():
    body = text_pdf(PAGES)
    assert reason(body[:len(body) * 6 // 10]) == "truncated"
    assert reason(body[:-20]) == "truncated"  # cut in the trailer


def test_every_cut_is_truncated_or_the_whole_document():
    body = text_pdf(PAGES, title="T", links=[(1, "http://a.org/", line_rect(0))])
    whole = extract(body)
    outcomes = set()
    for end in range(10, len(body)):
        try:
            outcomes.add("whole" if extract(body[:end]) == whole else "PART")
        except PdfError as exc:
            outcomes.add(exc.reason)
    assert outcomes == {"truncated", "whole"}


def test_only_the_end_marker_cut_is_read_whole():
    body = text_pdf(PAGES)
    assert body.endswith(b"%%EOF\n")
    assert extract(body[:-3]).text == TEXT  # ends "%%E"


def test_objects_after_the_last_end_marker_mean_truncated():
    # An incremental update (or the rest of a linearized file) cut short.
    body = text_pdf(PAGES) + b"7 0 obj\n<< /Type /Page /Contents 8 0 R"
    assert reason(body) == "truncated"


def test_junk_after_the_end_marker_is_ignored():
    body = text_pdf(PAGES) + b"<html><body>" + b"Not found. " * 200 + b"</body></html>"
    assert extract(body).text == TEXT


@pytest.mark.parametrize("body", [
    b"",
    os.urandom(4096),
    b"<!DOCTYPE html><html><head><title>Not here</title></head><body>404</body></html>",
    b"%PDF-1.4\n" + bytes(range(256)) * 10 + b"\n%%EOF\n",
    b"%PDF-1.4\n%%EOF\n",
], ids=["empty", "random", "html", "garbage-between-markers", "markers-only"])
def test_what_is_no_pdf_is_malformed(body):
    assert reason(body) == "malformed"


def test_reasons_have_one_line_messages():
    assert str(PdfError("malformed", "no %PDF- header")) == (
        "PDF is malformed (not a PDF, or too broken to read): no %PDF- header")
    assert all("\n" not in message for message in REASONS.values())
    with pytest.raises(ValueError, match="unknown PdfError reason 'nope'"):
        PdfError("nope")


# Decompression bomb

def test_a_decompression_bomb_stops_at_max_stream_bytes():
    body = bomb_pdf()  # 2 GiB of spaces in 2 MB
    assert len(body) < 2_200_000
    start = time.monotonic()
    with pytest.raises(PdfError) as info:
        extract(body, max_stream_bytes=1_000_000)
    assert info.value.reason == "limit"
    assert "Limit reached while decompressing" in str(info.value)
    assert time.monotonic() - start < 5


def test_a_stream_within_max_stream_bytes_is_read():
    body = one_page_raw_pdf(deflated_spaces(1 << 20), b"/Filter /FlateDecode")  # 1 MiB
    assert extract(body, max_stream_bytes=1_100_000).pages_read == 1
    assert reason(body, max_stream_bytes=1_000_000) == "limit"


# The worker

def run(coro):
    return asyncio.run(coro)


def exists(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")


def peak_memory(pid: int) -> int:
    """The peak resident set of ``pid``, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.fixture
def worker():
    w = PdfWorker(timeout=20)
    yield w
    w.close()


def test_the_worker_gives_what_extract_gives(worker):
    body = text_pdf(PAGES, title="T", links=[(0, "/a", line_rect(0))])
    assert run(worker.extract(body)) == extract(body)
    assert len(worker.pids) == 1
    with pytest.raises(PdfError) as info:
        run(worker.extract(text_pdf(PAGES)[:900]))
    assert info.value.reason == "truncated"
    with pytest.raises(PdfError) as info:
        run(worker.extract(text_pdf(PAGES, user_password="pw", owner_password="o")))
    assert info.value.reason == "encrypted"
    assert len(worker.pids) == 1  # the same child throughout


def test_the_worker_stops_a_bomb_in_the_child(worker):
    body = bomb_pdf()
    run(worker.extract(text_pdf([["warm"]])))
    [pid] = worker.pids
    child_before = peak_memory(pid)
    ours_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    with pytest.raises(PdfError) as info:
        run(worker.extract(body))
    assert info.value.reason == "limit"
    assert time.monotonic() - start < worker.timeout
    # The child decoded 50 MB; this process did not.
    assert peak_memory(pid) - child_before > 45_000
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - ours_before < 20_000
    assert worker.pids == [pid]  # a limit error keeps the child


def test_a_child_over_its_memory_is_replaced():
    worker = PdfWorker(memory_mb=256, max_stream_bytes=400_000_000)
    try:
        run(worker.extract(text_pdf([["warm"]])))
        [pid] = worker.pids
        with pytest.raises(PdfError) as info:
            run(worker.extract(bomb_pdf()))
        assert info.value.reason == "memory"
        assert not exists(pid) and worker.pids == []  # it exited after replying
        assert run(worker.extract(text_pdf([["again"]]))).text == "again"
        assert worker.pids != [pid]
    finally:
        worker.close()


def test_a_body_over_half_the_memory_is_not_sent():
    worker = PdfWorker(memory_mb=256)
    with pytest.raises(PdfError) as info:
        run(worker.extract(bytes(129 << 20)))  # zeros: calloc'd, never touched
    assert str(info.value) == ("PDF needed more memory than its worker may use:"
                               " a body of 129 MiB, over half of PDF_MEMORY_MB (256)")
    assert worker.pids == []
    worker.close()


def test_timeout_kills_the_child_and_the_next_call_starts_another():
    worker = PdfWorker(timeout=0.5)
    try:
        run(worker.extract(text_pdf([["warm"]])))
        [pid] = worker.pids
        start = time.monotonic()
        with pytest.raises(PdfError) as info:
            run(worker.extract(slow_pdf()))  # 4 s of work
        elapsed = time.monotonic() - start
        assert info.value.reason == "timeout"
        assert str(info.value) == "PDF took too long to read: over 0.5 s"
        assert 0.5 <= elapsed < 2.5
        assert not exists(pid) and worker.pids == []
        assert run(worker.extract(text_pdf([["next"]]))).text == "next"
        assert len(worker.pids) == 1 and worker.pids != [pid]
    finally:
        worker.close()


def test_a_child_killed_from_outside_is_replaced(worker):
    run(worker.extract(text_pdf([["one"]])))
    [pid] = worker.pids
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while exists(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert run(worker.extract(text_pdf([["two"]]))).text == "two"
    assert len(worker.pids) == 1 and worker.pids != [pid]


def test_callers_beyond_the_processes_wait_their_turn(worker):
    bodies = [text_pdf([[f"Document {n}."]]) for n in range(3)]

    async def both():
        return await asyncio.gather(*(worker.extract(body) for body in bodies))

    assert [doc.text for doc in run(both())] == ["Document 0.", "Document 1.", "Document 2."]
    assert len(worker.pids) == 1


def test_two_processes_read_two_documents_at_once():
    worker = PdfWorker(timeout=20, processes=2)
    try:
        async def four():
            return await asyncio.gather(*(worker.extract(slow_pdf(5_000)) for _ in range(4)))

        docs = run(four())
        assert [doc.text for doc in docs] == ["a" * 5_000] * 4
        assert len(worker.pids) == 2
    finally:
        worker.close()


def test_the_event_loop_runs_while_a_document_is_read():
    worker = PdfWorker(timeout=1)
    try:
        async def ticks_during_slow_extract():
            ticks = 0

            async def tick():
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticker = asyncio.create_task(tick())
            with pytest.raises(PdfError):
                await worker.extract(slow_pdf())  # times out after 1 s
            ticker.cancel()
            return ticks

        assert run(ticks_during_slow_extract()) >= 30
    finally:
        worker.close()


def test_close_kills_the_children_and_is_idempotent():
    worker = PdfWorker(processes=2)

    async def two():
        await asyncio.gather(*(worker.extract(slow_pdf(20_000)) for _ in range(2)))

    run(two())
    pids = worker.pids
    assert len(pids) == 2 and all(exists(pid) for pid in pids)
    worker.close()
    assert not any(exists(pid) for pid in pids)
    assert worker.pids == []
    worker.close()
    with pytest.raises(RuntimeError, match="PdfWorker is closed"):
        run(worker.extract(text_pdf([["x"]])))


@pytest.mark.parametrize("kwargs, message", [
    ({"timeout": 0}, r"PDF_TIMEOUT \(0\) must be higher than 0\."),
    ({"memory_mb": 100}, r"PDF_MEMORY_MB \(100\) must be at least 256\."),
    ({"max_pages": 0}, r"PDF_MAX_PAGES \(0\) must be at least 1\."),
    ({"processes": 0}, r"PDF_PROCESSES \(0\) must be at least 1\."),
])
def test_bad_worker_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PdfWorker(**kwargs)
