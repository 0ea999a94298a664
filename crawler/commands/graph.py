"""``scrapy graph [--site SITE] [--sites] -o FILE``: export the link graph.

``FILE`` ends in ``.graphml``, ``.gexf`` or ``.csv``. Reads the crawl's store
(``CRAWL_DIR``, ``CRAWL_NAME``, default crawl name ``site``; ``STORE_PATH``;
``MONGO_URI``, ``MONGO_DATABASE``). A crawl without a store, or a store that
cannot be reached, is one line on stderr and exit status 1, and no file is
written.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.crawldir import crawl_name
from crawler.operations.graph import FORMATS, export_graph
from crawler.store import StoreNotFound, StoreUnavailable, open_store

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "[--site SITE] [--sites] -o FILE"

    def short_desc(self) -> str:
        return "Export the crawl's link graph (GraphML, GEXF or CSV edge list)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("-o", "--output", required=True, help=f"output file ({', '.join(FORMATS)})")
        parser.add_argument("--site", help="only the links found on this site's pages")
        parser.add_argument("--sites", action="store_true", help="the site-level graph")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        path = Path(opts.output)
        if path.suffix.lower() not in FORMATS:
            raise UsageError(f"-o {opts.output}: the file must end in {', '.join(FORMATS)}")
        try:
            store = open_store(self.settings, crawl_name(self.settings, "site"), create=False)
        except (StoreNotFound, StoreUnavailable) as exc:
            print(f"scrapy graph: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        with store:
            nodes, edges = export_graph(store, path, site=opts.site, sites=opts.sites)
        print(f"wrote {path}: {nodes} nodes, {edges} edges")
