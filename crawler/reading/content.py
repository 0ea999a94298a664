"""The page's main content: which of its elements hold what the page is
about, and that content as text and Markdown. Pure logic, no Scrapy.

``main_content(root, url)`` reads the parsed page (``crawler.reading.html``)
after its scripts and styles are gone and before
``crawler.reading.extract.analyze`` marks its links. It

1. marks boilerplate (``SKIP``): hidden elements, navigation, headers and
   footers, sidebars, sharing, comments, promotions and forms by their tag,
   role, class or id, unless such an element holds most of the page's
   prose (themes name the page's own wrapper after the sidebar beside it);
2. weighs each element by the prose it holds (text not inside links) and
   chooses the main container: the deepest element holding most of the
   page's prose;
3. inside it, leaves out blocks that are mostly links (menus, tag clouds,
   "read next" teasers) unless the page is a list of items whose links are
   its content (a listing, a collection, a forum's index): then the items
   are the content;

and renders what is left (``crawler.reading.markdown.render``).

No settings, no stats.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, cast

import lxml.etree

from crawler.reading.html import STRING
from crawler.reading.markdown import SKIP, Rendered, render

__all__ = ["main_content"]

# Boilerplate by what it is: navigation, asides, footers, controls, dialogs, what is hidden.
# (a figure's caption: its credit and its gloss, not the text's words).
_DROP_TAGS = frozenset({"nav", "footer", "aside", "menu", "form", "header", "button", "dialog", "select", "label",
                        "input", "option", "figcaption"})
_DROP_ROLES = frozenset({"navigation", "banner", "contentinfo", "complementary", "menu", "menubar", "dialog",
                         "alertdialog", "search", "toolbar", "tablist"})
# ... of which a footer is never the page's wrapper, whatever it holds (an empty
# shell's footer is not its content; a misnested button or aside can be).
_NEVER_PAGE = frozenset({"footer"})
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
# ... and by what its class or id says it is: believed only of an element
# holding a small part of the main container's prose (page builders name
# every wrapper "widget" or "module", themes the page's own column after
# the sidebar beside it).
# Words of a class or id (split at spaces, "-" and "_"), and words written
# as one or as two or three ("side-bar", "read-more": matched joined).
_BOILER_WORDS = frozenset(
    "nav navbar navigation menu menus footer sidebar breadcrumb breadcrumbs cookie cookies consent banner share "
    "sharing social socials related toolbar masthead pagination pager comment comments commentlist respond disqus "
    "newsletter subscribe subscription signup promo promos advert adverts ad ads adslot advertisement sponsor "
    "sponsored popup modal overlay skiplink screenreadertext sronly visuallyhidden authorbio tags tagcloud readmore "
    "recommended morestories trending popular btn button buttons cta userinfo postprofile signature userstats "
    "byline disclaimer footnotes".split())
_SEPARATORS = str.maketrans("-_", "  ")
# Readers' comments: boilerplate of an article however long, unless, all
# named alike, they are most of the page (a forum's posts).
_COMMENTS = re.compile(
    r"^(?:[\w-]*[_-])?(?:comments?|commentlist|comment-?list|respond|disqus_thread|reviews|review-?list|"
    r"comments?-?(?:area|section|wrapper|container|block|thread|list|item|body|content|text))$", re.I)
_CUE_SHARE = 3  # a class-named element is boilerplate below a third of the container's prose


# An author's box or name: boilerplate of an article, where it is said once
# or twice, not of a forum's or a listing's items, each with its author.
_AUTHOR = "author"
BOILER, AUTHOR = 1, 2


@lru_cache(maxsize=16384)
def _boiler_attr(value: str) -> int:
    """Whether a class or id names boilerplate (``BOILER``), an author
    (``AUTHOR``) or neither (0)."""
    words = value.lower().translate(_SEPARATORS).split()
    if "hentry" in words:  # an entry (microformats), named after its tags and author too: "tag-social"
        return 0
    if not _BOILER_WORDS.isdisjoint(words):
        return BOILER
    for i in range(len(words) - 1):
        pair = words[i] + words[i + 1]
        if pair in _BOILER_WORDS or pair + "".join(words[i + 2:i + 3]) in _BOILER_WORDS:
            return BOILER
    return AUTHOR if _AUTHOR in words else 0


def _strong(el: Any, tag: str) -> bool:
    """Boilerplate by its tag, role or hiding."""
    if tag in _DROP_TAGS:
        return True
    role = el.get("role")
    if role is not None and role in _DROP_ROLES:
        return True
    return False


def _hidden(el: Any) -> bool:
    """Hidden until the reader asks (a collapsed answer, a tab, a menu, a dialog)."""
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    style = el.get("style")
    return style is not None and _HIDDEN_STYLE.search(style) is not None


def _comments_name(value: str) -> bool:
    """Whether a class or id names readers' comments."""
    return any(_COMMENTS.match(token) for token in value.split())


