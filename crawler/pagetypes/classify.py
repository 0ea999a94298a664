"""Index (navigation) page or information (content) page. Pure logic.

``page_type(url, html)`` answers ``"index"`` or ``"info"``; ``classify``
types an analysed page, ``classify_stats`` one whose features were kept.

The T-spider rule (``crawler.pagetypes.rules.tspider_rule``) looks at the URL and
the longest paragraph only; on real pages it scores about 0.5 balanced
accuracy, because today's listing pages have slug URLs and long teaser
paragraphs, and today's articles sit behind directory-style URLs. The
model here adds what separates the two in practice
(``crawler.pagetypes.features``: link density, long link-poor paragraphs, the
``h1`` before them, schema.org and Open Graph types, the URL's shape, and
what is left of the page once its site's template is set aside,
``crawler/pagetypes/template.py``).

Two small gradient-boosted tree models (pure Python at run time, well
under a millisecond a page): ``data/classifier.json`` types a page whose
site's template is known; it is fitted by ``python -m
tools.pagetypes.template_model --write`` on WCXB's training part and 71
Debian documentation trees (pages typed in crawl order with their site's
template, as the crawler types them), never on the PostgreSQL or Python
documentation, and ``bench.bench_pagetypes`` measures it
leave-one-source-out. ``data/classifier_page.json`` types a page alone (a
site's first pages; its features are the first 39), fitted on WCXB's
training part (898 single pages of many sites) by ``python -m
tools.pagetypes.page_model``, which scores it on WCXB's 427 held-out
pages, 112 of which are kept in ``tests/data/pagetypes``. A page typed
alone in a crawl is typed by that model's score together with its kind's
index probability (``alone_score``: ``crawler.pagetypes.kind``, fitted on
all of WCXB's dev split, weight and threshold chosen there by
cross-validation; ``python -m tools.pagetypes.kind_model``). Each model's
threshold is the one with the best cross-validated balanced accuracy that
keeps index recall at least 0.93: a missed index page costs coverage, a
missed info page only a few extra requests.

Around the model, the rules of ``crawler.pagetypes.rules``: a thin page of
links typed alone is an index page whatever the model says
(``thin_navigation``); with a site's template known, the model's close
calls go to the link-density rule on a site where the rule has held
(``decide``, ``RuleTrust``: the spider keeps the count); a close call with
next to nothing of its own once the template is set aside is an index
page (``bare_navigation``); so, whatever the model's score, is a page whose
own content is mostly a contents list of rows each led by a link to
another page (``crawler.pagetypes.template.contents_list``: a section's table of
contents whose rows carry one-line descriptions, an index whose entries
open with their link), which link density alone takes for prose, and an
index of terms (``term_index``).

No settings read here: ``CLASSIFIER_THRESHOLD`` and ``CLASSIFIER_TEMPLATE``
are the caller's (``crawler/pagetypes/typer.py``, which also keeps the stats).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from crawler.reading.extract import analyze
from crawler.pagetypes.features import FEATURES, assemble, page_features
from crawler.pagetypes.kind import index_score, kind_model, kind_scores
from crawler.pagetypes.rules import INDEX, INFO, RULE_AT, RuleTrust, bare_navigation, decide, term_index, thin_navigation
from crawler.pagetypes.template import BlockStat, block_stats, contents_list, stat_features

if TYPE_CHECKING:
    from crawler.reading.extract import Page

__all__ = ["Model", "alone_by_kind", "alone_score", "classify", "classify_stats", "classify_vector", "model",
           "model_for", "page_model", "page_type"]


Tree = "float | list[Any]"  # leaf value, or [feature, threshold, left, right]


class Model:
    """Gradient-boosted decision trees over ``FEATURES`` or their first
    ``len(data["features"])`` (an earlier model's: logistic loss)."""

    def __init__(self, data: dict[str, Any]) -> None:
        n = len(data["features"])
        if list(data["features"]) != list(FEATURES[:n]):
            raise ValueError(
                "the classifier's model was trained on other features; "
                "rerun python -m tools.pagetypes.template_model --write (classifier.json) "
                "or python -m tools.pagetypes.page_model --write (classifier_page.json)"
            )
        self.trees: list[Any] = data["trees"]
        self.learning_rate = float(data["learning_rate"])
        self.threshold = float(data["threshold"])

    def score(self, x: list[float]) -> float:
        """Probability-like score that the page is an index page."""
        z = 0.0
        for node in self.trees:
            while isinstance(node, list):
                node = node[2] if x[node[0]] <= node[1] else node[3]
            z += node
        z *= self.learning_rate
        return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))


