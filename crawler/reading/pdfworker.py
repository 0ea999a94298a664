"""``crawler.reading.pdf.extract`` in child processes, bounded in time and memory,
for an asyncio caller (the crawl runs Scrapy's asyncio reactor).

A PDF is untrusted input for a large pure-Python parser: a crafted file
can take minutes or gigabytes. Each document is read in a child process
limited by ``RLIMIT_AS`` (``memory_mb``) and killed after ``timeout``
seconds; the crawl process never holds more of it than its body and the
reply. Children are started with the ``spawn`` method (never a fork of the
crawl's process, which has threads and sockets), on first use, and kept:
one document at a time each, ``processes`` at most; callers beyond that
wait their turn. The blocking pipe work runs in the worker's own threads,
never on the event loop.

The settings that build it (the spider reads them; defaults here):

- ``PDF_TIMEOUT`` - seconds a document may take (``TIMEOUT``)
- ``PDF_MEMORY_MB`` - address space of a child, MiB (``MEMORY_MB``)
- ``PDF_MAX_PAGES`` - pages read a document (``crawler.reading.pdf.MAX_PAGES``)
- ``PDF_PROCESSES`` - children at most (1)

Errors are ``crawler.reading.pdf.PdfError`` with the reasons of ``crawler.reading.pdf``,
and three of the worker's own: ``timeout`` (the child was killed; the next
call starts another), ``memory`` (the child hit its limit; it exits after
replying, so the next document gets a fresh heap) and ``crashed`` (the
child died: a signal, the OOM killer). A child killed while idle is
replaced on the next call. Call ``close()`` when done (``spider_closed``):
it kills the children.

The child answers in JSON (plain strings, numbers and lists): nothing read
from a document is unpickled in the crawl's process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import resource
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from crawler.reading.pdf import MAX_CHARS, MAX_PAGES, MAX_STREAM_BYTES, PdfError, PdfText, extract, quiet_pypdf

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

__all__ = ["MEMORY_MB", "MIN_MEMORY_MB", "TIMEOUT", "PdfWorker"]

logger = logging.getLogger(__name__)

TIMEOUT = 30.0
# A child's address space at rest is about 60 MiB (Python, pypdf and the
# cryptography library it decrypts with; 90 MiB when the crawl was started
# by a script importing Scrapy, which spawn imports again in the child). A
# stream decoded to the 50 MB limit took it to 165 MiB; text extracted from
# that much content takes a few times more.
MEMORY_MB = 1024
MIN_MEMORY_MB = 256
# Starting a child takes well under a second; this is for a loaded machine.
START_TIMEOUT = 60.0
# After terminate(), how long a child has before it is killed.
KILL_GRACE = 1.0
_MIB = 1 << 20


class _Child:
    __slots__ = ("conn", "gone", "process")

    def __init__(self, process: BaseProcess, conn: Connection) -> None:
        self.process = process
        self.conn = conn
        self.gone = False


class PdfWorker:
    """Reads PDFs in child processes: ``await worker.extract(body)``."""

    def __init__(self, *, timeout: float = TIMEOUT, memory_mb: int = MEMORY_MB,
                 max_pages: int = MAX_PAGES, max_chars: int = MAX_CHARS,
                 max_stream_bytes: int = MAX_STREAM_BYTES, processes: int = 1) -> None:
        if not timeout > 0:
            raise ValueError(f"PDF_TIMEOUT ({timeout!r}) must be higher than 0.")
        if memory_mb < MIN_MEMORY_MB:
            raise ValueError(f"PDF_MEMORY_MB ({memory_mb!r}) must be at least {MIN_MEMORY_MB}.")
        if max_pages < 1:
            raise ValueError(f"PDF_MAX_PAGES ({max_pages!r}) must be at least 1.")
        if processes < 1:
            raise ValueError(f"PDF_PROCESSES ({processes!r}) must be at least 1.")
        if max_chars < 1 or max_stream_bytes < 1:
            raise ValueError(f"max_chars ({max_chars!r}) and max_stream_bytes ({max_stream_bytes!r})"
                             " must be at least 1.")
        self.timeout = timeout
        self.memory_mb = memory_mb
        self.processes = processes
        self._limits = {"max_pages": max_pages, "max_chars": max_chars,
                        "max_stream_bytes": max_stream_bytes}
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._idle: list[_Child] = []
        self._children: set[_Child] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """The process ids of the children running now."""
        with self._lock:
            return sorted(c.process.pid for c in self._children if c.process.pid is not None)

    async def extract(self, body: bytes) -> PdfText:
        """``crawler.reading.pdf.extract(body)`` in a child; raises ``PdfError``.
        If the caller is cancelled, the document is still read to its end
        or its timeout (the child cannot be interrupted mid-document)."""
        if len(body) > self.memory_mb * _MIB // 2:
            # It could not be received, let alone read: not worth sending.
            raise PdfError("memory", f"a body of {len(body) / _MIB:.0f} MiB, over half of"
                                     f" PDF_MEMORY_MB ({self.memory_mb})")
        with self._lock:
            if self._closed:
                raise RuntimeError("PdfWorker is closed")
            if self._executor is None:
                # Threads of its own: a queue of PDFs must not hold up the
                # event loop's default executor. One thread a child.
                self._executor = ThreadPoolExecutor(self.processes, thread_name_prefix="pdfworker")
            executor = self._executor
        reply = await asyncio.get_running_loop().run_in_executor(executor, self._run, bytes(body))
        if "error" in reply:
            raise PdfError(str(reply["error"]), str(reply.get("detail", "")))
        return PdfText(text=str(reply["text"]), title=str(reply["title"]),
                       links=[(str(uri), str(anchor)) for uri, anchor in reply["links"]],
                       pages=int(reply["pages"]), pages_read=int(reply["pages_read"]))

    def close(self) -> None:
        """Kill the children (a call in progress fails with ``crashed``)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            children, idle = list(self._children), list(self._idle)
            self._idle.clear()
            executor, self._executor = self._executor, None
        for child in children:
            if child.process.is_alive():
                child.process.terminate()
        # The busy ones are reaped by the thread waiting on them.
        for child in idle:
            self._discard(child)
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    # In the executor's threads.

    def _run(self, body: bytes) -> dict[str, Any]:
        child = self._checkout()
        try:
            child.conn.send_bytes(body)
            del body
            if not child.conn.poll(self.timeout):
                self._discard(child)
                raise PdfError("timeout", f"over {self.timeout:g} s")
            reply: dict[str, Any] = json.loads(child.conn.recv_bytes())
        except (EOFError, OSError, ValueError):
            self._discard(child)
            if self._closed:
                raise PdfError("crashed", "the worker was closed") from None
            raise PdfError("crashed", _exit_reason(child.process.exitcode)) from None
        if reply.get("error") == "memory":
            self._discard(child)  # it exits by itself
        else:
            with self._lock:
                if not self._closed:
                    self._idle.append(child)
                    return reply
            self._discard(child)
        return reply

    def _checkout(self) -> _Child:
        dead = []
        try:
            with self._lock:
                if self._closed:
                    raise PdfError("crashed", "the worker was closed")
                while self._idle:
                    child = self._idle.pop()
                    if child.process.is_alive():
                        return child
                    dead.append(child)  # killed while idle
        finally:
            for child in dead:
                logger.warning("PDF worker process %(pid)s died while idle (%(why)s); starting another",
                               {"pid": child.process.pid, "why": _exit_reason(child.process.exitcode)})
                self._discard(child)
        return self._start()

    def _start(self) -> _Child:
        conn, child_conn = self._context.Pipe()
        process = self._context.Process(target=_child_main, name="pdfworker", daemon=True,
                                        args=(child_conn, self.memory_mb, self._limits))
        process.start()
        # Our copy of the child's end closed: its death is an EOF here.
        child_conn.close()
        child = _Child(process, conn)
        with self._lock:
            self._children.add(child)
        try:
            if not conn.poll(START_TIMEOUT):
                raise PdfError("crashed", f"the worker process did not start within {START_TIMEOUT:g} s")
            hello: dict[str, Any] = json.loads(conn.recv_bytes())
        except (EOFError, OSError):
            self._discard(child)
            raise PdfError("crashed", f"the worker process died starting ({_exit_reason(process.exitcode)})") from None
        except PdfError:
            self._discard(child)
            raise
        if "error" in hello:
            self._discard(child)
            logger.error("%(error)s", {"error": hello["error"]})
            raise PdfError("memory", str(hello["error"]))
        logger.debug("Started PDF worker process %(pid)d: %(vm)d MiB of address space, %(rss)d MiB resident",
                     {"pid": process.pid, "vm": hello["vm"] // _MIB, "rss": hello["rss"] // _MIB})
        return child

    def _discard(self, child: _Child) -> None:
        """Stop (terminate, then kill) and reap a child; idempotent."""
        with self._lock:
            if child.gone:
                return
            child.gone = True
            self._children.discard(child)
        process = child.process
        if process.is_alive():
            process.terminate()
            process.join(KILL_GRACE)
            if process.is_alive():
                process.kill()
        process.join()
        child.conn.close()


def _exit_reason(code: int | None) -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


# In the child.

def _memory() -> tuple[int, int]:
    """This process's address space and resident set, bytes (Linux)."""
    with open("/proc/self/statm") as statm:
        size, resident = statm.read().split()[:2]
    page = os.sysconf("SC_PAGE_SIZE")
    return int(size) * page, int(resident) * page


def _send(conn: Connection, reply: dict[str, Any]) -> None:
    try:
        data = json.dumps(reply, ensure_ascii=False).encode()
    except UnicodeEncodeError:  # a lone surrogate crawler.reading.pdf missed
        data = json.dumps(reply).encode()
    conn.send_bytes(data)


def _reply(body: bytes, limits: dict[str, int]) -> dict[str, Any]:
    try:
        doc = extract(body, **limits)
    except PdfError as exc:
        return {"error": exc.reason, "detail": exc.detail}
    return {"text": doc.text, "title": doc.title, "links": doc.links,
            "pages": doc.pages, "pages_read": doc.pages_read}


def _child_main(conn: Connection, memory_mb: int, limits: dict[str, int]) -> None:
    # Ctrl-C reaches the terminal's whole process group; the parent decides
    # when its children stop (close(), or an EOF when it dies).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # pypdf imported before the child says it is ready: the crawler imports
    # it on its first PDF only, and a read's time limit is the read's.
    import pypdf  # noqa: F401

    quiet_pypdf()
    vm, rss = _memory()
    limit = memory_mb * _MIB
    if vm + 64 * _MIB > limit:
        _send(conn, {"error": f"PDF_MEMORY_MB ({memory_mb}) leaves the PDF worker no room:"
                              f" it takes {vm // _MIB} MiB of address space at rest"})
        return
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    _send(conn, {"ready": True, "vm": vm, "rss": rss})
    while True:
        try:
            body = conn.recv_bytes()
        except EOFError:
            return  # the parent closed its end, or died
        except MemoryError:
            _send(conn, {"error": "memory", "detail": "the body does not fit"})
            return
        reply = _reply(body, limits)
        body = b""
        _send(conn, reply)
        if reply.get("error") == "memory":
            return  # a fresh process for the next document, not a fragmented heap
