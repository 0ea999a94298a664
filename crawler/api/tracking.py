"""Firecrawl's ``changeTracking`` format from the store's changes
(``crawler/recrawl/diff.py``).

A job that asks for it is *tracked*: its crawl is kept from one job to the
next under a name made of the key, the kind of job, the URL and the
format's ``tag`` (``jobs.tracked_name``). The first job crawls (every page
``new``); each later one re-crawls every stored page of it (``scrapy crawl
recrawl -a all=1``: conditional requests, new links followed), and each
document says what this job found against the version before::

    "changeTracking": {"previousScrapeAt": ISO 8601 or null,
                       "changeStatus": "new" | "same" | "changed" | "removed",
                       "visibility": "visible",
                       "diff": {"text": "<unified diff of the Markdown>"}}   # mode git-diff, changed pages

``removed``: the page answered 404 or 410 (``RECRAWL_GONE_AFTER`` is 1 for
these crawls) or moved away; its document has no Markdown.
"""

from __future__ import annotations

import datetime
from typing import Any

from crawler.recrawl.merge import visits

__all__ = ["change_tracking", "changes_by_url"]


def _iso(t: float | None) -> str | None:
    return datetime.datetime.fromtimestamp(float(t), datetime.timezone.utc).isoformat() if t else None


def changes_by_url(store: Any, since: float) -> dict[str, dict[str, Any]]:
    """The latest change of each page since ``since``."""
    return {c["url"]: c for c in store.changes(since)}


def change_tracking(page: dict[str, Any], found: dict[str, Any] | None, diff: bool) -> dict[str, Any]:
    kind = found["kind"] if found else None
    status = {"new": "new", "changed": "changed", "gone": "removed", "moved": "removed"}.get(kind or "", "same")
    previous = found.get("previous_at") if found else None
    if found is None:  # unchanged: the visit before this one
        seen = visits(page.get("history"))
        previous = seen[-2].at if len(seen) > 1 else None
    out: dict[str, Any] = {"previousScrapeAt": _iso(previous), "changeStatus": status, "visibility": "visible"}
    if diff and status == "changed" and found is not None:
        out["diff"] = {"text": found.get("diff") or ""}
    return out
