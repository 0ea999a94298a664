"""SimHash cost per page.

    python -m bench.bench_fingerprint [--root /usr/share/doc/python3.11/html]

1. SimHash of the main text of every page under --root: the simhash
   package as shipped (``Simhash(text)``: character 4-grams, one md5 and one
   numpy array per feature), the package on our features (with md5, and
   with our ``feature_hash``), and ours (same features and hash, one
   vectorised pass over cached word hashes; identical values), and ours
   with the resemblance sketch the spider computes with it.

The cluster's near-duplicate index is timed by bench/bench_dupindex.py.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from simhash import Simhash

from crawler.reading.extract import analyze
from crawler.duplicates.featurehash import feature_hash
from crawler.duplicates.fingerprint import fingerprints, simhash
from crawler.reading.textfeatures import features


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path("/usr/share/doc/python3.11/html"))
    args = ap.parse_args()
    texts = [analyze(p.read_bytes()).text for p in sorted(args.root.rglob("*.html"))]
    texts = [t for t in texts if len(t) >= 200]
    failed_own = failed_ours = 0
    t0 = time.perf_counter()
    for t in texts:
        try:
            Simhash(t)
        except OverflowError:  # a feature weighing over 255 overflows its uint8 arrays
            failed_own += 1
    t1 = time.perf_counter()
    for t in texts:
        try:
            Simhash(features(t))
        except OverflowError:
            pass
    t_md5 = time.perf_counter()
    package: dict[int, int] = {}
    for i, t in enumerate(texts):
        try:
            package[i] = Simhash(features(t), hashfunc=feature_hash).value
        except OverflowError:
            failed_ours += 1
    t2 = time.perf_counter()
    same = sum(simhash(texts[i]) == v for i, v in package.items())
    t3 = time.perf_counter()
    for t in texts:
        simhash(t)
    t4 = time.perf_counter()
    for t in texts:
        fingerprints(t)
    t5 = time.perf_counter()
    n = len(texts)
    chars = sum(len(t) for t in texts) / n
    print(f"{n} pages, {chars:.0f} characters of main text on average")
    print(f"simhash package, its own features (char 4-grams): {(t1 - t0) / n * 1000:.2f} ms/page "
          f"({failed_own} pages raised OverflowError)")
    print(f"simhash package, our features, md5:                {(t_md5 - t1) / n * 1000:.2f} ms/page")
    print(f"simhash package, our features, our feature_hash:   {(t2 - t_md5) / n * 1000:.2f} ms/page "
          f"({failed_ours} pages raised OverflowError)")
    print(f"ours (same features and hash, vectorised):         {(t4 - t3) / n * 1000:.2f} ms/page "
          f"(identical values on the {len(package)} pages the package computes: {same})")
    print(f"ours, SimHash and resemblance sketch (fingerprints): {(t5 - t4) / n * 1000:.2f} ms/page")


if __name__ == "__main__":
    main()
