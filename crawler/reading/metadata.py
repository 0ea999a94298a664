"""What a page says about itself for machines: JSON-LD, microdata, RDFa,
OpenGraph and Twitter cards, and the normalised fields taken from them.
Pure logic, no Scrapy.

``read_metadata(root, url)`` reads the parsed page before its scripts are
stripped (``crawler.reading.extract.analyze`` calls it) and never changes
the tree. It returns a JSON-safe dict; a part the page does not have is
left out, so a page without any metadata gives ``{}`` (or only the fields
taken from its markup)::

    title, author, published, modified, description, site_name, image, type
        the normalised fields (crawler/reading/metafields.py): strings;
        dates as ISO 8601 (YYYY-MM-DD, or YYYY-MM-DDTHH:MM:SS with the zone
        as written); several authors as "A, B"
    jsonld      [item, ...]: each <script type="application/ld+json">'s
                objects, a "@graph" flattened into its items
    microdata   [item, ...]: top-level itemscopes as {"@type", "@id",
                property: value or [values], ...}, nested items as dicts
    rdfa        [item, ...]: RDFa Lite, top-level typeof elements as
                {"@type", "@id", property: value, ...}
    opengraph   {"og:title": ..., "article:published_time": ...}: og:,
                article:, product:, book:, profile:, fb: ... meta tags
    twitter     {"twitter:card": ...}
    errors      JSON-LD blobs that could not be read (even after cheap
                repairs: HTML comments, CDATA, trailing commas, control
                characters, several objects in a row) or were too large
    cut         values cut or left out by the bounds below

A tag's property found more than once holds a list of its values.

Bounded: a JSON-LD blob of at most MAX_BLOB characters, MAX_SCRIPTS of
them; nesting to MAX_DEPTH; MAX_ITEMS items a list, MAX_PROPS keys a
dict; strings cut to MAX_STRING characters (keys to MAX_KEY), with
control characters and lone surrogates taken out; integers beyond 2**53
kept as strings, NaN and infinities as None; the whole dict, as JSON, at
most MAX_TOTAL characters (the raw parts dropped, largest first). Never
raises.

Measured on WCXB's 1,497 dev pages (CPU, one core): about 1 ms a page
(0.5-0.9 ms more for analyze), of which one tag walk (0.2 ms) and one
XPath for itemscope/typeof (0.4 ms); extruct 0.18.0 costs 136 ms a page
with all its syntaxes (RDFa through rdflib), 3 ms without RDFa and
microformats (it parses the HTML again). Normalised fields right (issue
50's rule): title 0.769, author 0.739, published date 0.812.

No settings, no stats.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, cast

import lxml.etree

from crawler.reading.html import UNSAFE, clean, scrub
from crawler.reading.metafields import byline, dateline, normalise, short_text

__all__ = ["MAX_BLOB", "MAX_DEPTH", "MAX_ITEMS", "MAX_STRING", "MAX_TOTAL", "read_metadata"]

MAX_BLOB = 256 * 1024
MAX_SCRIPTS = 16
MAX_DEPTH = 8
MAX_ITEMS = 50
MAX_PROPS = 100
MAX_STRING = 2000
MAX_KEY = 200
MAX_TOTAL = 64 * 1024
MAX_META = 200  # meta tags read
MAX_PROPERTIES = 2000  # microdata or RDFa properties (and scopes) read
MAX_LEVELS = 64  # how far up a property's item is looked for

_OG_PREFIXES = ("og:", "article:", "product:", "book:", "profile:", "music:", "video:", "fb:", "al:")
# The one scan for microdata and RDFa (most pages have neither; the tag
# walk below cannot see attributes): the attribute nodes of both.
_SCOPES = lxml.etree.XPath("//@itemscope|//@typeof")
_ITEMPROPS = lxml.etree.XPath("//*[@itemprop]")
_PROPERTIES = lxml.etree.XPath("//*[@property]")
_SURROGATE = re.compile("[\ud800-\udfff]")
_BAD = re.compile(UNSAFE.pattern[:-1] + "\ud800-\udfff]")  # UNSAFE or a lone surrogate
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_WRAPPERS = re.compile(r"^\s*(?:<!--|//\s*<!\[CDATA\[|<!\[CDATA\[)|(?://\s*\]\]>|\]\]>|-->)\s*$")


class _Read:
    """One page's reading: the counters of what went wrong or was cut."""

    __slots__ = ("errors", "cut", "full")

    def __init__(self) -> None:
        self.errors = 0
        self.cut = 0
        self.full: set[int] = set()  # the lists found full (each counted once)

    def text(self, value: str, limit: int = MAX_STRING) -> str:
        if _BAD.search(value) is not None:
            value = _SURROGATE.sub("\ufffd", scrub(value))
        if len(value) > limit:
            self.cut += 1
            value = value[:limit]
        return value

    def bound(self, value: Any, depth: int = 0) -> Any:
        """``value`` (from JSON) made JSON-safe and bounded."""
        if isinstance(value, str):
            return self.text(value)
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, int):
            return value if -(2**53) <= value <= 2**53 else self.text(str(value))
        if isinstance(value, float):
            return value if math.isfinite(value) else None
        if depth >= MAX_DEPTH:
            self.cut += 1
            return None
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for i, (key, item) in enumerate(value.items()):
                if i >= MAX_PROPS:
                    self.cut += 1
                    break
                out[self.key(str(key))] = self.bound(item, depth + 1)
            return out
        if isinstance(value, list):
            if len(value) > MAX_ITEMS:
                self.cut += 1
            return [self.bound(item, depth + 1) for item in value[:MAX_ITEMS]]
        return self.text(str(value))

    def key(self, key: str) -> str:
        key = self.text(key, MAX_KEY)
        # Document stores read "$..." as operators.
        return "_" + key if key.startswith("$") else key


