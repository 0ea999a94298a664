"""Webhooks in a crawl: ``-s WEBHOOK_URL=URL`` (an extension; docs/api.md).

With ``WEBHOOK_URL`` set, every worker of the crawl records its events in
the crawl's stream (``events.py``: the first worker says ``crawl.started``,
the store's writer each page stored, changed or gone, the last worker that
finishes with nothing left ``crawl.completed``) and runs a deliverer in a
thread of its own (``delivery.py``: one worker of the crawl posts at a
time, in order). A worker that ends waits up to ``WEBHOOK_FLUSH_TIMEOUT``
seconds for what is left to go, then leaves it in Redis for the next
worker (or ``scrapy serve``) to post.

``WEBHOOK_EVENTS`` (``pages`` or ``batch``) records page events without a
URL: ``scrapy serve`` gives it to its jobs' workers and posts their events
itself, to each job's own webhook.

Secrets: the signing secret comes from ``WEBHOOK_SECRET_FILE`` (readable
by its owner only) or the environment variable ``CRAWLER_WEBHOOK_SECRET``;
a ``WEBHOOK_URL`` without one, with credentials in it, or whose host the
network policy refuses stops the crawl before it starts (one line).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

from crawler.config import ConfigError
from crawler.network.policy import NetworkPolicy, parse_networks

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from crawler.webhooks.delivery import DeliveryThread
    from crawler.webhooks.events import EventLog

logger = logging.getLogger(__name__)

__all__ = ["SECRET_ENV", "Webhooks", "page_prefix", "webhook_secret"]

SECRET_ENV = "CRAWLER_WEBHOOK_SECRET"


def page_prefix(settings: Any) -> str | None:
    """The type prefix of the crawl's page events, or None: it records none."""
    mode = str(settings.get("WEBHOOK_EVENTS") or "").strip().lower()
    if mode == "batch":
        return "batch_scrape"
    if mode == "pages" or settings.get("WEBHOOK_URL"):
        return "crawl"
    return None


def webhook_secret(settings: Any, env: dict[str, str] | None = None) -> bytes | None:
    env = dict(os.environ) if env is None else env
    path = settings.get("WEBHOOK_SECRET_FILE")
    if path:
        target = Path(str(path)).expanduser()
        try:
            mode = target.stat().st_mode
            text = target.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"WEBHOOK_SECRET_FILE: cannot read {target} ({exc})") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(f"WEBHOOK_SECRET_FILE: {target} is readable by others (chmod 600 {target})")
        if not text:
            raise ConfigError(f"WEBHOOK_SECRET_FILE: {target} is empty")
        return text.encode("utf-8")
    value = env.get(SECRET_ENV, "").strip()
    return value.encode("utf-8") if value else None


def make_deliverer(client: Any, crawl: str, url: str, settings: Any, **more: Any) -> Any:
    """A deliverer of ``crawl``'s events to ``url`` with ``settings``' secret,
    policy and timings (``ConfigError``: one that cannot work)."""
    from crawler.webhooks.delivery import Deliverer, Target, TargetError

    secret = webhook_secret(settings)
    if secret is None:
        raise ConfigError(f"a webhook needs a secret to sign with: give -s WEBHOOK_SECRET_FILE=PATH or {SECRET_ENV}")
    policy = NetworkPolicy(parse_networks(settings.get("NETWORK_ALLOWLIST")))
    try:
        target = Target.parse(url)
        target.address(policy)
    except TargetError as exc:
        raise ConfigError(str(exc)) from None
    return Deliverer(client, crawl, target, secret, policy, timeout=settings.getfloat("WEBHOOK_TIMEOUT"),
                     retry_min=settings.getfloat("WEBHOOK_RETRY_MIN"), retry_max=settings.getfloat("WEBHOOK_RETRY_MAX"),
                     user_agent=str(settings.get("USER_AGENT")), **more)


class Webhooks:
    def __init__(self, crawler: Crawler) -> None:
        settings = crawler.settings
        self.url = settings.get("WEBHOOK_URL")
        if not self.url:
            raise NotConfigured  # no message: Scrapy would log one at WARNING for every crawl
        from crawler.frontier.faces import FrontierFaces

        self.crawler = crawler
        self.face = FrontierFaces(crawler).store
        self.flush_timeout = settings.getfloat("WEBHOOK_FLUSH_TIMEOUT")
        self.log: EventLog | None = None
        self.thread: DeliveryThread | None = None
        crawler.signals.connect(self.opened, signal=signals.spider_opened)
        crawler.signals.connect(self.closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    def opened(self, spider: Spider) -> None:
        from crawler.webhooks.delivery import DeliveryThread
        from crawler.webhooks.events import EventLog

        client, crawl = self.face.client, self.face.crawl
        self.log = EventLog(client, crawl)
        self.log.once("started", {"type": "crawl.started"})
        self.thread = DeliveryThread()
        self.thread.add(crawl, make_deliverer(client, crawl, str(self.url), self.crawler.settings))
        self.thread.start()

    def closed(self, spider: Spider, reason: str) -> None:
        if self.log is None or self.thread is None:
            return
        try:
            if reason == "finished" and self._left() == 0:
                # Workers that finish together say it once (a later run may say it again).
                self.log.once("completed", {"type": "crawl.completed"}, ttl_ms=60_000)
            left = self.thread.flush(self.flush_timeout)
            if left:
                logger.warning("%(n)d webhook events of crawl %(crawl)s not delivered yet: kept in Redis for the "
                               "next worker", {"n": left, "crawl": self.log.crawl})
        except Exception as exc:
            logger.error("Webhook events of crawl %(crawl)s at its end: %(exc)s", {"crawl": self.log.crawl, "exc": exc})
        finally:
            self.thread.stop()

    def _left(self) -> int:
        """URLs the crawl still holds (queued, leased, delayed) and other
        workers alive: the crawl is over for this worker's last word."""
        from crawler.frontier.faces import FrontierFaces

        ops = FrontierFaces(self.crawler).ops
        counters = ops.counters()
        left = sum(int(counters.get(k, 0)) for k in ("queued", "leased", "delayed"))
        return left
