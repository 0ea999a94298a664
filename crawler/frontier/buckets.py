"""Grown bucket tables: the duplicate index's hashes start coarse and split
as they fill, so that a small crawl does not pay for a large one's keys.

The duplicate index (``crawler/frontier/dupindex.py``) keeps its LSH band
tables, records and sketches in ``DUPEFILTER_BUCKETS`` small hashes per
shard and table, so that each stays in Redis's compact listpack encoding
at a million pages and beyond (about 60 entries a hash then). Every such
hash costs about 120 B of Redis whatever it holds (its key, the keyspace's
entry, the object, the listpack's header); after 20,000 pages, 139,000 of
the 16 x 1,024 x 12 hashes held one or two entries each, and the crawl
took 1,286 B of Redis a page, 546 B with grown tables (``bench/RESULTS.md``,
"Redis memory at scale").

So a table (one band table, the records or the sketches of one shard)
starts with ``DUPEFILTER_BUCKETS / 256`` coarse buckets, and a bucket that
holds more than ``SPLIT_AT`` entries is split four ways, down to
``DUPEFILTER_BUCKETS`` (levels ``grown_sizes``). A bucket's split is one
step of the script that inserted the entry (``lua/grow.lua``): entries move
to the four children, the parent goes, and a bit of the table's ``grown``
string says so. Lookups walk the levels (a GETBIT a level) to the bucket
that holds their entry now, in the same script, so checks and inserts stay
as atomic as before. A key's final bucket is the one it always had; at a
million pages every table has split to it, and the entries are the same
bytes as before (the ``grown`` strings add 43 B a table).

To split, a bucket must know each entry's final bucket:

- records and sketches are keyed by the page reference, whose top 3 bytes
  choose the bucket: nothing more to store;
- a band key's field keeps only 3 bytes of it, not the bits that chose its
  bucket, so in a coarse bucket the field carries the final bucket first
  (``bucket_width`` bytes, 2 for 1,024), dropped when it reaches its
  final bucket.

A ``DUPEFILTER_BUCKETS`` that is not a multiple of 4 (or below 16) has
fewer or no coarse levels. A crawl an earlier version started keeps its
flat tables (the crawl's meta says which: ``dup_levels``).
"""

from __future__ import annotations

__all__ = ["DEPTH", "SPLIT_AT", "bucket_width", "grown_sizes", "sizes_text"]

# Entries a coarse bucket holds before it splits: below Redis's default
# hash-max-listpack-entries (128), so that a coarse bucket stays compact on
# any server; a split leaves four of about 25.
SPLIT_AT = 100
DEPTH = 4  # coarse levels below DUPEFILTER_BUCKETS: 1/256, 1/64, 1/16, 1/4 of it


def grown_sizes(buckets: int, depth: int = DEPTH) -> list[int]:
    """The bucket counts of a table's levels, coarsest first, the last
    ``buckets`` (each a quarter of the next; ``depth`` coarse levels at
    most, none below 4 buckets)."""
    sizes = [buckets]
    while len(sizes) <= depth and sizes[0] % 4 == 0 and sizes[0] // 4 >= 4:
        sizes.insert(0, sizes[0] // 4)
    return sizes


def sizes_text(sizes: list[int]) -> str:
    """The levels as the scripts and the crawl's meta take them: "4,16,64,256,1024"."""
    return ",".join(str(n) for n in sizes)


def parse_sizes(text: str, buckets: int) -> list[int] | None:
    """Levels as ``sizes_text`` wrote them, if they end at ``buckets``
    and each divides the next (None: not levels of this layout)."""
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        return None
    if not sizes or sizes[-1] != buckets or any(n < 1 or m % n for n, m in zip(sizes, sizes[1:])):
        return None
    return sizes


def bucket_width(buckets: int) -> int:
    """Bytes of a final bucket number in a coarse band field."""
    return max(1, ((buckets - 1).bit_length() + 7) // 8)
