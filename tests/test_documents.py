"""PDF documents in a crawl, end to end: ``scrapy crawl`` against a server
of real PDF files (built by ``tests/support/pdfs.py``), asserting what was
fetched and exactly what the store kept: text, title and links of a
readable PDF, its copy found as one, and each unreadable PDF an error
record with its reason. Other types are stored as records, not read."""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from crawler.store import SQLiteStore
from tests.support.crawl import run_crawl, stop_embedded_redis
from tests.support.pdfs import bomb_pdf, line_rect, text_pdf
from tests.support.servers import launch

pytestmark = pytest.mark.slow

REPORT = [["Annual report of the river authority", "Water levels rose in the spring."],
          ["Second page: the harbor and its lanterns", "Café owners reported more visitors."]]


def build(root: Path) -> bytes:
    root.mkdir()
    report = text_pdf(REPORT, title="River report", links=[
        (0, "/notes.html", line_rect(0)), (1, "https://example.org/elsewhere", line_rect(1)),
        (1, "javascript:alert(1)", line_rect(0))])
    (root / "report.pdf").write_bytes(report)
    (root / "copy.pdf").write_bytes(report)  # the same document at a second URL
    (root / "locked.pdf").write_bytes(text_pdf([["secret"]], user_password="pw", owner_password="own"))
    (root / "cut.pdf").write_bytes(report[: len(report) * 6 // 10])
    (root / "bomb.pdf").write_bytes(bomb_pdf())
    (root / "fake.pdf").write_bytes(b"<html><body>not a pdf</body></html>")
    links = "".join(f'<li><a href="/{n}">{n}</a></li>' for n in
                    ("report.pdf", "copy.pdf", "locked.pdf", "cut.pdf", "bomb.pdf", "fake.pdf", "chart"))
    (root / "papers.html").write_text(f"<html><head><title>Papers</title></head><body><h1>Papers</h1><ul>{links}"
                                      "</ul></body></html>")
    (root / "notes.html").write_text("<html><head><title>Notes</title></head><body><p>Notes on the report, "
                                     "with more words than a title alone.</p></body></html>")
    return report


def test_pdfs_are_read_checked_stored_and_their_errors_kept(tmp_path):
    root = tmp_path / "www"
    build(root)
    log = (tmp_path / "requests.jsonl").resolve()
    server = launch([sys.executable, "-m", "tests.support.app_server", "--hosts", "127.0.0.2", "--log", str(log),
                     "--root", str(root)], log)
    crawl_dir = tmp_path / "crawl"
    try:
        base = server.url("/", host="127.0.0.2")[:-1]
        result = run_crawl(server, crawl_dir, [f"seeds={base}/papers.html", "follow=all"],
                           {"NETWORK_ALLOWLIST": "127.0.0.2/32", "PDF_TIMEOUT": 20}, timeout=180)
        assert result.returncode == 0, result.log[-3000:]
        assert Counter(result.fetched) == Counter(["/robots.txt", "/papers.html", "/report.pdf", "/copy.pdf",
                                                   "/locked.pdf", "/cut.pdf", "/bomb.pdf", "/fake.pdf",
                                                   "/chart", "/notes.html"])
        with SQLiteStore(result.store_path) as store:
            stored = {p["url"][len(base):]: p for p in store.iter_pages()}
            links = {(link["src"][len(base):], link["dst"].removeprefix(base), link["anchor"])
                     for link in store.iter_links()}
        report = stored["/report.pdf"]
        assert (report["state"], report["page_type"], report["content_type"], report["title"]) == (
            "C", "info", "application/pdf", "River report")
        assert report["text"] == "\n".join(REPORT[0]) + "\n\n" + "\n".join(REPORT[1])
        assert stored["/copy.pdf"]["dup_of"] == f"{base}/report.pdf"
        errors = {u: (p["state"], p["error"]) for u, p in stored.items() if p["state"] == "E"}
        assert {u: e[1][: e[1].index(" (")] for u, e in errors.items()} == {
            "/locked.pdf": "pdf: PDF is encrypted", "/cut.pdf": "pdf: PDF is truncated",
            "/bomb.pdf": "pdf: PDF exceeds a reading limit", "/fake.pdf": "pdf: PDF is malformed"}
        assert stored["/chart"]["state"] == "C" and stored["/chart"]["text"] in ("", None)
        # Its link annotations, with the text under them as anchors; the
        # javascript: one is no link.
        assert {(d, a) for src, d, a in links if src == "/report.pdf"} == {
            ("/notes.html", "Annual report of the river authority"),
            ("https://example.org/elsewhere", "Café owners reported more visitors.")}
        stats = ast.literal_eval(re.sub(r"datetime\.datetime\([^)]*\)", "None",
                                        re.findall(r"Dumping Scrapy stats:\n(\{.*?\})\n", result.log, re.S)[-1]))
        assert {k: v for k, v in stats.items() if k.startswith(("pdf/", "response/skipped_type"))} == {
            "pdf/documents": 2, "pdf/pages": 4, "pdf/error/encrypted": 1, "pdf/error/truncated": 1,
            "pdf/error/limit": 1, "pdf/error/malformed": 1, "response/skipped_type/image/png": 1}
    finally:
        server.stop()
        stop_embedded_redis(crawl_dir)
