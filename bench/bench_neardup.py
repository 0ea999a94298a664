"""Near-duplicate precision and recall on two versions of one documentation tree.

    python -m bench.bench_neardup [--old /usr/share/doc/llvm-14-doc/html]
                                  [--new /usr/share/doc/llvm-15-doc/html] [--k 3]
    python -m bench.bench_neardup --old TREE --banner "SENTENCE"      # a mirror with a banner
    python -m bench.bench_neardup --old TREE --nav                    # a mirror with its own menu and footer
    python -m bench.bench_neardup ... --minhash 128                   # and what MinHash would find

(``apt-get install llvm-14-doc llvm-15-doc``: Sphinx HTML of LLVM 14 and 15,
823 and 1,044 pages; many pages barely changed between the releases, many
did.) With ``--banner``, the second tree is a mirror of ``--old`` with the
sentence added to every page, after its first heading (or at the start of
its body): a copy every reader would call the same page. Both trees are
served from a local HTTP server on 127.0.0.1 (as
``/old/...`` and ``/new/...``) and crawled together with ``scrapy crawl site``,
every HTML page a seed, duplicate detection on (``NEARDUP_RESEMBLANCE``,
``--threshold``, 0.9).

Truth: Broder's resemblance of the stored main texts' word 3-shingles,
|S(A) ∩ S(B)| / |S(A) ∪ S(B)|, at least 0.9 = near duplicates (computed
exactly for every pair whose sizes allow it: resemblance ≥ 0.9 needs the
smaller set to hold ≥ 90 % of the larger's shingles).

Reported, over the pages that were fingerprinted (main text ≥
``SIMHASH_MIN_CHARS``):

- pairs: every pair of pages, predicted near duplicate when the Hamming
  distance of their SimHashes is ≤ k, against the truth (precision, recall,
  for k = 0..6: what SimHash alone would find);
- sketch pairs: the crawler's own test on every pair, without crawl order:
  pairs sharing an LSH band key are candidates, and a candidate is a near
  duplicate when the odd sketches' resemblance is ≥ the threshold;
- minhash (with ``--minhash N``; datasketch's estimates, for comparison): every
  pair again, predicted near duplicate when N-permutation MinHash
  signatures (datasketch, over the same word 3-shingles) agree on at least
  a share t of their values, for a few t, and how many true pairs an LSH
  of 16 bands of N / 16 rows makes candidates;
- crawl: the crawler's own decisions. A page stored with ``dup_of`` is right
  when it resembles that page ≥ 0.9; a page should have been flagged when
  some page fetched before it resembles it ≥ 0.9.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.harness import LOOPBACK, ROOT, query, run, scrapy_crawl, serve, store_path
from crawler.duplicates.fingerprint import ODD_BITS, SKETCH_BANDS, SKETCH_ROWS, sketch

_WORD = re.compile(r"\w+")


def shingles(text: str, w: int = 3) -> set[int]:
    words = _WORD.findall(text.lower())
    if len(words) < w:
        return {hash(tuple(words))} if words else set()
    return {hash(tuple(words[i:i + w])) for i in range(len(words) - w + 1)}


def resemblant_pairs(sets: list[set[int]], threshold: float) -> dict[tuple[int, int], float]:
    """Every pair (i < j) with resemblance ≥ threshold, exactly."""
    order = sorted(range(len(sets)), key=lambda i: len(sets[i]))
    out: dict[tuple[int, int], float] = {}
    for pos, i in enumerate(order):
        a = sets[i]
        for j in order[pos + 1:]:
            b = sets[j]
            if len(a) < threshold * len(b):
                break  # sorted by size: every later set is larger still
            r = resemblance(a, b)
            if r >= threshold:
                out[(min(i, j), max(i, j))] = r
    return out


_H1_END = re.compile(rb"</h1\s*>", re.I)
_BODY = re.compile(rb"<body[^>]*>", re.I)


def with_banner(html: bytes, sentence: str) -> bytes:
    """The page with ``sentence`` as a paragraph after its first heading, or
    at the start of its body."""
    p = b"<p>" + sentence.encode() + b"</p>"
    m = _H1_END.search(html) or _BODY.search(html)
    return html[:m.end()] + p + html[m.end():] if m else p + html


_BODY_END = re.compile(rb"</body\s*>", re.I)
NAV = (b'<nav class="mirror-menu"><ul>' + b"".join(
    b'<li><a href="/%s/">%s</a></li>' % (w.encode(), w.title().encode())
    for w in ("home", "manuals", "downloads", "news", "mirrors", "about", "contact", "search"))
    + b"</ul></nav>")
FOOTER = b'<footer><p>Mirrored nightly by the Example University mirror service. <a href="/about/">About</a></p></footer>'


def with_navigation(html: bytes) -> bytes:
    """The page with a mirror's own menu at the start of its body and a
    footer at its end (the page's own navigation stays)."""
    m = _BODY.search(html)
    html = html[:m.end()] + NAV + html[m.end():] if m else NAV + html
    m = _BODY_END.search(html)
    return html[:m.start()] + FOOTER + html[m.start():] if m else html + FOOTER


def resemblance(a: set[int], b: set[int]) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


_POP = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def hamming_matrix(fps: np.ndarray) -> np.ndarray:
    x = fps[:, None] ^ fps[None, :]
    return _POP[x.view(np.uint8)].reshape(len(fps), len(fps), 8).sum(axis=2)


def minhash_pairs(texts: list[str], is_true: np.ndarray, iu: tuple[np.ndarray, np.ndarray], perms: int) -> None:
    """Pair precision and recall of MinHash estimates (module docstring)."""
    from datasketch import MinHash  # the bench extra

    def grams(text: str) -> list[bytes]:
        words = _WORD.findall(text.lower())
        return [" ".join(words[i:i + 3]).encode() for i in range(max(1, len(words) - 2))]

    t0 = time.monotonic()
    sigs = np.array([m.hashvalues for m in MinHash.bulk([grams(t) for t in texts], num_perm=perms)])
    took = time.monotonic() - t0
    n = len(sigs)
    est = np.empty((n, n), dtype=np.float32)
    for i in range(n):
        est[i] = (sigs == sigs[i]).mean(axis=1)
    e = est[iu]
    print(f"\nminhash ({perms} permutations, {1000 * took / max(1, n):.2f} ms a page):")
    print(" agree >=  predicted  true-pos  precision  recall")
    for t in (0.85, 0.88, 0.90):
        pred = e >= t
        tp = int((pred & is_true).sum())
        p, r = prf(tp, int(pred.sum()) - tp, int(is_true.sum()) - tp)
        print(f"   {t:.2f}   {int(pred.sum()):9d}  {tp:8d}  {p:9.3f}  {r:6.3f}")
    rows = perms // 16
    cand = np.zeros((n, n), dtype=bool)
    for k in range(16):
        groups: dict[bytes, list[int]] = {}
        for i in range(n):
            groups.setdefault(sigs[i, k * rows:(k + 1) * rows].tobytes(), []).append(i)
        for g in groups.values():
            if len(g) > 1:
                cand[np.ix_(g, g)] = True
    c = cand[iu]
    print(f" LSH 16 bands x {rows} rows: {int(c.sum())} candidate pairs, "
          f"{int((c & is_true).sum())} of the {int(is_true.sum())} true pairs among them")


def prf(tp: int, fp: int, fn: int) -> tuple[float, float]:
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", type=Path, default=Path("/usr/share/doc/llvm-14-doc/html"))
    ap.add_argument("--new", type=Path, default=Path("/usr/share/doc/llvm-15-doc/html"))
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--banner", default=None, help="mirror --old with this sentence added to every page")
    ap.add_argument("--bits", type=int, default=ODD_BITS, help="NEARDUP_SKETCH_BITS of the crawl")
    ap.add_argument("--min-chars", type=int, default=200, help="SIMHASH_MIN_CHARS of the crawl")
    ap.add_argument("--nav", action="store_true", help="mirror --old with a menu and a footer of its own")
    ap.add_argument("--minhash", type=int, default=0, help="also report N-permutation MinHash (0: not)")
    args = ap.parse_args()
    mirror = bool(args.banner or args.nav)
    for d in (args.old,) if mirror else (args.old, args.new):
        if not d.is_dir():
            sys.exit(f"{d} is missing: apt-get install llvm-14-doc llvm-15-doc (or pass --old/--new)")

    work = Path(tempfile.mkdtemp(prefix="bench-neardup-"))
    root = work / "root"
    seeds: list[str] = []
    for name, src in (("old", args.old), ("new", args.old if mirror else args.new)):
        for f in sorted(src.rglob("*.html")):
            dst = root / name / f.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            if mirror and name == "new":
                html = f.read_bytes()
                html = with_banner(html, args.banner) if args.banner else html
                dst.write_bytes(with_navigation(html) if args.nav else html)
            else:
                shutil.copyfile(f, dst)
    server = serve(work, root)
    try:
        for f in sorted(root.rglob("*.html")):
            seeds.append(server.url("/" + str(f.relative_to(root))))
        (work / "seeds.txt").write_text("\n".join(seeds) + "\n")
        crawl_dir = work / "crawl"
        settings = {"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS": 16, "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
                    "LOG_LEVEL": "INFO", "FRONTIER_MAX_PAGES_PER_SITE": 0, "NEARDUP_RESEMBLANCE": args.threshold,
                    "SIMHASH_MIN_CHARS": args.min_chars, "NEARDUP_SKETCH_BITS": args.bits,
                    "CRAWL_DIR": crawl_dir, "TELNETCONSOLE_ENABLED": False,
                    "NETWORK_ALLOWLIST": LOOPBACK}  # loopback sites
        stats = run(scrapy_crawl([f"seeds_file={work / 'seeds.txt'}", "follow=all"], settings), ROOT, timeout=3600)
        print(f"crawled {len(seeds)} seeds in {stats['wall']:.0f}s: "
              f"{stats.get('simhash/exact_duplicate', 0)} exact and {stats.get('simhash/near_duplicate', 0)} near "
              "duplicates flagged")
    finally:
        server.stop()

    rows = query(store_path(crawl_dir), "SELECT url, text, simhash, dup_of, fetched_at FROM pages "
                 "WHERE state = 'C' AND url LIKE '%.html' ORDER BY fetched_at, url")
    # The pages the crawler checks for near duplicates: a SimHash and at
    # least SIMHASH_MIN_CHARS of main text (shorter ones are stored with a
    # SimHash for the re-crawl, but only their exact copies are looked for).
    fingerprinted = [r for r in rows if r[2] is not None and len(r[1] or "") >= args.min_chars]
    print(f"{len(rows)} HTML pages stored, {len(fingerprinted)} checked for near duplicates "
          f"({len(rows) - len(fingerprinted)} with less main text than SIMHASH_MIN_CHARS)")
    urls = [r[0] for r in fingerprinted]
    index = {u: i for i, u in enumerate(urls)}
    sets = [shingles(r[1] or "") for r in fingerprinted]
    t0 = time.monotonic()
    truth = resemblant_pairs(sets, args.threshold)
    print(f"truth: {len(truth)} pairs with word 3-shingle resemblance >= {args.threshold} "
          f"(computed in {time.monotonic() - t0:.1f}s); "
          f"{sum(1 for i, j in truth if urls[i].split('/')[3] != urls[j].split('/')[3])} across versions")

    fps = np.array([r[2] & 0xFFFFFFFFFFFFFFFF for r in fingerprinted], dtype=np.uint64)
    dist = hamming_matrix(fps)
    iu = np.triu_indices(len(fps), k=1)
    d = dist[iu]
    is_true = np.zeros(len(d), dtype=bool)
    pos = {(int(i), int(j)): n for n, (i, j) in enumerate(zip(*iu))} if len(truth) else {}
    for pair in truth:
        is_true[pos[pair]] = True
    print("\npairs (every pair of fingerprinted pages):")
    print(" k  predicted  true-pos  precision  recall")
    for k in range(7):
        pred = d <= k
        tp = int((pred & is_true).sum())
        p, r = prf(tp, int(pred.sum()) - tp, int(is_true.sum()) - tp)
        mark = "  <- SIMHASH_MAX_DISTANCE" if k == args.k else ""
        print(f" {k}  {int(pred.sum()):9d}  {tp:8d}  {p:9.3f}  {r:6.3f}{mark}")

    if args.minhash:
        minhash_pairs([r[1] or "" for r in fingerprinted], is_true, iu, args.minhash)

    # The crawler's own test on every pair: LSH band keys make candidates,
    # the odd sketches' resemblance decides (crawler/duplicates/fingerprint.py).
    sketches = [sketch(r[1] or "", args.bits) for r in fingerprinted]
    by_band: dict[tuple[int, int], list[int]] = {}
    for n, sk in enumerate(sketches):
        for b, key in enumerate(sk.bands if sk is not None else ()):
            by_band.setdefault((b, key), []).append(n)
    candidates = {(a, b) for group in by_band.values() for x, a in enumerate(group) for b in group[x + 1:]}
    predicted = {pair for pair in candidates
                 if (sketches[pair[0]].resemblance(sketches[pair[1]].odd) or 0.0) >= args.threshold}  # type: ignore[union-attr]
    tp = len(predicted & set(truth))
    p, r = prf(tp, len(predicted) - tp, len(truth) - tp)
    print(f"\nsketch pairs (LSH {SKETCH_BANDS}x{SKETCH_ROWS} candidates, odd sketch of {args.bits} bits, resemblance >= "
          f"{args.threshold}): {len(candidates)} candidates ({len(set(truth) & candidates)} of {len(truth)} true "
          f"pairs among them), {len(predicted)} predicted, {tp} right: precision {p:.3f}  recall {r:.3f}")

    # The crawler's decisions, in fetch order.
    flagged = {r[0]: r[3] for r in fingerprinted if r[3]}
    partners: dict[int, set[int]] = {}
    for i, j in truth:
        partners.setdefault(i, set()).add(j)
        partners.setdefault(j, set()).add(i)
    should = {i for i, ps in partners.items() if any(j < i for j in ps)}  # a page fetched before resembles it
    right = set()
    wrong = []
    for url, first in flagged.items():
        i = index[url]
        j = index.get(first)
        r = resemblance(sets[i], sets[j]) if j is not None else 0.0
        if r >= args.threshold:
            right.add(i)
        else:
            wrong.append((url, first, r))
    p, r = prf(len(right), len(wrong), len(should - right))
    print(f"\ncrawl (NEARDUP_RESEMBLANCE={args.threshold}): {len(flagged)} pages stored with dup_of, "
          f"{len(right)} right, {len(wrong)} wrong; {len(should)} should have been flagged, "
          f"{len(should - right)} missed")
    print(f"  precision {p:.3f}  recall {r:.3f}")
    for url, first, res in sorted(wrong, key=lambda x: x[2])[:10]:
        print(f"  wrong: {url} dup_of {first} (resemblance {res:.3f})")
    missed = sorted(should - right)
    for i in missed[:10]:
        best = max(partners[i], key=lambda j: truth[(min(i, j), max(i, j))])
        print(f"  missed: {urls[i]} ~ {urls[best]} (resemblance {truth[(min(i, best), max(i, best))]:.3f}, "
              f"distance {int(dist[i, best])})")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
