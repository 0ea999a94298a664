"""A stored page as a Firecrawl document (v2's ``Document``).

- ``markdown``: the page's main content as Markdown (its stored
  ``markdown``; its text where there is none: a PDF, a crawl without
  ``MAIN_CONTENT``);
- ``html``, ``rawHtml``: the page's HTML without and with its scripts and
  styles (``crawler/api/steps.py`` stored them for jobs that asked);
- ``links``: the page's out-links, absolute and normalised;
- ``summary``: this crawler's own, not a language model's: the page's
  kind and type, then its abstract (its first sentences);
- ``metadata``: always: ``title``, ``description``, ``language``,
  ``sourceURL`` (the URL asked), ``url`` (the page's, after redirects),
  ``statusCode``, ``contentType``, ``scrapeId``, ``author``,
  ``publishedTime``, ``modifiedTime``, ``ogTitle``, ``ogDescription``,
  ``ogImage``, ``ogSiteName``, ``ogUrl``, ``ogLocale``, ``canonical``, and the
  crawler's ``pageType`` (``index`` or ``info``), ``kind`` (``article``,
  ``forum``, ``product``, ``collection``, ``listing``, ``documentation``,
  ``service``), ``fetchedAt`` (ISO 8601) and ``error`` (a page that could
  not be had).
"""

from __future__ import annotations

import datetime
from typing import Any

__all__ = ["document", "metadata", "summary"]

_OG = {"og:title": "ogTitle", "og:description": "ogDescription", "og:image": "ogImage",
       "og:site_name": "ogSiteName", "og:url": "ogUrl", "og:locale": "ogLocale"}


def _first(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value


def metadata(page: dict[str, Any], job_id: str, source: str | None = None) -> dict[str, Any]:
    described: dict[str, Any] = page["metadata"] if isinstance(page.get("metadata"), dict) else {}
    out: dict[str, Any] = {
        "title": page.get("title") or described.get("title") or "",
        "sourceURL": source or page["url"],
        "url": page["url"],
        "statusCode": int(page.get("status") or 0),
        "scrapeId": job_id,
    }
    for ours, theirs in (("description", "description"), ("lang", "language"), ("content_type", "contentType"),
                         ("canonical", "canonical"), ("page_type", "pageType"), ("kind", "kind"),
                         ("error", "error")):
        value = page.get(ours) if ours in page and page.get(ours) is not None else described.get(ours)
        if value not in (None, ""):
            out[theirs] = value
    for ours, theirs in (("author", "author"), ("published", "publishedTime"), ("modified", "modifiedTime")):
        if described.get(ours):
            out[theirs] = described[ours]
    og: dict[str, Any] = described["opengraph"] if isinstance(described.get("opengraph"), dict) else {}
    for ours, theirs in _OG.items():
        value = _first(og.get(ours))
        if isinstance(value, str) and value:
            out[theirs] = value
    if page.get("fetched_at"):
        out["fetchedAt"] = datetime.datetime.fromtimestamp(float(page["fetched_at"]), datetime.timezone.utc).isoformat()
    return out


def summary(page: dict[str, Any]) -> str:
    kind = page.get("kind")
    typed = {"index": "index page", "info": "information page"}.get(str(page.get("page_type")), "page")
    abstract = (page.get("abstract") or "").strip()
    head = f"{kind} ({typed})" if kind and kind != "other" else typed
    return f"{head}: {abstract}" if abstract else head


def document(page: dict[str, Any], formats: list[str], job_id: str, links: list[str] | None = None,
             source: str | None = None) -> dict[str, Any]:
    extra: dict[str, Any] = page["extra"] if isinstance(page.get("extra"), dict) else {}
    doc: dict[str, Any] = {}
    if "markdown" in formats:
        doc["markdown"] = page.get("markdown") or page.get("text") or ""
    if "html" in formats:
        doc["html"] = extra.get("html") or ""
    if "rawHtml" in formats:
        doc["rawHtml"] = extra.get("rawHtml") or ""
    if "links" in formats:
        doc["links"] = links or []
    if "summary" in formats:
        doc["summary"] = summary(page)
    # changeTracking: crawler/api/tracking.py, which knows the job's changes
    doc["metadata"] = metadata(page, job_id, source)
    return doc
