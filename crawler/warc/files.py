"""A worker's WARC files: named, opened, rotated and closed so that a file
without ``.open`` is always complete (no Scrapy, no Redis).

- **Names** follow the IIPC convention (and Heritrix's):
  ``<prefix>-<timestamp>-<serial>-<pid>~<host>.warc.gz``, the timestamp in
  UTC to the millisecond, the serial counting this writer's files from 0.
- **One writer a file.** A file is written as ``<name>.open``, created
  exclusively and held under an exclusive ``flock`` for as long as its
  writer lives; it opens with a ``warcinfo`` record. Each record is one gzip
  member, written whole and flushed to the kernel before the writer says it
  is written (a SIGKILL then loses nothing written; a power cut may lose
  what the disk had not synced, which is ``close``'s ``fsync``).
- **Rotation.** Once a file reaches ``max_size`` bytes it is closed: synced
  and renamed without ``.open``. The next record opens the next file.
- **A worker killed** leaves its ``.open`` file, whose lock died with it.
  ``salvage`` (run by every worker as it starts, over this host's files in
  the directory) takes each ``.open`` file whose lock it can get, cuts it
  after its last complete gzip member and renames it: the records a store
  names by the file's final name are then found there. A new file is made
  under a hidden name, locked, and only then named ``.open``, so a
  salvager never finds a live file unlocked. Other hosts' files are left
  to their own workers (a shared file system's locks may not reach across
  machines). A write that fails is cut back to the last whole record.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import socket
import time
import zlib
from pathlib import Path
from typing import BinaryIO, Callable

__all__ = ["OPEN_SUFFIX", "WarcFiles", "complete_length", "salvage", "warc_name"]

logger = logging.getLogger(__name__)

OPEN_SUFFIX = ".open"
_MAKING_SUFFIX = ".making"
_HOST_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")


def safe_host(host: str) -> str:
    return _HOST_UNSAFE.sub("-", host) or "localhost"


def warc_name(prefix: str, at: float, serial: int, pid: int, host: str) -> str:
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(at)) + f"{int(at * 1000) % 1000:03d}"
    return f"{prefix}-{stamp}-{serial:05d}-{pid}~{safe_host(host)}.warc.gz"


def complete_length(f: BinaryIO) -> int:
    """The length of ``f``'s leading run of complete gzip members."""
    f.seek(0)
    good = pos = 0
    d = zlib.decompressobj(zlib.MAX_WBITS + 16)
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            return good
        data = chunk
        while data:
            try:
                d.decompress(data, 1 << 16)
                while d.unconsumed_tail and not d.eof:
                    d.decompress(d.unconsumed_tail, 1 << 16)
            except zlib.error:
                return good
            if d.eof:
                used = len(data) - len(d.unused_data)
                pos += used
                good = pos
                data = d.unused_data
                d = zlib.decompressobj(zlib.MAX_WBITS + 16)
            else:
                pos += len(data)
                data = b""


def salvage(directory: Path, host: str | None = None) -> list[tuple[str, int, int]]:
    """Close the ``.open`` files of this host's writers that are gone:
    (final name, bytes kept, bytes cut) of each. A file whose lock is held
    (its writer lives) is left alone, and so are other hosts' files (a
    shared file system's locks may not reach across machines)."""
    done = []
    mine = "~" + safe_host(host or socket.gethostname()) + ".warc.gz" + OPEN_SUFFIX
    for path in sorted(directory.glob("*" + mine)):
        try:
            f = open(path, "r+b")
        except OSError:
            continue
        with f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its writer is alive
            if not path.exists():
                continue  # salvaged by another worker between our glob and our lock
            size = os.fstat(f.fileno()).st_size
            keep = complete_length(f)
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
            final = path.with_name(path.name[: -len(OPEN_SUFFIX)])
            os.rename(path, final)
            done.append((final.name, keep, size - keep))
            logger.warning("WARC file %(name)s was left open by a worker that stopped: closed with %(keep)d "
                           "bytes of complete records (%(cut)d bytes of a record cut short removed)",
                           {"name": final.name, "keep": keep, "cut": size - keep})
    return done


class WarcFiles:
    """This writer's files in ``directory`` (see the module)."""

    def __init__(self, directory: Path, prefix: str, max_size: int, warcinfo: Callable[[str], bytes],
                 host: str | None = None, pid: int | None = None) -> None:
        self.directory = directory
        self.prefix = prefix
        self.max_size = max(1, max_size)
        self.warcinfo = warcinfo
        self.host = host or socket.gethostname()
        self.pid = pid or os.getpid()
        self.serial = 0
        self.closed: list[str] = []
        self._f: BinaryIO | None = None
        self._name = ""

    @property
    def current(self) -> str:
        """The file being written ('' between files)."""
        return self._name

    def _open(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        while True:
            name = warc_name(self.prefix, time.time(), self.serial, self.pid, self.host)
            self.serial += 1
            if (self.directory / (name + OPEN_SUFFIX)).exists() or (self.directory / name).exists():
                continue
            try:
                # Made under a name salvage does not look at, locked, then named .open:
                # a salvager never sees it unlocked.
                # Unbuffered: a write that fails (a full disk) leaves nothing
                # in a buffer to reach the file later, after the cut.
                f = open(self.directory / ("." + name + _MAKING_SUFFIX), "xb", buffering=0)
            except FileExistsError:
                continue
            break
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _write_all(f, self.warcinfo(name))
            os.rename(self.directory / ("." + name + _MAKING_SUFFIX), self.directory / (name + OPEN_SUFFIX))
        except BaseException:
            f.close()
            (self.directory / ("." + name + _MAKING_SUFFIX)).unlink(missing_ok=True)  # a full disk: made again later
            raise
        self._f, self._name = f, name

    def write(self, members: list[bytes]) -> tuple[str, int, int]:
        """Write one fetch's records together: (file, offset and length of
        the first). Rotates after, once the file is full."""
        if self._f is None:
            self._open()
        f = self._f
        assert f is not None
        offset = f.tell()
        try:
            _write_all(f, b"".join(members))
        except BaseException:
            # A record cut short (a full disk) must not stay before the next: back to the last whole one.
            try:
                f.seek(offset)
                f.truncate(offset)
            except OSError:
                pass
            raise
        where = (self._name, offset, len(members[0]))
        if f.tell() >= self.max_size:
            self.close()
        return where

    def abandon(self) -> None:
        """Let go of the current file as it is, still named ``.open`` (a
        writer that failed): its lock goes with it, and the next worker's
        salvage closes it after its last whole record."""
        f, self._f, self._name = self._f, None, ""
        if f is not None:
            try:
                f.close()
            except OSError:
                pass

    def close(self) -> None:
        """Close the current file: synced, renamed without ``.open``."""
        f, name = self._f, self._name
        if f is None:
            return
        self._f, self._name = None, ""
        try:
            f.flush()
            os.fsync(f.fileno())
            os.rename(self.directory / (name + OPEN_SUFFIX), self.directory / name)
            self.closed.append(name)
        finally:
            f.close()


def _write_all(f: BinaryIO, data: bytes) -> None:
    """All of ``data`` to the unbuffered ``f`` (a raw write may take part of it)."""
    view = memoryview(data)
    while view:
        n = f.write(view)
        if not n:
            raise OSError("WARC: a write took no bytes")
        view = view[n:]
