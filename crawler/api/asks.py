"""What a request to the API asks, read from Firecrawl's request bodies
(v2, as the ``firecrawl-py`` SDK 4.x sends them) into what a crawl of this
crawler does. Pure logic, no Redis, no HTTP.

A field is one of three things here:

- *honoured*: it changes the job (below);
- *accepted*: the SDK sends it with a default this crawler keeps anyway
  (``onlyMainContent: true``, ``mobile: false``, ``blockAds``, ``maxAge``,
  ``storeInCache``, ``origin``, ...), or it asks what this crawler always
  does; nothing said;
- *not done*: it asks for something this crawler does not do; a field that
  would change what comes back (``actions``, a ``json`` or ``screenshot``
  format, ``location``) is refused with 400 naming it; any other is named in
  the job's ``warning`` and the job goes on without it.

Honoured, scrape: ``formats`` (``markdown``, ``html``, ``rawHtml``,
``links``, ``summary``, ``changeTracking`` with mode ``git-diff`` and a
``tag``; ``metadata`` is always there; strings or ``{"type": ...}``),
``timeout`` (ms). Crawl: ``url``, ``limit``,
``maxDiscoveryDepth``, ``includePaths``/``excludePaths`` (regular expressions
searched in the URL's path, or the whole URL with ``regexOnFullURL``),
``crawlEntireDomain`` (the host), ``allowSubdomains`` (the registrable
domain), ``allowExternalLinks`` (any site; the network guard still holds),
``sitemap`` (``include``, ``skip``; ``only`` reads the sitemaps and follows no
link), ``delay`` (seconds; never below the server's ``DOWNLOAD_DELAY``),
``maxConcurrency`` (never above the server's), ``scrapeOptions``,
``webhook``. Map: ``url``, ``search``, ``limit``, ``sitemap``,
``includeSubdomains``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crawler.scope.urls import normalize

__all__ = ["BadAsk", "CrawlAsk", "MapAsk", "ScrapeAsk", "read_batch", "read_crawl", "read_map", "read_scrape", "read_url"]

FORMATS = ("markdown", "html", "rawHtml", "links", "metadata", "summary", "changeTracking")
# Formats Firecrawl has that this crawler does not make: asked, the request is refused.
REFUSED_FORMATS = ("json", "screenshot", "screenshot@fullPage", "branding", "images", "audio", "video",
                   "attributes", "query", "highlights", "product", "menu", "pages", "blocks")
# Scrape fields that change what comes back and are not done: refused.
REFUSED = ("actions", "location", "jsonOptions", "extract")
# Sent by the SDK with the defaults it fills in, or asking what is done anyway.
ACCEPTED = {"onlyMainContent": True, "mobile": False, "removeBase64Images": None, "fastMode": None,
            "blockAds": None, "maxAge": None, "minAge": None, "storeInCache": None, "origin": None,
            "integration": None, "skipTlsVerification": None, "zeroDataRetention": False, "proxy": None,
            "parsers": None, "waitFor": None, "ignoreRobotsTxt": False, "robotsUserAgent": None,
            "ignoreQueryParameters": None, "deduplicateSimilarURLs": None, "auditMetadata": None,
            "threatProtection": None, "redactPII": None, "checkPromptInjection": None, "useMock": None,
            "timeout": None}
MAX_LIMIT_PATTERNS = 200
V1_CRAWL = {"maxDepth": "maxDiscoveryDepth", "ignoreSitemap": "sitemap", "allowBackwardLinks": "crawlEntireDomain"}


class BadAsk(ValueError):
    """A request this API refuses (400), with what is wrong in one line."""


@dataclass
class ScrapeAsk:
    formats: list[str]
    timeout: float | None = None  # seconds
    track: str | None = None  # changeTracking asked: its tag ("" none); None: not asked
    track_diff: bool = False  # its git-diff mode
    warnings: list[str] = field(default_factory=list)


@dataclass
class CrawlAsk:
    url: str
    limit: int
    scrape: ScrapeAsk
    depth: int | None = None
    scope: str = "prefix"
    allow: list[str] = field(default_factory=list)
    deny: list[str] = field(default_factory=list)
    sitemaps: bool = True
    links: bool = True  # False: sitemap "only", no link followed
    delay: float | None = None
    concurrency: int | None = None
    webhook: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class MapAsk:
    url: str
    limit: int
    search: str | None = None
    sitemaps: bool = True
    links: bool = True
    scope: str = "host"


def read_url(value: Any, what: str = "url") -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadAsk(f"{what}: a URL is required")
    raw = value.strip()
    if "://" not in raw:
        raw = "http://" + raw  # Firecrawl takes "example.com" too
    elif not raw.lower().startswith(("http://", "https://")):
        raise BadAsk(f"{what}: only http and https URLs, not {raw[:100]!r}")
    try:
        return normalize(raw)
    except ValueError as exc:
        raise BadAsk(f"{what}: {exc}") from None


def _int(body: dict[str, Any], name: str, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadAsk(f"{name}: an integer from {low} to {high}, not {value!r}")
    return value


def _bool(body: dict[str, Any], name: str) -> bool | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise BadAsk(f"{name}: true or false, not {value!r}")
    return value


def _formats(value: Any) -> tuple[list[str], str | None, bool]:
    """The formats asked, the change-tracking tag when changeTracking is
    one of them (``""``: no tag), and whether its git-diff mode is asked."""
    if value is None:
        return ["markdown"], None, False
    if not isinstance(value, list):
        raise BadAsk("formats: a list")
    out: list[str] = []
    tag = None
    diff = False
    for entry in value:
        name = entry.get("type") if isinstance(entry, dict) else entry
        if not isinstance(name, str):
            raise BadAsk(f"formats: {entry!r} is no format")
        if name == "changeTracking":
            options = entry if isinstance(entry, dict) else {}
            modes = options.get("modes") or []
            if not isinstance(modes, list) or set(modes) - {"git-diff"}:
                raise BadAsk("formats: changeTracking's modes: only git-diff is made here (json needs a model)")
            given = options.get("tag")
            if given is not None and (not isinstance(given, str) or len(given) > 200):
                raise BadAsk("formats: changeTracking's tag: a string of at most 200 characters")
            tag = given or ""
            diff = diff or "git-diff" in modes
            if "changeTracking" not in out:
                out.append("changeTracking")
            continue
        if name in REFUSED_FORMATS:
            raise BadAsk(f"formats: {name!r} is not made by this crawler (it makes {', '.join(FORMATS)})")
        if name not in FORMATS:
            raise BadAsk(f"formats: unknown format {name!r} (this crawler makes {', '.join(FORMATS)})")
        if name not in out:
            out.append(name)
    return out, tag, diff


def _unused(body: dict[str, Any], honoured: set[str], where: str = "") -> list[str]:
    """Refuse what would change the answer; name what else is left undone."""
    notes = []
    for name, value in body.items():
        if name in honoured:
            continue
        if name in REFUSED and value not in (None, [], {}):
            raise BadAsk(f"{where}{name}: not done by this crawler")
        if name in ACCEPTED:
            wanted = ACCEPTED[name]
            if wanted is None or value == wanted or value is None:
                continue
        if value in (None, [], {}, False):
            continue
        notes.append(f"{where}{name}")
    return notes


def read_scrape(body: Any, where: str = "") -> ScrapeAsk:
    if not isinstance(body, dict):
        raise BadAsk(f"{where or 'the body'}: a JSON object")
    formats, track, diff = _formats(body.get("formats"))
    if track is not None and "markdown" not in formats:
        raise BadAsk("formats: changeTracking needs markdown too (what is compared)")
    ask = ScrapeAsk(formats, track=track, track_diff=diff)
    timeout = _int(body, "timeout", 1000, 600_000)
    ask.timeout = timeout / 1000 if timeout is not None else None
    left = _unused(body, {"url", "formats", "timeout", "onlyMainContent"}, where)
    if body.get("onlyMainContent") is False:
        left.append(f"{where}onlyMainContent=false (the Markdown is the page's main content)")
    if left:
        ask.warnings.append("not done by this crawler, ignored: " + ", ".join(left))
    return ask


def _patterns(body: dict[str, Any], name: str, full: bool) -> list[str]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
        raise BadAsk(f"{name}: a list of regular expressions")
    if len(value) > MAX_LIMIT_PATTERNS:
        raise BadAsk(f"{name}: at most {MAX_LIMIT_PATTERNS} patterns")
    if full:
        return list(value)
    # Firecrawl tests a pattern on the URL's path: here the path is the URL after its host.
    host = r"^[a-z][a-z0-9+.-]*://[^/?#]*"
    return [host + p[1:] if p.startswith("^") else f"{host}[^?#]*?(?:{p})" for p in value]


def read_crawl(body: Any, max_limit: int) -> CrawlAsk:
    if not isinstance(body, dict):
        raise BadAsk("the body: a JSON object")
    body = dict(body)
    for old, new in V1_CRAWL.items():  # v1's names of the same things
        if old in body and new not in body:
            body[new] = body.pop(old) if old != "ignoreSitemap" else ("skip" if body.pop(old) else "include")
        body.pop(old, None)
    scrape_body = body.get("scrapeOptions") or {}
    scrape = read_scrape(scrape_body, "scrapeOptions.")
    limit = _int(body, "limit", 1, max_limit)
    ask = CrawlAsk(read_url(body.get("url")), limit if limit is not None else max_limit, scrape)
    ask.depth = _int(body, "maxDiscoveryDepth", 0, 1000)
    if _bool(body, "allowExternalLinks"):
        ask.scope = "any"
    elif _bool(body, "allowSubdomains"):
        ask.scope = "site"
    elif _bool(body, "crawlEntireDomain"):
        ask.scope = "host"
    full = bool(_bool(body, "regexOnFullURL"))
    ask.allow, ask.deny = _patterns(body, "includePaths", full), _patterns(body, "excludePaths", full)
    sitemap = body.get("sitemap", "include")
    if sitemap not in ("include", "skip", "only"):
        raise BadAsk(f"sitemap: include, skip or only, not {sitemap!r}")
    ask.sitemaps, ask.links = sitemap != "skip", sitemap != "only"
    delay = body.get("delay")
    if delay is not None:
        if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0 <= delay <= 3600:
            raise BadAsk(f"delay: seconds from 0 to 3600, not {delay!r}")
        ask.delay = float(delay)
    ask.concurrency = _int(body, "maxConcurrency", 1, 1000)
    if _bool(body, "ignoreRobotsTxt"):
        raise BadAsk("ignoreRobotsTxt: this crawler always obeys robots.txt")
    ask.webhook = read_webhook(body.get("webhook"))
    honoured = {"url", "limit", "maxDiscoveryDepth", "allowExternalLinks", "allowSubdomains", "crawlEntireDomain",
                "regexOnFullURL", "includePaths", "excludePaths", "sitemap", "delay", "maxConcurrency",
                "ignoreRobotsTxt", "webhook", "scrapeOptions"}
    left = _unused(body, honoured)
    if left:
        ask.warnings.append("not done by this crawler, ignored: " + ", ".join(left))
    ask.warnings += scrape.warnings
    return ask


WEBHOOK_EVENTS = ("started", "page", "completed", "failed", "cancelled", "changed", "gone")


def read_webhook(value: Any) -> dict[str, Any] | None:
    """A job's webhook: ``{"url", "metadata", "events"}`` (headers are refused:
    the posts are signed with the server's secret, and nothing secret is kept)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = {"url": value}
    if not isinstance(value, dict) or not isinstance(value.get("url"), str) or not value["url"].strip():
        raise BadAsk("webhook: a URL, or an object with 'url'")
    if value.get("headers"):
        raise BadAsk("webhook.headers: not kept by this server (its posts are signed: X-Firecrawl-Signature)")
    events = value.get("events")
    if events is not None and (not isinstance(events, list) or set(events) - set(WEBHOOK_EVENTS)):
        raise BadAsk(f"webhook.events: a list of {', '.join(WEBHOOK_EVENTS)}")
    metadata = value.get("metadata")
    if metadata is not None and (not isinstance(metadata, dict) or len(str(metadata)) > 10_000):
        raise BadAsk("webhook.metadata: an object of at most 10,000 characters")
    return {"url": value["url"].strip(), "metadata": metadata, "events": events}


