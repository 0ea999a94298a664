"""Redirects and meta refreshes: where a page sends its reader, and whether
to go. Pure logic, no Scrapy, no Redis.

A 3xx answer and a ``<meta http-equiv="refresh">`` are followed the same
way, through the frontier (``crawler/spiders/site.py``): the source is
stored with its status and the target as its one link, and the target is
queued as a new URL at the source's depth, carrying the chain so far in
``request.meta``:

- ``redirect_times``: hops so far;
- ``redirect_urls``: the URLs of the chain (the last ``REDIRECT_MAX_TIMES``).

A target already in the chain is a loop, and more than ``REDIRECT_MAX_TIMES``
hops is the limit: both make the source an error record (``hop``). A
missing or unparsable ``Location`` makes the source an error record too
(``location_target``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from crawler.requestmeta import REDIRECT_TIMES, REDIRECT_URLS
from crawler.scope.urls import InvalidURL, normalize

__all__ = ["REDIRECT_STATUSES", "Hop", "hop", "location_target", "meta_refresh"]

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

# Scrapy's METAREFRESH_MAXDELAY: a refresh further off than this is a page
# that reloads itself now and then, not a redirect.
MAX_REFRESH_DELAY = 100


def meta_refresh(text: str, url: str) -> str | None:
    """The target of a ``<meta http-equiv="refresh">`` in the page's head
    that sends the reader elsewhere within ``MAX_REFRESH_DELAY`` seconds,
    normalised; None for none, a bad one, or a page that only reloads
    itself."""
    head = text[:8192]
    if "refresh" not in head.lower():
        return None
    from w3lib.html import get_meta_refresh

    try:
        interval, target = get_meta_refresh(head, url)
        target = normalize(target, url) if target and interval is not None and interval <= MAX_REFRESH_DELAY \
            else None
    except (InvalidURL, ValueError):
        return None
    return target if target != url else None


def location_target(location: str | None, url: str) -> str | None:
    """A 3xx's ``Location`` (relative to ``url``), normalised; None when it
    is missing or not a URL the crawler can fetch."""
    if not location:
        return None
    try:
        return normalize(location, url)
    except InvalidURL:
        return None


@dataclass(slots=True)
class Hop:
    """What one redirect hop is: ``error`` (a loop, the hop limit: the
    source becomes an error record, ``stat`` says which), or the target's
    ``meta`` for its request."""

    error: str | None = None
    stat: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def hop(source: str, target: str, meta: Mapping[str, Any], max_redirects: int) -> Hop:
    """The hop from ``source`` (whose request carried ``meta``) to
    ``target``: its chain checked for a loop and against ``max_redirects``
    (``REDIRECT_MAX_TIMES``); the target's chain if it may go."""
    chain: Sequence[str] = [u for u in meta.get(REDIRECT_URLS, ()) if isinstance(u, str)]
    raw = meta.get(REDIRECT_TIMES, 0)
    hops = raw if type(raw) is int and raw >= 0 else 0
    if target == source or target in chain:
        return Hop(error="redirect loop: " + " -> ".join([*chain, source, target])[:500], stat="redirect/loop")
    if hops >= max_redirects:
        return Hop(error=f"too many redirects: {hops + 1} hops (REDIRECT_MAX_TIMES = {max_redirects})",
                   stat="redirect/limit")
    return Hop(meta={REDIRECT_TIMES: hops + 1, REDIRECT_URLS: [*chain, source][-max_redirects:]})
