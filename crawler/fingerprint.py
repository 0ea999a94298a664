"""Page fingerprints: 64-bit SimHash, the resemblance sketch and a content
hash. Pure logic.

``simhash(text)`` is a page's SimHash over the features of its main text
(``crawler.textfeatures``: word 2- and 3-shingles, CJK character 3-grams,
dates left out), each weighted by its count, with the hash and vote of
``crawler.featurehash``; ``shingles`` is the set resemblance is judged on,
``sketch`` its LSH band keys and bottom-k sample (``Sketch``, below),
``fingerprints`` both at once.

The arithmetic after tokenizing (the shingles' hashes, the vote, the sorted
set resemblance is judged on and its sketch's bins) runs in C where the
optional module ``crawler._fpcore`` was built at install (setup.py), about
ten times faster than numpy; the numpy code (here and in
``crawler.featurehash``) is the reference it is tested against, bit for
bit, and the fallback where no C compiler was found. ``python -m
crawler.fingerprint`` says which is in use (``COMPILED``).

``content_hash`` (SHA-1 of the whitespace-folded, lowercased text) finds
exact duplicates; ``hamming`` measures how far two SimHashes are.

Settings (read by the callers, ``crawler/pagecheck.py`` and the frontier's
duplicate index): ``NEARDUP_SAMPLE`` (``SKETCH_SAMPLE``: values a sketch's
sample keeps, at most ``SKETCH_SAMPLE_MAX``), ``NEARDUP_RESEMBLANCE``,
``SIMHASH_MAX_DISTANCE``. No stats.
"""

from __future__ import annotations

import hashlib
from array import array

import numpy as np

from crawler.featurehash import MASK64, hashes, mix, unit_md5, vote
from crawler.textfeatures import CJK_CHAR, date_spans, without

try:
    from crawler import _fpcore
except ImportError:  # not built (no C compiler at install) or not importable (a zipped egg)
    _fpcore = None  # type: ignore[assignment]

COMPILED = _fpcore is not None

__all__ = ["COMPILED", "SKETCH_BANDS", "SKETCH_BINS", "SKETCH_ROWS", "SKETCH_SAMPLE", "SKETCH_SAMPLE_MAX", "Sketch",
           "content_hash", "fingerprints", "hamming", "resemblance", "sample_from_bytes", "shingles", "signed",
           "simhash", "sketch", "unsigned"]

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
# - 16 LSH band keys: a 128-value MinHash by one-permutation hashing (each
#   shingle's hash falls in one of 128 bins by its top 7 bits; a bin keeps its
#   smallest value; an empty bin borrows the value of the bin a fixed hash
#   sequence leads it to: Shrivastava's optimal densification, 2017, which
#   keeps Pr[bin agrees] = resemblance), cut in 16 bands of 8 bins, each band
#   hashed to 64 bits. Two pages of resemblance r share at least one band key
#   with probability 1 - (1 - r^8)^16: 0.9999 at 0.9, 0.95 at 0.8, 0.24 at
#   0.6. One hash a shingle, not 128: the whole sketch costs what sorting
#   the shingles costs.
# - a bottom-k sample: the SKETCH_SAMPLE (512) smallest of the shingles'
#   32-bit hashes. For two pages whose shingles fit in it (up to about 500
#   words), it is the whole set, and the resemblance it gives is exact; for
#   longer pages it estimates it within about +-0.013 at 0.9 (Broder's
#   bottom-k estimator, the k smallest of the union). 4 bytes a value: at
#   most 2 KB a page. k was chosen on two releases of the LLVM and clang
#   manuals (pair precision / recall, LLVM: 0.998 / 0.988 at 256, 0.999 /
#   0.999 at 512; bench/RESULTS.md).
#
# An estimate from the 128 MinHash values alone missed the targets on short
# pages, where one added sentence moves resemblance to 0.85-0.9 and 128
# values estimate it +-0.03 (bench/JOURNAL.md, "What MinHash would find").
SKETCH_BANDS = 16
SKETCH_ROWS = 8
SKETCH_BINS = SKETCH_BANDS * SKETCH_ROWS
SKETCH_SAMPLE = 512  # the default of NEARDUP_SAMPLE
SKETCH_SAMPLE_MAX = 4096
_BIN_SHIFT = np.uint64(64 - 7)
_LOW57 = np.uint64((1 << 57) - 1)
_LOW32 = np.uint64(0xFFFFFFFF)


