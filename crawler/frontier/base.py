"""What the frontier's parts share: this worker's settings (``Settings``)
and what it learns of the crawl as it runs (``State``).

``crawler/frontier/frontier.py`` builds them once and hands the same two
objects to the parts that need them (queues, control, politeness ...), so
that a heartbeat's count of live workers is what the next lease call uses.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
import zlib
from dataclasses import dataclass, field

__all__ = ["Settings", "State"]


@dataclass(slots=True)
class Settings:
    """A worker's frontier settings, in the units the Lua scripts take."""

    crawl: str
    node: str = ""
    default_delay_ms: int = 1000
    conc: int = 1  # requests at once per site, cluster-wide (CONCURRENT_REQUESTS_PER_DOMAIN)
    margin_ms: int = 10
    cap: int = 0  # URLs admitted per site (0: no cap)
    buckets: int = 1024
    lease_timeout_ms: int = 60_000
    started: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.buckets < 1:
            raise ValueError(f"DUPEFILTER_BUCKETS ({self.buckets!r}) must be at least 1")
        self.node = self.node or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

    @property
    def node_tag(self) -> str:
        return f"{zlib.crc32(self.node.encode()) & 0xFFFF:04x}"


@dataclass(slots=True)
class State:
    """What the worker learns of the crawl as it runs."""

    ordered: bool = False  # a focused or importance crawl's: queues by priority (CrawlMeta.check_layout)
    order: str = "fifo"  # the crawl's queue order: fifo, lifo, importance, topic:<digest>
    order_known: bool = True  # False: joined before the crawl recorded its order (CrawlMeta.refresh_order)
    live_nodes: int = 1  # workers of the crawl alive at the last count
    stop_mode: str | None = None  # the operator's stop, as of the last heartbeat
