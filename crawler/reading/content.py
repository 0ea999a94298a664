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
from typing import Any

from crawler.reading.markdown import SKIP, Rendered, render

__all__ = ["main_content"]

# Boilerplate by what it is: navigation, asides, footers, controls, dialogs, what is hidden.
_DROP_TAGS = frozenset({"nav", "footer", "aside", "menu", "form", "header", "button", "dialog", "select", "label",
                        "input", "option"})
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
_BOILER = re.compile(
    r"(?:^|[\s_-])(?:nav|navbar|navigation|menu|menus|footer|sidebar|side-?bar|"
    r"breadcrumbs?|cookies?|consent|banner|share|sharing|social|socials|related|"
    r"toolbar|masthead|pagination|pager|comments?|comment-?list|respond|disqus|newsletter|subscribe|subscription|"
    r"signup|promo|promos|advert|adverts|ads?|ad-?slot|advertisement|sponsor|sponsored|popup|modal|overlay|"
    r"skip-?link|screen-?reader-?text|sr-only|visually-?hidden|author-?bio|"
    r"tags|tag-?cloud|read-?more|recommended|more-?stories|trending|popular)(?:$|[\s_-])",
    re.I,
)
# Readers' comments: boilerplate of an article however long, unless, all
# named alike, they are most of the page (a forum's posts).
_COMMENTS = re.compile(
    r"^(?:[\w-]*[_-])?(?:comments?|commentlist|comment-?list|respond|disqus_thread|"
    r"comments?-?(?:area|section|wrapper|container|block|thread|list|item|body|content|text))$", re.I)
_CUE_SHARE = 3  # a class-named element is boilerplate below a third of the container's prose


@lru_cache(maxsize=16384)
def _boiler_attr(value: str) -> bool:
    return _BOILER.search(value) is not None


def _strong(el: Any, tag: str) -> bool:
    """Boilerplate by its tag, role or hiding."""
    if tag in _DROP_TAGS:
        return True
    role = el.get("role")
    if role is not None and role in _DROP_ROLES:
        return True
    if el.get("hidden") is not None or el.get("aria-hidden") == "true":
        return True
    style = el.get("style")
    return style is not None and _HIDDEN_STYLE.search(style) is not None


def _cue(el: Any) -> bool:
    """Boilerplate by its class or id."""
    for name in ("class", "id"):
        v = el.get(name)
        if v and len(v) < 512 and _boiler_attr(v):
            return True
    return False


def _comments_name(el: Any) -> str | None:
    for name in ("class", "id"):
        v = el.get(name)
        if v and len(v) < 512 and "omment" in v or v and ("respond" in v or "disqus" in v):
            for token in v.split():
                if _COMMENTS.match(token):
                    return v
    return None


def _net(elements: list[Any], boiler: set[Any], links: dict[Any, int]) -> tuple[dict[Any, int], dict[Any, int]]:
    """Each element's prose and link text, boilerplate left out, bottom-up."""
    net: dict[Any, int] = {}
    net_links: dict[Any, int] = {}
    for el in reversed(elements):
        if el in boiler:
            net[el] = net_links[el] = 0
            continue
        if el.tag == "a":
            net[el], net_links[el] = 0, links[el]
            continue
        n = len(el.text.strip()) if el.text else 0
        k = 0
        for child in el:
            if isinstance(child.tag, str):
                n += net[child]
                k += net_links[child]
            if child.tail:
                n += len(child.tail.strip())
        net[el], net_links[el] = n, k
    return net, net_links


def main_content(root: Any, url: str | None = None) -> Rendered:
    body = root.find("body")
    if body is None:
        body = root
    # Prose (characters of text outside links) and link text of each element's subtree, bottom-up.
    elements = [el for el in body.iter() if isinstance(el.tag, str)]
    prose: dict[Any, int] = {}
    links: dict[Any, int] = {}
    for el in reversed(elements):
        n = len(el.text.strip()) if el.text else 0
        k = 0
        for child in el:
            if isinstance(child.tag, str):
                n += prose[child]
                k += links[child]
            if child.tail:
                n += len(child.tail.strip())
        if el.tag == "a":
            k += n
            n = 0
        prose[el] = n
        links[el] = k
    total = prose.get(body, 0)
    # Boilerplate that holds most of the page's prose is the page's wrapper, misnamed.
    boiler = {el for el in elements if _strong(el, el.tag) and (prose[el] * 2 < total or el.tag in _NEVER_PAGE)}
    net, net_links = _net(elements, boiler, links)
    comments: dict[str, list[Any]] = {}
    for el in elements:
        name = _comments_name(el)
        if name is not None:
            comments.setdefault(name, []).append(el)
    if comments:
        before = len(boiler)
        for group in comments.values():
            if sum(net[el] for el in group) * 2 < net[body]:
                boiler.update(group)
        if len(boiler) > before:
            net, net_links = _net(elements, boiler, links)
    # The main container: the deepest element holding most of the page's
    # weight (its prose, and half its link text: a listing's items are links).
    weight = {el: net[el] * 2 + net_links[el] for el in elements}
    good = weight.get(body, 0)
    container = body
    if good:
        while True:
            best = None
            for child in container:
                if isinstance(child.tag, str) and weight[child] * 10 >= good * 7:
                    best = child
                    break
            if best is None:
                break
            container = best
    for el in boiler:
        el.set(SKIP, "")
    inside = weight[container]
    cued = [el for el in container.iter() if isinstance(el.tag, str) and el is not container
            and weight[el] * _CUE_SHARE < inside and _cue(el)]
    # Elements named alike that together hold much of the container are its
    # items, whatever their name says: a forum's posts ("comment"), a
    # listing's cards ("promo"), a product's tabs.
    # Items of prose, that is: a menu's entries are links.
    by_name: dict[str, list[int]] = {}
    for el in cued:
        name = el.get("class") or el.get("id") or ""
        sums = by_name.setdefault(name, [0, 0, 0])
        sums[0] += weight[el]
        sums[1] += net[el]
        sums[2] += net_links[el]
    for el in cued:
        total_weight, total_prose, total_links = by_name[el.get("class") or el.get("id") or ""]
        if total_weight * _CUE_SHARE < inside or total_prose < total_links:
            el.set(SKIP, "")
    # Link lists inside the container, unless the container is itself a list of links (a listing's items).
    if net_links[container] < net[container]:
        for el in container.iter("ul", "ol", "div", "p", "table", "section", "dl"):
            if el is container or el.get(SKIP) is not None:
                continue
            k = links[el]
            if k > 0 and k >= 2 * prose[el] and prose[el] < 200:
                el.set(SKIP, "")
    return render([container], url)
