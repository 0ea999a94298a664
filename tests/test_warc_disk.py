"""A full disk under WARC_DIR is waited out, not the end of the crawl: on
a real file system of 2 MiB (a tmpfs, mounted where the machine allows
it), filled, then freed. Before, the first write that failed stopped the
writer and the crawl (``warc_write_failed``), and the chaos run's groups
ended with status 0 as if the crawl were done."""

from __future__ import annotations

import io
import os
import subprocess
import time
from concurrent.futures import TimeoutError as FutureTimeout

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler.warc.files import WarcFiles
from crawler.warc.records import RecordMaker
from crawler.warc.writer import WarcWriter
from tests.test_warc_parts import exchange


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs, mounted as root or through ``sudo -n``, as the other
    system parts the tests need: a machine that refuses it fails the test,
    saying why (a skipped test proves nothing)."""
    where = tmp_path / "disk"
    where.mkdir()
    root = [] if os.geteuid() == 0 else ["sudo", "-n"]
    done = subprocess.run([*root, "mount", "-t", "tmpfs", "-o", "size=2m", "warc-test", str(where)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a tmpfs for the full-disk test (root or sudo -n needed): {done.stderr.strip()}")
    yield where
    # lazily: a writer that gave up keeps its file open
    subprocess.run([*root, "umount", "-l", str(where)], check=True)


def fill(directory) -> None:
    with open(directory / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError:
            pass


def test_a_full_disk_is_waited_out_and_every_record_written_whole(small_disk):
    maker = RecordMaker()
    writer = WarcWriter(WarcFiles(small_disk / "warc", "w", 10**9, lambda name: maker.warcinfo(name, {}), pid=7))
    first = writer.submit(exchange("http://127.0.0.2/0.html")).result(timeout=30)
    fill(small_disk)
    waiting = [writer.submit(exchange(f"http://127.0.0.2/{i}.html", body=os.urandom(3000))) for i in range(1, 6)]
    with pytest.raises(FutureTimeout):
        waiting[0].result(timeout=2.5)  # held, not failed
    assert writer.error is None and writer.counts.disk_full == 1
    (small_disk / "filler").unlink()
    written = [f.result(timeout=30) for f in waiting]
    writer.close()
    assert writer.error is None and writer.counts.responses == 6
    names = {w.file for w in [first, *written]}
    assert len(names) == 1
    data = (small_disk / "warc" / names.pop()).read_bytes()
    got = [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI")) for r in ArchiveIterator(io.BytesIO(data))]
    urls = [f"http://127.0.0.2/{i}.html" for i in range(6)]
    assert [u for t, u in got if t == "response"] == urls  # each once, whole, in order: no record cut short
    assert [(w.offset, w.kind) for w in written] == sorted((w.offset, "response") for w in written)


def test_closing_on_a_disk_still_full_gives_up_and_says_so(small_disk):
    maker = RecordMaker()
    writer = WarcWriter(WarcFiles(small_disk / "warc", "w", 10**9, lambda name: maker.warcinfo(name, {}), pid=7))
    writer.submit(exchange("http://127.0.0.2/0.html")).result(timeout=30)
    fill(small_disk)
    late = writer.submit(exchange("http://127.0.0.2/1.html", body=os.urandom(3000)))
    time.sleep(1.5)
    opened = writer.files._f
    writer.close(timeout=2)
    with pytest.raises(OSError, match="No space left"):
        late.result(timeout=5)  # not written: its page is not stored, its URL fetched again by the next run
    # Its file left .open for the next worker's salvage, its descriptor closed
    # (before: left to the garbage collector, a ResourceWarning in whichever
    # test ran then).
    assert opened is not None and opened.closed and writer.files._f is None
    assert len(list((small_disk / "warc").glob("*.open"))) == 1
