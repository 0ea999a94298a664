"""The normalised fields of a page's metadata (crawler/reading/metadata.py):
``title``, ``author``, ``published``, ``modified``, ``description``,
``site_name``, ``image``, ``type``, each from the first source that has
it, in an order measured on WCXB's dev pages. Pure logic, no Scrapy.

``byline`` and ``dateline`` read the author and date the markup near the
page's first h1 shows, for pages whose metadata gives none.
``iso_date`` reads the dates pages write (ISO 8601, RFC 2822, "September
4, 2025", "4 Sept. 2025", "2025/09/04", "09/04/2025") as ISO 8601.

No settings, no stats.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

from crawler.reading.html import clean

__all__ = ["byline", "dateline", "iso_date", "normalise", "short_text"]

MAX_FIELD = 500  # characters of a normalised field (description: 2000)

# The item a page is about, by its type: articles first, then the things a
# page sells or describes, then the page itself.
_ARTICLE = {"article", "newsarticle", "blogposting", "reportagenewsarticle", "analysisnewsarticle",
            "opinionnewsarticle", "scholarlyarticle", "techarticle", "report", "liveblogposting",
            "socialmediaposting", "discussionforumposting", "posting", "review", "qapage", "question",
            "howto", "recipe", "videoobject", "podcastepisode", "creativework", "medicalwebpage"}
_THING = {"product", "event", "course", "jobposting", "book", "movie", "softwareapplication",
          "localbusiness", "restaurant", "dataset", "collectionpage", "profilepage"}
_PAGE = {"webpage", "itempage", "aboutpage", "contactpage", "searchresultspage", "faqpage"}
_SEPARATORS = re.compile(r"\s+[|\-–—·•:»/]\s+")
_BY = re.compile(r"^(?:by|von|par|por|di|door|av|written by|posted by|author:?)\s+", re.I)
_URLISH = re.compile(r"^(?:https?:|www\.|/)|\.(?:com|org|net)/|[{}\[\]<>]")
_TAG = re.compile(r"<[^>]{0,200}>")


def normalise(jsonld: list[Any], microdata: list[Any], rdfa: list[Any], opengraph: dict[str, Any],
              twitter: dict[str, Any], tags: dict[str, str], marks: dict[str, Any], read: Any) -> dict[str, Any]:
    items = [i for i in jsonld + microdata + rdfa if isinstance(i, dict)]
    main = _main_item(items)
    og, tw = opengraph, twitter
    out: dict[str, Any] = {}

    out["title"] = _text(_title(marks, _one(og, "og:title"), _one(main, "headline"),
                                tags.get("citation_title") or tags.get("dc.title") or _one(tw, "twitter:title")))
    out["author"] = _author(main, items, og, tw, tags, marks)
    published = [_date(main, "datePublished"), _date(main, "dateCreated"), _one(og, "article:published_time"),
                 tags.get("article:published_time"), tags.get("citation_publication_date"),
                 tags.get("citation_date"), tags.get("dc.date.issued"), tags.get("dc.date"), tags.get("dcterms.date"),
                 tags.get("dcterms.created"), tags.get("date"), tags.get("pubdate"), tags.get("publishdate"),
                 tags.get("publish-date"), tags.get("parsely-pub-date"), tags.get("sailthru.date"),
                 tags.get("datepublished"), _one(og, "og:published_time")]
    times = marks["times"]
    published += [t for t, pub, hint in times if pub or "publish" in hint] + [t for t, _, _ in times[:1]]
    out["published"] = _first_date(published) or marks["dateline"]()
    out["modified"] = _first_date([_date(main, "dateModified"), _one(og, "article:modified_time"),
                                   _one(og, "og:updated_time"), tags.get("dcterms.modified"),
                                   tags.get("last-modified"), tags.get("datemodified")])
    description = _first(_one(og, "og:description"), tags.get("description"), _one(tw, "twitter:description"),
                         _one(main, "description"), tags.get("dc.description"))
    out["description"] = _text(description, 2000)
    publisher = main.get("publisher") if main else None
    site = _first(_one(og, "og:site_name"), _name(publisher),
                  *(_one(i, "name") for i in items if _types(i) & {"website"}), tags.get("application-name"))
    out["site_name"] = _text(site)
    out["image"] = _text(_first(_one(og, "og:image"), _one(og, "og:image:url"), _one(tw, "twitter:image"),
                                _image(main.get("image") if main else None)), 2000)
    kind = _one(og, "og:type") or (sorted(_types(main))[0] if main and _types(main) else "")
    out["type"] = _text(kind, 100)
    return {k: v for k, v in out.items() if v}


def _title(marks: dict[str, Any], og: str, headline: str, other: str) -> str:
    """The page's first h1 that the titles for machines (og:title, the
    <title>, the headline) mostly hold, else the first of those without its
    site's name: 0.77 of WCXB's dev titles right, where the h1 alone is
    0.66 and the <title> without the site's name 0.65."""
    h1s: list[str] = [h for h in marks["h1"] if h]
    titles = [set(_tokens(t)) for t in (marks["title"], og, headline, other) if t]
    for h1 in h1s:
        words = set(_tokens(h1))
        if words and any(len(words & t) >= 0.6 * len(words) for t in titles):
            return h1
    return _first(_strip_site(og), _strip_site(marks["title"]), headline, other, *h1s[:1])


