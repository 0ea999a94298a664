"""Page fingerprints: 64-bit SimHash and a content hash. Pure logic.

Features, so that Chinese and Japanese (no spaces) work as well as
space-separated languages:

- runs of CJK characters (Han, kana, Hangul) give character 3-grams;
- other text gives lowercased word 2- and 3-shingles ("the crawler",
  "crawler reads", "the crawler reads"); a text of one word gives that word.
  3-shingles are what resemblance is judged on (Broder); the 2-shingles
  double the features, which steadies the fingerprints of short pages: on
  two releases of the LLVM manual, 2-shingles alone found 0.867 of the
  near-duplicate pairs at k=3, both 0.949, at the same precision;
- dates and times are left out ("2024-05-01", "01/05/2024", "May 1, 2024",
  "1 May 2024", "2024年5月1日", "12:30"): they change between copies of a
  page without changing the page. Other numbers are words like any other:
  an earlier version left every digit-only token out, which made pages that
  differ only in their numbers (register tables, versions) look identical;
  on two releases of the LLVM manual, pair precision at k=3 went from 0.905
  to 0.97 once numbers counted (bench/RESULTS.md).

Each feature is weighted by its count. The SimHash is the ``simhash``
package's bit-wise weighted vote (``Simhash(features, hashfunc=feature_hash)``)
with a faster hash function: a feature's 64-bit hash folds the hashes of its
units (words, or CJK characters) with the splitmix64 finaliser, and a unit's
hash is the last 8 bytes of its md5, cached. The package as shipped hashes
every feature with md5 and loops over them in Python; here the units are
hashed once each (a page repeats its words, a site its vocabulary) and the
folding and the vote run vectorised in numpy: the result is the package's
for that hash function, bit for bit (tests/test_fingerprint.py checks it),
at a fraction of the cost (bench/RESULTS.md).

The arithmetic after tokenizing (the shingles' hashes, the vote, the sorted
set resemblance is judged on and its sketch's bins) runs in C where the
optional module ``crawler._fpcore`` was built at install (setup.py), about
ten times faster than numpy; the numpy code here is the reference it is
tested against, bit for bit, and the fallback where no C compiler was
found. ``python -m crawler.fingerprint`` says which is in use.

``content_hash`` (SHA-1 of the whitespace-folded, lowercased text) finds
exact duplicates; ``hamming`` measures how far two SimHashes are.
"""

from __future__ import annotations

import hashlib
import re
from array import array
from collections import Counter

import numpy as np

try:
    from crawler import _fpcore
except ImportError:  # not built (no C compiler at install) or not importable (a zipped egg)
    _fpcore = None  # type: ignore[assignment]

COMPILED = _fpcore is not None

__all__ = ["CJK_CHAR", "Sketch", "content_hash", "feature_hash", "features", "fingerprints", "hamming",
           "resemblance", "sample_from_bytes", "shingles", "signed", "simhash", "simhash_of_features", "sketch",
           "unsigned"]

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+")
CJK_CHAR = re.compile(rf"[{_CJK}]")  # Han, kana, Hangul: text written without spaces
_WORD = re.compile(r"\w+")


def count_words(text: str, unspaced: re.Pattern[str] = CJK_CHAR) -> int:
    """Words in ``text``: space-separated tokens, and for scripts written
    without spaces (``unspaced``: Chinese, Japanese and Korean by default)
    one word per two characters, about their mean word length. A Chinese
    headline is not one word."""
    n = len(unspaced.findall(text))
    if not n:
        return len(text.split())
    return len(unspaced.sub(" ", text).split()) + (n + 1) // 2


_MASK64 = (1 << 64) - 1


