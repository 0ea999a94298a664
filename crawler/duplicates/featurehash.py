"""A feature's 64-bit hash and the SimHash vote, the numpy reference.
Pure logic, no Scrapy.

The SimHash is the ``simhash`` package's bit-wise weighted vote
(``Simhash(features, hashfunc=feature_hash)``) with a faster hash
function: a feature's 64-bit hash folds the hashes of its units (words, or
CJK characters) with the splitmix64 finaliser (``mix``), and a unit's hash
is the last 8 bytes of its md5, cached (``unit``). The package as shipped
hashes every feature with md5 and loops over them in Python; here the
units are hashed once each (a page repeats its words, a site its
vocabulary) and the folding and the vote run vectorised in numpy
(``hashes``, ``vote``): the result is the package's for that hash
function, bit for bit (tests/test_fingerprint.py checks it), at a
fraction of the cost (bench/RESULTS.md). ``crawler._fpcore`` computes the
same in C (``crawler.duplicates.fingerprint``); this is the reference it is tested
against and the fallback where it was not built.

No settings, no stats.
"""

from __future__ import annotations

import hashlib
from collections import Counter

import numpy as np

from crawler.reading.textfeatures import CJK_CHAR, split, strip_dates

__all__ = ["MASK64", "feature_hash", "hashes", "mix", "simhash_of_features", "unit", "unit_md5", "vote"]

MASK64 = (1 << 64) - 1
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_UNITS: dict[str, int] = {}
_UNITS_MAX = 1 << 18  # about 50 MB at most; a site's vocabulary is far smaller


def mix(x: int) -> int:
    """splitmix64's finaliser: a bijection of 64-bit integers that mixes
    every input bit into every output bit."""
    x ^= x >> 30
    x = (x * _M1) & MASK64
    x ^= x >> 27
    x = (x * _M2) & MASK64
    return x ^ (x >> 31)


def _mix_array(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(_M1)  # uint64 arithmetic wraps modulo 2**64, as mix's mask
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(_M2)
    out: np.ndarray = x ^ (x >> np.uint64(31))
    return out


_SEEDS = [mix((n * 0x9E3779B97F4A7C15) & MASK64) for n in range(8)]


def unit_md5(unit: str) -> int:
    """A unit's hash: the last 8 bytes of its UTF-8 md5 (``unit`` caches it;
    ``_fpcore.stream`` keeps its own cache)."""
    return int.from_bytes(hashlib.md5(unit.encode("utf-8")).digest()[-8:], "big")


def unit(unit: str) -> int:
    h = _UNITS.get(unit)
    if h is None:
        if len(_UNITS) >= _UNITS_MAX:
            _UNITS.clear()
        h = _UNITS[unit] = unit_md5(unit)
    return h


def _unit_array(units: list[str] | str) -> np.ndarray:
    """``unit`` of each of ``units``, as uint64: the cache is read by
    ``dict.get`` in C, and only the units it lacks are hashed in Python."""
    found = list(map(_UNITS.get, units))
    if None in found:
        found = [unit(u) if h is None else h for u, h in zip(units, found)]
    return np.array(found, dtype=np.uint64)


def _units(feature: str) -> list[str]:
    return list(feature) if CJK_CHAR.match(feature) else feature.split(" ")


def feature_hash(feature: bytes) -> int:
    """The 64-bit hash of a feature (as ``features`` spells it, UTF-8): its
    units' md5s folded with splitmix64. A ``hashfunc`` for the simhash package."""
    units = _units(feature.decode("utf-8"))
    acc = _SEEDS[len(units)]
    for u in units:
        acc = mix(acc ^ unit(u))
    return acc


def _fold(seed: int, columns: list[np.ndarray]) -> np.ndarray:
    acc = np.full(len(columns[0]), seed, dtype=np.uint64)
    for col in columns:
        acc = _mix_array(acc ^ col)
    return acc


def hashes(text: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The hash of every feature occurrence of ``text`` (``features``'
    multiset), vectorised; and of those the shingles resemblance is judged
    on (``shingles``)."""
    lowered = text.lower()
    stripped = strip_dates(lowered)
    out, judged = _shingle_hashes(*split(stripped))
    if stripped is not lowered:
        # Resemblance is judged on every word: a date that differs (a
        # release's notes beside another's) is a difference there.
        judged = _shingle_hashes(*split(lowered), judged_only=True)[1]
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


def vote(hashes: np.ndarray, weights: np.ndarray | None = None) -> int:
    """The package's bit-wise weighted vote: bit i is set when the features
    with bit i set outweigh half of all (weights 1 unless given)."""
    bits = np.unpackbits(hashes.astype(">u8").view(np.uint8)).reshape(len(hashes), 64)
    if weights is None:
        sums, total = bits.sum(axis=0, dtype=np.int64), len(hashes)
    else:
        sums, total = weights @ bits, int(weights.sum())
    return int.from_bytes(np.packbits(sums > total / 2).tobytes(), "big")


def simhash_of_features(feats: Counter[str] | dict[str, int]) -> int:
    """The same SimHash from ``features``' output, one feature at a time:
    the reference ``simhash`` is checked against."""
    if not feats:
        return 0
    keys = list(feats)
    hashes = np.array([feature_hash(k.encode("utf-8")) for k in keys], dtype=np.uint64)
    return vote(hashes, np.fromiter((feats[k] for k in keys), dtype=np.int64, count=len(keys)))

