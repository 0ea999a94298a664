"""Page fingerprints: 64-bit SimHash and a content hash. Pure logic.

Features, so that Chinese and Japanese (no spaces) work as well as
space-separated languages:

- runs of CJK characters (Han, kana, Hangul) give character 3-grams;
- other text gives lowercased word 2-shingles ("the crawler", "crawler
  reads"); a text of one word gives that word;
- tokens of digits only are left out: dates, counters and view counts
  change between copies of a page without changing the page.

Each feature is weighted by its count. The SimHash is the ``simhash``
package's (``Simhash(features).value``: md5 of each feature, last 8 bytes,
bit-wise weighted vote), computed with the same arithmetic in one
vectorised pass: the package loops in Python over every feature and costs
tens of milliseconds on a long page (bench/RESULTS.md), the result is
identical (tests/test_fingerprint.py checks it against the package).

``content_hash`` (SHA-1 of the whitespace-folded, lowercased text) finds
exact duplicates; ``hamming`` measures how far two SimHashes are.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter

import numpy as np

__all__ = ["content_hash", "features", "hamming", "signed", "simhash", "unsigned"]

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+")
_CJK_RUN = re.compile(rf"[{_CJK}]")
_MASK64 = (1 << 64) - 1


def features(text: str) -> Counter[str]:
    """Weighted features of a text (see the module docstring)."""
    out: Counter[str] = Counter()
    words: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        if _CJK_RUN.match(token):
            if len(token) <= 3:
                out[token] += 1
            else:
                out.update(token[i:i + 3] for i in range(len(token) - 2))
        elif not token.isdigit():
            words.append(token)
    if len(words) == 1:
        out[words[0]] += 1
    else:
        out.update(f"{a} {b}" for a, b in zip(words, words[1:]))
    return out


def simhash_of_features(feats: Counter[str] | dict[str, int]) -> int:
    """Unsigned 64-bit SimHash of weighted features (the simhash package's)."""
    if not feats:
        return 0
    keys = list(feats)
    digests = b"".join(hashlib.md5(k.encode("utf-8")).digest()[-8:] for k in keys)
    bits = np.unpackbits(np.frombuffer(digests, dtype=np.uint8)).reshape(len(keys), 64)
    weights = np.fromiter((feats[k] for k in keys), dtype=np.int64, count=len(keys))
    sums = weights @ bits
    total = int(weights.sum())
    return int.from_bytes(np.packbits(sums > total / 2).tobytes(), "big")


def simhash(text: str) -> int:
    """Unsigned 64-bit SimHash of a page's main text."""
    return simhash_of_features(features(text))


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
