"""The rules that type a page beside the page-type model, or overrule it.
Pure logic, no Scrapy.

- ``thin_navigation``: a page typed alone that is nearly all link text is
  an index page whatever the page-only model says.
- The link-density rule (``RULE_*``, ``decide``): where the model is
  unsure of a page whose site's template is known, the rule types it, on a
  site where it has typed the model's sure pages as the model did
  (``RuleTrust``, the spider's count of that); a page with next to nothing
  of its own there is an index page (``bare_navigation``); so is one whose
  own content is mostly a contents list (``crawler.pagetypes.template.contents_list``).
- ``term_index``: a back-of-book index of terms is an index page whatever
  the model says.
- ``tspider_rule``: T-spider's rule as published, the baseline the model
  is measured against (``bench.bench_pagetypes``), not used in a crawl.

The page types themselves are ``INDEX`` and ``INFO``. No settings read
here; ``RuleTrust``'s counts are the spider's stats
``classifier/rule/decided``, ``classifier/rule/overruled``,
``classifier/bare_index``, ``classifier/contents_index`` and
``classifier/terms_index`` (``crawler/pagetypes/typer.py``).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from crawler.pagetypes.features import SEQ_NAME
from crawler.pagetypes.template import OWN_FEATURES

if TYPE_CHECKING:
    from crawler.reading.extract import Block, Page

__all__ = ["INDEX", "INFO", "RULE_AGREEMENT", "RULE_AT", "RULE_BAND", "RULE_DENSITY", "RULE_MIN_PAGES", "RULE_SURE",
           "RuleTrust", "THIN_LINKS", "THIN_TEXT", "bare_navigation", "decide", "term_index", "thin_navigation",
           "tspider_rule"]

INDEX = "index"
INFO = "info"


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
# (bench/JOURNAL.md, "The rule where the model is unsure" and "A wider
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
RULE_AT = OWN_FEATURES.index("content_link_density")
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
    threshold). Chosen on those scores (bench/JOURNAL.md, "A page with
    nothing of its own"): the same with 100 to 400 characters, at any
    score or within the band; without the rule's figure, a short page of
    prose with no links of its own (tango's) would pass too."""
    return own[_PROSE_AT] < _THIN_PROSE and own[RULE_AT] > RULE_DENSITY


def decide(score: float, threshold: float, density: float, trust: RuleTrust | None = None, site: str = "",
           bare: bool = False, contents: bool | Callable[[], bool] = False) -> str:
    """``_decide``, then a page whose own content is mostly a contents
    list (``contents``: ``crawler.pagetypes.template.contents_list``) is an index
    page whatever the model's score (counted in ``trust.contents`` where
    it would have been typed info): a section's table of contents or a
    book's index is what a crawler must follow, and the model, which reads
    link density, takes one whose rows carry descriptions for prose.
    ``contents`` may be a callable: asked only of a page otherwise typed
    info (most pages are not contents lists; reading the rows costs)."""
    kind = _decide(score, threshold, density, trust, site, bare)
    if kind == INFO and (contents() if callable(contents) else contents):
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
    if SEQ_NAME.match(last):
        return INFO
    if page.features["longest_block"] > min_paragraph or page.features["h1_before_para"]:
        return INFO
    return INDEX
