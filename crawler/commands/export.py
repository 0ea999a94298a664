"""``scrapy export -o FILE [--site SITE] [--type index|info] [--state C|E]``:
write what the store holds.

``FILE`` ends in ``.jsonl`` (one JSON object a page, every stored field) or
``.csv`` (the same fields, a header row), or ``.cdxj`` (or ``--cdxj``): the
CDXJ index of the crawl's WARC files in ``WARC_DIR``, as pywb reads it
(``crawler/warc/cdxj.py``). Reads the crawl's store as
``scrapy graph`` does (``CRAWL_DIR``, ``CRAWL_NAME``; ``STORE_PATH``;
``MONGO_URI``, ``MONGO_DATABASE``). Feed exports (``scrapy crawl -o``) hold
only the pages fetched in that run; this holds the whole crawl. The file is
written next to its final name and moved into place when complete.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.crawldir import crawl_name
from crawler.store import StoreNotFound, StoreUnavailable, open_store
from crawler.store.base import PAGE_FIELDS

if TYPE_CHECKING:
    import argparse

FORMATS = (".jsonl", ".csv", ".cdxj")
TYPES = ("index", "info")


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "-o FILE [--site SITE] [--type index|info] [--state C|E] | --cdxj -o FILE"

    def short_desc(self) -> str:
        return "Export the stored pages (JSON lines or CSV), or the CDXJ index of the crawl's WARC files"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("-o", "--output", required=True, help=f"output file ({', '.join(FORMATS)})")
        parser.add_argument("--site", help="only this site's pages")
        parser.add_argument("--type", choices=TYPES, help="only index (navigation) or info (content) pages")
        parser.add_argument("--state", choices=("C", "E"), help="only pages crawled (C) or errors (E)")
        parser.add_argument("--cdxj", action="store_true",
                            help="the CDXJ index of the WARC files in WARC_DIR (as -o FILE.cdxj)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        path = Path(opts.output)
        suffix = path.suffix.lower()
        if suffix not in FORMATS:
            raise UsageError(f"-o {opts.output}: the file must end in {', '.join(FORMATS)}", print_help=False)
        if opts.cdxj or suffix == ".cdxj":
            self._cdxj(path)
            return
        try:
            store = open_store(self.settings, crawl_name(self.settings, "site"), create=False)
        except (StoreNotFound, StoreUnavailable) as exc:
            print(f"scrapy export: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        tmp = path.with_name(path.name + ".part")
        n = 0
        with store, open(tmp, "w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=PAGE_FIELDS, extrasaction="ignore") if suffix == ".csv" else None
            if writer is not None:
                writer.writeheader()
            for page in store.iter_pages(site=opts.site):
                if opts.type and page.get("page_type") != opts.type:
                    continue
                if opts.state and page.get("state") != opts.state:
                    continue
                row = {k: page.get(k) for k in PAGE_FIELDS}
                if writer is not None:
                    # A list or record (the change history, the evidence) as JSON, as it reads back.
                    writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()})
                else:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
        os.replace(tmp, path)
        print(f"wrote {path}: {n} pages")

    def _cdxj(self, path: Path) -> None:
        from crawler.warc.cdxj import write_cdxj

        assert self.settings is not None
        directory = self.settings.get("WARC_DIR")
        if not directory or not Path(directory).is_dir():
            print(f"scrapy export: --cdxj indexes the WARC files of WARC_DIR: "
                  f"{'set -s WARC_DIR=DIR' if not directory else repr(directory) + ' is not a directory'}",
                  file=sys.stderr)
            self.exitcode = 1
            return
        files, lines, still_open = write_cdxj(Path(directory), path)
        print(f"wrote {path}: {lines} records of {files} WARC files"
              + (f" ({still_open} file(s) still being written left out)" if still_open else ""))
