"""Every Redis key of a crawl, named here and nowhere else.

A crawl's keys fall in three groups, each under its own hash tags so that a
Redis Cluster spreads them over its masters while every Lua script still
touches one slot only:

- **crawl-wide** keys, tag ``{<crawl>}``: small and rarely written.

  ``meta``           hash: the crawl's layout (``shards``), checked by every worker
  ``nodes``          hash node -> JSON record (operators read it)
  ``hb``             zset node -> last heartbeat (ms, server time)
  ``control``        hash: ``stop`` ("graceful" or "now", set by ``scrapy stop``), ``at``, ``by``
  ``scope:sites``    set of the registrable domains the seeds opened
  ``scope:hosts``    set of the seeds' hosts (``-a scope=host``)
  ``scope:prefixes`` set of the seeds' directories (``-a scope=prefix``: host/path/)

- **site shards**, tag ``{<crawl>:s<N>.<t>}``: a site's queue, politeness and
  URL dedup live in one shard, N = crc32(site) mod ``FRONTIER_SHARDS``, so
  that enqueueing, leasing and settling a site's URLs stays one atomic
  script. Per shard:

  ``stats``          hash of counters (queued, leased, delayed, done, errors ...)
  ``ready``          zset site -> earliest time (ms) the site may be served
  ``delayed``        zset "<site>\\n<entry>" -> due time (retries with backoff)
  ``next``           hash site -> next allowed fetch time (ms)
  ``active``         hash site -> requests being downloaded now (cluster-wide)
  ``delay``          hash site -> delay between fetches (ms), from robots.txt
  ``backoff``        hash site -> extra delay after 429/503/timeouts (ms)
  ``sitecount``      hash site -> URLs admitted (per-site cap)
  ``errors``         list of the latest final errors (JSON), capped
  ``mirrors``        hash site -> the site it mirrors
  ``q:<site>``       list of queued entries (JSON requests), FIFO
  ``leases:<node>``  hash lease id -> "<site>\\n<entry>" ("~" first once downloaded)
  ``node:<node>``    hash of a node's counters in this shard (pages, errors)
  ``seen:<bucket>``  set of 64-bit URL fingerprints (intset: 8 bytes each)
  ``mirror:<site>``  hash: "pages" fingerprinted, "copies\\t<other site>"
  ``robots:body:<host>``, ``robots:lock:<host>``: the shared robots.txt cache
  ``sitemaps:<site>`` zset: the site's sitemap files, read one at a time
                     (``crawler/frontier/sitemapqueue.py``); ``sitemaps:count``
                     hash site -> files known
  ``qk:<site>``      hash: an importance crawl's queued entries by dedup member,
                     so later links raise them (``lua/shard.lua``)

- **duplicate-index shards**, tag ``{<crawl>:d<N>.<t>}``: the exact and
  near-duplicate indexes are spread by fingerprint bits
  (``crawler/frontier/dupindex.py`` argues why that stays atomic enough):

  ``content:<b>``    hash content key (16 hex digits) -> "<site tag><url>": the first page
                     with that text, of the pages too short for a sketch; "<key>\\t<site tag>"
                     -> "<url>", the first on that site
  ``lsh:<i>:<b>``    LSH band table i (of 10): hash band key (3 bytes of it) -> the
                     references (5 bytes each, at most 8) of the pages with that band key
  ``rec:<b>``        hash page reference (5 bytes of its page id) -> the page id's other 3
                     bytes, site tag (5 bytes), order (7 bytes) and URL of the first page with
                     that text; "<reference><site tag>" -> "<order><url>", the first on that
                     site; a page with a sketch is found here, not in ``content``
  ``osk:<b>``        hash page reference -> the odd sketch of its first page's shingles
  ``warc:<b>``       hash payload digest (its first 16 base-32 characters) -> "<the other
                     16> <WARC-Date> <URI>" of the first response archived with that
                     payload (``-s WARC_DIR``: ``crawler/warc/digests.py``); while it is
                     being written, its writer's claim: the same, "<owner> <deadline ms>" added
  (``<b>``: one of ``DUPEFILTER_BUCKETS`` small hashes, which Redis keeps in its
  compact listpack encoding; a site tag is 40 bits, ``dupindex.site_tag``, written as
  10 hex digits in ``content`` and as 5 bytes in ``rec``)
  ``lsh:<i>:<n>/<p>``, ``rec:<n>/<p>``, ``osk:<n>/<p>``: until a table has split down
                     to bucket b, its entries live in the coarse bucket p = b mod n of the
                     first level n not split (``crawler/frontier/buckets.py``); a coarse
                     band field carries b (2 bytes) before its 3
  ``lsh:<i>:grown``, ``rec:grown``, ``osk:grown``: string, a bit a coarse bucket
                     (level by level, coarsest first): 1 once it has split

Shard tags carry a short suffix ``.<t>`` chosen so that shard i's slot falls
in the i-th of ``shards`` equal ranges of Redis Cluster's 16,384 slots: a
cluster whose masters own equal slot ranges gets equal numbers of shards,
whatever the crawl is called (plain CRC16 would leave 16 shards as unevenly
as 8/4/4 on three masters).
"""

