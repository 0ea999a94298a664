"""A worker joining its crawl, for the frontier service (``service.py``) and
the scheduler: what the crawl holds when it comes (said once, in a line),
the leases of earlier workers of this machine whose process is gone (taken
back at once), a worker without seeds waiting for the crawl's first URL,
and, when this run fetched nothing, why (the crawl was already finished).

Stats: ``frontier/taken_over``.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

import redis
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.task import deferLater

from crawler import compat

if TYPE_CHECKING:
    from crawler.frontier.spiderface import FrontierSpider
    from scrapy import Spider
    from scrapy.statscollectors import StatsCollector

    from crawler.frontier.frontier import Frontier
    from crawler.frontier.service import FrontierService

logger = logging.getLogger(__name__)

__all__ = ["say_already_finished", "say_what_it_resumes", "take_over_local", "until_seeded"]


def say_what_it_resumes(frontier: Frontier, st: dict[str, int], spider: FrontierSpider | None, lease_timeout: float) -> None:
    """Say what the crawl holds (its counters ``st``) as this worker joins
    it, nothing when it is new (raises ``redis.RedisError``)."""
    done, errors = st.get("done", 0), st.get("errors", 0)
    pending = st.get("queued", 0) + st.get("leased", 0) + st.get("delayed", 0)
    now, beats = frontier.control.heartbeats()
    # Workers alive now: joining them is not resuming a stopped crawl.
    others = sum(1 for node, beat in beats.items() if node != frontier.node and now - beat < lease_timeout)
    if others:
        what = f"joining {others} running worker{'s' if others > 1 else ''}"
    else:
        what = "resuming it" if pending else "nothing is pending"
    if done or errors or pending:
        logger.info("Crawl %(crawl)s holds %(done)d pages done, %(errors)d errors, %(queued)d queued, "
                    "%(leased)d leased, %(delayed)d waiting to be retried: %(what)s",
                    {"crawl": frontier.crawl, "done": done, "errors": errors, "queued": st.get("queued", 0),
                     "leased": st.get("leased", 0), "delayed": st.get("delayed", 0),
                     "what": what},
                    extra={"spider": spider})


def take_over_local(frontier: Frontier, directory: str, stats: StatsCollector, spider: FrontierSpider | None) -> None:
    """Leases of a worker of this machine and ``CRAWL_DIR`` whose
    process no longer runs (stopped with a second Ctrl-C, or killed) come
    back now instead of after ``FRONTIER_LEASE_TIMEOUT``: its records
    name its host, directory and pid, and a pid that no longer exists
    proves it gone. (A pid reused by another process only means waiting
    for the timeout, as before.) Raises ``redis.RedisError``."""
    host = socket.gethostname()
    records = frontier.views.nodes()
    _, watched = frontier.control.heartbeats()
    gone = []
    for node, rec in records.items():
        pid = rec.get("pid")
        if (node in watched and node != frontier.node and rec.get("host") == host
                and rec.get("crawl_dir") == directory and isinstance(pid, int) and pid > 0
                and pid != os.getpid() and not _pid_running(pid)):
            gone.append((node, pid))
    if not gone:
        return
    reaped = frontier.control.take_over([n for n, _ in gone])
    stats.inc_value("frontier/taken_over", reaped)
    logger.warning("Took back %(n)d leases of %(workers)s: earlier worker(s) on this machine whose process "
                   "no longer runs (without waiting FRONTIER_LEASE_TIMEOUT)",
                   {"n": reaped, "workers": ", ".join(f"{n} (pid {p})" for n, p in gone)},
                   extra={"spider": spider})


def say_already_finished(crawl: str, resumed: dict[str, Any], spider: FrontierSpider | None) -> None:
    """The run fetched nothing because its crawl was finished when it came:
    said, with how to crawl again."""
    done, errors = resumed.get("done", 0), resumed.get("errors", 0)
    if not done + errors:
        return
    logger.warning("Crawl %(crawl)s was already finished: it holds %(done)d pages done and %(errors)d "
                   "errors, and nothing is pending, so this run fetched nothing. To crawl again, name "
                   "a new crawl (-s CRAWL_NAME=...) or clear this one's frontier with `scrapy reset "
                   "--yes`; `scrapy seed URL` adds pages to it, and a seed stored as an error is "
                   "tried again when given again (-a seeds=)",
                   {"crawl": crawl, "done": done, "errors": errors}, extra={"spider": spider})


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, under another user
        return True
    return True


async def until_seeded(service: FrontierService, wait: float) -> None:
    """For a worker without seeds: return once the crawl has had a URL
    (queued, leased, waiting, done or failed), after ``wait`` seconds, or
    when the worker is stopped. Workers started together then join one
    crawl whichever comes up first; one started alone says why it
    closes."""
    def seeded() -> bool:
        try:
            st = service.frontier.views.stats()
        except redis.RedisError:
            return True  # Redis away: the scheduler waits for it, said there
        return any(st.get(k, 0) for k in ("queued", "leased", "delayed", "done", "errors"))

    deadline = time.monotonic() + wait
    if seeded() or wait <= 0:
        return
    logger.info("Crawl %(crawl)s has no URL yet: waiting up to %(wait)gs for a worker to seed it "
                "(FRONTIER_JOIN_WAIT)", {"crawl": service.frontier.crawl, "wait": wait},
                extra={"spider": service.spider})
    reactor = compat.reactor()
    # Ctrl-C now: Scrapy stops the reactor without closing a spider that
    # is still opening. The node leaves then (it holds nothing).
    trigger = reactor.addSystemEventTrigger("before", "shutdown", service.close)
    try:
        while time.monotonic() < deadline:
            await maybe_deferred_to_future(deferLater(reactor, 0.25, lambda: None))
            if seeded() or not service.crawler.crawling or service.frontier.stop_mode is not None:
                return  # stop_mode: `scrapy stop`
    finally:
        reactor.removeSystemEventTrigger(trigger)
    logger.warning("Crawl %(crawl)s has no URL: no worker seeded it within %(wait)gs, so this one has "
                   "nothing to join. Give seeds (-a seeds=URL,...) or add them with `scrapy seed URL`",
                   {"crawl": service.frontier.crawl, "wait": wait}, extra={"spider": service.spider})
