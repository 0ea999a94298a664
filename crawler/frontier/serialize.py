"""Requests as JSON, never pickle, and never trusted.

Whoever can write to Redis must not be able to run code on the workers, nor
steer what they fetch beyond naming a URL. An entry read back from the
frontier is therefore checked field by field, and refused whole
(``SerializationError``, with the reason) when any field is not what the
crawler itself writes:

- ``u``: an absolute ``http``/``https`` URL, no whitespace or control
  characters, at most ``MAX_URL_CHARS``;
- ``u``: in the crawler's normal form (``crawler.scope.urls.normalize``);
- ``c``/``e``: callback and errback by name, only names the spider declares
  in ``frontier_callbacks`` and ``frontier_errbacks`` (``spiderface.py``;
  an entry without ``e``: ``errback`` when the spider declares it, else none;
  ``""``: none), never any other attribute;
- ``x``: ``GET`` or ``HEAD``; no body;
- ``h``: only the headers in ``ALLOWED_HEADERS`` (validators and Referer);
- ``m``: only the meta keys in ``META_KEYS`` (the registry's ``ENTRY_KINDS``,
  ``crawler/requestmeta.py``), each of its kind and size.
  Keys that would lift a limit or skip a guard (``download_maxsize``,
  ``proxy``, ``dont_obey_robotstxt``, ``dont_trap_guard``, ...) are refused;
- ``p``: a bounded integer priority; ``f``: dont_filter flag;
- ``r``: the referring page (becomes meta ``referer_url`` and the
  ``Referer`` header): ".<name>" in the URL's directory, "/<path>" on its
  origin, else the whole URL.

The encoding is compact (a queued request costs Redis memory): only fields
that differ from a plain GET are written, only the meta keys above, and the
referring page once (not as header and meta both), as a path on the same
origin.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request

from crawler.requestmeta import ENTRY_KINDS, REFERER_URL
from crawler.scope.urls import InvalidURL, normalize

if TYPE_CHECKING:
    from crawler.frontier.spiderface import EntrySpider

logger = logging.getLogger(__name__)

__all__ = ["META_KEYS", "SerializationError", "request_from_json", "request_to_json"]

MAX_ENTRY_BYTES = 64 * 1024
MAX_URL_CHARS = 8192
MAX_STR_CHARS = 8192
MAX_LIST_ITEMS = 64
MAX_INT = 10**9
ALLOWED_METHODS = frozenset({"GET", "HEAD"})
# Headers the crawler itself sets on a queued request (the referring page,
# and validators for a conditional GET). Everything else is added at download
# time by the worker's own settings.
ALLOWED_HEADERS = frozenset({"referer", "if-none-match", "if-modified-since"})

# meta keys the crawler itself sets and keeps across workers, by kind of
# value ("int", "time", "str", "strs"): the registry's (crawler/requestmeta.py).
META_KEYS: dict[str, str] = ENTRY_KINDS


class SerializationError(ValueError):
    """A request that cannot be written to, or was refused from, the frontier."""


def _valid(kind: str, value: Any) -> bool:
    if kind == "int":
        return type(value) is int and 0 <= value <= MAX_INT
    if kind == "time":  # unix seconds, as an integer, up to 2106
        return type(value) is int and 0 <= value < 1 << 32
    if kind == "str":
        return isinstance(value, str) and len(value) <= MAX_STR_CHARS
    return (isinstance(value, list) and len(value) <= MAX_LIST_ITEMS
            and all(isinstance(v, str) and len(v) <= MAX_URL_CHARS for v in value))


def callbacks_of(spider: EntrySpider, kind: str = "callbacks") -> frozenset[str]:
    """The callback (``kind`` "callbacks") or errback ("errbacks") names a
    frontier entry may name for this spider: its ``frontier_callbacks`` or
    ``frontier_errbacks`` (``crawler/frontier/spiderface.py``)."""
    return frozenset(spider.frontier_callbacks if kind == "callbacks" else spider.frontier_errbacks)


def _method_for(spider: EntrySpider, callback: Any) -> str:
    """HEAD for a callback in the spider's ``frontier_head_callbacks`` (the
    re-crawl's cheap check), GET for every other."""
    return "HEAD" if isinstance(callback, str) and callback in spider.frontier_head_callbacks else "GET"


def _default_errback(spider: EntrySpider) -> str | None:
    """The errback an entry without ``e`` names: ``errback`` when the spider
    declares one (14 bytes less a queued request), else none."""
    return "errback" if "errback" in callbacks_of(spider, "errbacks") else None