_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
# Every date form starts with a digit, so that the regex engine can skip to
# the next digit (a leading \b or a month name would make it try every
# position: 2 ms on a 17,000-character page). "May 1, 2024" is found from
# its "1, 2024" and the month before it.
_DATES = re.compile(
    r"\d(?:"
    r"\d{3}[-/.]\d{1,2}[-/.]\d{1,2}(?:t\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?z?)?(?!\w)"  # ISO 8601
    r"|\d?[-/.]\d{1,2}[-/.]\d{2,4}(?!\w)"  # 01/05/2024, 1.5.24
    r"|\d{3}\s*年\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?"  # 2024年5月1日
    r"|\d?:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?)?(?!\w)"  # 12:30, 9:05 pm
    rf"|\d?(?:st|nd|rd|th)?\s+{_MONTH}\s+\d{{4}}(?!\w)"  # 1 may 2024
    r"|\d?(?:st|nd|rd|th)?,?\s+\d{4}(?P<tail>)(?!\w)"  # (may) 1, 2024
    r")"
)
_MONTH_BEFORE = re.compile(rf"(?<![a-z]){_MONTH}\s+$")


def _date_spans(text: str) -> list[tuple[int, int]]:
    """Where ``text`` (lowercased) has dates and times, in order."""
    spans: list[tuple[int, int]] = []
    last = 0
    for m in _DATES.finditer(text):
        start = m.start()
        if start and (text[start - 1].isdigit() or (text[start - 1].isalpha() and "年" not in m.group())):
            continue  # inside a longer number or word
        if m.group("tail") is not None:
            month = _MONTH_BEFORE.search(text, max(start - 12, last), start)
            if month is None:
                continue  # "chapter 1, 2024 pages": not a date
            start = month.start()
        spans.append((start, m.end()))
        last = m.end()
    return spans


def _strip_dates(text: str) -> str:
    """``text`` (lowercased) without its dates and times."""
    return _without(text, _date_spans(text))


def _without(text: str, spans: list[tuple[int, int]]) -> str:
    if not spans:
        return text
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces.append(text[last:start])
        pieces.append(" ")
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _tokens(text: str, dates: bool = False) -> tuple[list[str], list[str]]:
    """The CJK runs and the other words of ``text``, lowercased, dates out
    (unless ``dates``)."""
    lowered = text.lower()
    return _split(lowered if dates else _strip_dates(lowered))


def _split(text: str) -> tuple[list[str], list[str]]:
    if CJK_CHAR.search(text) is None:
        # Most pages: no CJK run to set apart, no Python loop over tokens
        # (half of this function's cost, measured on the Debian handbook).
        return [], _WORD.findall(text)  # _TOKEN's words where there is no CJK
    runs: list[str] = []
    words: list[str] = []
    for token in _TOKEN.findall(text):
        (runs if CJK_CHAR.match(token) else words).append(token)
    return runs, words


def features(text: str) -> Counter[str]:
    """Weighted features of a text (see the module docstring)."""
    out: Counter[str] = Counter()
    runs, words = _tokens(text)
    for run in runs:
        if len(run) <= 3:
            out[run] += 1
        else:
            out.update(run[i:i + 3] for i in range(len(run) - 2))
    if len(words) == 1:
        out[words[0]] += 1
    else:
        out.update(f"{a} {b}" for a, b in zip(words, words[1:]))
        out.update(f"{a} {b} {c}" for a, b, c in zip(words, words[1:], words[2:]))
    return out


_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_UNITS: dict[str, int] = {}
_UNITS_MAX = 1 << 18  # about 50 MB at most; a site's vocabulary is far smaller


def _mix(x: int) -> int:
    """splitmix64's finaliser: a bijection of 64-bit integers that mixes
    every input bit into every output bit."""
    x ^= x >> 30
    x = (x * _M1) & _MASK64
    x ^= x >> 27
    x = (x * _M2) & _MASK64
    return x ^ (x >> 31)


