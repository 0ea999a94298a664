"""What a text's fingerprints are made of: its words and CJK runs, dates
and times left out, and the weighted features (shingles) of the SimHash.
Pure logic, no Scrapy.

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

Each feature is weighted by its count (``features``). ``count_words``
counts words the same way for the page classifier and topic scoring.

No settings, no stats.
"""

from __future__ import annotations

import re
from collections import Counter

__all__ = ["CJK", "CJK_CHAR", "count_words", "date_spans", "features", "split", "strip_dates", "without"]

CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{CJK}]+|[^\W{CJK}]+")
CJK_CHAR = re.compile(rf"[{CJK}]")  # Han, kana, Hangul: text written without spaces
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


def date_spans(text: str) -> list[tuple[int, int]]:
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


def strip_dates(text: str) -> str:
    """``text`` (lowercased) without its dates and times."""
    return without(text, date_spans(text))


def without(text: str, spans: list[tuple[int, int]]) -> str:
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
    return split(lowered if dates else strip_dates(lowered))


def split(text: str) -> tuple[list[str], list[str]]:
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
