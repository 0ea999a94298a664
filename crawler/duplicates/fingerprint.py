"""Page fingerprints: 64-bit SimHash, the resemblance sketch and a content
hash. Pure logic.

``simhash(text)`` is a page's SimHash over the features of its main text
(``crawler.reading.textfeatures``: word 2- and 3-shingles, CJK character 3-grams,
dates left out), each weighted by its count, with the hash and vote of
``crawler.duplicates.featurehash``; ``shingles`` is the set resemblance is judged on,
``sketch`` its LSH band keys and odd sketch (``Sketch``, below),
``fingerprints`` both at once.

The arithmetic after tokenizing (the shingles' hashes, the vote, the sorted
set resemblance is judged on and its sketch's bins) runs in C where the
optional module ``crawler._fpcore`` was built at install (setup.py), about
ten times faster than numpy; the numpy code (here and in
``crawler.duplicates.featurehash``) is the reference it is tested against, bit for
bit, and the fallback where no C compiler was found. ``python -m
crawler.duplicates.fingerprint`` says which is in use (``COMPILED``).

``content_hash`` (SHA-1 of the whitespace-folded, lowercased text) finds
exact duplicates; ``hamming`` measures how far two SimHashes are.

Settings (read by the callers, ``crawler/duplicates/check.py`` and the frontier's
duplicate index): ``NEARDUP_SKETCH_BITS`` (``ODD_BITS``: the odd sketch's
size), ``NEARDUP_RESEMBLANCE``,
``SIMHASH_MAX_DISTANCE``. No stats.
"""

from __future__ import annotations

import hashlib
from array import array

import numpy as np

from crawler.duplicates.featurehash import MASK64, hashes, mix, unit_md5, vote
from crawler.reading.textfeatures import CJK_CHAR, date_spans, without

try:
    from crawler import _fpcore
except ImportError:  # not built (no C compiler at install) or not importable (a zipped egg)
    _fpcore = None  # type: ignore[assignment]

COMPILED = _fpcore is not None

__all__ = ["COMPILED", "ODD_BITS", "ODD_CAP", "SKETCH_BANDS", "SKETCH_BINS", "SKETCH_ROWS", "OddSketch", "Sketch",
           "content_hash", "fingerprints", "hamming", "odd_sketch", "shingles", "signed", "simhash", "sketch",
           "unsigned"]

def _compiled_stream(text: str) -> tuple[bytes, bytes]:
    """The token stream ``_fpcore.fingerprint`` takes, made by ``_fpcore``: the
    units' hashes (uint64; the CJK runs' characters, then the words) and the
    runs' lengths (int64), as bytes; ``textfeatures.split``'s tokens, ``featurehash.unit``'s hashes."""
    assert _fpcore is not None
    return _fpcore.stream(text, unit_md5)


def _compiled(text: str, sample: int) -> tuple[bool, int, bytes, bytes, bytes]:
    """``_fpcore.fingerprint`` of ``text``, with whether it has any feature."""
    assert _fpcore is not None
    lowered = text.lower()
    spans = date_spans(lowered)
    judged_units: bytes | None = None
    judged_runs: bytes | None = None
    if not spans:
        units, runs = _compiled_stream(lowered)
    elif all(_token_edge(lowered, start) and _token_edge(lowered, end) for start, end in spans):
        units, runs, judged_units, judged_runs = _streams_around(lowered, spans)
    else:  # a date glued to a word ("_2024-05-01", "2024年5月1日は"): tokenized twice
        units, runs = _compiled_stream(without(lowered, spans))
        judged_units, judged_runs = _compiled_stream(lowered)
    value, judged, bins, low = _fpcore.fingerprint(units, runs, judged_units, judged_runs, sample)
    return bool(units), value, judged, bins, low


def _kind(c: str) -> int:
    """How ``_TOKEN`` sees a character: 1 CJK, 2 another word character, 0 neither."""
    if CJK_CHAR.match(c):
        return 1
    return 2 if c.isalnum() or c == "_" else 0


def _token_edge(text: str, i: int) -> bool:
    """Whether no token of ``text`` runs across position ``i``."""
    if i <= 0 or i >= len(text):
        return True
    before = _kind(text[i - 1])
    return before == 0 or before != _kind(text[i])


