"""Every ``Request.meta`` key the crawler sets or reads, in one place.

Each key is a constant (use it, never the string: a test scans ``crawler/``
for string keys used with ``.meta``), and a ``MetaKey`` in ``REGISTRY``
saying what it means, who sets it and whether a frontier entry may carry it.
``docs/reference.md``'s ``request.meta`` table lists exactly these keys (a
test compares them).

A frontier entry (``crawler/frontier/serialize.py``) is trusted with a meta
key only when its ``entry`` kind is set here, and only with a value of that
kind (``ENTRY_KINDS``):

- ``"int"``: an integer from 0 to ``serialize.MAX_INT``;
- ``"time"``: unix seconds, an integer below 2**32;
- ``"str"``: a bounded string;
- ``"strs"``: a bounded list of bounded strings.

Keys that would lift a limit or skip a guard (``download_maxsize``,
``proxy``, ``dont_obey_robotstxt``, ``dont_trap_guard``, ...) have no kind:
whoever can write to Redis must not be able to set them.

Scrapy's own keys are here too where the crawler sets or reads them; their
meaning is Scrapy's.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "AGAIN", "DEPTH", "DESCENT_RUN", "DONT_OBEY_ROBOTSTXT", "DONT_REDIRECT", "DONT_RETRY", "DONT_TRAP_GUARD",
    "DOWNLOAD_LATENCY", "DOWNLOAD_MAXSIZE", "DOWNLOAD_SLOT", "DOWNLOAD_TIMEOUT", "DUP_ORDER", "ENTRY_KINDS",
    "FRONTIER_GAP", "FRONTIER_LEASE", "HANDLE_HTTPSTATUS_ALL", "HEAD_LENGTH", "HEAD_SINCE", "IMP", "IMPORTANCE",
    "IMP_CASH", "IMP_KEY", "MAX_RETRY_TIMES", "NUMBERED_RUN", "PROXY", "PROXY_POOL", "REDIRECT_TIMES", "REDIRECT_URLS",
    "REFERER_URL", "REGISTRY", "RENDER_FOR", "RETRY_TIMES", "REVISIT", "SESSION", "SESSION_LOGIN", "SHAPE_RUN",
    "SITEMAP", "SITEMAP_NAMED",
    "TOKEN_RUN", "TOPIC_HOPS", "TOPIC_KEYS", "TOPIC_PARENT", "TOPIC_PRIORITY", "TRAP_EVIDENCE", "TRAP_PARENT",
    "WARC_ORIGINAL", "MetaKey",
]

ENTRY_VALUE_KINDS = frozenset({"int", "time", "str", "strs"})


@dataclass(frozen=True, slots=True)
class MetaKey:
    """One ``request.meta`` key: its ``name``, who sets it (``set_by``),
    what it means, and ``entry``: the kind of value a frontier entry may
    carry for it (None: never read from a frontier entry)."""

    name: str
    set_by: str
    meaning: str
    entry: str | None = None


# The trap guard (crawler/middlewares.py, crawler/scope/traps.py).
DONT_TRAP_GUARD = "dont_trap_guard"
SHAPE_RUN = "shape_run"
DESCENT_RUN = "descent_run"
NUMBERED_RUN = "numbered_run"
TOKEN_RUN = "token_run"
TRAP_PARENT = "trap_parent"
# The spiders' links.
REFERER_URL = "referer_url"
DEPTH = "depth"
TOPIC_HOPS = "topic_hops"
TOPIC_PARENT = "topic_parent"
TOPIC_PRIORITY = "topic_priority"
REDIRECT_TIMES = "redirect_times"
REDIRECT_URLS = "redirect_urls"
# The frontier's scheduler.
FRONTIER_GAP = "frontier_gap"
FRONTIER_LEASE = "frontier_lease"
IMPORTANCE = "importance"
# Seeds again, sitemaps, importance, rendering, re-crawl, WARC.
AGAIN = "again"
SITEMAP = "sitemap"
SITEMAP_NAMED = "sitemap_named"
IMP = "imp"
IMP_KEY = "imp_key"
IMP_CASH = "imp_cash"
RENDER_FOR = "render_for"
REVISIT = "revisit"
DUP_ORDER = "dup_order"
HEAD_LENGTH = "head_length"
HEAD_SINCE = "head_since"
WARC_ORIGINAL = "warc_original"
# Scrapy's own, set or read by the crawler.
DONT_OBEY_ROBOTSTXT = "dont_obey_robotstxt"
DONT_REDIRECT = "dont_redirect"
DONT_RETRY = "dont_retry"
HANDLE_HTTPSTATUS_ALL = "handle_httpstatus_all"
DOWNLOAD_TIMEOUT = "download_timeout"
DOWNLOAD_MAXSIZE = "download_maxsize"
DOWNLOAD_LATENCY = "download_latency"
DOWNLOAD_SLOT = "download_slot"
MAX_RETRY_TIMES = "max_retry_times"
RETRY_TIMES = "retry_times"
PROXY = "proxy"
PROXY_POOL = "proxy_pool"
SESSION = "session"
SESSION_LOGIN = "session_login"

# The trap guard's evidence about the chain of links that led here (absent: 0).
TRAP_EVIDENCE = (DESCENT_RUN, NUMBERED_RUN, TOKEN_RUN)
# A focused crawl's standing of a link: a redirect's target keeps its source's.
TOPIC_KEYS = (TOPIC_HOPS, TOPIC_PARENT, TOPIC_PRIORITY)

REGISTRY: tuple[MetaKey, ...] = (
    MetaKey(DEPTH, "spider", "Links from the seed (a redirect keeps its source's depth); stored as `depth`.", "int"),
    MetaKey(REFERER_URL, "spider", "The page the link was found on; stored as `referer`.", "str"),
    MetaKey(RETRY_TIMES, "Scrapy", "Retries so far; kept in Redis with the request.", "int"),
    MetaKey(SHAPE_RUN, "trap guard", "Length of the same-shape link chain that led here.", "int"),
    MetaKey(REDIRECT_TIMES, "spider", "Hops so far of a redirect chain.", "int"),
    MetaKey(REDIRECT_URLS, "spider", "The URLs of the redirect chain so far.", "strs"),
    MetaKey(DESCENT_RUN, "trap guard", "Links in a row each going deeper than its page.", "int"),
    MetaKey(NUMBERED_RUN, "trap guard", "The same for deeper links with a digit or random token.", "int"),
    MetaKey(TOKEN_RUN, "trap guard", "Links in a row each bringing a new random-looking token.", "int"),
    MetaKey(REVISIT, "recrawl spider", "The due time (unix seconds) a re-crawl's visit was queued for.", "time"),
    MetaKey(AGAIN, "site spider", "A seed given again the store holds: 1 as an error, 2 as gone.", "int"),
    MetaKey(HEAD_LENGTH, "recrawl spider", "A HEAD's stored Content-Length to compare.", "int"),
    MetaKey(HEAD_SINCE, "recrawl spider", "A HEAD's: when the stored version was fetched.", "time"),
    MetaKey(TOPIC_HOPS, "spider", "Off-topic pages in a row on the path to this link.", "int"),
    MetaKey(TOPIC_PARENT, "spider", "The parent page's topic score, in thousandths.", "int"),
    MetaKey(TOPIC_PRIORITY, "spider", "The link's priority in a focused crawl, in thousandths.", "int"),
    MetaKey(SITEMAP, "site spider", "A sitemap fetch: its level below robots.txt.", "int"),
    MetaKey(SITEMAP_NAMED, "site spider", "A sitemap fetch: 1 when robots.txt named it.", "int"),
    MetaKey(IMP, "site spider", "The URL's importance when queued (hundredths).", "int"),
    MetaKey(IMP_KEY, "site spider", "The URL's dedup member, by which later links raise it.", "str"),
    MetaKey(WARC_ORIGINAL, "recrawl spider", "A conditional GET's [uri, WARC-Date, payload digest].", "strs"),
    MetaKey(DUP_ORDER, "recrawl spider", "The page's first duplicate check as the store kept it.", "str"),
    MetaKey(DONT_TRAP_GUARD, "you", "The trap guard lets this request through."),
    MetaKey(TRAP_PARENT, "spider", "(url, meta) of the page whose link this is, for the trap guard."),
    MetaKey(FRONTIER_GAP, "scheduler", "Seconds a leased request's site wants between requests."),
    MetaKey(FRONTIER_LEASE, "scheduler", "The lease id of a request taken from the frontier."),
    MetaKey(IMPORTANCE, "scheduler", "An importance crawl's page: its importance when leased."),
    MetaKey(IMP_CASH, "site spider", "What a link adds to a URL already queued (hundredths)."),
    MetaKey(RENDER_FOR, "renderer", "On a request a rendered page made: the page's URL."),
    MetaKey(DONT_OBEY_ROBOTSTXT, "Scrapy", "Scrapy's; marks robots.txt requests."),
    MetaKey(DONT_REDIRECT, "scheduler, renderer", "Scrapy's; set on leased requests and the renderer's."),
    MetaKey(DONT_RETRY, "renderer", "Scrapy's; set on the renderer's requests."),
    MetaKey(HANDLE_HTTPSTATUS_ALL, "renderer", "Scrapy's; set on the renderer's requests."),
    MetaKey(DOWNLOAD_TIMEOUT, "robots.txt guard, renderer", "Scrapy's; read by the WARC writer."),
    MetaKey(DOWNLOAD_MAXSIZE, "you", "Scrapy's; read by the WARC writer."),
    MetaKey(DOWNLOAD_LATENCY, "Scrapy", "Scrapy's; read by the WARC writer, dropped on a render retry."),
    MetaKey(DOWNLOAD_SLOT, "renderer", "Scrapy's; the renderer's requests get a slot of their own."),
    MetaKey(MAX_RETRY_TIMES, "robots.txt guard", "Scrapy's; set on robots.txt requests."),
    MetaKey(PROXY, "you, proxy pool", "Scrapy's; the network guard checks the proxy's address."),
    MetaKey(PROXY_POOL, "proxy pool", "The PROXY_LIST proxy a request went through (scheme://host:port)."),
    MetaKey(SESSION, "sessions", "The -a sites origin whose headers and cookies a request carries."),
    MetaKey(SESSION_LOGIN, "sessions", "A login request (the form page, its POST): not stored, body not archived."),
)

# What a frontier entry may carry: key -> kind of value (serialize.py).
ENTRY_KINDS: dict[str, str] = {k.name: k.entry for k in REGISTRY if k.entry is not None}