def _load(name: str) -> Model:
    raw = resources.files("crawler").joinpath(f"data/{name}").read_text("utf-8")
    return Model(json.loads(raw))


@lru_cache(maxsize=1)
def model() -> Model:
    """The model for pages whose site's template is known."""
    return _load("classifier.json")


@lru_cache(maxsize=1)
def page_model() -> Model:
    """The model for a page typed alone (no template known: a site's first
    pages, or a page whose evidence could not be had): fitted on WCXB's
    pages, each alone on its site, by ``python -m tools.pagetypes.page_model``."""
    return _load("classifier_page.json")


def model_for(template: frozenset[str] | None) -> Model:
    return page_model() if template is None else model()


def classify(url: str, page: Page, threshold: float | None = None,
             template: frozenset[str] | None = None) -> str:
    """``"index"`` or ``"info"``; ``template`` as for ``feature_vector``
    (None: the page is typed alone, by ``page_model`` and
    ``thin_navigation``)."""
    stats = block_stats(page.blocks, keyed=template is not None)  # keys only to set the template aside
    base = page_features(url, page)
    kind = kind_scores(page, url, base) if template is None else None
    return classify_stats(base, stats, template, threshold, thin_navigation(page),
                          terms=term_index(page.blocks), kind=kind)


def classify_stats(base: list[float], stats: Sequence[BlockStat], template: frozenset[str] | None,
                   threshold: float | None = None, thin: bool = False, trust: RuleTrust | None = None,
                   site: str = "", terms: bool = False, kind: dict[str, float] | None = None) -> str:
    """``classify`` from a page's ``page_features`` and ``block_stats``
    (what is kept of a site's first pages to type them again once the
    site's template is known); ``thin``: the page's ``thin_navigation``,
    which holds only while no template is known. With the template known,
    a page with nothing of its own is an index page where the model is
    unsure (``bare_navigation``, with or without ``trust``), and with
    ``trust`` given, the rule decides the model's other close calls on a
    site where the rule has held (``decide``; the spider's ``RuleTrust``);
    a page whose own content is mostly a contents list is an index page
    (``crawler.pagetypes.template.contents_list``), with the template known only;
    ``terms``: the page is an index of terms (``term_index``), an index
    page whatever the model says (counted in ``trust.terms``); ``kind``:
    the page's kinds' probabilities (``crawler.pagetypes.kind.kind_scores``),
    which type a page alone with the page-only model's score
    (``alone_by_kind``); without them a page alone is typed by the
    page-only model alone.
    ``classify_vector`` is the model alone."""
    if terms:
        if trust is not None:
            trust.terms += 1
        return INDEX
    if template is None and thin:
        return INDEX
    own = stat_features(stats, template)
    x = assemble(base, own)
    if template is None:
        if kind is not None:
            return alone_by_kind(x, kind, threshold)
        return classify_vector(x, template, threshold)
    m = model()
    return decide(m.score(x), m.threshold if threshold is None else threshold, own[RULE_AT], trust, site,
                  bare_navigation(own), lambda: contents_list(stats, template))


def alone_by_kind(x: list[float], kind: dict[str, float], threshold: float | None = None) -> str:
    """A page typed alone by the page-only model's score of its features
    ``x`` and its kinds' probabilities together: index when ``alone_score``
    is at least the kind model's ``index_threshold``."""
    t = kind_model().index_threshold if threshold is None else threshold
    return INDEX if alone_score(x, kind) >= t else INFO


def alone_score(x: list[float], kind: dict[str, float]) -> float:
    """The page-only model's score and the kind's index probability
    (``crawler.pagetypes.kind.index_score``), weighed by the kind model's
    ``index_weight`` (the page-only model's share), both chosen by
    ``python -m tools.pagetypes.kind_model`` on WCXB's dev split."""
    w = kind_model().index_weight
    return w * page_model().score(x) + (1.0 - w) * index_score(kind)


def classify_vector(x: list[float], template: frozenset[str] | None, threshold: float | None = None) -> str:
    m = model_for(template)
    return INDEX if m.score(x) >= (m.threshold if threshold is None else threshold) else INFO


def page_type(url: str, html: str | bytes) -> str:
    """``"index"`` or ``"info"`` for a page given as text or bytes, alone
    (the page-only view: no site template)."""
    return classify(url, analyze(html, url))

