"""Topic relevance for focused crawling. Pure logic, no Scrapy.

A topic is read from a file (``-a topic=PATH``, JSON or YAML) by
``load_topic``; anything wrong in it is a ``TopicError`` that names the
file, the field and the value. The file::

    {"keywords": {"term or phrase": weight, ...},   # weights in [-100, 100], not 0
     "patterns": {"regular expression": weight},    # optional
     "languages": ["mn", ...],                      # optional: ISO 639 codes
     "threshold": 0.3}                              # on topic when score >= threshold

At least one of ``keywords``, ``patterns`` and ``languages`` is needed; a
``name`` may say what the topic is. A negative weight marks a term of the
pages to avoid.

How a page is scored (``Topic.score``, 0 to 1):

- Terms and phrases match whole words, case- and width-folded (NFKC), any
  run of spaces between a phrase's words; a term written in a script without
  spaces (Chinese, Japanese, Korean, Thai, Lao, Khmer, Myanmar) matches
  wherever its characters stand together. Patterns are Python regular
  expressions, matched on the same folded text; each match counts as a hit
  of its weight.
- The evidence is the weighted hits per 100 words of the page's title and
  main text (title hits count twice: the title says what the page is
  about), so one passing mention on a long page is not enough and a few on
  a short one are; score = 1 - exp(-density / 2), so 0.3 is about 0.7
  weighted hits per 100 words.
- With ``languages``, the page's language (``py3langid``: a maintained fork
  of langid.py, its model shipped in the wheel, 0.1 ms a page) must be one
  of them: a page in another language scores 0; with languages alone, the
  score is the identifier's confidence in a listed language.

How a link is prioritised (``Topic.link_priority``, 0 to 1), before it is
fetched: what it says about itself and what the crawl has learned about
where it is (the textbook's topical locality: a page's topic predicts its
links' topics, and siblings share topics):

- its anchor text and the words around it (the link's parent element),
  scored as a short text (hits, not density) — weight 0.4;
- the tokens of its URL (path and query split at punctuation, percent-
  decoded; a listed language's code as a path segment or file-name part,
  ``/mn/`` or ``index.mn.html``, counts as a hit) — weight 0.15;
- its parent page's score — weight 0.25;
- its siblings' outcomes: the on-topic share of the pages already fetched
  in the same URL directory (``Siblings``, smoothed towards the parent's
  score while few are known) — weight 0.2.

Tunnelling (``follow_links``): an off-topic page's links are still followed
while it is at most ``tunnel`` hops from the last on-topic page on its path
(``TOPIC_TUNNEL``), so an on-topic region behind up to ``tunnel`` off-topic
pages in a row is reached; with 0, only on-topic pages' links are followed.
Which of them: those whose priority reaches ``TOPIC_MIN_PRIORITY``, or
with ``TOPIC_TUNNEL_LINKS`` its few most promising whatever their priority
(``passage``): a tunnel is a path, and the link into a hidden on-topic
region often reads "page 12", which a priority bound drops. Off by
default: on documentation trees an off-topic page's best link is mostly
its navigation to another off-topic page (bench/JOURNAL.md, issue 48).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from crawler.datafile import DataFileError, read_data_file
from crawler.reading.language import identifier, identify
from crawler.reading.textfeatures import count_words as _count_words

__all__ = ["Siblings", "Topic", "TopicError", "follow_links", "load_topic", "parse_topic", "passage"]

MAX_TERMS = 10_000  # keywords and patterns of one topic
MAX_WEIGHT = 100.0
MAX_SCAN_CHARS = 200_000  # of a page's text scored (a hostile page has megabytes)
CONTEXT_CHARS = 240  # of a link's surroundings read

# Scripts written without spaces between words: a term in them matches as a substring.
_UNSPACED = re.compile(
    r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]"
)
_WORD = re.compile(r"\w+")
_URL_SPLIT = re.compile(r"[\W_]+")

# Weights of a link's evidence (sum 1).
W_ANCHOR, W_URL, W_PARENT, W_SIBLINGS = 0.4, 0.15, 0.25, 0.2


class TopicError(ValueError):
    """A topic file that cannot be used; the message names the file and field."""


def fold(text: str) -> str:
    """Case- and width-folded text, as terms and pages are compared."""
    return unicodedata.normalize("NFKC", text).casefold()


def count_words(text: str) -> int:
    """Words of ``text`` (``crawler.reading.textfeatures.count_words``), Thai, Lao,
    Khmer and Myanmar counted as unspaced scripts too."""
    return _count_words(text, _UNSPACED)


def _term_regex(term: str) -> str:
    if _UNSPACED.search(term):
        return re.escape(term)
    words = term.split()
    body = r"\s+".join(re.escape(w) for w in words)
    # Whole words: no word character right before or after.
    return rf"(?<!\w){body}(?!\w)"


@dataclass(frozen=True)
class Topic:
    keywords: dict[str, float] = field(default_factory=dict)  # folded term -> weight
    patterns: tuple[tuple[str, float], ...] = ()
    languages: frozenset[str] = frozenset()
    threshold: float = 0.3
    name: str = ""

    def __post_init__(self) -> None:
        # One alternation for all terms: a single pass over the page's text.
        terms = sorted(self.keywords, key=len, reverse=True)  # longest first: a phrase before its words
        object.__setattr__(self, "_terms", re.compile("|".join(_term_regex(t) for t in terms)) if terms else None)
        object.__setattr__(self, "_patterns", tuple((re.compile(p), w) for p, w in self.patterns))

    # -- evidence
    def hits(self, text: str) -> float:
        """Weighted hits of the topic's terms and patterns in ``text``."""
        text = fold(text[:MAX_SCAN_CHARS])
        total = 0.0
        terms: re.Pattern[str] | None = self._terms  # type: ignore[attr-defined]
        if terms is not None:
            kw = self.keywords
            for m in terms.finditer(text):
                total += kw.get(" ".join(m.group().split()), 0.0)
        for pattern, weight in self._patterns:  # type: ignore[attr-defined]
            total += weight * sum(1 for _ in pattern.finditer(text))
        return total

    @property
    def has_terms(self) -> bool:
        return bool(self.keywords or self.patterns)

    def language_score(self, text: str) -> float:
        """The identifier's confidence that ``text`` is in one of the topic's
        languages (1.0 without languages; 0.0 for text too short to tell)."""
        if not self.languages:
            return 1.0
        found = identify(text)
        if found is None:
            return 0.0
        lang, confidence = found
        return confidence if lang in self.languages else 0.0

    def score(self, title: str, text: str) -> float:
        """The page's relevance, 0 to 1 (see the module's docstring)."""
        lang = self.language_score(text or title)
        if lang <= 0.0 or not self.has_terms:
            return round(lang, 4)
        weighted = 2.0 * self.hits(title) + self.hits(text)
        words = count_words(title) + count_words(text[:MAX_SCAN_CHARS])
        density = 100.0 * weighted / max(words, 50)
        return round(1.0 - math.exp(-max(density, 0.0) / 2.0), 4)

    @property
    def digest(self) -> str:
        """What the topic decides by, hashed: workers of one focused crawl
        must score pages alike (the frontier records it)."""
        canonical = json.dumps([sorted(self.keywords.items()), sorted(self.patterns), sorted(self.languages),
                                self.threshold], ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha1(canonical.encode("utf-8")).hexdigest()[:16]

    def on_topic(self, score: float) -> bool:
        return score >= self.threshold

    def short_text_score(self, text: str) -> float:
        """A short text's relevance (an anchor and its surroundings): its
        hits, not their density."""
        if not self.has_terms or not text:
            return 0.0
        return 1.0 - math.exp(-max(self.hits(text), 0.0))

    def url_score(self, url: str) -> float:
        parts = urlsplit(url)
        raw = unquote(parts.path + " " + parts.query)
        tokens = [t for t in _URL_SPLIT.split(raw) if t]
        hits = self.hits(" ".join(tokens)) if self.has_terms else 0.0
        if self.languages and any(t.lower() in self.languages for t in tokens):
            hits += 1.0
        return 1.0 - math.exp(-max(hits, 0.0))

    def link_priority(self, url: str, anchor: str, context: str, parent_score: float,
                      siblings: float | None) -> float:
        """How promising a link is, 0 to 1, before it is fetched."""
        # Both cut: a hostile page's anchors are as long as the page.
        a = self.short_text_score(f"{anchor[:CONTEXT_CHARS]} {context[:CONTEXT_CHARS]}")
        u = self.url_score(url)
        s = parent_score if siblings is None else siblings
        return round(W_ANCHOR * a + W_URL * u + W_PARENT * parent_score + W_SIBLINGS * s, 4)


def follow_links(on_topic: bool, off_hops: int, tunnel: int) -> tuple[bool, int]:
    """Whether a page's links are followed, and the off-topic hops its links
    inherit: 0 after an on-topic page, else one more than the page's
    parent's (``off_hops``: the hops its request carried)."""
    hops = 0 if on_topic else off_hops + 1
    return hops <= tunnel, hops


def passage(priorities: dict[str, float], width: int) -> dict[str, float]:
    """An off-topic page's links within the tunnel that are followed: its
    ``width`` most promising (``priorities``: link -> priority, in page
    order; ties keep it), whatever their priority (``TOPIC_TUNNEL_LINKS``)."""
    return dict(sorted(priorities.items(), key=lambda kv: -kv[1])[:max(0, width)])


class Siblings:
    """On-topic outcomes of fetched pages by URL directory (site and path
    up to its last ``/``), bounded: the least recently used directories
    are forgotten beyond ``size``."""

    def __init__(self, size: int = 50_000, prior: float = 2.0) -> None:
        self.size = max(1, size)
        self.prior = prior  # pseudo-pages of the parent's score while few are known
        self._dirs: OrderedDict[str, tuple[int, int]] = OrderedDict()

    @staticmethod
    def directory(url: str) -> str:
        parts = urlsplit(url)
        return parts.netloc + parts.path.rsplit("/", 1)[0]

    def record(self, url: str, on_topic: bool) -> None:
        d = self.directory(url)
        on, total = self._dirs.pop(d, (0, 0))
        self._dirs[d] = (on + int(on_topic), total + 1)
        if len(self._dirs) > self.size:
            self._dirs.popitem(last=False)

    def rate(self, url: str, parent_score: float) -> float | None:
        """The directory's on-topic share, smoothed towards the parent's
        score; None when nothing of it is known."""
        got = self._dirs.get(self.directory(url))
        if got is None:
            return None
        on, total = got
        return (on + self.prior * parent_score) / (total + self.prior)

    def __len__(self) -> int:
        return len(self._dirs)


def known_languages() -> frozenset[str]:
    return frozenset(identifier().nb_classes)


# -- the topic file
def load_topic(path: str | Path) -> Topic:
    """The topic in the JSON or YAML file ``path``; ``TopicError`` if it
    cannot be read or is not a valid topic."""
    try:
        data = read_data_file(path, "topic file")
    except DataFileError as exc:
        raise TopicError(str(exc)) from None
    return parse_topic(data, str(path))


_FIELDS = ("name", "keywords", "patterns", "languages", "threshold")


def _weights(where: str, name: str, value: Any, check: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TopicError(f"{where}: {name!r} must be a mapping of {name[:-1]} to weight, not {type(value).__name__}")
    out: dict[str, float] = {}
    for key, weight in value.items():
        if not isinstance(key, str) or not key.strip():
            raise TopicError(f"{where}: {name} has an empty or non-text entry {str(key)[:60]!r}")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) \
                or weight == 0 or abs(weight) > MAX_WEIGHT:
            raise TopicError(f"{where}: {name}[{key[:60]!r}] = {repr(weight)[:20]}: a weight must be a number "
                             f"between -{MAX_WEIGHT:g} and {MAX_WEIGHT:g}, not 0")
        folded = check(key)
        out[folded] = out.get(folded, 0.0) + float(weight)
    return out


def _check_term(key: str) -> str:
    return " ".join(fold(key).split())


def _check_pattern(where: str) -> Any:
    def check(key: str) -> str:
        try:
            re.compile(key)
        except re.error as exc:
            raise TopicError(f"{where}: patterns: {key[:60]!r} is not a regular expression ({exc})") from None
        if re.compile(key).search("") is not None:
            raise TopicError(f"{where}: patterns: {key[:60]!r} matches the empty string")
        return key
    return check


def parse_topic(data: Any, where: str = "topic") -> Topic:
    """A ``Topic`` from the decoded file; ``TopicError`` for anything wrong."""
    if not isinstance(data, dict):
        raise TopicError(f"{where}: a topic is a mapping with keywords, patterns, languages and threshold, "
                         f"not {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in _FIELDS)
    if unknown:
        raise TopicError(f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                         f"(a topic has {', '.join(_FIELDS)})")
    keywords = _weights(where, "keywords", data.get("keywords"), _check_term)
    patterns = _weights(where, "patterns", data.get("patterns"), _check_pattern(where))
    if len(keywords) + len(patterns) > MAX_TERMS:
        raise TopicError(f"{where}: {len(keywords) + len(patterns)} keywords and patterns; at most {MAX_TERMS}")
    langs = data.get("languages") or []
    if isinstance(langs, str):
        langs = [langs]
    if not isinstance(langs, list) or not all(isinstance(x, str) and x.strip() for x in langs):
        raise TopicError(f"{where}: 'languages' must be a list of language codes such as [\"mn\"]")
    languages = frozenset(x.strip().lower() for x in langs)
    if languages:
        unknown_langs = sorted(languages - known_languages())
        if unknown_langs:
            raise TopicError(f"{where}: languages: {', '.join(unknown_langs)} not known to the language "
                             f"identifier (ISO 639 codes such as en, mn, ja, zh)")
    threshold = data.get("threshold", 0.3)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        raise TopicError(f"{where}: threshold = {repr(threshold)[:20]}: must be a number above 0 and at most 1")
    if not keywords and not patterns and not languages:
        raise TopicError(f"{where}: no keywords, patterns or languages: nothing to tell on-topic pages by")
    name = data.get("name", "")
    if not isinstance(name, str):
        raise TopicError(f"{where}: 'name' must be text")
    return Topic(keywords=keywords, patterns=tuple(patterns.items()), languages=languages,
                 threshold=float(threshold), name=name)