def _streams_around(text: str, spans: list[tuple[int, int]]) -> tuple[bytes, bytes, bytes, bytes]:
    """The streams of ``text`` without its dates (``spans``, each on token
    edges) and with them, tokenizing each piece once: without them, the
    tokens are those of the pieces between the dates, in order. A stream is
    its CJK runs' characters, then its words: each piece's are put in place."""
    kept_chars: list[bytes] = []
    kept_words: list[bytes] = []
    kept_runs: list[bytes] = []
    all_chars: list[bytes] = []
    all_words: list[bytes] = []
    all_runs: list[bytes] = []
    last = 0
    for i in range(len(spans) + 1):
        for piece, kept in ((text[last:spans[i][0]] if i < len(spans) else text[last:], True),
                            (text[spans[i][0]:spans[i][1]] if i < len(spans) else "", False)):
            if not piece:
                continue
            units, runs = _compiled_stream(piece)
            chars = 8 * sum(array("q", runs)) if runs else 0
            all_chars.append(units[:chars])
            all_words.append(units[chars:])
            all_runs.append(runs)
            if kept:
                kept_chars.append(units[:chars])
                kept_words.append(units[chars:])
                kept_runs.append(runs)
        if i < len(spans):
            last = spans[i][1]
    return (b"".join(kept_chars + kept_words), b"".join(kept_runs),
            b"".join(all_chars + all_words), b"".join(all_runs))


def simhash(text: str) -> int:
    """Unsigned 64-bit SimHash of a page's main text: every feature
    occurrence votes on every bit (weights are counts)."""
    if _fpcore is not None:
        return _compiled(text, 0)[1]
    return _simhash_numpy(text)


def _simhash_numpy(text: str) -> int:
    parts, _ = hashes(text)
    return vote(np.concatenate(parts)) if parts else 0


def shingles(text: str) -> np.ndarray:
    """The set of ``text``'s shingles that resemblance is judged on, as
    sorted unique 64-bit hashes: word 3-shingles (Broder's), CJK character
    3-grams; a text of fewer words, its one 2-shingle or word. Dates are
    words here (the SimHash leaves them out)."""
    if _fpcore is not None:
        return np.frombuffer(_compiled(text, 0)[2], dtype=np.uint64).copy()
    return _shingles_numpy(text)


def _shingles_numpy(text: str) -> np.ndarray:
    _, judged = hashes(text)
    return np.unique(np.concatenate(judged)) if judged else np.zeros(0, dtype=np.uint64)