def _callback_name(spider: EntrySpider, fn: Any, kind: str) -> str | None:
    if fn is None:
        return None
    name = getattr(fn, "frontier_name", None) or getattr(fn, "__name__", None)
    if not name or name not in callbacks_of(spider, kind) or getattr(spider, name, None) is None:
        raise SerializationError(f"{kind[:-1]} {fn!r} is not one of spider {spider.name!r}'s frontier_{kind}")
    return str(name)


def request_to_dict(request: Request, spider: EntrySpider) -> dict[str, Any]:
    if request.method not in ALLOWED_METHODS:
        raise SerializationError(f"method {request.method} cannot be queued (only GET and HEAD)")
    if request.method != _method_for(spider, _callback_name(spider, request.callback, "callbacks")):
        raise SerializationError(f"method {request.method} does not go with callback {request.callback!r}: "
                                 "HEAD is sent for the spider's frontier_head_callbacks, GET for the others")
    if request.body or request.cb_kwargs:
        raise SerializationError("a request with a body or callback arguments cannot be queued")
    d: dict[str, Any] = {"u": request.url}
    cb = _callback_name(spider, request.callback, "callbacks")
    if cb is not None and cb != "parse":
        d["c"] = cb
    eb = _callback_name(spider, request.errback, "errbacks")
    if eb != _default_errback(spider):
        d["e"] = eb or ""  # "": none, where the spider's default is "errback"
    if request.method != "GET":
        d["x"] = request.method
    referer = request.meta.get(REFERER_URL)
    headers = {k.decode("latin-1"): [v.decode("latin-1") for v in vs]
               for k, vs in request.headers.items() if k.decode("latin-1").lower() in ALLOWED_HEADERS}
    if isinstance(referer, str) and referer and headers.get("Referer") in (None, [referer]):
        headers.pop("Referer", None)
        d["r"] = _compact_referer(referer, request.url)
    else:
        referer = None
    if headers:
        d["h"] = headers
    if request.priority:
        d["p"] = request.priority
    # Only the crawler's own keys travel; per-attempt keys (download_slot,
    # download_latency, the lease) and other components' keys stay behind.
    meta = {k: v for k, v in request.meta.items()
            if k in META_KEYS and _valid(META_KEYS[k], v) and not (k == REFERER_URL and referer)}
    if meta:
        d["m"] = meta
    if request.dont_filter:
        d["f"] = 1
    return d


def request_to_json(request: Request, spider: EntrySpider) -> str:
    return json.dumps(request_to_dict(request, spider), separators=(",", ":"), ensure_ascii=False)


def _method(spider: EntrySpider, name: Any, kind: str) -> Any:
    """The spider's bound method ``name``, if the spider declared it as one
    of its ``frontier_<kind>``."""
    if name is None:
        return None
    if not isinstance(name, str) or name not in callbacks_of(spider, kind):
        raise SerializationError(f"{kind[:-1]} {str(name)[:80]!r} is not one of spider "
                                 f"{spider.name!r}'s frontier_{kind}")
    fn = getattr(spider, name, None)
    if fn is None or getattr(fn, "__self__", None) is not spider:
        raise SerializationError(f"spider {spider.name!r} has no method {name!r}")
    return fn


def _url(value: Any) -> str:
    """The entry's URL, if it is one the crawler itself would have queued:
    an http(s) URL already in the crawler's normal form (so it is fetched,
    stored and retried under exactly this string)."""
    if not isinstance(value, str):
        raise SerializationError("no URL ('u' must be a string)")
    if len(value) > MAX_URL_CHARS:
        raise SerializationError(f"URL longer than {MAX_URL_CHARS} characters")
    scheme, sep, _ = value.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise SerializationError(f"URL {value[:200]!r} is not an absolute http(s) URL")
    if any(c <= " " or c == "\x7f" for c in value):
        raise SerializationError(f"URL {value[:200]!r} holds whitespace or control characters")
    try:
        normal = normalize(value)
    except InvalidURL as exc:
        raise SerializationError(str(exc)[:300]) from None
    if normal != value:
        raise SerializationError(f"URL {value[:200]!r} is not in normal form ({normal[:200]!r})")
    return value