from __future__ import annotations

import zlib
from functools import lru_cache

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

__all__ = ["Keys", "ShardKeys", "shard_of"]

# The fixed keys of a site shard, in the order the shard scripts receive
# them as KEYS[1..n] (crawler/redis/lua/shard.lua relies on this order).
SHARD_KEYS = ("stats", "ready", "delayed", "next", "active", "delay", "backoff", "sitecount", "errors",
              "mirrors")


def shard_of(name: str, shards: int) -> int:
    """The shard of a site (or any other name): crc32 mod ``shards``."""
    return zlib.crc32(name.encode("utf-8", "surrogatepass")) % shards


@lru_cache(maxsize=4096)
def _spread_tag(base: str, i: int, n: int) -> str:
    """A hash tag for shard ``i`` of ``n`` whose slot lies in the i-th of n
    equal slot ranges: ``base`` + "." + the first suffix that lands there."""
    lo = i * REDIS_CLUSTER_HASH_SLOTS // n
    hi = (i + 1) * REDIS_CLUSTER_HASH_SLOTS // n
    t = 0
    while True:
        tag = f"{base}.{t:x}"
        if lo <= key_slot(tag.encode("utf-8", "surrogatepass")) < hi:
            return tag
        t += 1


class ShardKeys:
    """The keys of one shard (site shard or duplicate-index shard)."""

    __slots__ = ("index", "prefix", "fixed")

    def __init__(self, tag: str, index: int) -> None:
        self.index = index
        self.prefix = "{" + tag + "}:"
        self.fixed = [self.prefix + name for name in SHARD_KEYS]

    def __getattr__(self, name: str) -> str:
        if name in SHARD_KEYS:
            return self.prefix + name
        raise AttributeError(name)

    def queue(self, site: str) -> str:
        return self.prefix + "q:" + site

    def leases(self, node: str) -> str:
        return self.prefix + "leases:" + node

    def node(self, node: str) -> str:
        return self.prefix + "node:" + node

    def seen(self, bucket: int | str) -> str:
        return f"{self.prefix}seen:{bucket}"

    def mirror(self, site: str) -> str:
        return self.prefix + "mirror:" + site

    @property
    def sent(self) -> str:
        return self.prefix + "sent"

    def robots(self, kind: str, host: str) -> str:
        return f"{self.prefix}robots:{kind}:{host}"

    # Duplicate-index shard keys:
    def content(self, bucket: int) -> str:
        return f"{self.prefix}content:{bucket}"

    def band(self, i: int, bucket: int) -> str:
        return f"{self.prefix}lsh:{i}:{bucket}"

    def sketch(self, bucket: int) -> str:
        return f"{self.prefix}osk:{bucket}"

    def record(self, bucket: int) -> str:
        return f"{self.prefix}rec:{bucket}"

    def archived(self, bucket: int) -> str:
        return f"{self.prefix}warc:{bucket}"


class Keys:
    """The key registry of one crawl."""

    def __init__(self, crawl: str, shards: int) -> None:
        if shards < 1:
            raise ValueError(f"FRONTIER_SHARDS ({shards!r}) must be at least 1")
        self.crawl = crawl
        self.shards = shards
        self.prefix = "{" + crawl + "}:"
        self.meta = self.prefix + "meta"
        self.nodes = self.prefix + "nodes"
        self.hb = self.prefix + "hb"
        self.control = self.prefix + "control"
        self.scope_sites = self.prefix + "scope:sites"
        self.scope_hosts = self.prefix + "scope:hosts"
        self.scope_prefixes = self.prefix + "scope:prefixes"
        self.site_shards = [ShardKeys(_spread_tag(f"{crawl}:s{i}", i, shards), i) for i in range(shards)]
        self.dup_shards = [ShardKeys(_spread_tag(f"{crawl}:d{i}", i, shards), i) for i in range(shards)]

    def site(self, site: str) -> ShardKeys:
        """The shard holding ``site``'s queue, politeness and URL dedup."""
        return self.site_shards[shard_of(site, self.shards)]

    def patterns(self) -> list[str]:
        """SCAN patterns matching every key of the crawl (brackets escape the
        braces of hash tags)."""
        c = self.crawl.replace("[", "\\[").replace("*", "\\*").replace("?", "\\?")
        return ["[{]" + c + "[}:]*"]


# Site templates (crawler/frontier/templates.py), in the site's own shard so
# that the script counting a page's blocks touches one slot:
#   ``tpl2:<site>``  hash: "#" -> pages counted, <block key> -> pages holding it
#                    (frozen to the template's keys after the site's first pages).
#                    "2": block keys tell navigation markup from the rest since
#                    2026-11-27; evidence counted before (``tpl:``) is not mixed in.
def template_key(shard: ShardKeys, site: str) -> str:
    """The key of ``site``'s template evidence, in its shard ``shard``."""
    return shard.prefix + "tpl2:" + site
