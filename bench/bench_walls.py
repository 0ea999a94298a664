"""Pages of content taken for bot walls (crawler/reading/blocked.py): the
false walls on real pages, which should be none.

    python -m bench.bench_walls DIR [DIR ...]

Reads every ``*.html``, ``*.htm`` and ``*.html.gz`` under each directory
(the labelled sample pages of ``../shared/data/pagetypes``, Debian's
PostgreSQL and Python manuals), analyses it as the crawler does (title,
text and links: ``crawler.reading.extract.analyze``) and asks
``block_reason``; prints the pages read, those taken for walls by kind, and
the first of them. None of these pages is a wall.
"""

from __future__ import annotations

import collections
import gzip
import sys
from pathlib import Path

from crawler.reading.blocked import block_reason
from crawler.reading.encoding import decode_html
from crawler.reading.extract import analyze


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    read = 0
    found: collections.Counter[str] = collections.Counter()
    shown: list[str] = []
    for root in map(Path, sys.argv[1:]):
        for path in sorted(p for p in root.rglob("*") if p.name.endswith((".html", ".htm", ".html.gz"))):
            raw = path.read_bytes()
            if path.name.endswith(".gz"):
                raw = gzip.decompress(raw)
            html = decode_html(raw)[0]
            page = analyze(html, "http://bench.test/", content=False, metadata=False)
            kind = block_reason(page.title or "", len(page.text), len(page.links), html, {})
            read += 1
            if kind:
                found[kind] += 1
                if len(shown) < 20:
                    shown.append(f"  {kind}: {path} ({page.title[:60]!r})")
    print(f"{read} pages read; taken for walls: {sum(found.values())} {dict(found)}")
    print("\n".join(shown))


if __name__ == "__main__":
    main()
