"""The page's kind: article, forum, product, collection, listing,
documentation, service, or other. Pure logic, no Scrapy.

``page_kind(analysis, url)`` names the kind of an analysed page
(``crawler.reading.extract.Page``); ``kind_scores`` gives the probability of
each of ``KINDS`` and ``kind_of(scores)`` the kind they name: ``OTHER`` where
the likeliest kind has less than ``SURE`` (the model is unsure).

The model (``crawler/data/kind.json``) is gradient-boosted trees with one
score a kind and a round (softmax), fitted by ``python -m
tools.pagetypes.kind_model --write`` on WCXB's development split (its
``kind`` labels) and read here in pure Python (about 0.1 ms a page). It
reads what the crawler's analysis of the page already has
(``kind_vector``): the page-type features (``crawler.pagetypes.features``:
link density, long paragraphs, schema.org and Open Graph types, the URL's
shape), finer JSON-LD and Open Graph types, where the URL points (``/forum``,
``/product``, ``/docs``, ``/services`` ...) and its shape (a listing's
later page, a trailing "/", the length of its last part), the title's words, and the
words of the page's short blocks (buttons and labels: "Add to cart",
"Reply", "Edit this page", "Get a quote", "Read more"), in the first
``SHORT_BLOCKS`` of them.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from crawler.pagetypes.features import FEATURES, page_features
from crawler.pagetypes.template import OWN_FEATURES

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from crawler.reading.extract import Page

__all__ = ["KINDS", "KIND_FEATURES", "KindModel", "OTHER", "SURE", "index_score", "kind_model", "kind_of",
           "kind_scores", "kind_vector", "page_kind"]

KINDS = ("article", "forum", "product", "collection", "listing", "documentation", "service")
OTHER = "other"
# Below this probability for the likeliest kind, the page's kind is OTHER
# (tools.pagetypes.kind_model reports how many pages of WCXB's dev split
# fall under it in cross-validation, and how often the kind above it is right).
SURE = 0.4
SHORT_BLOCKS = 120  # blocks read for their words, at most
SHORT_CHARS = 60  # a block this long or shorter is a button, a label, a menu entry

_PAGE_ONLY = FEATURES.index(OWN_FEATURES[0])  # the page-type features a lone page gives

_LD = {
    "ld_doc": frozenset({"techarticle", "apireference", "softwaresourcecode", "howto"}),
    "ld_service": frozenset({"service", "localbusiness", "professionalservice", "contactpage", "aboutpage",
                             "faqpage", "legalservice", "medicalbusiness", "homeandconstructionbusiness",
                             "financialservice", "offercatalog"}),
    "ld_qa": frozenset({"qapage", "question", "answer", "discussionforumposting", "comment"}),
    "ld_offer": frozenset({"offer", "aggregateoffer", "aggregaterating", "review", "productgroup", "product",
                           "og:product", "product.item"}),
    "ld_list": frozenset({"collectionpage", "itemlist", "searchresultspage", "website.category", "listitem"}),
    "ld_news": frozenset({"newsarticle", "blogposting", "article", "reportagenewsarticle", "report"}),
    "ld_org": frozenset({"organization", "corporation"}),
    "ld_breadcrumb": frozenset({"breadcrumblist"}),
    "og_website": frozenset({"website"}),
    "ld_software": frozenset({"softwareapplication", "webapplication", "mobileapplication"}),
}

# Words of the URL's path (split at "/", ".", "-" and "_"), by the kind they
# point to; and of its host's first label and its other labels.
_URL_CUES = {
    "url_forum": frozenset({"forum", "forums", "thread", "threads", "showthread", "viewtopic", "topic", "topics",
                            "discussion", "discussions", "community", "questions", "t", "board", "boards", "r"}),
    "url_product": frozenset({"product", "products", "p", "dp", "item", "items", "shop", "store", "buy", "sku", "pd",
                              "gp"}),
    "url_collection": frozenset({"collection", "collections", "category", "categories", "c", "cat", "department",
                                 "browse", "brand", "brands", "tag", "tags", "catalog", "catalogue"}),
    "url_docs": frozenset({"doc", "docs", "documentation", "api", "reference", "manual", "guide", "guides", "learn",
                           "tutorial", "tutorials", "wiki", "kb", "knowledge", "help", "support", "sdk", "handbook",
                           "latest", "stable"}),
    "url_blog": frozenset({"blog", "blogs", "news", "article", "articles", "post", "posts", "stories", "story",
                           "insights", "magazine", "press"}),
    "url_service": frozenset({"service", "services", "solution", "solutions", "about", "contact", "pricing", "plans",
                              "features", "consulting", "hire", "agency", "company", "careers", "location",
                              "locations", "areas", "industries"}),
    "url_listing": frozenset({"search", "results", "page", "archive", "archives", "latest", "all", "list", "listings",
                              "jobs", "events", "directory", "author", "authors"}),
}
_HOST_FIRST = {
    "host_docs": frozenset({"doc", "docs", "developer", "developers", "dev", "api", "learn", "wiki", "help", "support",
                            "manual"}),
    "host_forum": frozenset({"forum", "forums", "community", "discuss", "discourse", "board", "boards"}),
    "host_shop": frozenset({"shop", "store"}),
}
_HOST_NAMES = {
    "host_docs": frozenset({"readthedocs", "gitbook", "mozilla"}),
    "host_forum": frozenset({"reddit", "stackexchange", "stackoverflow", "quora", "discourse"}),
    "host_shop": frozenset({"amazon", "ebay", "etsy", "walmart", "shopify", "target", "bestbuy"}),
}
_URL_SPLIT = re.compile(r"[/._\-]+")
# A listing's later pages: "/page/2/", "/p3", "?page=2", "?start=20".
_PAGER = re.compile(r"(?:^|/)(?:page|p|pg)[/=_-]?\d+(?:/|$)")
_PAGER_QUERY = frozenset({"page", "p", "pg", "paged", "start", "offset"})
_YEAR = re.compile(r"(?:^|[/._-])(?:19|20)\d\d(?:$|[/._-])")
_VERSION = re.compile(r"v?\d+(?:\.\d+)+|v\d+")
_TITLE_CUES = {
    "title_docs": re.compile(r"\b(?:documentation|docs|api|reference|guide|manual|tutorial|sdk|class|function|"
                             r"method|module|configuration|install(?:ation|ing)?)\b"),
    "title_forum": re.compile(r"\b(?:forums?|thread|community|discussion|reddit|question|help|problem|issue|"
                              r"how (?:do|can|to)|anyone|solved)\b|\?"),
    "title_shop": re.compile(r"\b(?:buy|shop|price|sale|sets?|pack|size|kit|oz|ml|mm|inch|cm)\b|[$€£]"),
    "title_service": re.compile(r"\b(?:services?|solutions?|company|agency|contact|pricing|hire|experts?|"
                                r"consulting|repair|near me|professional|cost)\b"),
    "title_list": re.compile(r"\b(?:best|top \d+|\d+ best|archives?|categor(?:y|ies)|results|all|latest|news|"
                             r"collection|shop all|page \d+)\b"),
}
# Words of short blocks (the page's buttons and labels), by the kind they
# point to: how many of each set a page's short blocks hold.
_SHORT_WORDS = {
    "forum": frozenset({"reply", "replies", "quote", "joined", "posts", "report", "permalink", "upvote", "votes",
                        "answered", "asked", "members", "member", "registered", "thread", "likes", "edited", "op",
                        "answers", "comments", "posted", "reputation", "solved", "views"}),
    "product": frozenset({"cart", "basket", "bag", "sku", "qty", "quantity", "stock", "wishlist", "shipping",
                          "returns", "specifications", "reviews", "review", "size", "color", "colour", "delivery",
                          "buy", "checkout", "warranty", "description"}),
    "docs": frozenset({"previous", "next", "parameters", "parameter", "returns", "example", "examples", "note",
                       "version", "copy", "github", "docs", "api", "reference", "syntax", "arguments", "overview",
                       "installation", "contents", "introduction", "edit", "changelog"}),
    "service": frozenset({"quote", "estimate", "consultation", "schedule", "book", "call", "request", "services",
                          "testimonials", "team", "appointment", "started", "contact", "pricing", "clients",
                          "industries", "solutions", "faq", "faqs", "locations", "free"}),
    "listing": frozenset({"more", "continue", "load", "all", "page", "showing", "results", "sort", "filter",
                          "older", "newer", "by", "min", "read", "previous", "next", "categories", "tags",
                          "archives", "latest", "popular", "items", "products"}),
}
_SHORT_GROUPS = ("forum", "product", "docs", "service", "listing")

KIND_FEATURES: tuple[str, ...] = (
    *FEATURES[:_PAGE_ONLY], "text_log", "blocks_log", "h1_count", "inputs_log", "rel_navigation",
    *_LD, *_URL_CUES, *_HOST_FIRST, "url_year", "url_version",
    "url_pager", "url_slash", "url_last_len", *_TITLE_CUES, *(f"short_{g}" for g in _SHORT_GROUPS), "short_share",
    "digits_title", "path_depth_raw",
)


def _log(x: float) -> float:
    return math.log1p(max(x, 0.0))


@lru_cache(maxsize=4096)
def _url_cues(url: str) -> tuple[float, ...]:
    parts = urlsplit(url)
    path = parts.path.lower()[:512]
    words = set(_URL_SPLIT.split(path))
    host = (parts.hostname or "")[:256].split(".")
    first, names = host[0], set(host)
    return (
        *(0.0 if words.isdisjoint(cues) else 1.0 for cues in _URL_CUES.values()),
        *(1.0 if first in _HOST_FIRST[h] or not names.isdisjoint(_HOST_NAMES[h]) else 0.0 for h in _HOST_FIRST),
        1.0 if _YEAR.search(path) else 0.0,
        1.0 if _VERSION.search(path) else 0.0,
        # A listing's later page; a path ending in "/" (a section's
        # address) and how long its last part is (an article's or a
        # product's slug is long, a section's name short).
        1.0 if _PAGER.search(path) or not _PAGER_QUERY.isdisjoint(
            k.lower() for k, _ in parse_qsl(parts.query[:512], keep_blank_values=True)) else 0.0,
        1.0 if path.endswith("/") else 0.0,
        float(min(len(path.rstrip("/").rsplit("/", 1)[-1]), 80)),
    )


def kind_vector(page: Page, url: str, base: Sequence[float] | None = None) -> list[float]:
    """The model's features of an analysed page (``KIND_FEATURES``);
    ``base``: its ``page_features`` when the caller has them."""
    if base is None:
        base = page_features(url, page)
    f = page.features
    types = page.ld_types
    title = page.title[:300].lower()
    blocks = page.blocks
    shorts = [b.text for b in blocks[:SHORT_BLOCKS] if len(b.text) <= SHORT_CHARS]
    words = set(" ".join(shorts).lower().split())
    n_blocks = len(blocks)
    path = urlsplit(url).path
    return [
        *base[:_PAGE_ONLY],
        _log(f.get("text_chars", 0.0)),
        _log(n_blocks),
        min(f.get("n_h1", 0.0), 5.0),
        _log(f.get("n_input", 0.0)),
        1.0 if page.navigation else 0.0,
        *(1.0 if not types.isdisjoint(names) else 0.0 for names in _LD.values()),
        *_url_cues(url),
        *(1.0 if r.search(title) else 0.0 for r in _TITLE_CUES.values()),
        *(float(len(words & _SHORT_WORDS[g])) for g in _SHORT_GROUPS),
        len(shorts) / min(n_blocks, SHORT_BLOCKS) if n_blocks else 0.0,
        1.0 if re.search(r"\d", title) else 0.0,
        float(min(path.count("/"), 10)),
    ]


class KindModel:
    """Softmax gradient-boosted trees: ``trees[r][k]`` is round r's tree for
    ``classes[k]``, a leaf value or ``[feature, threshold, left, right]``.
    The trees are turned into one Python function when the model is loaded
    (each split an ``if``: ten times faster than walking the lists), from
    numbers only: a model file with anything else in its trees is refused."""

    def __init__(self, data: dict[str, Any]) -> None:
        if list(data["features"]) != list(KIND_FEATURES):
            raise ValueError("the kind model was fitted on other features; rerun "
                             "python -m tools.pagetypes.kind_model --write")
        self.classes: tuple[str, ...] = tuple(str(c) for c in data["classes"])
        self.learning_rate = float(data["learning_rate"])
        self.base: list[float] = [float(v) for v in data.get("base", [0.0] * len(self.classes))]
        self.sure = float(data.get("sure", SURE))
        # A page typed alone (crawler.pagetypes.classify.alone_score): the
        # page-only model's share of its index score, and the threshold.
        self.index_weight = float(data.get("index_weight", 0.0))
        self.index_threshold = float(data.get("index_threshold", 0.5))
        self._margins = _compile(data["trees"], len(self.classes), len(KIND_FEATURES))

    def scores(self, x: Sequence[float]) -> dict[str, float]:
        lr = self.learning_rate
        z = [b + v * lr for b, v in zip(self.base, self._margins(x))]
        top = max(z)
        e = [math.exp(v - top) for v in z]
        total = sum(e)
        return {c: v / total for c, v in zip(self.classes, e)}


def _compile(trees: list[list[Any]], n_classes: int, n_features: int) -> Callable[[Sequence[float]], list[float]]:
    lines = ["def margins(x):", "    z = [0.0] * %d" % n_classes]

    def emit(node: Any, k: int, pad: str) -> None:
        if isinstance(node, list):
            j, t, left, right = node
            if type(j) is not int or not 0 <= j < n_features:
                raise ValueError(f"the kind model's tree splits on feature {j!r}")
            lines.append(f"{pad}if x[{j}] <= {float(t)!r}:")
            emit(left, k, pad + " ")
            lines.append(f"{pad}else:")
            emit(right, k, pad + " ")
        else:
            lines.append(f"{pad}z[{k}] += {float(node)!r}")

    for round_ in trees:
        if len(round_) != n_classes:
            raise ValueError("the kind model's round has a tree a class")
        for k, tree in enumerate(round_):
            emit(tree, k, "    ")
    lines.append("    return z")
    scope: dict[str, Any] = {}
    exec(compile("\n".join(lines), "<kind model>", "exec"), scope)  # noqa: S102 (numbers only, checked above)
    margins: Callable[[Sequence[float]], list[float]] = scope["margins"]
    return margins


@lru_cache(maxsize=1)
def kind_model() -> KindModel:
    raw = resources.files("crawler").joinpath("data/kind.json").read_text("utf-8")
    return KindModel(json.loads(raw))


def kind_scores(page: Page, url: str, base: Sequence[float] | None = None) -> dict[str, float]:
    """Each kind's probability (``KINDS``), by ``kind_model``."""
    return kind_model().scores(kind_vector(page, url, base))


def kind_of(scores: dict[str, float], sure: float | None = None) -> str:
    """The likeliest kind, or ``OTHER`` if its probability is under ``sure``
    (the model's, ``SURE`` by default)."""
    if not scores:
        return OTHER
    best = max(scores, key=scores.__getitem__)
    return best if scores[best] >= (kind_model().sure if sure is None else sure) else OTHER


def index_score(scores: dict[str, float]) -> float:
    """How likely a page is an index page by its kind: a listing's or a
    collection's probability among the kinds that are typed index or info
    (a service page is neither: WCXB's page-type labels leave it out)."""
    index = scores.get("listing", 0.0) + scores.get("collection", 0.0)
    return min(index / max(1.0 - scores.get("service", 0.0), 1e-9), 1.0)


def page_kind(page: Page, url: str) -> str:
    """The kind of an analysed page: one of ``KINDS`` or ``OTHER``."""
    if not page.features:
        return OTHER
    return kind_of(kind_scores(page, url))