def _headers(value: Any) -> dict[str, list[str]] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SerializationError("'h' must be an object of header lists")
    out: dict[str, list[str]] = {}
    for name, values in value.items():
        if name.lower() not in ALLOWED_HEADERS:
            raise SerializationError(f"header {name[:80]!r} may not come from the frontier")
        if not _valid("strs", values) or any("\r" in v or "\n" in v for v in values):
            raise SerializationError(f"bad values for header {name!r}")
        out[name] = values
    return out


def _meta(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SerializationError("'m' must be an object")
    for key, v in value.items():
        kind = META_KEYS.get(key)
        if kind is None:
            raise SerializationError(f"meta key {key[:80]!r} may not come from the frontier")
        if not _valid(kind, v):
            raise SerializationError(f"bad value for meta key {key!r}: {str(v)[:80]!r}")
    return dict(value)


_FIELDS = frozenset("ucexmkpfhbr")


def _origin(url: str) -> str:
    """scheme://host[:port] of a URL in normal form."""
    scheme, _, rest = url.partition("://")
    return scheme + "://" + rest.split("/", 1)[0].split("?", 1)[0]


def _compact_referer(referer: str, url: str) -> str:
    """The referring page as few characters as it takes: ".<rest>" in the
    URL's own directory, "/<path>" on its origin, else whole."""
    origin = _origin(url)
    base = url[:url.rfind("/") + 1]
    if len(base) > len(origin) + 1 and referer.startswith(base):
        return "." + referer[len(base):]
    if referer.startswith(origin + "/"):
        return referer[len(origin):]
    return referer


def _referer(value: Any, url: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_URL_CHARS \
            or any(c < " " or c == "\x7f" for c in value):
        raise SerializationError("bad referring page ('r')")
    if value.startswith("."):
        return url[:url.rfind("/") + 1] + value[1:]
    return _origin(url) + value if value.startswith("/") else value


def request_from_dict(d: Any, spider: EntrySpider) -> Request:
    if not isinstance(d, dict):
        raise SerializationError(f"not a request object: {str(d)[:100]!r}")
    unknown = set(d) - _FIELDS
    if unknown:
        raise SerializationError(f"unknown field(s) {', '.join(sorted(map(str, unknown)))[:100]}")
    url = _url(d.get("u"))
    # The method follows from the callback (HEAD for the spider's
    # frontier_head_callbacks, GET otherwise): an entry cannot choose it.
    method = _method_for(spider, d.get("c"))
    if d.get("x", "GET") != method:
        raise SerializationError(f"method {str(d.get('x', 'GET'))[:20]!r} does not go with callback "
                                 f"{str(d.get('c', 'parse'))[:40]!r} (only {method})")
    if "b" in d or "k" in d:
        raise SerializationError("a request body or callback arguments may not come from the frontier")
    if d.get("f", 1) != 1:
        raise SerializationError(f"bad dont_filter flag {str(d.get('f'))[:20]!r} (only 1)")
    priority = d.get("p", 0)
    if type(priority) is not int or abs(priority) > MAX_INT:
        raise SerializationError(f"bad priority {str(priority)[:20]!r}")
    referer = _referer(d.get("r"), url)
    headers = _headers(d.get("h"))
    meta = _meta(d.get("m"))
    if referer is not None:
        meta = {**(meta or {}), REFERER_URL: referer}
        headers = {"Referer": [referer], **(headers or {})}
    try:
        return Request(
            url,
            callback=_method(spider, d.get("c"), "callbacks"),
            errback=_method(spider, d.get("e", _default_errback(spider)) or None, "errbacks"),
            method=method,
            headers=headers,
            priority=priority,
            meta=meta,
            dont_filter=bool(d.get("f")),
        )
    except SerializationError:
        raise
    except Exception as exc:  # Request's own checks: the entry is refused, not the worker
        raise SerializationError(f"bad request: {type(exc).__name__}: {exc}"[:300]) from None


def request_from_json(data: str | bytes, spider: EntrySpider) -> Request:
    """The request an entry describes, or ``SerializationError`` saying why
    the entry is refused. Never raises anything else."""
    if len(data) > MAX_ENTRY_BYTES:
        raise SerializationError(f"entry of {len(data)} bytes (at most {MAX_ENTRY_BYTES})")
    try:
        if isinstance(data, str):
            data = data.encode("utf-8")  # lone surrogates: undecodable bytes in Redis
        d = json.loads(data)
    except UnicodeError:
        raise SerializationError("entry is not UTF-8") from None
    except (ValueError, RecursionError) as exc:
        raise SerializationError(f"bad JSON in frontier entry: {str(exc)[:100]}") from None
    return request_from_dict(d, spider)
