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
(``redis.cluster.RedisCluster``) alike. The methods below are the parts'
own, under the names callers have used; new code may call the part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

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
from crawler.redis.keys import Keys, ShardKeys
from crawler.redis.scripts import SCRIPTS

if TYPE_CHECKING:
    from crawler.redis.gateway import Call

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

    def run_many(self, calls: Sequence[Call], *, raise_on_error: bool = True) -> list[Any]:
        return self.gateway.run_many(calls, raise_on_error=raise_on_error)

    def shard(self, site: str) -> ShardKeys:
        return self.keys.site(site)

    def slot(self, fp: bytes) -> tuple[str, str]:
        return fingerprint_slot(fp, self.settings.buckets)

    # -- meta (meta.py) ------------------------------------------------------------
    def recorded_order(self) -> str | None:
        return self.meta.recorded_order()

    def recorded_shards(self) -> int | None:
        return self.meta.recorded_shards()

    def check_layout(self, order: str | None = None) -> None:
        self.meta.check_layout(order, sizes_text(grown_sizes(self.settings.buckets)))

    def scope(self, add_sites: Sequence[str] = (), add_hosts: Sequence[str] = ()) -> tuple[set[str], set[str]]:
        return self.scope_store.share(add_sites, add_hosts)[:2]

    # -- queues and leases (queues.py) -----------------------------------------------
    def enqueue(self, links: Sequence[LinkEntry]) -> tuple[int, int, int]:
        return self.queues.enqueue(links)

    def commit(self, links: Sequence[LinkEntry] = (), acks: Sequence[tuple[str, str, str]] = (),
               requeues: Sequence[tuple[str, float, str, str]] = (), downloaded: Sequence[str] = ()) -> CommitResult:
        return self.queues.commit(links, acks, requeues, downloaded)

    def lease(self, n: int, downloaded: Sequence[str] = (),
              in_flight: Mapping[str, int] | None = None) -> tuple[list[Lease], float | None]:
        return self.queues.lease(n, downloaded, in_flight)

    def release(self, lease_ids: Sequence[str]) -> int:
        return self.queues.release(lease_ids)

    # -- control (control.py) ----------------------------------------------------------
    def heartbeat(self, record: dict[str, Any] | None = None) -> tuple[int, int, set[str]]:
        return self.control.heartbeat(record)

    def heartbeats(self) -> tuple[float, dict[str, float]]:
        return self.control.heartbeats()

    def take_over(self, nodes: Sequence[str]) -> int:
        return self.control.take_over(nodes)

    def leave(self, record: dict[str, Any] | None = None) -> None:
        self.control.leave(record)

    def request_stop(self, mode: str = "graceful", by: str = "") -> None:
        self.control.request_stop(mode, by)

    def clear_stop(self) -> bool:
        return self.control.clear_stop()

    def stop_requested(self) -> dict[str, Any] | None:
        return self.control.stop_requested()

    # -- operators (views.py) ------------------------------------------------------------
    def pending(self) -> int:
        return self.views.pending()

    def stats(self) -> dict[str, int]:
        return self.views.stats()

    def node_counters(self, node: str | None = None) -> dict[str, int]:
        return self.views.node_counters(node)

    def counters_of(self, nodes: Sequence[str]) -> dict[str, dict[str, int]]:
        return self.views.counters_of(nodes)

    def nodes(self) -> dict[str, dict[str, Any]]:
        return self.views.nodes()

    def errors(self, limit: int = 1000) -> list[dict[str, Any]]:
        return self.views.errors(limit)

    def view(self, top: int = 10, limit: int = 100_000, default_delay: float | None = None) -> dict[str, Any]:
        return self.views.view(top, limit, default_delay)

    def queue_length(self, site: str) -> int:
        return self.views.queue_length(site)

    def held_leases(self, node: str | None = None) -> int:
        return self.views.held_leases(node)

    def remove(self, by_site: Mapping[str, Sequence[str]]) -> int:
        return self.views.remove(by_site)

    def all_keys(self) -> list[str]:
        return self.views.all_keys()

    def dedup_keys(self) -> list[str]:
        return self.views.dedup_keys()

    def delete_all(self) -> int:
        return self.views.delete_all()
