"""Politeness for the whole cluster, in each site's shard: the time a
request to a site may go on the wire (``SEND``), a request sent outside the
frontier (``TOUCH``: robots.txt; ``RESERVE``: a rendered page's), backoff after 429/503/timeouts
(``BACKOFF``) or, with ``ADAPTIVE_RATE``, a pace the site's answers teach (``SLOW``), a site's own delay (robots.txt ``Crawl-delay``); and the
shared robots.txt cache (``RobotsCache``: one body and one fetch lock per
host, in its site's shard; ``crawler/frontier/robots.py`` reads and fills it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawler.frontier.base import Settings
    from crawler.redis.gateway import Gateway
    from crawler.redis.keys import Keys

__all__ = ["Politeness", "RobotsCache"]


class Politeness:
    """When each site may be fetched next, through ``gateway``."""

    def __init__(self, gateway: Gateway, keys: Keys, settings: Settings) -> None:
        self.gateway = gateway
        self.keys = keys
        self.settings = settings

    def reserve_send(self, site: str) -> float:
        """A request to ``site`` goes on the wire: seconds to wait first, so
        that it follows the last one any worker sent there by the site's gap
        (its delay, backoff and margin). 0 for sites without a delay."""
        sk = self.keys.site(site)
        cfg = self.settings
        return int(self.gateway.run("SEND", [*sk.fixed, sk.sent], [site, cfg.default_delay_ms, cfg.margin_ms])) / 1000.0

    def reserve(self, site: str) -> float:
        """A rendered page's request to ``site`` (outside the frontier):
        seconds to wait first, so that it keeps the site's gap after the last
        request any worker sent, leased or reserved there; the site's next
        request then waits a gap after it. 0 for sites without a delay."""
        sk = self.keys.site(site)
        cfg = self.settings
        return int(self.gateway.run("RESERVE", sk.fixed, [site, cfg.default_delay_ms, cfg.margin_ms])) / 1000.0

    def touch(self, site: str, delay: float) -> None:
        """A request went to ``site`` outside the frontier (robots.txt): hold
        its next request back for ``delay`` seconds, for every worker."""
        self.gateway.run("TOUCH", self.keys.site(site).fixed, [site, int(delay * 1000)])

    def backoff(self, site: str, minimum: float, maximum: float) -> float:
        """Back ``site`` off (429, 503, timeouts); returns the backoff in seconds."""
        return int(self.gateway.run("BACKOFF", self.keys.site(site).fixed,
                                    [site, int(minimum * 1000), int(maximum * 1000)])) / 1000.0

    def slow(self, site: str, retry_after: float, latency: float, pause: float, max_pause: float,
             max_pace: float, reason: str = "") -> tuple[float, float, bool]:
        """``site`` refused a request or let it time out (``ADAPTIVE_RATE``):
        its pace slowed for every worker (``crawler/redis/lua/slow.lua``).
        (the site's gap now, the pause given, whether this was a new
        incident), in seconds."""
        pace, paused, new = self.gateway.run(
            "SLOW", self.keys.site(site).fixed,
            [site, int(retry_after * 1000), int(max(latency, 0.0) * 1000), int(pause * 1000), int(max_pause * 1000),
             int(max_pace * 1000), reason])
        return int(pace) / 1000.0, int(paused) / 1000.0, bool(int(new))

    def set_site_delay(self, site: str, delay: float) -> None:
        """The delay between two fetches from ``site`` (robots.txt Crawl-delay)."""
        self.gateway.run("HSET", [self.keys.site(site).delay], [site, int(delay * 1000)])


class RobotsCache:
    """robots.txt bodies and fetch locks shared by the cluster, through
    ``gateway``; ``node`` names the lock's holder."""

    def __init__(self, gateway: Gateway, keys: Keys, node: str) -> None:
        self.gateway = gateway
        self.keys = keys
        self.node = node

    def _key(self, kind: str, site: str, host: str) -> str:
        # Without the user:password of a URL that has one: key names are
        # listed to whoever can SCAN.
        return self.keys.site(site).robots(kind, host.rpartition("@")[2])

    def get(self, site: str, host: str, limit: int) -> tuple[bool, bytes]:
        """(whether the cached entry exists, its first ``limit`` + 1 bytes)."""
        key = self._key("body", site, host)
        exists, raw = self.gateway.run_many([("EXISTS", [key], []), ("GETRANGE", [key], [0, limit])])
        return bool(exists), bytes(raw or b"")

    def put(self, site: str, host: str, entry: bytes, ttl: int) -> None:
        self.gateway.run("SET", [self._key("body", site, host)], [entry, "EX", max(1, ttl)])

    def lock(self, site: str, host: str, ttl: int) -> bool:
        """Take the right to fetch ``host``'s robots.txt for ``ttl`` seconds."""
        return bool(self.gateway.run("SET", [self._key("lock", site, host)],
                                     [self.node, "NX", "EX", max(1, ttl)]))

    def unlock(self, site: str, host: str) -> None:
        self.gateway.run("DEL", [self._key("lock", site, host)], [])
