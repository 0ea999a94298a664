"""Index (navigation) page or information (content) page. Pure logic.

``page_type(url, html)`` answers ``"index"`` or ``"info"``.

The T-spider rule (``tspider_rule``) looks at the URL and the longest
paragraph only; on real pages it scores about 0.5 balanced accuracy, because
today's listing pages have slug URLs and long teaser paragraphs, and today's
articles sit behind directory-style URLs. The model here adds what separates
the two in practice:

- link density and the share of blocks that are mostly links (the classic
  navigation signal), links inside headings (teaser cards of a listing);
- the amount of text in long, link-poor paragraphs, and whether the ``h1``
  comes before them (T-spider's "a title precedes the body text");
- schema.org / Open Graph types (``Article``, ``Product``,
  ``DiscussionForumPosting`` against ``CollectionPage``, ``ItemList``);
- URL shape: T-spider's "no file name" rule, sequence-number and slug file
  names, listing words (``category``, ``tag``, ``page=``) and dates.
- what is left of the page once its site's template is set aside
  (``crawler/template.py``: blocks on many of the site's pages, as the
  crawl's evidence in Redis says; blocks outside navigation markup while
  the site is new): how much of it is links to *other* pages (links to a
  place on the page itself, ``#x``, do not count), how much of it sits in
  link-list rows, how much prose it has; and the link-density rule's own
  figure, so the model is not worse than the rule where the rule holds.
- with the template known, whether the page's file name is one that
  documentation generators give their contents pages (``summary``,
  ``contents``, ``genindex``, ``allclasses``, ``annotated`` ...) or it sits
  in javadoc's ``class-use/``: those pages' markup looks like a class
  page's member tables.

Two small gradient-boosted tree models (pure Python at run time, well
under a millisecond a page): ``data/classifier.json`` types a page whose
site's template is known; it is fitted by ``bench/bench_pagetypes.py
--write`` on WCXB's training part and 71 Debian documentation trees
(pages typed in crawl order with their site's template, as the crawler
types them), never on the PostgreSQL or Python documentation, and that
bench measures it leave-one-source-out. ``data/classifier_page.json`` types
a page alone (a site's first pages; its features are the first 39), fitted
on WCXB's training part (898 single pages of many sites) by
``bench/train_classifier.py``, which scores it on WCXB's 427 held-out
pages, 112 of which are kept in ``tests/data/pagetypes``; a thin page of
links typed alone is an index page whatever it says
(``thin_navigation``). Each model's threshold is the one with the best
cross-validated balanced accuracy that keeps index recall at least 0.93:
a missed index page costs coverage, a missed info page only a few extra
requests. With a site's template known, the model's close calls go to the
link-density rule on a site where the rule has held (``decide``,
``RuleTrust``: the spider keeps the count); a close call with next to
nothing of its own once the template is set aside is an index page, as a
thin page of links typed alone is (``bare_navigation``); so, whatever the
model's score, is a page whose own content is mostly a contents list of
rows each led by a link to another page (``crawler.template.contents_list``:
a section's table of contents whose rows carry one-line descriptions, an
index whose entries open with their link), which link density alone
takes for prose.
"""

from __future__ import annotations

import json
import math
import re
from collections import OrderedDict
from functools import lru_cache
from collections.abc import Sequence
from typing import Any
from importlib import resources
from urllib.parse import parse_qsl, urlsplit

from crawler.extract import Block, Page, analyze
from crawler.fingerprint import count_words
from crawler.template import (OWN_FEATURES, BlockStat, block_stats, contents_list, own_features, rule_density,
                              stat_features)

__all__ = ["INDEX", "INFO", "RULE_AGREEMENT", "RULE_BAND", "RULE_DENSITY", "RULE_MIN_PAGES", "RULE_SURE", "RuleTrust",
           "THIN_TEXT", "bare_navigation", "classify",
           "classify_stats", "classify_vector", "decide", "feature_vector", "page_features", "page_type",
           "rule_density", "thin_navigation", "tspider_rule"]

INDEX = "index"
INFO = "info"