def _mix_array(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(_M1)  # uint64 arithmetic wraps modulo 2**64, as _mix's mask
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(_M2)
    out: np.ndarray = x ^ (x >> np.uint64(31))
    return out


_SEEDS = [_mix((n * 0x9E3779B97F4A7C15) & _MASK64) for n in range(8)]


def _unit_md5(unit: str) -> int:
    """A unit's hash: the last 8 bytes of its UTF-8 md5 (``_unit`` caches it;
    ``_fpcore.stream`` keeps its own cache)."""
    return int.from_bytes(hashlib.md5(unit.encode("utf-8")).digest()[-8:], "big")


def _unit(unit: str) -> int:
    h = _UNITS.get(unit)
    if h is None:
        if len(_UNITS) >= _UNITS_MAX:
            _UNITS.clear()
        h = _UNITS[unit] = _unit_md5(unit)
    return h


def _unit_array(units: list[str] | str) -> np.ndarray:
    """``_unit`` of each of ``units``, as uint64: the cache is read by
    ``dict.get`` in C, and only the units it lacks are hashed in Python."""
    found = list(map(_UNITS.get, units))
    if None in found:
        found = [_unit(u) if h is None else h for u, h in zip(units, found)]
    return np.array(found, dtype=np.uint64)


def _units(feature: str) -> list[str]:
    return list(feature) if CJK_CHAR.match(feature) else feature.split(" ")


def feature_hash(feature: bytes) -> int:
    """The 64-bit hash of a feature (as ``features`` spells it, UTF-8): its
    units' md5s folded with splitmix64. A ``hashfunc`` for the simhash package."""
    units = _units(feature.decode("utf-8"))
    acc = _SEEDS[len(units)]
    for u in units:
        acc = _mix(acc ^ _unit(u))
    return acc


def _fold(seed: int, columns: list[np.ndarray]) -> np.ndarray:
    acc = np.full(len(columns[0]), seed, dtype=np.uint64)
    for col in columns:
        acc = _mix_array(acc ^ col)
    return acc


def _hashes(text: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The hash of every feature occurrence of ``text`` (``features``'
    multiset), vectorised; and of those the shingles resemblance is judged
    on (``shingles``)."""
    lowered = text.lower()
    stripped = _strip_dates(lowered)
    out, judged = _shingle_hashes(*_split(stripped))
    if stripped is not lowered:
        # Resemblance is judged on every word: a date that differs (a
        # release's notes beside another's) is a difference there.
        judged = _shingle_hashes(*_split(lowered), judged_only=True)[1]
    return out, judged


def _shingle_hashes(runs: list[str], words: list[str],
                    judged_only: bool = False) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The features' hashes, and those resemblance is judged on (with
    ``judged_only``, the word 2-shingles of a longer text are not made)."""
    out: list[np.ndarray] = []
    for run in runs:
        u = _unit_array(run)
        if len(run) <= 3:
            out.append(_fold(_SEEDS[len(run)], [u[i:i + 1] for i in range(len(run))]))
        else:
            out.append(_fold(_SEEDS[3], [u[:-2], u[1:-1], u[2:]]))
    judged = list(out)
    if len(words) == 1:
        out.append(np.array([feature_hash(words[0].encode("utf-8"))], dtype=np.uint64))
        judged.append(out[-1])
    elif len(words) > 1:
        u = _unit_array(words)
        if not (judged_only and len(words) > 2):
            out.append(_fold(_SEEDS[2], [u[:-1], u[1:]]))
        if len(words) > 2:
            out.append(_fold(_SEEDS[3], [u[:-2], u[1:-1], u[2:]]))
        judged.append(out[-1])
    return out, judged


def _vote(hashes: np.ndarray, weights: np.ndarray | None = None) -> int:
    """The package's bit-wise weighted vote: bit i is set when the features
    with bit i set outweigh half of all (weights 1 unless given)."""
    bits = np.unpackbits(hashes.astype(">u8").view(np.uint8)).reshape(len(hashes), 64)
    if weights is None:
        sums, total = bits.sum(axis=0, dtype=np.int64), len(hashes)
    else:
        sums, total = weights @ bits, int(weights.sum())
    return int.from_bytes(np.packbits(sums > total / 2).tobytes(), "big")


def _compiled_stream(text: str) -> tuple[bytes, bytes]:
    """The token stream ``_fpcore.fingerprint`` takes, made by ``_fpcore``: the
    units' hashes (uint64; the CJK runs' characters, then the words) and the
    runs' lengths (int64), as bytes; ``_split``'s tokens, ``_unit``'s hashes."""
    assert _fpcore is not None
    return _fpcore.stream(text, _unit_md5)


def _compiled(text: str, sample: int) -> tuple[bool, int, bytes, bytes, bytes]:
    """``_fpcore.fingerprint`` of ``text``, with whether it has any feature."""
    assert _fpcore is not None
    lowered = text.lower()
    spans = _date_spans(lowered)
    judged_units: bytes | None = None
    judged_runs: bytes | None = None
    if not spans:
        units, runs = _compiled_stream(lowered)
    elif all(_token_edge(lowered, start) and _token_edge(lowered, end) for start, end in spans):
        units, runs, judged_units, judged_runs = _streams_around(lowered, spans)
    else:  # a date glued to a word ("_2024-05-01", "2024年5月1日は"): tokenized twice
        units, runs = _compiled_stream(_without(lowered, spans))
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
    parts, _ = _hashes(text)
    return _vote(np.concatenate(parts)) if parts else 0


def shingles(text: str) -> np.ndarray:
    """The set of ``text``'s shingles that resemblance is judged on, as
    sorted unique 64-bit hashes: word 3-shingles (Broder's), CJK character
    3-grams; a text of fewer words, its one 2-shingle or word. Dates are
    words here (the SimHash leaves them out)."""
    if _fpcore is not None:
        return np.frombuffer(_compiled(text, 0)[2], dtype=np.uint64).copy()
    return _shingles_numpy(text)


def _shingles_numpy(text: str) -> np.ndarray:
    _, judged = _hashes(text)
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
# values estimate it +-0.03 (bench/RESULTS.md, "What MinHash would find").
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
    parts, judged = _hashes(text)
    if not parts:
        return 0, None
    return _vote(np.concatenate(parts)), _sketch(np.unique(np.concatenate(judged)), sample)


def sketch(text: str, sample: int = SKETCH_SAMPLE) -> Sketch | None:
    """The sketch of ``text`` with a sample of at most ``sample`` values
    (None: no shingles)."""
    if _fpcore is not None:
        _, _, judged, bins, low = _compiled(text, sample)
        return _compiled_sketch(bins, low, sample) if judged else None
    found = _shingles_numpy(text)
    return _sketch(found, sample) if len(found) else None


_DENSIFY = [[_mix((i << 32 | a) ^ 0xD1B54A32D192ED03) % SKETCH_BINS for a in range(1, 64)]
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


def simhash_of_features(feats: Counter[str] | dict[str, int]) -> int:
    """The same SimHash from ``features``' output, one feature at a time:
    the reference ``simhash`` is checked against."""
    if not feats:
        return 0
    keys = list(feats)
    hashes = np.array([feature_hash(k.encode("utf-8")) for k in keys], dtype=np.uint64)
    return _vote(hashes, np.fromiter((feats[k] for k in keys), dtype=np.int64, count=len(keys)))


def signed(value: int) -> int:
    """As a signed 64-bit integer (how stores keep it)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def unsigned(value: int) -> int:
    return value & _MASK64


def hamming(a: int, b: int) -> int:
    return ((a ^ b) & _MASK64).bit_count()


def content_hash(text: str) -> str:
    """SHA-1 of the lowercased text with whitespace folded: exact duplicates."""
    return hashlib.sha1(" ".join(text.lower().split()).encode("utf-8")).hexdigest()


if __name__ == "__main__":
    print("fingerprints: " + ("compiled (crawler._fpcore)" if COMPILED else
                              "numpy (crawler._fpcore not built: no C compiler at install?)"))