def read_metadata(root: Any, url: str | None = None) -> dict[str, Any]:
    """The page's metadata (see the module's docstring); ``{}`` for None."""
    if root is None:
        return {}
    read = _Read()
    try:
        return _read(root, url, read)
    except Exception:  # a bug must not cost the page: counted instead
        return {"errors": read.errors + 1}


def _read(root: Any, url: str | None, read: _Read) -> dict[str, Any]:
    opengraph: dict[str, Any] = {}
    twitter: dict[str, Any] = {}
    meta: dict[str, str] = {}
    scripts: list[str] = []
    marks: dict[str, Any] = {"title": "", "h1": [], "times": [], "rel_author": [], "byline": lambda: "",
                             "dateline": lambda: ""}
    metas = 0
    for el in root.iter("meta", "script", "title", "time", "h1", "a"):
        tag = el.tag
        if tag == "meta":
            content = el.get("content")
            key = (el.get("property") or el.get("name") or el.get("itemprop") or "").strip().lower()
            if content is None or not key or metas >= MAX_META:
                continue
            metas += 1
            content = read.text(content.strip())
            key = read.key(key)
            if key.startswith(_OG_PREFIXES):
                _put(opengraph, key, content, read)
            elif key.startswith("twitter:"):
                _put(twitter, key, content, read)
            elif content and key not in meta:
                meta[key] = content
        elif tag == "script":
            if (el.get("type") or "").strip().lower() == "application/ld+json" and el.text:
                if len(scripts) < MAX_SCRIPTS:
                    scripts.append(el.text)
                else:
                    read.cut += 1
        elif tag == "title":
            if not marks["title"] and el.text:
                marks["title"] = read.text(clean(el.text))
        elif tag == "time":
            if len(marks["times"]) < 8:
                stamp = el.get("datetime") or el.text
                if stamp:
                    marks["times"].append((read.text(stamp.strip(), 100), el.get("pubdate") is not None,
                                           (el.get("itemprop") or el.get("class") or "").lower()))
        elif tag == "h1":
            if len(marks["h1"]) < 3:
                if not marks["h1"]:
                    marks["byline"] = lambda h1=el: byline(h1, read)
                    marks["dateline"] = lambda h1=el: dateline(h1)
                marks["h1"].append(read.text(clean(short_text(el, 500))))
        elif len(marks["rel_author"]) < 5 and "author" in (el.get("rel") or "").lower().split():
            name = read.text(clean(short_text(el, 200)), 200)
            if name:
                marks["rel_author"].append(name)

    out: dict[str, Any] = {}
    jsonld = [item for text in scripts for item in _jsonld(text, read)]
    microdata: list[Any] = []
    rdfa: list[Any] = []
    found = cast(list[Any], _SCOPES(root))
    if found:
        micro = [a.getparent() for a in found if a.attrname == "itemscope"]
        typed = [a.getparent() for a in found if a.attrname == "typeof"]
        if micro:
            microdata = _microdata(root, micro, read)
        if typed:
            rdfa = _rdfa(root, typed, read)
    out.update(normalise(jsonld, microdata, rdfa, opengraph, twitter, meta, marks, read))
    for name, part in (("jsonld", jsonld), ("microdata", microdata), ("rdfa", rdfa),
                       ("opengraph", opengraph), ("twitter", twitter)):
        if part:
            out[name] = part
    _cap(out, read)
    if read.errors:
        out["errors"] = read.errors
    if read.cut:
        out["cut"] = read.cut
    return out


def _put(target: dict[str, Any], key: str, value: Any, read: _Read) -> None:
    """A property's value, a list from its second value on."""
    if key not in target:
        if len(target) >= MAX_PROPS:
            read.cut += 1
            return
        target[key] = value
        return
    old = target[key]
    if isinstance(old, list) and old and not isinstance(value, list):
        if len(old) >= MAX_ITEMS:
            if id(old) not in read.full:  # counted once a list
                read.full.add(id(old))
                read.cut += 1
        else:
            old.append(value)
    else:
        target[key] = [old, value]


