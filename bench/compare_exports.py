"""Whether two crawls stored the same thing: pages, types, duplicates, links.

    python -m bench.compare_exports BEFORE_DIR AFTER_DIR

Each directory holds what one crawl exported: ``pages.jsonl`` (``scrapy
export -o pages.jsonl``) and ``links.csv`` (``scrapy graph -o links.csv``).
The two crawls may have served the same tree on different ports: a
``port`` file in each directory (the port, one line) lets the URLs be
compared without it. Prints, field by field, how many pages differ (and
three of them), whether the link sets are the same; exits 1 if anything
differs. Used to show a refactoring changed nothing a crawl stores
(issue 36: the PostgreSQL manual crawled before and after).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

FIELDS = ("state", "status", "page_type", "title", "text", "simhash", "content_hash", "dup_of", "depth")


def load(directory: Path) -> tuple[dict[str, dict[str, Any]], set[tuple[str, ...]]]:
    port_file = directory / "port"
    port = port_file.read_text().strip() if port_file.exists() else None

    def norm(value: Any) -> Any:
        return value.replace(f":{port}/", ":PORT/") if port and isinstance(value, str) else value

    pages = {}
    with open(directory / "pages.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            pages[norm(row["url"])] = {k: norm(row.get(k)) for k in FIELDS}
    with open(directory / "links.csv", newline="", encoding="utf-8") as fh:
        links = {tuple(norm(x) for x in row) for row in csv.reader(fh)}
    return pages, links


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args()
    a, la = load(args.before)
    b, lb = load(args.after)
    same = set(a) == set(b) and la == lb
    print(f"pages: {len(a)} and {len(b)}; the same URLs: {set(a) == set(b)}")
    for field in FIELDS:
        differ = sorted(u for u in a.keys() & b.keys() if a[u][field] != b[u][field])
        same = same and not differ
        print(f"{field}: {len(differ)} differ{' (' + ', '.join(differ[:3]) + ')' if differ else ''}")
    print(f"links: {len(la)} and {len(lb)}; the same: {la == lb}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