# -- resemblance -------------------------------------------------------------
# Broder's resemblance |A & B| / |A | B| of two pages' shingle sets decides
# near duplicates (>= NEARDUP_RESEMBLANCE, 0.9). A page's sketch holds what
# finds and checks its candidates in the cluster's index:
#
# - 10 LSH band keys: a MinHash by one-permutation hashing (each shingle's
#   hash falls in one of 128 bins by its top 7 bits; a bin keeps its
#   smallest value; an empty bin borrows the value of the bin a fixed hash
#   sequence leads it to: Shrivastava's optimal densification, 2017, which
#   keeps Pr[bin agrees] = resemblance); the first 50 bins cut in 10 bands
#   of 5, each band hashed to 64 bits. Two pages of resemblance r share at
#   least one band key with probability 1 - (1 - r^5)^10: 0.9999 at 0.9,
#   0.97 at 0.8, 0.27 at 0.5 (16 bands of 8 were the same at 0.9 and kept
#   fewer pages of 0.5 as candidates, for 60 % more band entries in Redis).
#   One hash a shingle, not 50: the whole sketch costs what sorting the
#   shingles costs.
# - an odd sketch (``OddSketch``): 102 bytes at the default NEARDUP_SKETCH_BITS
#   (512). Resemblance between 0.85 and 0.95 is estimated within +-0.006 (one
#   standard deviation) for pages of up to 500 words, +-0.011 for longer
#   ones, 0.035 at worst in the tests. It replaced a bottom-512 sample of
#   32-bit hashes (up to 2 KB a page, 20 times as much: exact up to 500
#   words, +-0.013 beyond) at the same precision and recall, within 0.011,
#   on the trees tuned on (bench/bench_sketch.py; bench/RESULTS.md).
#
# An estimate from 128 MinHash values alone missed the targets on short
# pages, where one added sentence moves resemblance to 0.85-0.9 and 128
# values estimate it +-0.03 (bench/JOURNAL.md, "What MinHash would find");
# so did b-bit minwise hashing of 1,024 bins at one bit (128 bytes: +-0.02).
SKETCH_BANDS = 10
SKETCH_ROWS = 5
SKETCH_BINS = 128  # one-permutation bins (the top 7 bits of a hash: _fpcore's too)
ODD_BITS = 512  # the default of NEARDUP_SKETCH_BITS
# Shingles a level's sample holds at most: 4 x 512, where a pair at 0.9
# fills about 40 % of 512 bits. The sample's error falls as it grows, the
# sketch's own rises once its bits saturate (bench/bench_sketch.py: at 512
# bits, +-0.017 on long pages with samples of 512, +-0.011 with 2,048).
ODD_CAP = 2048
ODD_MAGIC = 0x6F  # "o": the first byte of an odd sketch as stored
_BIN_SHIFT = np.uint64(64 - 7)
_LOW57 = np.uint64((1 << 57) - 1)
_LOW32 = np.uint64(0xFFFFFFFF)
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def odd_sketch(hashes: np.ndarray, bits: int = ODD_BITS, cap: int = ODD_CAP) -> bytes:
    """A page's resemblance sketch as stored, from its shingle hashes (unique
    uint64; see ``OddSketch``): the magic byte, the level L, the sizes of
    the samples at L and L+1 (2 bytes each, big-endian), then their odd
    sketches, ``bits`` bits at L and ``bits // 2`` at L+1 (``bits``: a
    power of two, 512 to 4,096). A level's sample holds at most ``cap``
    shingles (``ODD_CAP``: the same for every size, so that sketches of
    two sizes compare, the larger folded to the smaller)."""
    low = hashes & _LOW32
    level = 0
    while level < 31 and len(hashes) >> level > cap // 2 and _sampled(low, level) > cap:
        level += 1
    head = [bytes((ODD_MAGIC, level))]
    odd = []
    for lv, n in ((level, bits), (level + 1, bits // 2)):
        kept = hashes[(low >> np.uint64(32 - lv)) == 0] if lv else hashes
        pos = ((kept >> np.uint64(32)) & np.uint64(n - 1)).astype(np.int64)
        parity = (np.bincount(pos, minlength=n) & 1).astype(np.uint8)
        head.append(min(len(kept), 0xFFFF).to_bytes(2, "big"))
        odd.append(np.packbits(parity).tobytes())
    return b"".join(head + odd)


def _sampled(low: np.ndarray, level: int) -> int:
    """How many of the low 32-bit halves ``low`` a level's sample keeps (rate 2^-level)."""
    return len(low) if level == 0 else int(np.count_nonzero((low >> np.uint64(32 - level)) == 0))


class OddSketch:
    """A page's resemblance sketch (Mitzenmacher, Pagh and Pham, "Efficient
    estimation for high similarities using odd sketches", WWW 2014): the
    page's shingles sampled by hash at rate 2^-L, L the least level whose
    sample holds at most ``ODD_CAP`` shingles, kept as an odd sketch: ``bits``
    bits, each the parity of the sampled shingles that hash to it; and the
    same at L+1 (half as many bits), so that two pages whose levels differ
    by one (sizes across a power of two) compare at the coarser level. The
    XOR of two odd sketches is the odd sketch of the samples' symmetric
    difference, whose size its popcount estimates; with the samples' sizes
    that gives the resemblance. A page of up to ``ODD_CAP`` shingles is
    kept whole (L = 0)."""

    __slots__ = ("level", "sizes", "odd")

    def __init__(self, level: int, sizes: tuple[int, int], odd: tuple[np.ndarray, np.ndarray]) -> None:
        self.level = level
        self.sizes = sizes
        self.odd = odd  # packed bits (uint8) at level and level + 1

    @classmethod
    def from_bytes(cls, data: bytes | None) -> OddSketch | None:
        """A stored sketch, or None when ``data`` is not one this code wrote
        (a malformed entry in a shared store is no evidence)."""
        if not isinstance(data, bytes) or len(data) < 6 + 96 or data[0] != ODD_MAGIC or data[1] > 31:
            return None
        body = len(data) - 6
        if body % 3:
            return None
        n1 = body // 3 * 2  # bytes at L; half as many at L+1
        if n1 & (n1 - 1) or not 64 <= n1 <= 512:
            return None  # bits: a power of two (it folds), 512 to 4,096
        raw = np.frombuffer(data, dtype=np.uint8, offset=6)
        return cls(data[1], (int.from_bytes(data[2:4], "big"), int.from_bytes(data[4:6], "big")),
                   (raw[:n1], raw[n1:]))

    def resemblance(self, other: OddSketch) -> float:
        """The estimated resemblance of the two pages (0.0 when their levels
        are two or more apart: sizes that far apart cannot resemble at 0.9)."""
        level = max(self.level, other.level)
        if level - min(self.level, other.level) > 1:
            return 0.0
        ma, a = self._at(level)
        mb, b = other._at(level)
        if ma + mb == 0:
            return 0.0
        while len(a) > len(b):
            a = a[: len(a) // 2] ^ a[len(a) // 2:]  # fold: the odd sketch with half the bits
        while len(b) > len(a):
            b = b[: len(b) // 2] ^ b[len(b) // 2:]
        n = 8 * len(a)
        z = int(_POPCOUNT[a ^ b].sum())
        if 2 * z >= n:
            return 0.0  # saturated: far apart
        delta = -(n / 2) * float(np.log1p(-2 * z / n))
        return max(0.0, min(1.0, (ma + mb - delta) / (ma + mb + delta)))

    def _at(self, level: int) -> tuple[int, np.ndarray]:
        i = level - self.level
        return self.sizes[i], self.odd[i]


class Sketch:
    """A page's LSH band keys (``bands``: ``SKETCH_BANDS`` integers of 64
    bits) and its odd sketch (``odd``, as stored: ``odd_sketch``)."""

    __slots__ = ("bands", "odd", "_parsed")

    def __init__(self, bands: tuple[int, ...], odd: bytes) -> None:
        self.bands = bands
        self.odd = odd
        self._parsed = OddSketch.from_bytes(odd)

    def resemblance(self, other: bytes | None) -> float | None:
        """The estimated resemblance to the page whose stored sketch is
        ``other`` (None: ``other`` is not a sketch this code wrote)."""
        theirs = OddSketch.from_bytes(other)
        if theirs is None or self._parsed is None:
            return None
        return self._parsed.resemblance(theirs)


def fingerprints(text: str, bits: int = ODD_BITS) -> tuple[int, Sketch | None]:
    """``simhash(text)`` and ``sketch(text, bits)``, hashing the text once."""
    if _fpcore is None:
        return _fingerprints_numpy(text, bits)
    any_feature, value, judged, bins, _ = _compiled(text, 0)
    if not any_feature:
        return 0, None
    return value, _compiled_sketch(judged, bins, bits)


def _fingerprints_numpy(text: str, bits: int = ODD_BITS) -> tuple[int, Sketch | None]:
    parts, judged = hashes(text)
    if not parts:
        return 0, None
    return vote(np.concatenate(parts)), _sketch(np.unique(np.concatenate(judged)), bits)


def sketch(text: str, bits: int = ODD_BITS) -> Sketch | None:
    """The sketch of ``text`` with an odd sketch of ``bits`` bits (None: no shingles)."""
    if _fpcore is not None:
        _, _, judged, bins, _ = _compiled(text, 0)
        return _compiled_sketch(judged, bins, bits) if judged else None
    found = _shingles_numpy(text)
    return _sketch(found, bits) if len(found) else None


_DENSIFY = [[mix((i << 32 | a) ^ 0xD1B54A32D192ED03) % SKETCH_BINS for a in range(1, 64)]
            for i in range(SKETCH_BINS)]


def _sketch(hashes: np.ndarray, bits: int = ODD_BITS) -> Sketch:
    """``hashes``: sorted unique shingle hashes (not empty)."""
    bins = hashes >> _BIN_SHIFT
    first_bins, first = np.unique(bins, return_index=True)  # sorted: a bin's first is its smallest
    filled: list[int | None] = [None] * SKETCH_BINS
    for b, v in zip(first_bins.tolist(), (hashes[first] & _LOW57).tolist()):
        filled[b] = v
    return _sketch_of(filled, odd_sketch(hashes, bits))


_EMPTY = (1 << 64) - 1  # an empty bin, as _fpcore marks it


def _compiled_sketch(judged: bytes, bins: bytes, bits: int) -> Sketch:
    """The sketch from what ``_fpcore.fingerprint`` answered."""
    filled = [None if v == _EMPTY else v for v in array("Q", bins)]
    return _sketch_of(filled, odd_sketch(np.frombuffer(judged, dtype=np.uint64), bits))


def _sketch_of(filled: list[int | None], odd: bytes) -> Sketch:
    """The sketch from its bins' smallest values (None: an empty bin) and
    its odd sketch."""
    values = list(filled)
    for i in range(SKETCH_BINS):
        if filled[i] is None:
            for j in _DENSIFY[i]:
                if filled[j] is not None:
                    values[i] = filled[j]
                    break
            else:  # 63 probes all empty (a page of a shingle or two): the first filled bin
                values[i] = next(v for v in filled if v is not None)
    row = np.array(values, dtype=np.uint64).astype("<u8").tobytes()
    bands = tuple(int.from_bytes(hashlib.blake2b(row[8 * SKETCH_ROWS * b:8 * SKETCH_ROWS * (b + 1)],
                                                 digest_size=8, person=b"band%02d" % b).digest(), "big")
                  for b in range(SKETCH_BANDS))
    return Sketch(bands, odd)


def signed(value: int) -> int:
    """As a signed 64-bit integer (how stores keep it)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def unsigned(value: int) -> int:
    return value & MASK64


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & MASK64).bit_count()


def content_hash(text: str) -> str:
    """SHA-1 of the lowercased text with whitespace folded: exact duplicates."""
    return hashlib.sha1(" ".join(text.lower().split()).encode("utf-8")).hexdigest()


if __name__ == "__main__":
    print("fingerprints: " + ("compiled (crawler._fpcore)" if COMPILED else
                              "numpy (crawler._fpcore not built: no C compiler at install?)"))
