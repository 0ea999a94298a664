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


_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_DATES = re.compile(
    r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:t\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?z?)?\b"  # ISO 8601
    r"|\b\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4}\b"  # 01/05/2024, 1.5.24
    rf"|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b"  # may 1, 2024
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\s+\d{{4}}\b"  # 1 may 2024
    r"|\d{4}\s*年\s*\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?"  # 2024年5月1日
    r"|\b\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?)?\b"  # 12:30, 9:05 pm
)


def features(text: str) -> Counter[str]:
    """Weighted features of a text (see the module docstring)."""
    out: Counter[str] = Counter()
    words: list[str] = []
    for token in _TOKEN.findall(_DATES.sub(" ", text.lower())):
        if _CJK_RUN.match(token):
            if len(token) <= 3:
                out[token] += 1
            else:
                out.update(token[i:i + 3] for i in range(len(token) - 2))
        else:
            words.append(token)
    if len(words) == 1:
        out[words[0]] += 1
    else:
        out.update(f"{a} {b}" for a, b in zip(words, words[1:]))
        out.update(f"{a} {b} {c}" for a, b, c in zip(words, words[1:], words[2:]))
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
