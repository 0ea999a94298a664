"""What bench/bench_content.py scores and reads: WCXB's word F1 and snippet
rates (exactly as its ``evaluate.py``), the metadata rules, and the two data
sets (WCXB's splits, ScrapingHub's news articles) as pages. Pure logic and
files, no crawler.

WCXB (github.com/Murrough-Foley/web-content-extraction-benchmark) is read
from a clone (``fetch_wcxb`` makes one, pinned, where none is), never from
the repository: its pages are not ours to commit.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["KINDS", "WCXB_COMMIT", "WCXB_REPO", "Sample", "Score", "author_right", "date_right", "fetch_wcxb",
           "mean_scores", "news_pages", "score", "snippet_rate", "title_right", "tokenize", "wcxb_pages", "word_f1"]

WCXB_REPO = "https://github.com/Murrough-Foley/web-content-extraction-benchmark"
WCXB_COMMIT = "c039d5e"  # WCXB v1.0
# evaluate.py's TYPE_ORDER: the kinds a table is broken down by.
KINDS = ("article", "forum", "product", "collection", "listing", "documentation", "service")
_WORD = re.compile(r"\w+")


@dataclass(slots=True)
class Sample:
    """One page of a benchmark: where its raw bytes are and what a human said it holds."""

    id: str
    url: str
    kind: str
    path: Path  # the page as fetched, gzipped
    main: str  # the main content's text
    with_: list[str] = field(default_factory=list)  # snippets that must be there
    without: list[str] = field(default_factory=list)  # snippets that must not
    title: str = ""
    author: str = ""
    published: str = ""

    def body(self) -> bytes:
        return gzip.decompress(self.path.read_bytes())


@dataclass(slots=True)
class Score:
    precision: float
    recall: float
    f1: float
    with_rate: float
    without_rate: float


# -- WCXB's evaluate.py, as it is ----------------------------------------------------------------
def tokenize(text: str) -> list[str]:
    """Lowercase words (evaluate.py's ``tokenize``)."""
    if not text:
        return []
    return _WORD.findall(text.lower())


def word_f1(predicted: str, reference: str) -> tuple[float, float, float]:
    """Word-level (precision, recall, F1) over word multisets (evaluate.py's ``word_f1``)."""
    pred, ref = tokenize(predicted), tokenize(reference)
    if not ref:
        return (1.0, 1.0, 1.0) if not pred else (0.0, 0.0, 0.0)
    if not pred:
        return (0.0, 0.0, 0.0)
    overlap = sum((Counter(pred) & Counter(ref)).values())
    precision, recall = overlap / len(pred), overlap / len(ref)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return (precision, recall, f1)


def snippet_rate(text: str, snippets: list[str]) -> float:
    """The share of ``snippets`` found in ``text``, case folded (evaluate.py's ``snippet_check``)."""
    if not snippets:
        return 1.0
    low = text.lower()
    return sum(1 for s in snippets if s.lower() in low) / len(snippets)


def score(predicted: str, sample: Sample) -> Score:
    p, r, f1 = word_f1(predicted, sample.main)
    return Score(p, r, f1, snippet_rate(predicted, sample.with_), snippet_rate(predicted, sample.without))


def mean_scores(scores: list[Score]) -> Score:
    """Each figure averaged over the pages (evaluate.py's "Overall")."""
    n = len(scores) or 1
    return Score(sum(s.precision for s in scores) / n, sum(s.recall for s in scores) / n,
                 sum(s.f1 for s in scores) / n, sum(s.with_rate for s in scores) / n,
                 sum(s.without_rate for s in scores) / n)


def page_kind(data: dict[str, Any]) -> str:
    """evaluate.py's ``get_page_type``: 'category' is a collection."""
    pt = (data.get("_internal") or {}).get("page_type", {})
    if isinstance(pt, dict):
        kind = pt.get("primary", "article")
    elif isinstance(pt, str):
        kind = pt
    else:
        kind = "article"
    return "collection" if kind == "category" else str(kind)


# -- metadata: right or not ----------------------------------------------------------------------
def _named(found: Any) -> str | None:
    """A field's value as text: a string, or a list of strings joined (several authors)."""
    if isinstance(found, str):
        return found
    if isinstance(found, list) and found and all(isinstance(v, str) for v in found):
        return ", ".join(found)
    return None


def title_right(found: Any, truth: str) -> bool:
    """The same lowercase \\w+ words in the same order."""
    text = _named(found)
    return text is not None and tokenize(text) == tokenize(truth)


def author_right(found: Any, truth: str) -> bool:
    """Both named, and one's word set holds the other's."""
    text = _named(found)
    if text is None:
        return False
    a, b = set(tokenize(text)), set(tokenize(truth))
    return bool(a) and bool(b) and (a <= b or b <= a)


_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


def date_right(found: Any, truth: str) -> bool:
    """The same YYYY-MM-DD."""
    if not isinstance(found, str):
        return False
    a, b = _DAY.search(found), _DAY.search(truth)
    return a is not None and b is not None and a.groups() == b.groups()


# -- the data ------------------------------------------------------------------------------------
def fetch_wcxb(root: Path, split: str) -> None:
    """Clone WCXB at its pinned commit into ``root`` unless its ``split`` is there."""
    if (root / split / "ground-truth").is_dir():
        return
    root.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "--quiet", WCXB_REPO, str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "checkout", "--quiet", WCXB_COMMIT], check=True)


def _strings(value: Any) -> list[str]:
    return [s for s in value if isinstance(s, str)] if isinstance(value, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def wcxb_pages(root: Path, split: str, limit: int | None = None) -> list[Sample]:
    """The pages of one split, in file order; a ground truth that is not an
    object is left out, as evaluate.py leaves it out."""
    out: list[Sample] = []
    for path in sorted((root / split / "ground-truth").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        gt = data.get("ground_truth")
        if not isinstance(gt, dict):
            continue
        out.append(Sample(id=path.stem, url=_text(data.get("url")), kind=page_kind(data),
                          path=root / split / "html" / f"{path.stem}.html.gz",
                          main=_text(gt.get("main_content")), with_=_strings(gt.get("with")),
                          without=_strings(gt.get("without")), title=_text(gt.get("title")),
                          author=_text(gt.get("author")), published=_text(gt.get("publish_date"))))
        if limit is not None and len(out) >= limit:
            break
    return out


def news_pages(root: Path, limit: int | None = None) -> list[Sample]:
    """ScrapingHub's article-extraction-benchmark: ``html/ID.html.gz`` and
    ``ground-truth.json`` (``{ID: {"articleBody", "url"}}``); every page an article."""
    truth = json.loads((root / "ground-truth.json").read_text(encoding="utf-8"))
    out: list[Sample] = []
    for key in sorted(truth):
        entry = truth[key] if isinstance(truth[key], dict) else {}
        out.append(Sample(id=key, url=_text(entry.get("url")), kind="article", path=root / "html" / f"{key}.html.gz",
                          main=_text(entry.get("articleBody"))))
        if limit is not None and len(out) >= limit:
            break
    return out
