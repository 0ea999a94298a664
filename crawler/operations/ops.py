"""What operators do to a crawl: see it, seed it, prune it, stop it.

The ``scrapy status``, ``seed``, ``stop`` and ``console`` commands and the
metrics are thin over these functions, which read and write the crawl only
through ``Frontier`` (``crawler/frontier/frontier.py``). This module sees
it (``status``, ``failed``); ``crawler/operations/actions.py`` seeds, prunes and
stops it (``seed``, ``remove``, ``request_stop``) and ``crawler/operations/crawls.py``
opens the crawl the settings name (``open_frontier``, ``crawl_names``,
``NoSuchCrawl``): their names are importable from here too.

``status`` returns one JSON-ready dict:

    {"crawl", "state", "stop", "nodes": [{"id", "host", "pid", "spider",
     "state", "alive", "pages", "pages_per_min", "links", "errors",
     "last_heartbeat"}], "frontier": {"queued", "leased", "delayed",
     "sites", "sites_ready", "sites_backed_off", "seen"}, "errors":
     {reason: count}, "top_sites": [{"site", "queued", "delay", "backoff", "pace", "pace_why", "next_in"}],
     "totals": {"pages", "errors", "robots_forbidden", "revisits", "revisit_errors", "retried",
     "removed", "pages_per_min", "links"}, "time", "download_delay",
     "steps": [{"step", "ms_a_page"}] (the page steps' CPU a page, costliest
     first, over the nodes' reports), "topic": null, or for a focused crawl {"on_topic", "pages",
     "harvest_rate", "tunnel_pages", "tunnel_on_topic", "tunnel_stopped"},
     "control": {"scope", "follow", "rules", "sitemaps", "languages", "render"} as
     the crawl recorded them (null: not recorded), with "order" (bfs, dfs,
     importance or topic) and "best_waiting" (the best priority queued: an
     importance crawl's importance, a focused crawl's link priority; null
     in a bfs or dfs crawl or with nothing queued), "sitemaps": {"read",
     "errors", "listed", "taken"} (sitemap files read and failed, URLs
     they listed, URLs in scope and allowed that were queued or known),
     "redis": [{"node", "used", "limit", "policy", "full"}]}

``redis`` has one entry per Redis node (the single Redis, or each master of
a Redis Cluster), from ``INFO memory``: ``used_memory`` and ``maxmemory``
in bytes (0: no limit), ``maxmemory_policy``, and ``full`` when it is at
its limit or within 2 % of it, at least 1 MiB (``crawler/redis/memory.py``:
a worker that found it refusing writes takes no new work until it has that
much free); empty when Redis does not answer ``INFO``.

In a focused crawl (``-a topic``) each node has ``on_topic`` and
``harvest_rate`` too: the pages it stored on the topic (counted in Redis as
it acknowledged them), over the pages it stored; ``topic`` sums the crawl
(the tunnel figures as the nodes last reported them: pages reached through
an off-topic parent, the on-topic ones among them, and off-topic pages
whose links were not followed).

A crawl's state: "stopping" (``scrapy stop`` asked, workers still alive),
"stopped" (asked, none alive; or no stop asked, but the workers that ran
it are gone with URLs still queued, leased or delayed: stopped by Ctrl-C, a
page count or a crash), "running" (a worker alive), "finished" (nobody
alive, nothing pending, pages crawled), else "idle" (no worker has run it:
seeded only, or empty). A node is
alive while its heartbeat is younger than the lease timeout; its state is
"running", "paused" (Redis is full: it takes no new work), "stopping",
"stopped", or "lost" (it stopped beating while running); its ``pages``
and ``errors`` are the pages it stored and the URLs it settled as errors,
counted in Redis as it acknowledged them (they survive the node);
``pages_per_min`` and ``links`` (links parsed) are what the node last
reported. ``download_delay`` is the delay the workers keep between two
fetches of a site (their ``DOWNLOAD_DELAY``, as they report it; the
largest of the live ones), which a site without a delay of its own shows
in ``top_sites``; the command's own setting only when no worker has
reported one. The crawl's ``pages`` count each page once: its first fetch (or
an error's URL fetched again and done); a re-crawl's visits are
``revisits`` (``revisit_errors`` those that got no answer or a server
error: a 404 or 410 is an answer, the page's ``gone`` outcome), while a
node's ``pages`` counts every page it stored, revisits included. A URL
robots.txt forbade is neither a page nor an error: ``robots_forbidden``
counts them (the frontier settles them apart; the store keeps no record
of them, the link to one stays in ``links``).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import TYPE_CHECKING, Any

import redis

from crawler.frontier.meta import ORDER_NAMES
from crawler.frontier.queues import IRANGE
from crawler.operations.actions import remove, request_stop, seed
from crawler.operations.crawls import NoSuchCrawl, crawl_names, open_frontier
from crawler.redis.memory import memory_of

if TYPE_CHECKING:
    from collections.abc import Iterable

    from crawler.frontier.frontier import Frontier

__all__ = ["STATES", "NoSuchCrawl", "crawl_names", "failed", "open_frontier", "remove", "request_stop", "seed",
           "status", "step_costs"]

STATES = ("running", "stopping", "stopped", "finished", "idle")


def _error_reason(reason: Any) -> str:
    """An error's kind, for counting: the reason up to its first colon or
    parenthesis ("HTTP 404", "timeout", "DNS lookup failed" ...)."""
    text = str(reason or "unknown").strip()
    for sep in (":", " ("):
        text = text.split(sep, 1)[0]
    return text[:80] or "unknown"


# The crawl's choices `scrapy status` shows, as its meta records them.
CONTROL_NAMES = ("scope", "follow", "rules", "sitemaps", "languages", "render")


# What `scrapy status` shows of a re-crawl (stats recrawl/<name>): "fetched"
# is every revisit stored, the sum of its outcomes "new" (no stored page to
# compare with) to "error" (no verdict: no answer, a server error, a
# temporary redirect); "not_modified" (304s) are some of the "unchanged".
RECRAWL_FIGURES = ("due", "fetched", "not_modified", "new", "unchanged", "trivial", "changed", "gone", "moved",
                   "error")


# What `scrapy status` shows of a focused crawl's tunnelling (stats topic/<name>).
TOPIC_FIGURES = ("tunnel_pages", "tunnel_on_topic", "tunnel_stopped")


def harvest_rate(on_topic: int, pages: int) -> float:
    """On-topic pages over pages stored (0 before any)."""
    return round(on_topic / pages, 4) if pages else 0.0


def status(frontier: Frontier, lease_timeout: float, top: int = 10, error_sample: int = 1000) -> dict[str, Any]:
    """The crawl as an operator sees it (module docstring)."""
    now, beats = frontier.control.heartbeats()
    records = frontier.views.nodes()
    stop = frontier.control.stop_requested()
    counters = frontier.views.counters_of(sorted(records))
    delay = workers_delay(records, beats, now, lease_timeout)
    view = frontier.views.view(top=top, default_delay=delay)
    nodes: list[dict[str, Any]] = []
    for node_id in sorted(records, key=lambda n: (str(records[n].get("host")), n)):
        rec = records[node_id]
        timeout = _number(rec.get("lease_timeout"), lease_timeout)
        beat = beats.get(node_id)
        alive = beat is not None and now - beat < timeout
        state = str(rec.get("state") or "unknown")
        if alive and stop is not None:
            state = "stopping"
        elif not alive and state in ("running", "paused"):
            state = "lost"
        c = counters.get(node_id, {})
        nodes.append({
            "id": node_id, "host": str(rec.get("host") or ""), "pid": int(_number(rec.get("pid"), 0)),
            "spider": str(rec.get("spider") or ""), "state": state, "alive": alive,
            "pages": int(c.get("pages", 0)), "pages_per_min": round(_number(rec.get("pages_per_min"), 0.0), 2)
            if alive else 0.0,
            "links": int(_number(rec.get("links"), 0)), "errors": int(c.get("errors", 0)),
            "on_topic": int(c.get("on_topic", 0)), "harvest_rate": harvest_rate(c.get("on_topic", 0), c.get("pages", 0)),
            "last_heartbeat": beat if beat is not None else _number(rec.get("heartbeat"), 0.0),
        })
    stats = view["stats"]
    frontier_view = {
        "queued": stats.get("queued", 0), "leased": stats.get("leased", 0), "delayed": stats.get("delayed", 0),
        "sites": view["sites"], "sites_ready": view["sites_ready"], "sites_backed_off": view["sites_backed_off"],
        "seen": stats.get("enqueued", 0) + stats.get("capped", 0),
    }
    pending = frontier_view["queued"] + frontier_view["leased"] + frontier_view["delayed"]
    alive_nodes = [n for n in nodes if n["alive"]]
    if stop is not None:
        state = "stopping" if alive_nodes else "stopped"
    elif alive_nodes:
        state = "running"
    elif pending == 0 and stats.get("done", 0) + stats.get("errors", 0) > 0:
        state = "finished"
    elif pending > 0 and records:
        # Its workers left with work queued (scrapy stop, Ctrl-C, a page
        # count, a crash): stopped, not idle; a worker resumes it.
        state = "stopped"
    else:
        state = "idle"
    errors = Counter(_error_reason(e.get("reason")) for e in frontier.views.errors(error_sample))
    # Re-crawl figures, summed over every node that reported them; "due" is
    # what the latest pass found due (each worker counts the same pages).
    recrawl = dict.fromkeys(RECRAWL_FIGURES, 0)
    for rec in records.values():
        figures = rec.get("recrawl")
        if not isinstance(figures, dict):
            continue
        for key in RECRAWL_FIGURES:
            value = int(_number(figures.get(key), 0))
            recrawl[key] = max(recrawl[key], value) if key == "due" else recrawl[key] + value
    topic: dict[str, Any] | None = None
    if (frontier.meta.recorded_order() or "fifo").startswith("topic:"):
        topic = {"on_topic": stats.get("on_topic", 0), "pages": stats.get("done", 0),
                 "harvest_rate": harvest_rate(stats.get("on_topic", 0), stats.get("done", 0))}
        for key in TOPIC_FIGURES:
            topic[key] = sum(int(_number((rec.get("topic") or {}).get(key), 0))
                             for rec in records.values() if isinstance(rec.get("topic"), dict))
    steps = step_costs(records.values())
    control: dict[str, Any] = {name: frontier.meta.crawl_policy(name) for name in CONTROL_NAMES}
    recorded = frontier.meta.recorded_order() or "fifo"
    rank = frontier.views.best_waiting() if recorded not in ("fifo", "lifo") else None
    control["order"] = "topic" if recorded.startswith("topic:") else ORDER_NAMES.get(recorded, recorded)
    # The best priority waiting: an importance crawl's importance, a focused
    # crawl's link priority (0 to 1).
    control["best_waiting"] = None if rank is None else (
        (IRANGE - rank) / 100.0 if recorded == "importance" else (1000 - rank) / 1000.0)
    sitemaps = {"read": stats.get("sitemaps_read", 0), "errors": stats.get("sitemap_errors", 0),
                "listed": stats.get("sitemap_listed", 0), "taken": stats.get("sitemap_taken", 0)}
    try:
        memory = [n.as_dict() for n in memory_of(frontier.client)]
    except redis.ResponseError:  # INFO denied (an ACL) or renamed
        memory = []
    return {
        "crawl": frontier.crawl, "state": state, "stop": stop, "time": now, "topic": topic, "steps": steps,
        "control": control, "sitemaps": sitemaps,
        "download_delay": delay if delay is not None else frontier.default_delay_ms / 1000.0,
        "nodes": nodes, "frontier": frontier_view,
        "errors": dict(errors.most_common()),
        "errors_total": stats.get("errors", 0),
        "top_sites": view["top_sites"],
        "recrawl": recrawl,
        "redis": memory,
        # Pages are pages: a re-crawl's visits are revisits (and their
        # failures revisit_errors), never counted as pages again.
        "totals": {"pages": stats.get("done", 0), "errors": stats.get("errors", 0),
                   "robots_forbidden": stats.get("robots_forbidden", 0),
                   "revisits": stats.get("revisits", 0), "revisit_errors": stats.get("revisit_errors", 0),
                   "retried": stats.get("retried", 0), "removed": stats.get("removed", 0),
                   "pages_per_min": round(sum(n["pages_per_min"] for n in alive_nodes), 2),
                   "links": sum(n["links"] for n in nodes)},
    }


def step_costs(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The page steps' CPU a page over every node that reported it (each
    node's figure weighted by its pages), costliest first: [{"step",
    "ms_a_page"}]."""
    spent: dict[str, float] = {}
    pages = 0
    for rec in records:
        figures, n = rec.get("steps"), int(_number(rec.get("step_pages"), 0))
        if not isinstance(figures, dict) or n <= 0:
            continue
        pages += n
        for name, ms in figures.items():
            spent[str(name)[:100]] = spent.get(str(name)[:100], 0.0) + _number(ms, 0.0) * n
    return sorted(({"step": name, "ms_a_page": round(total / pages, 3)} for name, total in spent.items()),
                  key=lambda x: (-x["ms_a_page"], x["step"])) if pages else []