class Sketch:
    """A page's LSH band keys (``bands``: 16 integers of 64 bits) and its
    bottom-k ``sample`` (sorted unique uint32, at most ``k`` values)."""

    __slots__ = ("bands", "k", "sample")

    def __init__(self, bands: tuple[int, ...], sample: np.ndarray, k: int = SKETCH_SAMPLE) -> None:
        self.bands = bands
        self.sample = sample
        self.k = k

    def sample_bytes(self) -> bytes:
        """The sample as stored: 4 bytes a value, little-endian."""
        return self.sample.astype("<u4").tobytes()

    def resemblance(self, other: np.ndarray) -> float:
        return resemblance(self.sample, other, self.k)


def sample_from_bytes(data: bytes | None) -> np.ndarray | None:
    """A stored sample, or None when ``data`` is not one (a malformed entry
    in a shared store is no evidence: its length, its size, its order)."""
    if not data or len(data) % 4 or len(data) > 4 * SKETCH_SAMPLE_MAX:
        return None
    sample = np.frombuffer(data, dtype="<u4").astype(np.uint32)
    if len(sample) > 1 and not bool(np.all(sample[1:] > sample[:-1])):
        return None
    return sample


def resemblance(a: np.ndarray, b: np.ndarray, k: int = SKETCH_SAMPLE) -> float:
    """Resemblance of two pages from their bottom-k samples: among the k
    smallest values of their union, the share both hold (exact when both
    samples are whole sets). A sample kept with a larger k (an earlier
    NEARDUP_SAMPLE) is cut to its k smallest: the bottom-k sample it would
    have been."""
    if not len(a) or not len(b):
        return 0.0
    a, b = a[:k], b[:k]
    union = np.union1d(a, b)[:k]
    top = union[-1]
    both = np.intersect1d(a[a <= top], b[b <= top], assume_unique=True)
    return len(both) / len(union)


def fingerprints(text: str, sample: int = SKETCH_SAMPLE) -> tuple[int, Sketch | None]:
    """``simhash(text)`` and ``sketch(text, sample)``, hashing the text once."""
    if _fpcore is None:
        return _fingerprints_numpy(text, sample)
    any_feature, value, _, bins, low = _compiled(text, sample)
    if not any_feature:
        return 0, None
    return value, _compiled_sketch(bins, low, sample)


def _fingerprints_numpy(text: str, sample: int = SKETCH_SAMPLE) -> tuple[int, Sketch | None]:
    parts, judged = hashes(text)
    if not parts:
        return 0, None
    return vote(np.concatenate(parts)), _sketch(np.unique(np.concatenate(judged)), sample)


def sketch(text: str, sample: int = SKETCH_SAMPLE) -> Sketch | None:
    """The sketch of ``text`` with a sample of at most ``sample`` values
    (None: no shingles)."""
    if _fpcore is not None:
        _, _, judged, bins, low = _compiled(text, sample)
        return _compiled_sketch(bins, low, sample) if judged else None
    found = _shingles_numpy(text)
    return _sketch(found, sample) if len(found) else None


_DENSIFY = [[mix((i << 32 | a) ^ 0xD1B54A32D192ED03) % SKETCH_BINS for a in range(1, 64)]
            for i in range(SKETCH_BINS)]


def _sketch(hashes: np.ndarray, sample: int = SKETCH_SAMPLE) -> Sketch:
    """``hashes``: sorted unique shingle hashes (not empty)."""
    bins = hashes >> _BIN_SHIFT
    first_bins, first = np.unique(bins, return_index=True)  # sorted: a bin's first is its smallest
    filled: list[int | None] = [None] * SKETCH_BINS
    for b, v in zip(first_bins.tolist(), (hashes[first] & _LOW57).tolist()):
        filled[b] = v
    low = np.unique((hashes & _LOW32).astype(np.uint32))[:sample]
    return _sketch_of(filled, low, sample)


_EMPTY = (1 << 64) - 1  # an empty bin, as _fpcore marks it


def _compiled_sketch(bins: bytes, low: bytes, sample: int) -> Sketch:
    """The sketch from what ``_fpcore.fingerprint`` answered."""
    filled = [None if v == _EMPTY else v for v in array("Q", bins)]
    return _sketch_of(filled, np.frombuffer(low, dtype=np.uint32).copy(), sample)


def _sketch_of(filled: list[int | None], low: np.ndarray, sample: int) -> Sketch:
    """The sketch from its bins' smallest values (None: an empty bin) and
    its bottom-k sample."""
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
    return Sketch(bands, low, sample)



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