# An element's figures: its prose (characters of text outside links), its
# link text, and both again with boilerplate left out.
Sums = tuple[int, int, int, int]


class _Scan:
    """The pass over the page: each element's figures (``sums``) with
    boilerplate by tag, role and hiding left out (``boiler``), and the
    elements whose class or id names readers' comments (``comments``) or
    boilerplate (``cues``). Given its ``boiler``, the figures again with it
    left out (the names are not read again)."""

    __slots__ = ("elements", "sums", "boiler", "comments", "cues", "authors")

    def __init__(self, body: Any, boiler: set[Any] | None = None, elements: list[Any] | None = None) -> None:
        self.elements = elements = list(body.iter(lxml.etree.Element)) if elements is None else elements
        sums: dict[Any, Sums] = {}
        read = boiler is None
        self.boiler = boiler = set() if boiler is None else boiler
        self.sums = sums
        self.comments: dict[str, list[Any]] = {}
        self.cues: set[Any] = set()
        self.authors: set[Any] = set()
        for el in reversed(elements):
            tag = el.tag
            text = el.text
            n = len(text.strip()) if text else 0
            k = 0
            m = n
            ml = 0
            for child in el:
                cn, ck, cm, cml = sums[child]
                n += cn
                k += ck
                m += cm
                ml += cml
                tail = child.tail
                if tail:
                    c = len(tail.strip())
                    n += c
                    m += c
            if tag == "a":
                k += n
                n = m = 0
                ml = k
            if read:
                self._names(el, tag)
            if el in boiler:
                m = ml = 0
            sums[el] = (n, k, m, ml)

    def _names(self, el: Any, tag: str) -> None:
        boiler = self.boiler
        if tag in _DROP_TAGS:
            boiler.add(el)
        names = el.keys()
        if not names:
            return
        if "role" in names and el not in boiler and _strong(el, tag):
            boiler.add(el)
        if ("style" in names or "hidden" in names or "aria-hidden" in names) and _hidden(el):
            self.cues.add(el)
        if "class" in names or "id" in names:
            for value in (el.get("class"), el.get("id")):
                if value and len(value) < 512:
                    said = _boiler_attr(value)
                    if said == BOILER:
                        self.cues.add(el)
                    elif said == AUTHOR:
                        self.authors.add(el)
                    if ("omment" in value or "respond" in value or "disqus" in value or "eview" in value) \
                            and _comments_name(value):
                        self.comments.setdefault(value, []).append(el)
                        break


def _kind_of_name(el: Any) -> str:
    """An element's class (else id) without the words that number it
    ("elementor-element-6e4d78d", "post-1234"): what names it alike with
    its siblings."""
    value = el.get("class") or el.get("id") or ""
    return " ".join(sorted(w for w in value.split() if not any(c.isdigit() for c in w)))


_QUOTED = 40  # characters of a quotation that make finding it twice telling


def _quotes_again(container: Any) -> None:
    """A quotation of what the page says elsewhere (a forum reply quoting
    the post it answers) is left out: the words are the page's once."""
    quotes = [el for el in container.iter("blockquote") if el.get(SKIP) is None]
    if not quotes:
        return
    whole = " ".join(cast(str, STRING(container)).split())
    for el in quotes:
        quoted = " ".join(cast(str, STRING(el)).split())
        if len(quoted) >= _QUOTED and whole.count(quoted) >= 2:
            el.set(SKIP, "")


_LEAVES = ("p",)


def _said_again(container: Any) -> None:
    """A block of text the main content says again word for word (a
    promotion repeated, a card shown twice) is kept once."""
    seen: set[str] = set()
    for el in container.iter(_LEAVES):
        if el.get(SKIP) is not None:
            continue
        said = " ".join(cast(str, STRING(el)).split())
        if len(said) < 20:
            continue
        if said in seen:
            el.set(SKIP, "")
        else:
            seen.add(said)


