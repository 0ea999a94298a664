"""Resemblance sketches against the exact resemblance, offline: which
compact sketch keeps near-duplicate precision and recall at 0.9.

    python -m bench.bench_sketch --old /usr/share/doc/llvm-14-doc/html --new /usr/share/doc/llvm-15-doc/html
    python -m bench.bench_sketch --old TREE --banner "SENTENCE"

Every HTML page of the trees is read as the crawler reads it
(``crawler.reading.extract.analyze``'s main text, ``crawler.duplicates.fingerprint.shingles``);
every pair whose exact resemblance is at least 0.7 is scored by each
sketch, and a pair is called a near duplicate when its estimate is at
least 0.9 (``NEARDUP_RESEMBLANCE``). Pairs below 0.7 are not scored: no
sketch here calls them 0.9 but by a tail of many standard deviations.
Printed: for each sketch, its bytes a page (mean and largest), pair
precision and recall against the truth, and the estimates' error on the
pairs of resemblance 0.85 to 0.95.

Sketches:

- ``bottom512``: the sample the index kept until now, the 512 smallest
  32-bit shingle hashes (Broder's bottom-k): exact for pages of up to 512
  shingles, 4 bytes a value.
- ``odd C/n``: the page's shingles sampled at rate 2^-L (L the least level
  whose sample holds at most C shingles), and the same at L+1, each kept as
  an odd sketch (Mitzenmacher, Pagh and Pham 2014: n bits, each the parity
  of the sampled shingles hashed to it; n/2 bits at L+1) with the sample's
  size. Two pages compare at the coarser of their levels: the XOR of their
  odd sketches estimates the symmetric difference, which with the sizes
  gives the resemblance (``crawler.duplicates.fingerprint.OddSketch``).
- ``bbit K/b``: b-bit minwise hashing (Li and König 2010) of a K-bin
  one-permutation MinHash, densified; the share of bins whose low b bits
  agree, corrected for chance agreement.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

from bench.bench_neardup import prf, resemblant_pairs, with_banner
from crawler.reading.extract import analyze
from crawler.duplicates.fingerprint import OddSketch, odd_sketch, shingles


def texts_of(root: Path, banner: str | None = None) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*.html")):
        html = path.read_bytes()
        if banner is not None:
            html = with_banner(html, banner)
        text = analyze(html.decode("utf-8", "replace"), "http://127.0.0.1/" + str(path.relative_to(root))).text
        if len(text) >= 200:  # SIMHASH_MIN_CHARS: shorter pages get no sketch
            out[str(path.relative_to(root))] = text
    return out


def bottom_k(a: np.ndarray, b: np.ndarray, k: int = 512) -> float:
    """Broder's bottom-k estimate: among the k smallest of the union, the share both hold."""
    union = np.union1d(a[:k], b[:k])[:k]
    top = union[-1]
    return len(np.intersect1d(a[a <= top], b[b <= top], assume_unique=True)) / len(union)


def bbit(h: np.ndarray, bins: int, b: int) -> np.ndarray:
    """The low b bits of a densified ``bins``-bin one-permutation MinHash."""
    top = (h >> np.uint64(64 - int(math.log2(bins)))).astype(np.int64)
    low = h & np.uint64((1 << (64 - int(math.log2(bins)))) - 1)
    vals = np.full(bins, np.iinfo(np.uint64).max, dtype=np.uint64)
    np.minimum.at(vals, top, low)
    empty = vals == np.iinfo(np.uint64).max
    if empty.any():  # rotation densification: an empty bin takes the next filled bin's value
        idx = np.arange(bins)
        filled = np.flatnonzero(~empty)
        nxt = filled[np.searchsorted(filled, idx) % len(filled)]
        vals = np.where(empty, vals[nxt] ^ np.uint64(0x9E3779B97F4A7C15) * (idx.astype(np.uint64) + np.uint64(1)),
                        vals)
    mixed = (vals * np.uint64(0xBF58476D1CE4E5B9)) >> np.uint64(40)
    return (mixed & np.uint64((1 << b) - 1)).astype(np.uint8)


def bbit_resemblance(a: np.ndarray, b: np.ndarray, bits: int) -> float:
    agree = float(np.mean(a == b))
    c = 1.0 / (1 << bits)
    return max(0.0, (agree - c) / (1 - c))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True)
    ap.add_argument("--new", type=Path, default=None)
    ap.add_argument("--banner", default=None)
    ap.add_argument("--odd", default="256/256,512/512,1024/1024", help="C/n pairs of odd sketches (n a power of two)")
    ap.add_argument("--bbit", default="1024/1,512/2", help="K/b pairs of b-bit MinHash")
    args = ap.parse_args()
    t0 = time.monotonic()
    old = texts_of(args.old)
    new = texts_of(args.new) if args.new else texts_of(args.old, args.banner or "A mirror's banner.")
    texts = list(old.values()) + list(new.values())
    hashes = [shingles(t) for t in texts]
    sets = [set(h.tolist()) for h in hashes]
    truth = resemblant_pairs(sets, 0.7)
    pairs = sorted(truth)
    print(f"{len(old)} + {len(new)} pages (main text >= 200 chars), {len(pairs)} pairs of resemblance >= 0.7, "
          f"{sum(1 for r in truth.values() if r >= 0.9)} >= 0.9 ({time.monotonic() - t0:.0f} s)")
    if not sets:
        sys.exit(f"no page of 200 characters or more under {args.old}")
    sizes = np.array([len(s) for s in sets])
    print(f"shingles a page: median {int(np.median(sizes))}, 90th percentile {int(np.percentile(sizes, 90))}, "
          f"largest {sizes.max()}")
    is_true = np.array([truth[p] >= 0.9 for p in pairs])
    exact = np.array([truth[p] for p in pairs])
    near = (exact >= 0.85) & (exact <= 0.95)

    def report(name: str, sizes_b: list[int], est: np.ndarray) -> None:
        pred = est >= 0.9
        tp = int((pred & is_true).sum())
        p, r = prf(tp, int(pred.sum()) - tp, int(is_true.sum()) - tp)
        err = est[near] - exact[near]
        print(f"  {name:16s} {np.mean(sizes_b):7.1f} B mean, {max(sizes_b):5d} largest | "
              f"P {p:.3f} R {r:.3f} | error at 0.85-0.95: mean {err.mean():+.4f}, sd {err.std():.4f}, "
              f"largest {np.abs(err).max():.3f} ({int(near.sum())} pairs)")

    low = [np.unique((h & np.uint64(0xFFFFFFFF)).astype(np.uint32))[:512] for h in hashes]
    report("bottom512", [4 * len(x) for x in low],
           np.array([bottom_k(low[i], low[j]) for i, j in pairs]))
    for spec in args.odd.split(","):
        if not spec:
            continue
        cap, bits = (int(x) for x in spec.split("/"))
        raw = [odd_sketch(h, bits, cap) for h in hashes]
        sk = [OddSketch.from_bytes(x) for x in raw]
        report(f"odd {cap}/{bits}", [len(x) for x in raw],
               np.array([sk[i].resemblance(sk[j]) for i, j in pairs]))  # type: ignore[union-attr]
    for spec in args.bbit.split(","):
        if not spec:
            continue
        k, b = (int(x) for x in spec.split("/"))
        sig = [bbit(h, k, b) for h in hashes]
        report(f"bbit {k}/{b}", [k * b // 8] * len(sig),
               np.array([bbit_resemblance(sig[i], sig[j], b) for i, j in pairs]))


if __name__ == "__main__":
    main()
