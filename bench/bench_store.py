"""The SQLite store's cost a batch as a site grows.

    python -m bench.bench_store [--sizes 1000,100000,400000] [--batch 50]

Fills a store (in a temporary directory) with one site's pages, 1,000 at a
time, and at each size times 20 batches of ``--batch`` new pages written as
the crawler writes them (``SQLiteStore.write``: pages, links, the sites
table). The anchor, in the same run: what each batch cost on top before the
counts moved by the batch, a recount of the site's done and failed pages
(``UPDATE sites SET pages = (SELECT COUNT(*) ...)``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from crawler.store import SQLiteStore

RECOUNT = ("UPDATE sites SET pages = (SELECT COUNT(*) FROM pages WHERE site = ?1 AND state = 'C'), "
           "errors = (SELECT COUNT(*) FROM pages WHERE site = ?1 AND state = 'E') WHERE site = ?1")


def page(i: int) -> dict:
    return {"url": f"http://a.test/{i}", "site": "a.test", "state": "C", "depth": 1, "status": 200,
            "page_type": "info", "title": f"page {i}", "text": "word " * 200, "fetched_at": 1000.0,
            "links": [{"url": f"http://a.test/{i + 1}", "anchor": "next"}]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,100000,400000")
    ap.add_argument("--batch", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        store = SQLiteStore(Path(d) / "bench.sqlite3")
        n = 0
        for size in (int(x) for x in args.sizes.split(",")):
            while n < size:
                store.write([page(i) for i in range(n, n + 1000)])
                n += 1000
            t0 = time.perf_counter()
            for _ in range(20):
                store.write([page(n + j) for j in range(args.batch)])
                n += args.batch
            ours = (time.perf_counter() - t0) / 20
            t0 = time.perf_counter()
            for _ in range(20):
                with store._lock:
                    store.conn.execute(RECOUNT, ("a.test",))
            recount = (time.perf_counter() - t0) / 20
            print(f"{size:>9,} pages: a batch of {args.batch} {ours * 1000:.1f} ms; the recount it no longer "
                  f"does {recount * 1000:.1f} ms (a batch with it: {(ours + recount) / ours:.1f}x)", flush=True)
        store.close()


if __name__ == "__main__":
    main()
