"""The Redis frontier of one crawl, as one object: ``Frontier`` builds the
Redis gateway (``crawler/redis/gateway.py``: batching, script registry,
round-trip counts) over a client and the parts that use it, one module a
concern, and answers for them:

- ``queues``      site queues and leases (``queues.py``);
- ``politeness``  send times, backoff, site delays (``politeness.py``);
- ``robots``      the shared robots.txt cache (``politeness.py``);
- ``control``     heartbeats, stopped workers' leases, the stop flag (``control.py``);
- ``views``       what operators see, key administration (``views.py``);
- ``meta``        layout, queue order, follow policy, claims (``meta.py``);
- ``scope_store`` the seeds' sites and hosts (``scope.py``);
- ``duplicates``  the duplicate index and mirrors (``dupindex.py``);
- ``templates``   the sites' template evidence (``templates.py``);
- ``sitemaps``    each site's sitemap files, read one at a time (``sitemapqueue.py``).

Only these parts talk to the frontier's keys (named in
``crawler/redis/keys.py``); every operation is one round of Lua scripts
(``crawler/redis/lua``), one script per shard it touches, sent together in
one pipeline. It knows nothing of Scrapy: the frontier service
(``service.py``) and the scheduler drive it, and operator commands and tests
use it directly. It runs on a single Redis or on a Redis Cluster
(``redis.cluster.RedisCluster``) alike. Callers use the parts
(``frontier.queues.lease``, ``frontier.views.stats`` ...): one way into
each; the few properties below read the settings and state the parts share.
"""

from __future__ import annotations

from typing import Any

from crawler.frontier.base import Settings, State
from crawler.frontier.buckets import grown_sizes, sizes_text
from crawler.frontier.control import STOP_MODES, Control
from crawler.frontier.dupindex import Duplicate, DuplicateIndex
from crawler.frontier.meta import CrawlMeta, FrontierLayoutError
from crawler.frontier.politeness import Politeness, RobotsCache
from crawler.frontier.queues import (CommitResult, Lease, LinkEntry, Queues, entry_priority,
                                     fingerprint_slot)
from crawler.frontier.scope import Scope
from crawler.frontier.sitemapqueue import SitemapQueue
from crawler.frontier.templates import SiteTemplates
from crawler.frontier.views import Views
from crawler.redis.gateway import Gateway
from crawler.redis.keys import Keys
from crawler.redis.scripts import SCRIPTS

__all__ = ["STOP_MODES", "CommitResult", "Duplicate", "Frontier", "FrontierLayoutError", "Lease", "LinkEntry",
           "entry_priority", "fingerprint_slot"]


class Frontier:
    def __init__(
        self,
        client: Any,
        crawl: str,
        *,
        node: str | None = None,
        default_delay: float = 1.0,
        concurrency_per_site: int = 1,
        delay_margin: float = 0.01,
        max_pages_per_site: int = 0,
        buckets: int = 1024,
        lease_timeout: float = 60.0,
        shards: int = 16,
    ) -> None:
        self.settings = Settings(crawl, node or "", default_delay_ms=int(default_delay * 1000),
                                 conc=max(1, concurrency_per_site), margin_ms=int(delay_margin * 1000),
                                 cap=max(0, max_pages_per_site), buckets=buckets,
                                 lease_timeout_ms=int(lease_timeout * 1000))
        self.state = State()
        self.gateway = Gateway(client, SCRIPTS)
        self.keys = Keys(crawl, shards)
        gw, keys, settings, state = self.gateway, self.keys, self.settings, self.state
        self.queues = Queues(gw, keys, settings, state)
        self.politeness = Politeness(gw, keys, settings)
        self.robots = RobotsCache(gw, keys, settings.node)
        self.control = Control(gw, keys, settings, state)
        self.views = Views(gw, keys, settings)
        self.meta = CrawlMeta(gw, keys, state)
        self.scope_store = Scope(gw, keys)
        self.duplicates = DuplicateIndex(gw, keys, buckets)
        self.templates = SiteTemplates(gw, keys)
        self.sitemaps = SitemapQueue(gw, keys)

    # -- what callers read -------------------------------------------------------
    @property
    def client(self) -> Any:
        return self.gateway.client

    @property
    def crawl(self) -> str:
        return self.settings.crawl

    @property
    def node(self) -> str:
        return self.settings.node

    @property
    def node_tag(self) -> str:
        return self.settings.node_tag

    @property
    def started(self) -> float:
        return self.settings.started

    @property
    def default_delay_ms(self) -> int:
        return self.settings.default_delay_ms

    @property
    def margin_ms(self) -> int:
        return self.settings.margin_ms

    @property
    def conc(self) -> int:
        return self.settings.conc

    @property
    def buckets(self) -> int:
        return self.settings.buckets

    @property
    def round_trips(self) -> int:
        return self.gateway.round_trips

    @property
    def calls(self) -> dict[str, int]:
        return self.gateway.calls

    @property
    def ordered(self) -> bool:
        return self.state.ordered

    @property
    def live_nodes(self) -> int:
        return self.state.live_nodes

    @property
    def stop_mode(self) -> str | None:
        return self.state.stop_mode

    # -- what combines settings with a part ---------------------------------------
    def check_layout(self, order: str | None = None) -> None:
        """Check (or record, for a new crawl) the crawl's queue order and
        dedup bucket sizes (``meta.py``), as this frontier is configured."""
        self.meta.check_layout(order, sizes_text(grown_sizes(self.settings.buckets)))