def _jsonld(text: str, read: _Read) -> list[Any]:
    """The items of one JSON-LD script: its objects, "@graph"s flattened."""
    if len(text) > MAX_BLOB:
        read.errors += 1
        return []
    text = _WRAPPERS.sub("", text.strip())
    if not text.strip():
        return []
    found: list[Any] = []
    try:
        found = [json.loads(text, strict=False, parse_constant=_constant)]
    except (ValueError, RecursionError):
        decoder = json.JSONDecoder(strict=False, parse_constant=_constant)
        repaired = _TRAILING_COMMA.sub(r"\1", text)
        at, end = 0, len(repaired)
        while at < end and len(found) < MAX_ITEMS:
            while at < end and repaired[at] in " \t\r\n;,":
                at += 1
            if at >= end:
                break
            try:
                value, at = decoder.raw_decode(repaired, at)
            except (ValueError, RecursionError):
                read.errors += 1
                break
            found.append(value)
    items: list[Any] = []
    for value in found:
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict):
                continue
            graph = item.get("@graph")
            if isinstance(graph, list):
                rest = {k: v for k, v in item.items() if k not in ("@graph", "@context")}
                if "@type" in rest:
                    items.append(rest)
                items.extend(g for g in graph if isinstance(g, dict))
            else:
                items.append(item)
    if len(items) > MAX_ITEMS:
        read.cut += 1
    return [read.bound(item, 1) for item in items[:MAX_ITEMS]]


def _constant(name: str) -> None:
    return None  # NaN, Infinity: not JSON


# Microdata's and RDFa Lite's values: the attribute an element's value is
# in, by its tag (HTML's "itemprop" value rules), else its text.
_URL_ATTRS = {"a": "href", "area": "href", "link": "href", "img": "src", "audio": "src", "video": "src",
              "source": "src", "track": "src", "embed": "src", "iframe": "src", "object": "data"}


def _value(el: Any, read: _Read) -> str:
    for name in ("content", _URL_ATTRS.get(el.tag, ""), "datetime", "value", "resource"):
        if name:
            found = el.get(name)
            if found is not None:
                return read.text(found.strip())
    return read.text(clean(short_text(el)))


def _owner(el: Any, attr: str) -> Any:
    """The nearest ancestor (not ``el``) holding ``attr``, at most
    MAX_LEVELS up: the item whose property ``el`` is."""
    for n, up in enumerate(el.iterancestors()):
        if n >= MAX_LEVELS:
            break
        if up.get(attr) is not None:
            return up
    return None


def _items(scopes: list[Any], props: list[Any], scope_attr: str, prop_attr: str, type_attr: str,
           read: _Read) -> list[Any]:
    """Items of the ``scopes`` and properties ``props`` (document order):
    each top-level scope as a dict, nested scopes as values of their
    properties."""
    owned: dict[Any, list[Any]] = {}
    if len(props) > MAX_PROPERTIES:
        read.cut += 1
        props = props[:MAX_PROPERTIES]
    for el in props:
        owned.setdefault(_owner(el, scope_attr), []).append(el)
    tops = [el for el in scopes[:MAX_PROPERTIES] if el.get(prop_attr) is None]

    def item(scope: Any, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        kind = (scope.get(type_attr) or "").split()
        if kind:
            out["@type"] = read.text(kind[0]) if len(kind) == 1 else [read.text(k) for k in kind[:MAX_ITEMS]]
        ident = scope.get("itemid") or scope.get("resource") or scope.get("about")
        if ident:
            out["@id"] = read.text(ident)
        for el in owned.get(scope, ()):
            if el.get(scope_attr) is not None:
                if depth >= MAX_DEPTH:
                    read.cut += 1
                    continue
                value: Any = item(el, depth + 1)
            else:
                value = _value(el, read)
            for name in (el.get(prop_attr) or "").split()[:8]:
                _put(out, read.key(name), value, read)
        return out

    if len(tops) > MAX_ITEMS:
        read.cut += 1
    return [item(scope, 1) for scope in tops[:MAX_ITEMS]]


def _microdata(root: Any, scopes: list[Any], read: _Read) -> list[Any]:
    return _items(scopes, cast(list[Any], _ITEMPROPS(root)), "itemscope", "itemprop", "itemtype", read)


def _rdfa(root: Any, scopes: list[Any], read: _Read) -> list[Any]:
    # Properties outside any typeof (OpenGraph's meta tags) are not items.
    return _items(scopes, cast(list[Any], _PROPERTIES(root)), "typeof", "property", "typeof", read)


def _cap(out: dict[str, Any], read: _Read) -> None:
    """The whole dict within MAX_TOTAL characters of JSON: the raw parts
    dropped, largest first."""
    total = len(json.dumps(out))
    if total <= MAX_TOTAL:
        return
    sizes = {name: len(json.dumps(out[name])) for name in ("jsonld", "microdata", "rdfa", "opengraph", "twitter")
             if name in out}
    for name in sorted(sizes, key=sizes.__getitem__, reverse=True):
        if total <= MAX_TOTAL:
            break
        del out[name]
        total -= sizes[name]
        read.cut += 1
