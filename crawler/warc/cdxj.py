"""The crawl's CDXJ index (``scrapy export -o index.cdxj``): one line a
response or revisit record of the closed WARC files of ``WARC_DIR``, by
Webrecorder's ``cdxj-indexer`` (the indexer of pywb's own ``wb-manager``):
SURT URL keys, sorted as pywb reads them, a request's method and body
appended to the key of what is not a GET (``post_append``), file names
relative to the directory (put the index in a pywb collection's
``indexes/`` and the files in its ``archive/``).

The ``.open`` files of workers that are gone are closed first
(``files.salvage``); those of running workers are left out and counted.
"""

from __future__ import annotations

import os
from pathlib import Path

from crawler.warc.files import OPEN_SUFFIX, salvage

__all__ = ["write_cdxj"]


def write_cdxj(directory: Path, output: Path) -> tuple[int, int, int]:
    """Index the closed files of ``directory`` into ``output``: (files,
    lines, files still open)."""
    from cdxj_indexer.main import CDXJIndexer

    salvage(directory)
    files = sorted(str(p) for p in directory.glob("*.warc.gz"))
    still_open = len(list(directory.glob("*.warc.gz" + OPEN_SUFFIX)))
    tmp = output.with_name(output.name + ".part")
    CDXJIndexer(output=str(tmp), inputs=files, sort=True, post_append=True, dir_root=str(directory)).process_all()
    with open(tmp, "rb") as fh:
        lines = sum(1 for _ in fh)
    os.replace(tmp, output)
    return len(files), lines, still_open
