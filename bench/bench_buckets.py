"""The duplicate index's grown tables (``crawler/frontier/buckets.py``) at
any size, counted rather than crawled: how many keys the band tables,
records and sketches take and how many of their entries are still in
coarse buckets (2 bytes more a band entry), against the flat layout that
gave every table its ``DUPEFILTER_BUCKETS`` buckets from the start.

    python -m bench.bench_buckets [--pages 20000,100000,1000000] [--shards 16] [--buckets 1024] [--seed 1]

Each entry's final bucket is drawn uniformly (band keys, page references
and their bits are hashes); a page adds one entry to each of the 10 band
tables (each spread over the shards) and one record and one sketch (in
one shard). A coarse bucket is split when it holds more than ``SPLIT_AT``
entries, so once its table's entries are all in, it has split exactly
when its own count (what its children's final buckets hold) is above
``SPLIT_AT`` and its parent has split: the state of the tables after the
crawl, whatever the order the pages came in. Counts, so no Redis needed;
bench_million measures the bytes.
"""

from __future__ import annotations

import argparse

import numpy as np

from crawler.frontier.buckets import SPLIT_AT, grown_sizes

BANDS = 10


def table(counts: np.ndarray, sizes: list[int]) -> tuple[int, int, int]:
    """One table's final bucket counts -> (keys, entries in coarse buckets,
    largest bucket) once every entry is in."""
    keys = coarse = largest = 0
    live = np.ones(sizes[0], dtype=bool)  # the coarsest level is always there
    for level, n in enumerate(sizes):
        held = counts.reshape(-1, n).sum(axis=0)  # final bucket b lies in p = b mod n
        if level == len(sizes) - 1:
            keys += int(np.count_nonzero(held[live]))
            largest = max(largest, int(held[live].max(initial=0)))
            break
        split = live & (held > SPLIT_AT)
        kept = live & ~split
        keys += int(np.count_nonzero(held[kept]))
        coarse += int(held[kept].sum())
        largest = max(largest, int(held[kept].max(initial=0)))
        live = np.tile(split, sizes[level + 1] // n)  # p' mod n == p: the children of split p
    return keys, coarse, largest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", default="20000,100000,1000000")
    ap.add_argument("--shards", type=int, default=16)
    ap.add_argument("--buckets", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    sizes = grown_sizes(args.buckets)
    print(f"levels {sizes}, split past {SPLIT_AT} entries; {args.shards} shards")
    print(f"  {'pages':>10} {'family':<8} {'keys flat':>10} {'keys grown':>10} {'coarse entries':>15} "
          f"{'largest flat':>12} {'largest grown':>13}")
    for pages in (int(x) for x in args.pages.split(",")):
        for family, tables in (("lsh", BANDS), ("rec/osk", 1)):
            flat = grown = coarse = big_flat = big_grown = 0
            per_table = rng.multinomial(pages * tables, [1 / (tables * args.shards)] * (tables * args.shards))
            for entries in per_table:
                counts = rng.multinomial(entries, [1 / args.buckets] * args.buckets)
                flat += int(np.count_nonzero(counts))
                big_flat = max(big_flat, int(counts.max()))
                k, c, big = table(counts, sizes)
                grown, coarse, big_grown = grown + k, coarse + c, max(big_grown, big)
            print(f"  {pages:>10,} {family:<8} {flat:>10,} {grown:>10,} {coarse:>15,} {big_flat:>12} {big_grown:>13}")


if __name__ == "__main__":
    main()