def read_batch(body: Any, max_limit: int) -> tuple[list[str], list[str], ScrapeAsk, dict[str, Any] | None]:
    """The URLs to scrape, those refused as invalid (``ignoreInvalidURLs``),
    and the scrape options (given inline, as the SDK sends them)."""
    if not isinstance(body, dict):
        raise BadAsk("the body: a JSON object")
    urls = body.get("urls")
    if not isinstance(urls, list) or not urls:
        raise BadAsk("urls: a list of URLs")
    if len(urls) > max_limit:
        raise BadAsk(f"urls: at most {max_limit}")
    good, bad = [], []
    for i, raw in enumerate(urls):
        try:
            good.append(read_url(raw, f"urls[{i}]"))
        except BadAsk:
            if not body.get("ignoreInvalidURLs"):
                raise
            bad.append(str(raw))
    scrape = read_scrape({k: v for k, v in body.items()
                          if k not in ("urls", "ignoreInvalidURLs", "webhook", "appendToId", "maxConcurrency")})
    return list(dict.fromkeys(good)), bad, scrape, read_webhook(body.get("webhook"))


def read_map(body: Any, max_limit: int) -> MapAsk:
    if not isinstance(body, dict):
        raise BadAsk("the body: a JSON object")
    limit = _int(body, "limit", 1, max_limit)
    ask = MapAsk(read_url(body.get("url")), limit if limit is not None else max_limit)
    search = body.get("search")
    if search is not None and not isinstance(search, str):
        raise BadAsk("search: a string")
    ask.search = search or None
    sitemap = body.get("sitemap", "include")
    if sitemap not in ("include", "skip", "only"):
        raise BadAsk(f"sitemap: include, skip or only, not {sitemap!r}")
    ask.sitemaps, ask.links = sitemap != "skip", sitemap != "only"
    if _bool(body, "includeSubdomains"):
        ask.scope = "site"
    return ask
