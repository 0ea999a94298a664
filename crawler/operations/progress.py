"""Progress in every worker's log, and Prometheus metrics.

``Progress`` is an extension. Every ``PROGRESS_INTERVAL`` seconds (60; 0:
never) it logs one line::

    Progress: 1,204 pages (310/min here, 1,150/min cluster), 48,210 links parsed,
    queued 9,113, leased 32, delayed 4, errors 12 (cluster 3,310 pages); ETA 8m

Pages and errors are pages (URLs), never sitemap files: a sitemap that
failed adds ``; sitemaps failed N`` (this node's) to the line. A
``/sitemap.xml`` robots.txt did not name and that is not there is no
failure (``crawler/sitemaps/crawl.py``).

"ETA" only while it means something: the crawl's pending requests (queued,
leased, delayed) fell over the last minute, and then it is those requests
over the rate at which they fell. While a crawl still finds more URLs than it
fetches, its end cannot be foreseen and no ETA is shown. With
``PROMETHEUS_PORT`` set it serves the Prometheus text format on
``PROMETHEUS_BIND:PROMETHEUS_PORT`` (``prometheus-client``), the same
figures labelled by ``crawl`` and ``node``:

- ``crawler_pages_total``, ``crawler_errors_total``: pages this node stored
  and URLs it settled as errors; ``crawler_fetched_total``: responses;
  ``crawler_links_parsed_total``: links read on pages;
  ``crawler_pages_per_minute``: this node's rate over the last minute.
- ``crawler_sitemap_errors_total``, ``crawler_cluster_sitemap_errors_total``:
  sitemap files that failed (this node's, the crawl's), apart from the
  URLs' errors.
- ``crawler_cluster_pages_total``, ``crawler_cluster_errors_total``,
  ``crawler_cluster_pages_per_minute``; ``crawler_frontier_queued``,
  ``crawler_frontier_leased``, ``crawler_frontier_delayed``: the whole crawl,
  as this node last read it from Redis.
- ``crawler_redis_up``: 1 while this node reaches Redis;
  ``crawler_redis_full``: 1 while it found Redis full (``maxmemory``) and
  takes no new work (the progress line adds ``Redis full: no new work taken``).
- In a focused crawl (``-a topic``): ``crawler_on_topic_total`` and
  ``crawler_harvest_rate`` (this node's pages on the topic, and their share
  of its pages), ``crawler_cluster_on_topic_total`` and
  ``crawler_cluster_harvest_rate`` (the crawl's), and
  ``crawler_topic_tunnel_total`` by ``kind`` (``pages`` reached through an
  off-topic parent, ``on_topic`` among them, ``stopped``: off-topic pages
  whose links were not followed). The progress line adds
  ``on topic N (harvest R here, R' cluster)``. Only a focused crawl: a
  crawl in importance order has no topic.

Figures are sampled from the reactor thread every ``min(PROGRESS_INTERVAL,
10)`` seconds; the metrics server only reads the last sample.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import redis
from scrapy import signals
from twisted.internet.task import LoopingCall

from crawler.frontier.faces import FrontierFaces
from crawler.operations.ops import RECRAWL_FIGURES, harvest_rate

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from crawler.frontier.faces import OpsFace

logger = logging.getLogger(__name__)

__all__ = ["Progress", "Sample", "draining"]


class Sample:
    """One reading of this node and of the crawl."""

    __slots__ = ("at", "pages", "errors", "fetched", "links", "cluster_pages", "cluster_errors", "queued",
                 "leased", "delayed", "redis_up", "redis_full", "node_rate", "cluster_rate", "on_topic",
                 "cluster_on_topic", "sitemap_errors", "cluster_sitemap_errors")

    def __init__(self) -> None:
        self.at = time.monotonic()
        self.pages = self.errors = self.fetched = self.links = 0
        self.cluster_pages = self.cluster_errors = self.queued = self.leased = self.delayed = 0
        self.redis_up = False
        self.redis_full = False
        self.node_rate = self.cluster_rate = 0.0
        self.on_topic = self.cluster_on_topic = 0
        self.sitemap_errors = self.cluster_sitemap_errors = 0


def _rate(history: deque[Sample], now: Sample, field: str) -> float:
    """Per minute, over the last minute of samples."""
    first = history[0]
    dt = now.at - first.at
    return (getattr(now, field) - getattr(first, field)) * 60.0 / dt if dt >= 1.0 else 0.0


def duration(seconds: float) -> str:
    """A span as operators read it: ``45s``, ``12m``, ``3.5h``, ``2.1d``."""
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def eta(pending: int, per_min: float) -> str:
    if pending <= 0:
        return "0s"
    if per_min <= 0:
        return "unknown"
    return duration(pending / per_min * 60.0)


def draining(history: deque[Sample], now: Sample) -> str | None:
    """The time left, when the pending requests fell over the samples in
    ``history`` (the last minute): pending over the rate they fell at;
    None while they grow or hold (more URLs found than fetched), and once
    nothing is pending."""
    first = history[0] if history else now
    dt = now.at - first.at
    before, pending = first.queued + first.leased + first.delayed, now.queued + now.leased + now.delayed
    if dt < 1.0 or pending >= before or pending == 0:
        return None
    return eta(pending, (before - pending) * 60.0 / dt)


class Progress:
    def __init__(self, crawler: Crawler, frontier: OpsFace) -> None:
        self.frontier = frontier
        self.crawler = crawler
        s = crawler.settings
        self.interval = s.getfloat("PROGRESS_INTERVAL")
        self.port = s.getint("PROMETHEUS_PORT")
        self.bind = s.get("PROMETHEUS_BIND") or "127.0.0.1"
        self.sample_every = min(self.interval, 10.0) if self.interval > 0 else 10.0
        self.last = Sample()
        self.history: deque[Sample] = deque()
        self._loop: LoopingCall | None = None
        self._next_line = 0.0
        self._server: Any = None
        self.crawl = ""
        self.node = ""
        self.focused = False
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, FrontierFaces(crawler).ops)

    def spider_opened(self, spider: Spider) -> None:
        if self.interval <= 0 and not self.port:
            return
        self._next_line = time.monotonic() + self.interval
        if self.port:
            self._serve()
        self._loop = LoopingCall(self.tick)
        self._loop.start(self.sample_every, now=False)

    def spider_closed(self, spider: Spider) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
            if self.interval > 0 and self.frontier.is_open:
                # A last line, so even a worker that lived less than one
                # interval leaves its figures in the log.
                logger.info(self.line(self.sample()) + " (at close)", extra={"spider": None})
        if self._server is not None:
            server, thread = self._server
            server.shutdown()
            server.server_close()
            thread.join(5)
            self._server = None

    # -- sampling ---------------------------------------------------------------------
    def sample(self) -> Sample:
        frontier = self.frontier
        stats = self.crawler.stats
        s = Sample()
        s.on_topic = frontier.acked("T")  # done and on a focused crawl's topic
        s.pages = frontier.done
        s.errors = frontier.acked("E")
        s.sitemap_errors = frontier.sitemap_errors
        s.fetched = int(stats.get_value("response_received_count", 0) or 0)
        s.links = int(stats.get_value("frontier/links_parsed", 0) or 0)
        if frontier.is_open:
            self.crawl, self.node = frontier.crawl, frontier.node
            self.focused = frontier.order.startswith("topic:")
            s.redis_full = frontier.redis_full
            try:
                c = frontier.counters()
            except redis.RedisError:
                s.redis_up = False
                prev = self.last
                s.cluster_pages, s.cluster_errors = prev.cluster_pages, prev.cluster_errors
                s.cluster_on_topic, s.cluster_sitemap_errors = prev.cluster_on_topic, prev.cluster_sitemap_errors
                s.queued, s.leased, s.delayed = prev.queued, prev.leased, prev.delayed
            else:
                s.redis_up = not frontier.redis_down
                s.cluster_pages, s.cluster_errors = c.get("done", 0), c.get("errors", 0)
                s.cluster_on_topic, s.cluster_sitemap_errors = c.get("on_topic", 0), c.get("sitemap_errors", 0)
                s.queued, s.leased, s.delayed = c.get("queued", 0), c.get("leased", 0), c.get("delayed", 0)
        self.history.append(s)
        while len(self.history) > 2 and s.at - self.history[1].at >= 60.0:
            self.history.popleft()
        s.node_rate = _rate(self.history, s, "pages")
        s.cluster_rate = _rate(self.history, s, "cluster_pages")
        self.last = s
        return s

    def tick(self) -> None:
        s = self.sample()
        if self.interval > 0 and time.monotonic() >= self._next_line:
            self._next_line = time.monotonic() + self.interval
            logger.info(self.line(s), extra={"spider": None})

    def line(self, s: Sample) -> str:
        text = (f"Progress: {s.pages:,} pages ({s.node_rate:,.0f}/min here, {s.cluster_rate:,.0f}/min cluster), "
                f"{s.links:,} links parsed, queued {s.queued:,}, leased {s.leased:,}, delayed {s.delayed:,}, "
                f"errors {s.errors:,} (cluster {s.cluster_pages:,} pages, {s.cluster_errors:,} errors)")
        if self.focused:
            text += (f"; on topic {s.on_topic:,} (harvest {harvest_rate(s.on_topic, s.pages):.1%} here, "
                     f"{harvest_rate(s.cluster_on_topic, s.cluster_pages):.1%} cluster)")
        if s.sitemap_errors:
            text += f"; sitemaps failed {s.sitemap_errors:,}"
        if not s.redis_up:
            text += "; Redis unreachable, cluster figures as last read"
        if s.redis_full:
            text += "; Redis full: no new work taken"
        left = draining(self.history, s)
        if left is not None:
            text += f"; ETA {left}"
        return text

    # -- Prometheus ------------------------------------------------------------------------
    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        s = self.last
        labels = ["crawl", "node"]
        values = [self.crawl, self.node]

        def family(kind: Any, name: str, doc: str, value: float) -> Any:
            f = kind(name, doc, labels=labels)
            f.add_metric(values, value)
            return f

        yield family(CounterMetricFamily, "crawler_pages", "Pages this node stored", s.pages)
        yield family(CounterMetricFamily, "crawler_errors", "URLs this node settled as errors", s.errors)
        yield family(CounterMetricFamily, "crawler_fetched", "Responses this node received", s.fetched)
        yield family(CounterMetricFamily, "crawler_links_parsed", "Links this node read on pages", s.links)
        yield family(GaugeMetricFamily, "crawler_pages_per_minute", "This node's pages a minute, last minute",
                     s.node_rate)
        yield family(CounterMetricFamily, "crawler_cluster_pages", "Pages the whole crawl stored", s.cluster_pages)
        yield family(CounterMetricFamily, "crawler_cluster_errors", "URLs the whole crawl settled as errors",
                     s.cluster_errors)
        yield family(GaugeMetricFamily, "crawler_cluster_pages_per_minute", "The crawl's pages a minute",
                     s.cluster_rate)
        yield family(CounterMetricFamily, "crawler_sitemap_errors", "Sitemap files this node settled as failed",
                     s.sitemap_errors)
        yield family(CounterMetricFamily, "crawler_cluster_sitemap_errors",
                     "Sitemap files the whole crawl settled as failed", s.cluster_sitemap_errors)
        yield family(GaugeMetricFamily, "crawler_frontier_queued", "Requests queued", s.queued)
        yield family(GaugeMetricFamily, "crawler_frontier_leased", "Requests leased", s.leased)
        yield family(GaugeMetricFamily, "crawler_frontier_delayed", "Requests waiting to be retried", s.delayed)
        yield family(GaugeMetricFamily, "crawler_redis_up", "1 while this node reaches Redis", int(s.redis_up))
        yield family(GaugeMetricFamily, "crawler_redis_full", "1 while Redis is full and this node takes no new work",
                     int(s.redis_full))
        recrawl = CounterMetricFamily("crawler_recrawl", "Re-crawl visits of this node by outcome "
                                      "(due, fetched, not_modified, unchanged, trivial, changed, gone, moved)",
                                      labels=[*labels, "outcome"])
        stats = self.crawler.stats
        for name in RECRAWL_FIGURES:
            recrawl.add_metric([*values, name], int(stats.get_value(f"recrawl/{name}", 0) or 0))
        yield recrawl
        if self.focused:
            yield family(CounterMetricFamily, "crawler_on_topic", "Pages this node stored on the crawl's topic",
                         s.on_topic)
            yield family(GaugeMetricFamily, "crawler_harvest_rate", "This node's pages on topic / pages stored",
                         harvest_rate(s.on_topic, s.pages))
            yield family(CounterMetricFamily, "crawler_cluster_on_topic", "Pages the whole crawl stored on topic",
                         s.cluster_on_topic)
            yield family(GaugeMetricFamily, "crawler_cluster_harvest_rate",
                         "The crawl's pages on topic / pages stored", harvest_rate(s.cluster_on_topic, s.cluster_pages))
            tunnel = CounterMetricFamily("crawler_topic_tunnel", "This node's tunnelling: pages reached through an "
                                         "off-topic parent, on_topic among them, stopped (links not followed)",
                                         labels=[*labels, "kind"])
            for kind, stat in (("pages", "tunnel_pages"), ("on_topic", "tunnel_on_topic"),
                               ("stopped", "tunnel_stopped")):
                tunnel.add_metric([*values, kind], int(stats.get_value(f"topic/{stat}", 0) or 0))
            yield tunnel

    def _serve(self) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        self.sample()
        self._server = start_http_server(self.port, addr=self.bind, registry=registry)
        logger.info("Prometheus metrics on http://%(bind)s:%(port)d/metrics", {"bind": self.bind, "port": self.port})
