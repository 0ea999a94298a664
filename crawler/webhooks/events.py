"""A crawl's events, kept in Redis until delivered.

Each crawl that posts events has a stream ``{CRAWL}:webhook:events`` (in the
crawl's slot of a Redis Cluster): one entry an event, its id (``ms-seq``)
its place in the crawl's order, its one field ``e`` the event as JSON (never
pickled). The deliverer (``delivery.py``) posts the first entry and deletes
it once the receiver took it, so the stream holds exactly what is still to
deliver: a worker or server killed at any point loses none (an event
posted but not yet deleted is posted again: at least once).

The events, in Firecrawl's webhook shape once delivered (``delivery.py``
adds ``id``, ``metadata`` and ``eventId``)::

    {"success": true, "type": TYPE, "data": [...], "error": null, "crawl": NAME, "at": SECONDS}

- ``crawl.started``: the crawl's first worker started it (or an API job did);
- ``crawl.page``: a page was stored; ``data``: its document (``markdown``,
  cut at ``MAX_MARKDOWN`` characters, and ``metadata``), written by the store's writer
  just after the store took the page (``crawler/store/buffer.py``);
- ``page.changed``: a page's new version changed (``data``: its change:
  ``url``, ``previousScrapeAt``, ``added``, ``removed``, ``diff``);
- ``page.gone``: a page answered 404/410 long enough, or moved (``target``);
- ``crawl.completed`` / ``crawl.failed`` (and ``crawl.cancelled`` for API
  jobs): the crawl ended; ``error`` says why it failed.

API batch scrapes say ``batch_scrape.`` where crawls say ``crawl.``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from crawler.recrawl.diff import CHANGE_KEY

__all__ = ["EventLog", "page_events", "stream_key"]

MAX_MARKDOWN = 100_000


def stream_key(crawl: str) -> str:
    return f"{{{crawl}}}:webhook:events"


def _iso(t: Any) -> str | None:
    import datetime

    return datetime.datetime.fromtimestamp(float(t), datetime.timezone.utc).isoformat() if t else None


def page_events(pages: list[dict[str, Any]], prefix: str = "crawl") -> list[dict[str, Any]]:
    """The events of a batch the store has just taken (merged pages)."""
    out = []
    for page in pages:
        if "url" not in page:
            continue
        change = page.get(CHANGE_KEY)
        status = int(page.get("status") or 0)
        if page.get("state") == "C" and 200 <= status < 300:
            described = {"url": page["url"], "sourceURL": page["url"], "title": page.get("title") or "",
                    "statusCode": status, "pageType": page.get("page_type"), "kind": page.get("kind"),
                    "language": page.get("lang"), "fetchedAt": _iso(page.get("fetched_at"))}
            markdown = page.get("markdown") or page.get("text") or ""
            out.append({"type": f"{prefix}.page", "data": [{"markdown": markdown[:MAX_MARKDOWN], "metadata": described}]})
        if change and change.get("kind") == "changed":
            out.append({"type": "page.changed", "data": [{
                "url": change["url"], "changeStatus": "changed", "previousScrapeAt": _iso(change.get("previous_at")),
                "added": change.get("added"), "removed": change.get("removed"), "diff": change.get("diff"),
                "cut": change.get("cut")}]})
        elif change and change.get("kind") in ("gone", "moved"):
            out.append({"type": "page.gone", "data": [{"url": change["url"], "changeStatus": "removed",
                                                       "statusCode": status, "target": change.get("target")}]})
    return out


class EventLog:
    """Adds a crawl's events to its stream."""

    def __init__(self, client: Any, crawl: str) -> None:
        self.client = client
        self.crawl = crawl
        self.key = stream_key(crawl)

    def add(self, events: list[dict[str, Any]]) -> list[str]:
        if not events:
            return []
        now = time.time()
        pipe = self.client.pipeline(transaction=False)
        for event in events:
            body = {"success": event.get("type", "").split(".")[-1] != "failed", "type": event["type"],
                    "data": event.get("data") or [], "error": event.get("error"), "crawl": self.crawl, "at": now}
            pipe.xadd(self.key, {"e": json.dumps(body, ensure_ascii=False, separators=(",", ":"))})
        return [i.decode() if isinstance(i, bytes) else str(i) for i in pipe.execute()]

    def once(self, flag: str, event: dict[str, Any], ttl_ms: int | None = None) -> bool:
        """Add ``event`` unless ``flag`` was set before (within ``ttl_ms``):
        the first of the crawl's workers to start it says it started."""
        if self.client.set(f"{{{self.crawl}}}:webhook:{flag}", "1", nx=True, px=ttl_ms):
            self.add([event])
            return True
        return False

    def pending(self) -> int:
        return int(self.client.xlen(self.key))