_SEQ_NAME = re.compile(r"^\d+(?:\.[a-z0-9]{1,5})?$", re.I)
_DATE_PATH = re.compile(r"/(?:19|20)\d\d/(?:0?[1-9]|1[0-2])(?:/|$)")
_INDEX_WORDS = frozenset(
    {"category", "categories", "tag", "tags", "collections", "collection", "c",
     "browse", "shop", "list", "lists", "archive", "archives", "search", "topics",
     "topic", "section", "sections", "index", "catalog", "catalogue", "department",
     "directory", "listing", "listings", "all", "page", "latest", "news", "blog",
     "blogs", "articles", "products", "store", "stories", "forum", "forums"}
)
_INFO_WORDS = frozenset(
    {"post", "posts", "article", "story", "p", "t", "thread", "threads", "product",
     "item", "dp", "wiki", "docs", "doc", "documentation", "questions", "question",
     "comments", "review", "reviews", "recipe", "recipes", "pulse", "guide", "guides",
     "how-to", "reference", "manual", "help"}
)
_INDEX_QUERY = frozenset({"page", "p", "pg", "category", "cat", "tag", "sort", "q",
                          "query", "search", "s", "filter", "orderby", "order"})
_ARTICLE_TYPES = frozenset(
    {"article", "newsarticle", "blogposting", "report", "techarticle",
     "scholarlyarticle", "howto", "recipe", "posting", "socialmediaposting"}
)
_PRODUCT_TYPES = frozenset({"product", "og:product", "product.item", "productgroup"})
_FORUM_TYPES = frozenset({"discussionforumposting", "qapage", "question", "answer"})
_LISTING_TYPES = frozenset(
    {"collectionpage", "itemlist", "searchresultspage", "offercatalog", "profilepage",
     "blog", "website.category"}
)

FEATURES = (
    "links_log", "link_density", "linky_block_share", "longest_block_log",
    "long_blocks_log", "long_share", "main_share", "heading_links_log",
    "heading_link_share", "article_tags_log", "time_tags_log", "li_log", "img_log",
    "h1_before_para", "url_no_file", "url_seq_name", "url_depth", "url_slug_words",
    "url_date", "url_query_index", "url_has_query", "url_index_word",
    "url_info_word", "url_last_index_word", "ld_article", "ld_product", "ld_forum",
    "ld_listing", "og_article", "cart_log", "cart_one", "price_log", "repeat_log",
    "url_forum", "best_run_log", "best_run_share", "title_words", "title_index_word",
    "h1_words", *OWN_FEATURES, "url_contents_name", "url_uses_dir",
)
# Where the template's features sit: before them, the page's own (the
# page-only model's, all it reads); after, the URL's documentation names
# (added after the page-only model was fitted).
_OWN_AT = FEATURES.index(OWN_FEATURES[0])
_TITLE_SPLIT = re.compile(r"\s+[|\-–—·:»]\s+")
_TITLE_INDEX_WORDS = frozenset(
    {"category", "categories", "archive", "archives", "collection", "collections", "shop",
     "products", "search", "results", "page", "tag", "tags", "blog", "news", "all",
     "directory", "catalog", "list", "topics", "latest", "browse", "index"}
)
_FORUM_TOKENS = frozenset({"thread", "threads", "showthread", "viewtopic", "topic",
                           "discussion", "discussions", "t", "questions"})
_TOKEN = re.compile(r"[a-z]+")


def _log(x: float) -> float:
    return math.log1p(max(x, 0.0))


@lru_cache(maxsize=4096)
def url_features(url: str) -> tuple[float, ...]:
    parts = urlsplit(url)
    path = parts.path or "/"
    segments = [s for s in path.lower().split("/") if s]
    last = segments[-1] if segments else ""
    no_file = path.endswith("/") or not segments or "." not in last and not _slug_words(last)
    query_keys = {k.lower() for k, _ in parse_qsl(parts.query, keep_blank_values=True)}
    words = set(segments)
    stem = last.rsplit(".", 1)[0] if "." in last else last
    return (
        1.0 if no_file else 0.0,
        1.0 if _SEQ_NAME.match(last) or re.fullmatch(r"[a-z]*\d{4,}", stem) else 0.0,
        min(len(segments), 8) / 4.0,
        min(_slug_words(last), 12) / 4.0,
        1.0 if _DATE_PATH.search(path) else 0.0,
        1.0 if query_keys & _INDEX_QUERY else 0.0,
        1.0 if parts.query else 0.0,
        1.0 if words & _INDEX_WORDS else 0.0,
        1.0 if words & _INFO_WORDS else 0.0,
        1.0 if stem in _INDEX_WORDS else 0.0,
    )