_BYLINE = re.compile(r"author|byline|byl\b|writer", re.I)
_BY_NAME = re.compile(r"\b(?:[Bb]y|BY|[Ww]ritten by|[Aa]uthor:)\s+([A-Z][\w.'’-]*(?:\s+(?:[A-Z][\w.'’-]*|de|van|von|da|and|&)){0,4})")
_NOT_NAME = re.compile(r"\d|@|://|\*|[.'’]\s|['’]s$|^\w{1,3}$|"
                       r"\b(?:posts?|articles?|more|about|view|bio|follow|undefined|null|protected|name)\b", re.I)


def _near(h1: Any) -> Iterator[Any]:
    """The elements around the page's first h1 (its ancestors up to three
    levels up, short of the body), at most 300."""
    scope = h1
    for _ in range(3):
        up = scope.getparent()
        if up is None or up.tag in ("body", "html"):
            break
        scope = up
    for n, el in enumerate(scope.iter()):
        if n >= 300:
            break
        if el is not h1 and isinstance(el.tag, str):
            yield el


_YEAR = re.compile(r"(?:19|20)\d\d")  # what every date iso_date reads holds


def dateline(h1: Any) -> str:
    """The first date written near the page's first h1 (a dateline), for a
    page whose metadata gives none."""
    for el in _near(h1):
        for text in (el.text, el.tail):
            if text and 6 <= len(text) <= 80 and _YEAR.search(text) is not None:
                found = iso_date(text)
                if found:
                    return found
    return ""


def byline(h1: Any, read: Any) -> str:
    """The author named near the page's first h1 (the markup's byline:
    an element whose class says author or byline, or "By Name"), for a page
    whose metadata names none: the h1's surroundings up to three levels up,
    at most 300 elements."""
    for el in _near(h1):
        cls = el.get("class")
        if cls and _BYLINE.search(cls) and el.tag not in ("img", "picture", "figure", "svg"):
            text = clean(short_text(el, 200))
            found = _BY_NAME.search(text)
            name = found[1] if found else text.removeprefix("By ").removeprefix("by ").strip(" :,|")
            if 2 <= len(name) <= 60 and len(name.split()) <= 5 and _NOT_NAME.search(name) is None:
                return str(read.text(name))
        elif el.text and ("By" in el.text or "by" in el.text):
            found = _BY_NAME.search(el.text + " " + clean(short_text(el, 120))[:80] if len(el) else el.text)
            if found and " " in found[1] and _NOT_NAME.search(found[1]) is None:
                return str(read.text(found[1]))
    return ""


def short_text(el: Any, limit: int = 2000) -> str:
    """The start of ``el``'s text: ``limit`` characters or a little more,
    whatever the size of the element (an itemprop on the page's body)."""
    parts: list[str] = []
    size = 0
    for text in el.itertext():
        parts.append(text)
        size += len(text)
        if size > limit:
            break
    return "".join(parts)


def _main_item(items: list[dict[str, Any]]) -> dict[str, Any] | None:
    for group in (_ARTICLE, _THING, _PAGE):
        for item in items:
            if _types(item) & group:
                return item
    return None


def _types(item: Any) -> set[str]:
    if not isinstance(item, dict):
        return set()
    kind = item.get("@type")
    kinds = kind if isinstance(kind, list) else [kind]
    return {k.rsplit("/", 1)[-1].rsplit(":", 1)[-1].lower() for k in kinds if isinstance(k, str)}


def _one(source: Any, key: str) -> str:
    """The first string value of ``key`` (microdata and RDFa properties may
    be prefixed: "schema:headline", "dc:title")."""
    if not isinstance(source, dict):
        return ""
    value = source.get(key)
    if value is None and ":" not in key:
        for name, found in source.items():
            if name.rsplit(":", 1)[-1] == key:
                value = found
                break
    while isinstance(value, list) and value:
        value = value[0]
    return value.strip() if isinstance(value, str) else ""


def _first(*values: Any) -> str:
    for value in values:
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _text(value: str, limit: int = MAX_FIELD) -> str:
    if "<" in value or "&" in value:
        value = _TAG.sub(" ", html.unescape(value))
    return " ".join(value.split())[:limit]


def _tokens(value: str) -> list[str]:
    return re.findall(r"\w+", value.lower())


def _strip_site(title: str) -> str:
    """A <title> without its site's name ("Story - Site", "Site | Story"):
    the longest part."""
    parts = _SEPARATORS.split(title)
    return max(parts, key=len) if len(parts) > 1 else title


def _name(value: Any) -> str:
    """A Person's or Organization's name, or a name as written; never a URL."""
    while isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict):
        value = value.get("name") or _one(value, "name")
        while isinstance(value, list) and value:
            value = value[0]
    if not isinstance(value, str):
        return ""
    value = _BY.sub("", _text(value, 200)).strip(" ,;|")
    return "" if not value or _URLISH.search(value) else value


