"""The cluster's near-duplicate index as it grows: time a check (lookup and
insert, as the spider makes it) at 10,000 indexed pages and at 1,000,000,
and the Redis memory an indexed page takes.

    python -m bench.bench_dupindex [--pages 1000000] [--window 10000] [--copies 0.1]

Pages are synthetic but shaped like a crawl's: each has a random SimHash, a
content key, 16 LSH band keys and a bottom-512 sample of random shingle
hashes (what ``crawler.fingerprint.sketch`` makes of a page of 500 words or
more: the largest sample, the worst case for memory); a share ``--copies``
of them are copies of an earlier page: half near copies (97 % of its
sample values kept, its band keys the same), half only alike (half the
values, every other band key): candidates to fetch and compare, as on a
crawl with mirrors. The index is the product's
(``Frontier.near_duplicate``) on an embedded Redis of its own, one process,
one round trip after another (the spider's way). Reported: the mean time
of a check over ``--window`` pages when the index holds about 10,000 pages
and when it holds ``--pages``, their ratio (target: within 1.5x), and
``used_memory`` per indexed page, with the share of each structure
(``MEMORY USAGE`` of every key).
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
from crawler.fingerprint import SKETCH_BANDS, SKETCH_SAMPLE, Sketch
from crawler.frontier import Frontier


def pages(n: int, copies: float, seed: int = 1, k: int = SKETCH_SAMPLE):
    """(url, content key, simhash, sketch) of n synthetic pages."""
    rnd = random.Random(seed)
    gen = np.random.default_rng(seed)
    kept: list[Sketch] = []
    for i in range(n):
        if kept and rnd.random() < copies:
            orig = kept[rnd.randrange(len(kept))]
            share = 0.97 if rnd.random() < 0.5 else 0.5  # a near copy, or a page only alike
            same = orig.sample[gen.random(len(orig.sample)) < share]
            fresh = gen.integers(0, 1 << 32, k - len(same), dtype=np.uint64).astype(np.uint32)
            sample = np.unique(np.concatenate([same, fresh]))[:k]
            bands = tuple(b if k % 2 == 0 or share > 0.9 else rnd.getrandbits(64) for k, b in enumerate(orig.bands))
        else:
            sample = np.unique(gen.integers(0, 1 << 32, k, dtype=np.uint64).astype(np.uint32))
            bands = tuple(rnd.getrandbits(64) for _ in range(SKETCH_BANDS))
        sk = Sketch(bands, sample, k)
        if len(kept) < 10_000:
            kept.append(sk)
        else:
            kept[rnd.randrange(len(kept))] = sk
        yield f"http://s{i % 1000}.example/{i}", f"{rnd.getrandbits(160):040x}", rnd.getrandbits(64), sk


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
    ap.add_argument("--sample", type=int, default=SKETCH_SAMPLE, help="NEARDUP_SAMPLE")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-dupindex-"))
    rs = RedisServer(work / "redis")
    try:
        client = rs.client
        f = Frontier(client, "bench_dup")
        base = int(client.info("memory")["used_memory"])
        at_small = (10_000, 10_000 + args.window)
        at_large = (args.pages - args.window, args.pages)
        spans = {at_small: [], at_large: []}
        verdicts: dict[str, int] = {}
        t_start = time.monotonic()
        for i, (url, key, fp, sk) in enumerate(pages(args.pages, args.copies, k=args.sample)):
            window = at_small if at_small[0] <= i < at_small[1] else at_large if i >= at_large[0] else None
            t0 = time.perf_counter()
            d = f.duplicates.check(url, url.split("/")[2], key, sk)
            if window is not None:
                spans[window].append(time.perf_counter() - t0)
            verdicts[d.kind] = verdicts.get(d.kind, 0) + 1
            if i and i % 100_000 == 0:
                print(f"  {i} pages indexed, {time.monotonic() - t_start:.0f}s", flush=True)
        used = int(client.info("memory")["used_memory"]) - base
        small = sum(spans[at_small]) / len(spans[at_small]) * 1e6
        large = sum(spans[at_large]) / len(spans[at_large]) * 1e6
        print(f"{args.pages} pages checked, samples of {args.sample}, {args.copies:.0%} near copies: "
              f"verdicts {verdicts}")
        print(f"check (lookup and insert), mean of {args.window} pages: at 10,000 indexed {small:.0f} us, "
              f"at {args.pages:,} indexed {large:.0f} us: {large / small:.2f}x")
        per = {k: v / args.pages for k, v in memory_by_structure(client).items()}
        print(f"Redis used_memory: {used / args.pages:.0f} B a page; by structure (MEMORY USAGE): "
              + ", ".join(f"{k} {v:.0f} B" for k, v in sorted(per.items(), key=lambda x: -x[1])))
        f.delete_all()
    finally:
        rs.stop()
        shutil.rmtree(work, ignore_errors=True)

if __name__ == "__main__":
    main()