_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# A heading that offers other things than the page's own: a shop's "similar
# items", "customers also bought", a forum's "similar threads".
_OTHERS = re.compile(
    r"\b(?:(?:similar|related|recommended) (?:items?|products?|accessories|threads)"
    r"|also (?:viewed|bought|purchased|like)|more like this|(?:customers|people) (?:also|who viewed)"
    r"|items to explore)\b", re.I)


def _others_offered(container: Any, inside: int, weight: Any) -> None:
    """A section headed as an offer of other things (``_OTHERS``) is left
    out: the heading's ancestors up to the last one it leads and that holds
    no other heading of its rank or above (its items' own are below), so
    long as that is a small part of the container."""
    for heading in container.iter(_HEADINGS):
        if heading.get(SKIP) is not None:
            continue
        title = cast(str, STRING(heading)).strip()
        if not _OTHERS.search(title):
            continue
        section = None
        rank = heading.tag
        parent = heading.getparent()
        while parent is not None and parent is not container and weight(parent) * _CUE_SHARE < inside \
                and not any(other.tag <= rank and other is not heading for other in parent.iter(_HEADINGS)) \
                and cast(str, STRING(parent)).lstrip().startswith(title):
            section = parent
            parent = parent.getparent()
        if section is not None:
            section.set(SKIP, "")


def main_content(root: Any, url: str | None = None) -> Rendered:
    body = root.find("body")
    if body is None:
        body = root
    scan = _Scan(body)
    elements, sums, boiler = scan.elements, scan.sums, scan.boiler
    total = sums[body][0]
    # Boilerplate that holds most of the page's prose is the page's wrapper,
    # misnamed (or misnested: a button left open holds the page).
    wrappers = {el for el in boiler if sums[el][0] * 2 >= total and el.tag not in _NEVER_PAGE}
    if wrappers:
        boiler -= wrappers
        sums = _Scan(body, boiler, elements).sums
    if scan.comments:
        before = len(boiler)
        for group in scan.comments.values():
            if sum(sums[el][2] for el in group) * 2 < sums[body][2]:
                boiler.update(group)
        if len(boiler) > before:
            sums = _Scan(body, boiler, elements).sums
    # The main container: the deepest element holding most of the page's
    # weight (its prose, and half its link text: a listing's items are links).
    def weight(el: Any) -> int:
        figures: Sums = sums[el]
        return figures[2] * 2 + figures[3]

    good = weight(body)
    container = body
    if good:
        while True:
            best = None
            for child in container:
                if weight(child) * 10 >= good * 7:
                    best = child
                    break
            if best is None:
                break
            container = best
    for el in boiler:
        el.set(SKIP, "")
    inside = weight(container)
    cues = scan.cues
    authors = scan.authors
    cued = []
    named_authors: dict[str, list[Any]] = {}
    for el in container.iter(lxml.etree.Element):
        if el in cues:
            if el is not container and 0 < weight(el) * _CUE_SHARE < inside:
                cued.append(el)
        elif el in authors and el is not container and 0 < weight(el) * _CUE_SHARE < inside:
            named_authors.setdefault(_kind_of_name(el), []).append(el)
    # Authors said once or twice (an article's byline, its author's box).
    for group in named_authors.values():
        if len(group) <= 2:
            cued.extend(group)
    # Elements named alike that together hold much of the container are its
    # items, whatever their name says: a forum's posts ("comment"), a
    # listing's cards ("promo"), a product's tabs.
    # Items of prose, that is: a menu's entries are links.
    by_name: dict[str, list[int]] = {}
    names = [_kind_of_name(el) for el in cued]
    for el, name in zip(cued, names):
        group = by_name.setdefault(name, [0, 0, 0])
        figures = sums[el]
        group[0] += weight(el)
        group[1] += figures[2]
        group[2] += figures[3]
    for el, name in zip(cued, names):
        total_weight, total_prose, total_links = by_name[name]
        if total_weight * _CUE_SHARE < inside or total_prose < total_links:
            el.set(SKIP, "")
    # Link lists inside the container, unless the container is itself a list of links (a listing's items).
    if sums[container][3] < sums[container][2]:
        for el in container.iter("ul", "ol", "div", "p", "table", "section", "dl"):
            if el is container or el.get(SKIP) is not None:
                continue
            prose, k = sums[el][0], sums[el][1]
            if k > 0 and k >= 2 * prose and prose < 200:
                el.set(SKIP, "")
    _others_offered(container, inside, weight)
    _quotes_again(container)
    _said_again(container)
    return render([container], url, images=False)
