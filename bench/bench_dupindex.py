"""The cluster's near-duplicate index as it grows: time a check (lookup and
insert, as the spider makes it) at 10,000 indexed pages and at 1,000,000,
and the Redis memory an indexed page takes.

    python -m bench.bench_dupindex [--pages 1000000] [--window 10000] [--copies 0.1] [--short 0.1]

Pages are synthetic but shaped like a crawl's: each has a URL of about 60
characters on one of 1,000 sites, a content key, and (but a share
``--short`` of pages too short for one) a sketch made by
``crawler.duplicates.fingerprint`` of 300 to 4,000 random shingles; a share
``--copies`` of them are copies of an earlier page: half near copies (97 %
of its shingles kept), half only alike (half of them): candidates to fetch
and compare, as on a crawl with mirrors. The index is the product's
(``Frontier.duplicates``) on a Redis of its own configured as the embedded
one is (``hash-max-ziplist-value 128``), one process, one round trip after
another (the spider's way). Reported: the mean time of a check over
``--window`` pages when the index holds about 10,000 pages and when it
holds ``--pages``, their ratio (target: within 1.5x), and Redis memory:
``used_memory`` per page, and by structure (``MEMORY USAGE`` of every key),
a page with a sketch (records, sketches, band tables, first checks) and a
short page (the content index) apart.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.bench_frontier import RedisServer
from crawler.duplicates.fingerprint import ODD_BITS, _sketch
from crawler.frontier import Frontier


def pages(n: int, copies: float, short: float, bits: int = ODD_BITS, seed: int = 1):
    """(url, site, content key, sketch or None) of n synthetic pages."""
    rnd = random.Random(seed)
    gen = np.random.default_rng(seed)
    kept: list[np.ndarray] = []
    for i in range(n):
        site = f"site{i % 1000:03d}.example.org"
        url = f"http://{site}/docs/section-{i % 97}/page-{i:07d}.html"
        key = f"{rnd.getrandbits(160):040x}"
        if rnd.random() < short:
            yield url, site, key, None
            continue
        if kept and rnd.random() < copies:
            orig = kept[rnd.randrange(len(kept))]
            share = 0.97 if rnd.random() < 0.5 else 0.5  # a near copy, or a page only alike
            same = orig[gen.random(len(orig)) < share]
            fresh = gen.integers(0, 1 << 63, len(orig) - len(same), dtype=np.uint64)
            hashes = np.unique(np.concatenate([same, fresh]))
        else:
            hashes = np.unique(gen.integers(0, 1 << 63, rnd.randint(300, 4000), dtype=np.uint64) * np.uint64(2))
        if len(kept) < 2_000:
            kept.append(hashes)
        elif rnd.random() < 0.01:
            kept[rnd.randrange(len(kept))] = hashes
        yield url, site, key, _sketch(hashes, bits)


def memory_by_structure(client) -> dict[str, int]:
    out: dict[str, int] = {}
    for key in client.scan_iter(count=10_000):
        name = key.decode().split("}:", 1)[-1].split(":", 1)[0]
        out[name] = out.get(name, 0) + (client.memory_usage(key, samples=0) or 0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=1_000_000)
    ap.add_argument("--window", type=int, default=10_000)
    ap.add_argument("--copies", type=float, default=0.1)
    ap.add_argument("--short", type=float, default=0.1, help="share of pages too short for a sketch")
    ap.add_argument("--bits", type=int, default=ODD_BITS, help="NEARDUP_SKETCH_BITS")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-dupindex-"))
    rs = RedisServer(work / "redis")
    try:
        client = rs.client
        client.config_set("hash-max-ziplist-value", 128)  # as the embedded Redis (crawler/redis/embeddedserver.py)
        f = Frontier(client, "bench_dup")
        base = int(client.info("memory")["used_memory"])
        at_small = (10_000, 10_000 + args.window)
        at_large = (args.pages - args.window, args.pages)
        spans = {at_small: [], at_large: []}
        verdicts: dict[str, int] = {}
        sketched = 0
        t_start = time.monotonic()
        for i, (url, site, key, sk) in enumerate(pages(args.pages, args.copies, args.short, args.bits)):
            window = at_small if at_small[0] <= i < at_small[1] else at_large if i >= at_large[0] else None
            sketched += sk is not None
            t0 = time.perf_counter()
            d = f.duplicates.check(url, site, key, sk)
            if window is not None:
                spans[window].append(time.perf_counter() - t0)
            verdicts[d.kind] = verdicts.get(d.kind, 0) + 1
            if i and i % 100_000 == 0:
                print(f"  {i} pages indexed, {time.monotonic() - t_start:.0f}s", flush=True)
        used = int(client.info("memory")["used_memory"]) - base
        small = sum(spans[at_small]) / len(spans[at_small]) * 1e6
        large = sum(spans[at_large]) / len(spans[at_large]) * 1e6
        print(f"{args.pages} pages checked ({sketched} with a sketch of {args.bits} bits), {args.copies:.0%} "
              f"copies: verdicts {verdicts}")
        print(f"check (lookup and insert), mean of {args.window} pages: at 10,000 indexed {small:.0f} us, "
              f"at {args.pages:,} indexed {large:.0f} us: {large / small:.2f}x")
        total = memory_by_structure(client)
        per = {k: v / args.pages for k, v in total.items()}
        print(f"Redis used_memory: {used / args.pages:.0f} B a page; by structure (MEMORY USAGE): "
              + ", ".join(f"{k} {v:.0f} B" for k, v in sorted(per.items(), key=lambda x: -x[1])))
        long_bytes = sum(v for k, v in total.items() if k in ("rec", "osk", "lsh", "first"))
        short_pages = args.pages - sketched
        print(f"a page with a sketch: {long_bytes / max(1, sketched):.0f} B (records, sketches, band tables, first "
              f"checks); a short page: {total.get('content', 0) / max(1, short_pages):.0f} B (the content index)")
        f.views.delete_all()
    finally:
        rs.stop()
        shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