def _slug_words(segment: str) -> int:
    stem = segment.rsplit(".", 1)[0]
    return stem.count("-") + stem.count("_")


def feature_vector(url: str, page: Page, template: frozenset[str] | None = None) -> list[float]:
    """The model's features of ``page``; ``template``: the keys of its
    blocks that are its site's template (``crawler.template``), None while
    the site's template is not known (the page-only view)."""
    return _assemble(page_features(url, page), own_features(page, template))


def _assemble(base: list[float], own: list[float]) -> list[float]:
    return [*base[:_OWN_AT], *own, *base[_OWN_AT:]]


# The names documentation generators give their contents pages (a package
# or module summary, an overview, a table of contents, a class or file
# list, a general or module index, "all items"): the page's whole file
# name, or one of at most two words of it ("package-summary",
# "overview-tree", "allclasses-index", "py-modindex"), so that an article
# named "christmas-tree-ideas" is not one; and javadoc's "Uses of class X"
# pages, in a directory named "class-use". A contents page's name says what
# its markup may not.
_CONTENTS_NAMES = frozenset(
    {"summary", "overview", "contents", "toc", "tree", "sitemap", "hierarchy", "files", "classes", "namespaces",
     "modules", "packages", "all", "index", "genindex", "modindex", "allclasses", "allpackages", "annotated"}
)
_NAME_WORDS = re.compile(r"[-_.]+")


@lru_cache(maxsize=4096)
def doc_url_features(url: str) -> tuple[float, float]:
    """Whether the URL names a documentation contents page; whether it is
    a javadoc "class-use" page."""
    path = urlsplit(url).path.lower()
    folder, _, name = path.rpartition("/")
    words = [w for w in _NAME_WORDS.split(name.rsplit(".", 1)[0] if "." in name else name) if w]
    contents = 1.0 if 0 < len(words) <= 2 and not _CONTENTS_NAMES.isdisjoint(words) else 0.0
    return contents, 1.0 if folder.rsplit("/", 1)[-1] == "class-use" else 0.0


def page_features(url: str, page: Page) -> list[float]:
    """The features that do not depend on the site's template: every one
    of ``FEATURES`` but ``OWN_FEATURES``, in their order."""
    f = page.features
    n_links = f["n_links"]
    text = f["text_chars"] or 1.0
    types = page.ld_types
    return [
        _log(n_links),
        f["link_density"],
        f["linky_block_share"],
        _log(f["longest_block"]),
        _log(f["n_long_blocks"]),
        f["long_chars"] / text,
        f["main_chars"] / text,
        _log(f["n_heading_links"]),
        f["n_heading_links"] / (n_links + 1.0),
        _log(f["n_article"]),
        _log(f["n_time"]),
        _log(f["n_li"]),
        _log(f["n_img"]),
        f["h1_before_para"],
        *url_features(url),
        1.0 if types & _ARTICLE_TYPES else 0.0,
        1.0 if types & _PRODUCT_TYPES else 0.0,
        1.0 if types & _FORUM_TYPES else 0.0,
        1.0 if types & _LISTING_TYPES else 0.0,
        1.0 if "article" in types else 0.0,
        _log(f["n_cart"]),
        1.0 if 1 <= f["n_cart"] <= 2 else 0.0,
        _log(f["n_price"]),
        _log(f["max_repeat"]),
        _url_forum(url),
        _log(f["best_run"]),
        f["best_run"] / text,
        *_title_features(page.title),
        min(count_words(page.h1), 30) / 10.0,
        *doc_url_features(url),
    ]


def _title_features(title: str) -> tuple[float, float]:
    """Words in the title's first part (before " | site name"), and whether it
    holds a listing word: listings are named like categories, articles like
    headlines."""
    head = _TITLE_SPLIT.split(title.strip(), maxsplit=1)[0] if title else ""
    words = head.lower().split()
    return min(count_words(head), 30) / 10.0, 1.0 if set(words) & _TITLE_INDEX_WORDS else 0.0


@lru_cache(maxsize=4096)
def _url_forum(url: str) -> float:
    path = urlsplit(url).path.lower()
    return 1.0 if set(_TOKEN.findall(path)) & _FORUM_TOKENS else 0.0


Tree = "float | list[Any]"  # leaf value, or [feature, threshold, left, right]


