"""``site-crawler``: the ``scrapy`` command of this project, from any directory.

``site-crawler crawl site -a seeds=...``, ``site-crawler status``, ... take
the same commands, options and ``-s`` settings as ``scrapy`` inside the
checkout. Outside a checkout there is no ``scrapy.cfg``: the settings module
is ``crawler.settings`` (``SCRAPY_SETTINGS_MODULE``, unless already set) and
a crawl keeps its local files (embedded Redis, SQLite store) in
``./.scrapy/crawl`` of the directory it runs in, unless ``CRAWL_DIR`` says
otherwise.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("SCRAPY_SETTINGS_MODULE", "crawler.settings")
    from scrapy.cmdline import execute

    execute(["scrapy", *sys.argv[1:]])


if __name__ == "__main__":
    main()