def _names(value: Any) -> str:
    """Several authors as "A, B"."""
    values = value if isinstance(value, list) else [value]
    found: list[str] = []
    for v in values[:10]:
        name = _name(v)
        if name and name not in found:
            found.append(name)
    return ", ".join(found)


def _author(main: Any, items: list[Any], og: dict[str, Any], tw: dict[str, Any], tags: dict[str, str],
            marks: dict[str, Any]) -> str:
    if main:
        author = main.get("author") or main.get("creator") or _prop(main, "author")
        if author:
            name = _names(author)
            if name:
                return name
    for key in ("author", "article:author", "parsely-author", "sailthru.author", "dc.creator",
                "citation_author", "byl", "dcterms.creator"):
        name = _names(tags.get(key) or (og.get(key) if key.startswith("article:") else None))
        if name:
            return name
    if marks["rel_author"]:
        return _names(marks["rel_author"][:3])
    for item in items:
        if item is not main and item.get("author"):
            name = _names(item["author"])
            if name:
                return name
    return _name(marks["byline"]())


def _prop(item: dict[str, Any], key: str) -> Any:
    for name, value in item.items():
        if name.rsplit(":", 1)[-1] == key:
            return value
    return None


def _date(item: Any, key: str) -> str:
    return _one(item, key)


def _image(value: Any) -> str:
    while isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict):
        value = value.get("url") or value.get("contentUrl")
    return str(value) if isinstance(value, str) else ""


def _first_date(values: list[Any]) -> str:
    for value in values:
        if isinstance(value, str) and value:
            found = iso_date(value)
            if found:
                return found
    return ""


_MONTHS = {m: i for i, ms in enumerate(
    ["jan janv januar enero gennaio", "feb fév févr februar febrero febbraio", "mar mär mars märz marzo",
     "apr avr avril abril aprile", "may mai mayo maggio", "jun juin juni junio giugno",
     "jul juil juillet juli julio luglio", "aug août august agosto", "sep sept septembre settembre septiembre",
     "oct okt octobre oktober octubre ottobre", "nov novembre noviembre", "dec déc dez décembre dezember diciembre dicembre"],
    start=1) for m in ms.split()}
_ISO = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ](\d{1,2}):(\d{2})(?::(\d{2}))?(?:[.,]\d+)?\s*(Z|[+-]\d{2}:?\d{2})?)?")
_SLASHED = re.compile(r"\b(\d{4})[/.](\d{1,2})[/.](\d{1,2})\b")
_NUMERIC = re.compile(r"\b(\d{1,2})([/.])(\d{1,2})\2(\d{4})\b")
_COMPACT = re.compile(r"^(\d{4})(\d{2})(\d{2})(?:\D|$)")
_NAMED = re.compile(r"\b([a-zéû]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b"
                    r"|\b(\d{1,2})(?:st|nd|rd|th)?\.?\s+(?:de\s+)?([a-zéûä]{3,9})\.?,?\s+(?:de\s+)?(\d{4})\b", re.I)


def iso_date(value: str) -> str:
    """``value`` as YYYY-MM-DD (or YYYY-MM-DDTHH:MM[:SS][zone] when it
    gives a time); "" when it holds no date."""
    value = value.strip()[:100]
    m = _ISO.search(value)
    if m:
        y, mo, d = int(m[1]), int(m[2]), int(m[3])
        if not _valid(y, mo, d):
            return ""
        day = f"{y:04d}-{mo:02d}-{d:02d}"
        if m[4] is None:
            return day
        zone = m[7] or ""
        if zone and zone != "Z" and ":" not in zone:
            zone = zone[:3] + ":" + zone[3:]
        return f"{day}T{int(m[4]):02d}:{m[5]}:{m[6] or '00'}{zone}"
    m = _SLASHED.search(value)
    if m:
        return _day(int(m[1]), int(m[2]), int(m[3]))
    m = _NAMED.search(value)
    if m:
        if m[1]:
            month, d, y = _month(m[1]), int(m[2]), int(m[3])
        else:
            month, d, y = _month(m[5]), int(m[4]), int(m[6])
        return _day(y, month, d) if month else ""
    m = _NUMERIC.search(value)
    if m:
        a, b, y = int(m[1]), int(m[3]), int(m[4])
        # "." is day first (Europe); "/" month first unless that cannot be
        return _day(y, b, a) if m[2] == "." or a > 12 else _day(y, a, b)
    m = _COMPACT.match(value)
    if m:
        return _day(int(m[1]), int(m[2]), int(m[3]))
    return ""


def _month(word: str) -> int | None:
    word = word.lower()
    return _MONTHS.get(word) or _MONTHS.get(word[:4]) or _MONTHS.get(word[:3])


def _valid(y: int, mo: int, d: int) -> bool:
    return 1900 <= y <= 2100 and 1 <= mo <= 12 and 1 <= d <= 31


def _day(y: int, mo: int | None, d: int) -> str:
    return f"{y:04d}-{mo:02d}-{d:02d}" if mo and _valid(y, mo, d) else ""
