"""What operators see of the frontier (``scrapy status``, the console, the
progress line): counters summed over the shards, the workers' records and
counters, the latest errors, the largest site queues; and what they may do
to it besides stopping it (``control.py``): remove unprocessed URLs
(``scrapy seed --remove``), list and delete the crawl's keys (``scrapy
reset``). All of it reads as many shards as there are, in one round trip.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from crawler.redis.gateway import pairs
from crawler.redis.gateway import text as _s

if TYPE_CHECKING:
    from crawler.frontier.base import Settings
    from crawler.redis.gateway import Call, Gateway
    from crawler.redis.keys import Keys

__all__ = ["Views"]


class Views:
    """The operators' views of a crawl's frontier, through ``gateway``."""

    def __init__(self, gateway: Gateway, keys: Keys, settings: Settings) -> None:
        self.gateway = gateway
        self.keys = keys
        self.settings = settings

    def pending(self) -> int:
        """Requests queued, waiting for a retry, or leased, anywhere."""
        calls = [("HMGET", [sk.stats], ["queued", "delayed", "leased"]) for sk in self.keys.site_shards]
        return sum(int(x or 0) for row in self.gateway.run_many(calls) for x in row)

    def best_waiting(self) -> int | None:
        """The best rank queued in an ordered crawl (smallest; None: nothing
        queued, or the queues are not ordered)."""
        rows = self.gateway.run_many([("ZRANGE", [sk.prefix + "best"], [0, 0, "WITHSCORES"])
                                      for sk in self.keys.site_shards])
        ranks = [float(row[1] if not isinstance(row[0], (list, tuple)) else row[0][1]) for row in rows if row]
        return int(min(ranks)) if ranks else None

    def stats(self) -> dict[str, int]:
        """The crawl's counters, summed over its shards."""
        out: dict[str, int] = {}
        for row in self.gateway.run_many([("HGETALL", [sk.stats], []) for sk in self.keys.site_shards]):
            for k, v in pairs(row):
                name = _s(k)
                if name != "lease_seq":
                    out[name] = out.get(name, 0) + int(v)
        return out

    def node_counters(self, node: str | None = None) -> dict[str, int]:
        """A node's counters (pages, errors), summed over the shards."""
        node = node or self.settings.node
        return self.counters_of([node])[node]

    def counters_of(self, nodes: Sequence[str]) -> dict[str, dict[str, int]]:
        """Several nodes' counters (pages, errors), summed over the shards,
        in one round trip."""
        shards = self.keys.site_shards
        calls: list[Call] = [
            ("HGETALL", [sk.node(n)], []) for n in nodes for sk in shards]
        out: dict[str, dict[str, int]] = {n: {} for n in nodes}
        for i, row in enumerate(self.gateway.run_many(calls) if calls else []):
            c = out[nodes[i // len(shards)]]
            for k, v in pairs(row):
                c[_s(k)] = c.get(_s(k), 0) + int(v)
        return out

    def nodes(self) -> dict[str, dict[str, Any]]:
        """The nodes' records (JSON objects; malformed ones skipped)."""
        raw = self.gateway.counted().hgetall(self.keys.nodes)
        out: dict[str, dict[str, Any]] = {}
        for k, v in raw.items():
            try:
                rec = json.loads(v)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out[_s(k)] = rec
        return out

    def errors(self, limit: int = 1000) -> list[dict[str, Any]]:
        """The latest final errors, newest first (malformed entries skipped)."""
        rows = self.gateway.run_many([("LRANGE", [sk.errors], [0, limit - 1]) for sk in self.keys.site_shards])
        out: list[dict[str, Any]] = []
        for row in rows:
            for v in row:
                try:
                    rec = json.loads(v)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    out.append(rec)
        out.sort(key=lambda r: -float(r.get("at") or 0) if isinstance(r.get("at"), (int, float)) else 0.0)
        return out[:limit]

    def view(self, top: int = 10, limit: int = 100_000, default_delay: float | None = None) -> dict[str, Any]:
        """What an operator sees of the frontier: counters summed over the
        shards ({"stats"}), sites known ("sites"), ready now ("sites_ready"),
        backed off ("sites_backed_off") and the ``top`` largest site queues
        ("top_sites": site, queued, delay and backoff in seconds, the pace
        the site's answers taught (ADAPTIVE_RATE; 0: none) and what it last
        answered to earn it ("pace_why"), seconds until its next request
        may go ("next_in"); a site
        without a delay of its own shows ``default_delay``, the workers',
        else this frontier's). Each shard looks at ``limit`` sites at most
        ("approximate" then says so)."""
        delay_ms = self.settings.default_delay_ms if default_delay is None else int(default_delay * 1000)
        calls = [("VIEW", sk.fixed, [top, delay_ms, limit]) for sk in self.keys.site_shards]
        stats: dict[str, int] = {}
        sites = ready = backed_off = 0
        approximate = False
        tops: list[dict[str, Any]] = []
        for out in self.gateway.run_many(calls):
            row = out[0]
            for k, v in pairs(row):
                name = _s(k)
                if name != "lease_seq":
                    stats[name] = stats.get(name, 0) + int(v)
            sites += int(out[1])
            ready += int(out[2])
            backed_off += int(out[3])
            approximate = approximate or int(out[4]) >= limit
            rest = out[5:]
            for i in range(0, len(rest) - 6, 7):
                tops.append({"site": _s(rest[i]), "queued": int(rest[i + 1]),
                             "delay": int(rest[i + 2]) / 1000.0, "backoff": int(rest[i + 3]) / 1000.0,
                             "pace": int(rest[i + 4]) / 1000.0, "pace_why": _s(rest[i + 5]),
                             "next_in": int(rest[i + 6]) / 1000.0})
        tops.sort(key=lambda t: (-t["queued"], t["site"]))
        return {"stats": stats, "sites": sites, "sites_ready": ready, "sites_backed_off": backed_off,
                "top_sites": tops[:top], "approximate": approximate}

    def remove(self, by_site: Mapping[str, Sequence[str]]) -> int:
        """Remove unprocessed requests: for each site, the queued and delayed
        entries of the given URLs (an empty list: every one of the site's).
        Leased requests stay. Returns how many were removed."""
        calls: list[Call] = []
        for site, urls in by_site.items():
            sk = self.keys.site(site)
            prefixes: list[str] = []
            for url in urls:
                head = '{"u":' + json.dumps(url, ensure_ascii=False)
                prefixes += [head + ",", head + "}"]
            calls.append(("REMOVE", [*sk.fixed, sk.queue(site)], [site, *prefixes]))
        return sum(int(n) for n in self.gateway.run_many(calls)) if calls else 0

    def queue_length(self, site: str) -> int:
        key = self.keys.site(site).queue(site)
        # A list, or in a focused crawl a sorted set (ordered by priority).
        kind = _s(self.gateway.run("TYPE", [key], []))
        return int(self.gateway.run("ZCARD" if kind == "zset" else "LLEN", [key], []))

    def held_leases(self, node: str | None = None) -> int:
        """Leases a node holds, over all shards."""
        node = node or self.settings.node
        rows = self.gateway.run_many([("HLEN", [sk.leases(node)], []) for sk in self.keys.site_shards])
        return sum(int(r) for r in rows)

    # -- key administration ------------------------------------------------------------
    def all_keys(self) -> list[str]:
        """Every key of this crawl (SCAN; on a cluster, over every master)."""
        out: list[str] = []
        for pattern in self.keys.patterns():
            out += [_s(k) for k in self.gateway.client.scan_iter(match=pattern, count=1000)]
        return sorted(set(out))

    def dedup_keys(self) -> list[str]:
        return [k for k in self.all_keys() if ":seen:" in k]

    def delete_all(self) -> int:
        """Remove every key of this crawl (tests, and an explicit reset)."""
        keys = self.all_keys()
        for i in range(0, len(keys), 500):
            pipe = self.gateway.client.pipeline(transaction=False)
            for key in keys[i:i + 500]:
                pipe.delete(key)
            pipe.execute()
        return len(keys)
