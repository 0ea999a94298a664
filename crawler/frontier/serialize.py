"""Requests as JSON, never pickle: whoever can write to Redis must not be
able to run code on the workers. Callbacks travel by name and are looked up
as methods of the spider, nothing else.

The encoding is compact (a queued request costs Redis memory): only fields
that differ from a plain GET are written.
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request

if TYPE_CHECKING:
    from scrapy import Spider

logger = logging.getLogger(__name__)

__all__ = ["SerializationError", "request_from_json", "request_to_json"]

# meta keys that describe one download attempt, not the request.
_TRANSIENT_META = frozenset({
    "download_slot", "download_latency", "download_timeout", "_scheduler_slot",
    "frontier_lease", "frontier_site", "frontier_entry", "handle_httpstatus_list",
})


class SerializationError(ValueError):
    pass


def _callback_name(spider: Spider, fn: Any) -> str | None:
    if fn is None:
        return None
    name = getattr(fn, "frontier_name", None) or getattr(fn, "__name__", None)
    if not name or getattr(spider, name, None) is None:
        raise SerializationError(f"callback {fn!r} is not a method of spider {spider.name!r}")
    return str(name)


def request_to_dict(request: Request, spider: Spider) -> dict[str, Any]:
    d: dict[str, Any] = {"u": request.url}
    cb = _callback_name(spider, request.callback)
    if cb is not None and cb != "parse":
        d["c"] = cb
    eb = _callback_name(spider, request.errback)
    if eb is not None:
        d["e"] = eb
    if request.method != "GET":
        d["x"] = request.method
    if request.body:
        d["b"] = base64.b64encode(request.body).decode("ascii")
    headers = {k.decode("latin-1"): [v.decode("latin-1") for v in vs]
               for k, vs in request.headers.items()}
    if headers:
        d["h"] = headers
    if request.priority:
        d["p"] = request.priority
    if request.cb_kwargs:
        d["k"] = request.cb_kwargs
    meta = {}
    for key, value in request.meta.items():
        if key in _TRANSIENT_META:
            continue
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            logger.debug("Not storing meta key %(key)r of %(request)s: not JSON-serializable",
                         {"key": key, "request": request})
            continue
        meta[key] = value
    if meta:
        d["m"] = meta
    if request.dont_filter:
        d["f"] = 1
    return d


def request_to_json(request: Request, spider: Spider) -> str:
    return json.dumps(request_to_dict(request, spider), separators=(",", ":"), ensure_ascii=False)


def _method(spider: Spider, name: str | None) -> Any:
    """The spider's bound method ``name``: nothing else can be named."""
    if name is None:
        return None
    fn = getattr(spider, name, None) if isinstance(name, str) and not name.startswith("__") else None
    if not inspect.ismethod(fn) or fn.__self__ is not spider:
        raise SerializationError(f"spider {spider.name!r} has no method {name!r}")
    return fn


def request_from_dict(d: dict[str, Any], spider: Spider) -> Request:
    if not isinstance(d, dict) or not isinstance(d.get("u"), str):
        raise SerializationError(f"not a request: {d!r}"[:200])
    return Request(
        d["u"],
        callback=_method(spider, d.get("c")),
        errback=_method(spider, d.get("e")),
        method=d.get("x", "GET"),
        body=base64.b64decode(d["b"]) if "b" in d else None,
        headers=d.get("h"),
        priority=int(d.get("p", 0)),
        cb_kwargs=d.get("k"),
        meta=d.get("m"),
        dont_filter=bool(d.get("f")),
    )


def request_from_json(data: str | bytes, spider: Spider) -> Request:
    try:
        d = json.loads(data)
    except ValueError as exc:
        raise SerializationError(f"bad JSON in frontier entry: {exc}") from exc
    return request_from_dict(d, spider)