class Model:
    """Gradient-boosted decision trees over ``FEATURES`` or their first
    ``len(data["features"])`` (an earlier model's: logistic loss)."""

    def __init__(self, data: dict[str, Any]) -> None:
        n = len(data["features"])
        if list(data["features"]) != list(FEATURES[:n]):
            raise ValueError(
                "the classifier's model was trained on other features; "
                "rerun bench/bench_pagetypes.py --write"
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
    pages, each alone on its site, by ``bench/train_classifier.py``."""
    return _load("classifier_page.json")


def model_for(template: frozenset[str] | None) -> Model:
    return page_model() if template is None else model()


# A page typed alone whose text is nearly all link text (under THIN_TEXT
# characters outside links) with at least THIN_LINKS links is a navigation
# page whatever the page-only model says: it has no content to be an
# information page. The page-only model never learned such pages: in WCXB's
# training part nearly all pages with that little text are script-rendered
# forum threads and shops whose HTML holds no links either; two of its 898
# pages pass the rule (an index page, and a forum thread of 195 characters
# and 11 links).
THIN_TEXT = 200
THIN_LINKS = 4


def thin_navigation(page: Page) -> bool:
    f = page.features
    return bool(f) and f["n_links"] >= THIN_LINKS and f["text_chars"] * (1.0 - f["link_density"]) < THIN_TEXT


def classify(url: str, page: Page, threshold: float | None = None,
             template: frozenset[str] | None = None) -> str:
    """``"index"`` or ``"info"``; ``template`` as for ``feature_vector``
    (None: the page is typed alone, by ``page_model`` and
    ``thin_navigation``)."""
    stats = block_stats(page.blocks, keyed=template is not None)  # keys only to set the template aside
    return classify_stats(page_features(url, page), stats, template, threshold, thin_navigation(page),
                          terms=term_index(page.blocks))


# Where the model is unsure of a page whose site's template is known (its
# score within RULE_BAND of the threshold), the one-line link-density rule
# types it (index when link text is more than RULE_DENSITY of the text
# outside navigation markup), on a site where the rule has typed the pages
# the model was sure of (scores at least RULE_SURE from the threshold) as
# the model did: at least RULE_AGREEMENT of them, once RULE_MIN_PAGES are
# counted. Where the rule holds on a site (most Sphinx trees) it decides
# the model's close calls; where the model's sure pages say it does not
# (javadoc, whose class pages are dense with links), it is not asked.
# Chosen on the Debian trees of the fit, one source left out at a time
# (bench/RESULTS.md, "The rule where the model is unsure" and "A wider
# band for the rule's decisions"): with one band of 0.25 for both, 62 of
# 71 met (61 with the model alone); deciding within 0.35 while still
# judging the rule on the pages 0.25 away, 64, none lost (cinder's and
# octavia's index pages scored 0.27 and 0.33 under the threshold). A page
# is not counted in the judgement of its own typing.
RULE_DENSITY = 0.35
RULE_BAND = 0.35
RULE_SURE = 0.25
RULE_AGREEMENT = 0.95
RULE_MIN_PAGES = 10


# Where ``stat_features`` holds the rule's figure (``rule_density``), and
# the text outside links (log1p of its characters).
_RULE_AT = OWN_FEATURES.index("content_link_density")
_PROSE_AT = OWN_FEATURES.index("own_prose_log")
_THIN_PROSE = math.log1p(THIN_TEXT)  # the feature's own scale: under it is under THIN_TEXT characters


class RuleTrust:
    """Per site, how often the rule typed the pages the model was sure of
    as the model did (a worker's own count: its pages of the site). At
    most ``max_sites`` sites, the least recently counted dropped first (it
    starts again from nothing: the model alone until 10 are counted).
    ``decided``: pages the rule typed; ``overruled``: of them, those the
    model would have typed the other way; ``bare``: pages with nothing of
    their own (``bare_navigation``) typed index where the model said info;
    ``contents``: contents lists (``contents_list``) typed index where the
    rest of ``decide`` said info; ``terms``: indexes of terms
    (``term_index``), typed index whatever the model said."""

    def __init__(self, max_sites: int = 4096) -> None:
        self.max_sites = max_sites
        self._sites: OrderedDict[str, list[int]] = OrderedDict()
        self.decided = 0
        self.overruled = 0
        self.bare = 0
        self.contents = 0
        self.terms = 0

    def record(self, site: str, agreed: bool) -> None:
        counts = self._sites.get(site)
        if counts is None:
            counts = self._sites[site] = [0, 0]
            while len(self._sites) > self.max_sites:
                self._sites.popitem(last=False)
        else:
            self._sites.move_to_end(site)
        counts[0] += 1
        counts[1] += agreed

    def trusted(self, site: str) -> bool:
        counts = self._sites.get(site)
        return counts is not None and counts[0] >= RULE_MIN_PAGES and counts[1] >= RULE_AGREEMENT * counts[0]

    def __len__(self) -> int:
        return len(self._sites)


# A back-of-book index (``term_index``): at least this many letter headings
# in alphabetical order, and of the entries between the first and the last,
# this share with a link to another page.
INDEX_LETTERS = 5
INDEX_LINKED = 0.6
_HEADING_TRIM = " \t\n-\u2013\u2014\u00b7\u2022:|()[]"


def term_index(blocks: Sequence[Block]) -> bool:
    """Whether the page is an index of terms (a back-of-book index, a
    generated index of names): entries under single-letter headings that
    run in alphabetical order (A ... Z; DocBook's ``indexdiv``, Sphinx's
    ``genindex``, javadoc's ``index-all``, Texinfo's index nodes,
    Doxygen's ``- a -``), most entries linking to another page. That is
    what an index is on every generator, whatever its markup: its entries
    ("term, section title") read as prose to link density, and it may be
    the only page that links to some pages. A glossary under letter
    headings is not one: its entries are definitions, not links."""
    letters: list[tuple[int, str]] = []
    for i, block in enumerate(blocks):
        text = block.text.strip(_HEADING_TRIM)
        if len(text) == 1 and text.isalpha():
            letters.append((i, text.casefold()))
    run = _alphabetical_run(letters)
    if len(run) < INDEX_LETTERS:
        return False
    heads = {i for i, _ in run}
    entries = [b for i, b in enumerate(blocks[run[0][0]:run[-1][0]], run[0][0]) if i not in heads and b.text.strip()]
    linked = sum(1 for b in entries if b.link_chars > b.frag_chars)
    return len(entries) >= 2 * len(run) and linked >= INDEX_LINKED * len(entries)


def _alphabetical_run(letters: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """The longest subsequence of ``letters`` (position, letter) whose letters
    strictly increase (patience sorting, O(n log n))."""
    import bisect

    tails: list[str] = []  # the smallest last letter of an increasing run of each length
    ends: list[int] = []  # the index in ``letters`` where that run ends
    parent = [-1] * len(letters)
    for k, (_, letter) in enumerate(letters):
        j = bisect.bisect_left(tails, letter)
        parent[k] = ends[j - 1] if j else -1
        if j == len(tails):
            tails.append(letter)
            ends.append(k)
        else:
            tails[j], ends[j] = letter, k
    run: list[tuple[int, str]] = []
    k = ends[-1] if ends else -1
    while k >= 0:
        run.append(letters[k])
        k = parent[k]
    return run[::-1]


def bare_navigation(own: Sequence[float]) -> bool:
    """A page whose site's template is known that has next to nothing of
    its own (``own``: its ``stat_features`` with the template): under
    ``THIN_TEXT`` characters of text outside links once the template is
    set aside, and link text over ``RULE_DENSITY`` of its text outside
    navigation markup (the rule's figure). A contents page whose list of
    links the site's template repeats (a Sphinx toctree that is also the
    sidebar) looks so; an article has text of its own. ``decide`` types
    such a page index where the model is unsure of it (within
    ``RULE_BAND``): on a site whose template is not in navigation markup
    (a sidebar in a plain ``div``) the rule's figure counts the template's
    links, and a short page of its own (under 200 characters) passes, so a
    page the model is sure is information stays one. Of the labelled pages
    of the 71 documentation trees of the fit typed with their template
    (one tree left out at a time), 807 pass, 806 of them index pages (the
    other javadoc's all-classes list, labelled info by its structure); the
    model, left out with its tree, typed one of the 806 info (neutron's
    install guide, a toctree its sidebar repeats, 0.21 under the
    threshold). Chosen on those scores (bench/RESULTS.md, "A page with
    nothing of its own"): the same with 100 to 400 characters, at any
    score or within the band; without the rule's figure, a short page of
    prose with no links of its own (tango's) would pass too."""
    return own[_PROSE_AT] < _THIN_PROSE and own[_RULE_AT] > RULE_DENSITY


def decide(score: float, threshold: float, density: float, trust: RuleTrust | None = None, site: str = "",
           bare: bool = False, contents: bool = False) -> str:
    """``_decide``, then a page whose own content is mostly a contents
    list (``contents``: ``crawler.template.contents_list``) is an index
    page whatever the model's score (counted in ``trust.contents`` where
    it would have been typed info): a section's table of contents or a
    book's index is what a crawler must follow, and the model, which reads
    link density, takes one whose rows carry descriptions for prose."""
    kind = _decide(score, threshold, density, trust, site, bare)
    if contents and kind == INFO:
        if trust is not None:
            trust.contents += 1
        return INDEX
    return kind


def _decide(score: float, threshold: float, density: float, trust: RuleTrust | None = None, site: str = "",
            bare: bool = False) -> str:
    """The type of a page with its site's template known: the model's
    ``score`` against ``threshold``; where the score is within
    ``RULE_BAND`` of it, the rule on ``density`` (``rule_density``) if
    ``trust`` trusts it on ``site`` (as it stood before this page). A page
    the model is sure of (``RULE_SURE`` from the threshold or further) is
    counted in ``trust``. A page with nothing of its own (``bare``:
    ``bare_navigation``) within ``RULE_BAND`` of the threshold is an index
    page, the rule trusted on the site or not (counted in ``trust.bare``
    where the model said info, not in ``decided``)."""
    model_says = INDEX if score >= threshold else INFO
    rule_says = INDEX if density > RULE_DENSITY else INFO
    distance = abs(score - threshold)
    close = distance < RULE_BAND
    trusted = False
    if trust is not None:
        trusted = close and trust.trusted(site)
        if distance >= RULE_SURE:
            trust.record(site, rule_says == model_says)
    if bare and close:
        if trust is not None and model_says == INFO:
            trust.bare += 1
        return INDEX
    if not trusted or trust is None:
        return model_says
    trust.decided += 1
    trust.overruled += rule_says != model_says
    return rule_says


def classify_stats(base: list[float], stats: Sequence[BlockStat], template: frozenset[str] | None,
                   threshold: float | None = None, thin: bool = False, trust: RuleTrust | None = None,
                   site: str = "", terms: bool = False) -> str:
    """``classify`` from a page's ``page_features`` and ``block_stats``
    (what is kept of a site's first pages to type them again once the
    site's template is known); ``thin``: the page's ``thin_navigation``,
    which holds only while no template is known. With the template known,
    a page with nothing of its own is an index page where the model is
    unsure (``bare_navigation``, with or without ``trust``), and with
    ``trust`` given, the rule decides the model's other close calls on a
    site where the rule has held (``decide``; the spider's ``RuleTrust``);
    a page whose own content is mostly a contents list is an index page
    (``crawler.template.contents_list``), with the template known only;
    ``terms``: the page is an index of terms (``term_index``), an index
    page whatever the model says (counted in ``trust.terms``).
    ``classify_vector`` is the model alone."""
    if terms:
        if trust is not None:
            trust.terms += 1
        return INDEX
    if template is None and thin:
        return INDEX
    own = stat_features(stats, template)
    x = _assemble(base, own)
    if template is None:
        return classify_vector(x, template, threshold)
    m = model()
    return decide(m.score(x), m.threshold if threshold is None else threshold, own[_RULE_AT], trust, site,
                  bare_navigation(own), contents_list(stats, template))


def classify_vector(x: list[float], template: frozenset[str] | None, threshold: float | None = None) -> str:
    m = model_for(template)
    return INDEX if m.score(x) >= (m.threshold if threshold is None else threshold) else INFO


def page_type(url: str, html: str | bytes) -> str:
    """``"index"`` or ``"info"`` for a page given as text or bytes, alone
    (the page-only view: no site template)."""
    return classify(url, analyze(html, url))


def tspider_rule(url: str, page: Page, min_paragraph: int = 200) -> str:
    """T-spider's rule as published, kept as the baseline to beat.

    Index when the path is empty or ends without a file name; otherwise info
    when the file name is a sequence number, the longest paragraph exceeds
    ``min_paragraph`` characters, or a title precedes the body text.
    """
    path = urlsplit(url).path
    last = path.rsplit("/", 1)[-1]
    if not last:
        return INDEX
    if _SEQ_NAME.match(last):
        return INFO
    if page.features["longest_block"] > min_paragraph or page.features["h1_before_para"]:
        return INFO
    return INDEX