def failed(frontier: Frontier, limit: int = 20) -> list[dict[str, Any]]:
    """The URLs the crawl settled as errors, newest first, at most ``limit``
    (the frontier keeps the latest 1,000 of each shard): {"url", "site",
    "reason", "at"} (``at``: seconds since the epoch). A URL is ``null``
    when its record was cut (entries over 2 KiB keep their first 2 KiB)."""
    out = []
    for rec in frontier.views.errors(max(1, limit)):
        at = _number(rec.get("at"), 0.0)
        out.append({"url": _entry_url(rec.get("entry")), "site": str(rec.get("site") or ""),
                    "reason": str(rec.get("reason") or "unknown"), "at": at / 1000.0 if at > 1e11 else at})
    return out


def _entry_url(entry: Any) -> str | None:
    """The URL of a frontier entry (a request as JSON, perhaps cut)."""
    if not isinstance(entry, str):
        return None
    try:
        url = json.loads(entry).get("u")
    except (ValueError, AttributeError):
        # Cut at 2 KiB: the URL comes first ({"u": ...}) and is whole if
        # its closing quote is there.
        head = '{"u":'
        if not entry.startswith(head):
            return None
        try:
            url, _ = json.JSONDecoder().raw_decode(entry, len(head))
        except ValueError:
            return None
    return url if isinstance(url, str) else None


def workers_delay(records: dict[str, dict[str, Any]], beats: dict[str, float], now: float,
                  lease_timeout: float) -> float | None:
    """The delay between two fetches of a site that the crawl's workers keep
    (``DOWNLOAD_DELAY``, as each reports it): the largest among the live
    workers, else the last worker's to report; None when no worker said
    (a crawl no worker has run, or workers of an earlier version)."""
    alive: list[float] = []
    last: tuple[float, float | None] = (-1.0, None)
    for node, rec in records.items():
        delay = _number(rec.get("download_delay"), -1.0)
        if delay < 0:
            continue
        beat = beats.get(node)
        if beat is not None and now - beat < _number(rec.get("lease_timeout"), lease_timeout):
            alive.append(delay)
        seen = beat if beat is not None else _number(rec.get("heartbeat"), 0.0)
        if seen >= last[0]:
            last = (seen, delay)
    return max(alive) if alive else last[1]


def _number(value: Any, default: float) -> float:
    """A number from a record written into Redis (anything else: default)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return default
    if not math.isfinite(value):  # JSON has no Infinity: status --json must stay valid
        return default
    return float(value)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False)
