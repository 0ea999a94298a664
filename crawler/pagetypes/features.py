"""The features the page-type models read (``FEATURES``), and a page's
vector of them. Pure logic, no Scrapy.

- link density and the share of blocks that are mostly links (the classic
  navigation signal), links inside headings (teaser cards of a listing);
- the amount of text in long, link-poor paragraphs, and whether the ``h1``
  comes before them (T-spider's "a title precedes the body text");
- schema.org / Open Graph types (``Article``, ``Product``,
  ``DiscussionForumPosting`` against ``CollectionPage``, ``ItemList``);
- URL shape: T-spider's "no file name" rule, sequence-number and slug file
  names, listing words (``category``, ``tag``, ``page=``) and dates; the
  title's words;
- the page's own features once its site's template is set aside
  (``crawler.pagetypes.template.OWN_FEATURES``, ``own_features``);
- the URL's documentation names (``doc_url_features``): a file name that
  documentation generators give their contents pages, or javadoc's
  ``class-use/``.

``page_features`` is every feature but the template's (what is kept of a
site's first pages to type them again), ``feature_vector`` all of them.
Changing a feature or its order means fitting the models again
(``python -m tools.pagetypes.template_model --write``,
``python -m tools.pagetypes.page_model --write``): ``crawler.pagetypes.classify.Model``
refuses a model fitted on other features.

No settings, no stats.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from crawler.pagetypes.template import OWN_FEATURES, own_features
from crawler.reading.textfeatures import count_words

if TYPE_CHECKING:
    from crawler.reading.extract import Page

__all__ = ["FEATURES", "SEQ_NAME", "assemble", "doc_url_features", "feature_vector", "page_features", "url_features"]

SEQ_NAME = re.compile(r"^\d+(?:\.[a-z0-9]{1,5})?$", re.I)
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
        1.0 if SEQ_NAME.match(last) or re.fullmatch(r"[a-z]*\d{4,}", stem) else 0.0,
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
    blocks that are its site's template (``crawler.pagetypes.template``), None while
    the site's template is not known (the page-only view)."""
    return assemble(page_features(url, page), own_features(page, template))


def assemble(base: list[float], own: list[float]) -> list[float]:
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

