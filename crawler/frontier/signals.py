"""How other components meet the frontier without holding each other's
callables: Scrapy signals (``crawler.signals``) and one exception.

- ``WORKER_IDLE`` (sent by the scheduler, no arguments): this worker has
  just become idle, nothing downloading, waiting for its callback or leased
  to start; what waits only for the store may be written now rather than
  at the store's next timed flush (``crawler/pipelines.py``).
- ``HEARTBEAT`` (sent by the frontier service after each heartbeat, with
  ``reaped``, ``nodes`` and ``held``: leases reaped, stopped workers reaped,
  the lease ids Redis holds for this worker): the scheduler acts on an
  operator's stop and on reaped leases.
- ``ITEMS_WAITING`` (sent by the scheduler, no arguments): a receiver
  answers how many items it holds that wait for something outside the
  crawl (the store, during an outage); while any do, the scheduler does
  not settle leases whose items never settled.
- ``ROBOTS_READ`` (sent by the robots.txt middleware, with ``url`` and
  ``body``: robots.txt's URL and body, the first time this worker reads a
  host's, fetched or from the cluster's cache): the sitemaps it names are
  read (``crawler/sitemaps/crawl.py``).
- ``GiveBack``: an item pipeline drops an item with an exception of this
  class when its page could not be kept for now (the store was away when
  the crawl stopped, and the page was spilled): the lease's URL goes back
  to its queue rather than being settled as done or as an error.
"""

from __future__ import annotations

__all__ = ["HEARTBEAT", "ITEMS_WAITING", "ROBOTS_READ", "WORKER_IDLE", "GiveBack"]

WORKER_IDLE = object()
HEARTBEAT = object()
ITEMS_WAITING = object()
ROBOTS_READ = object()


class GiveBack(Exception):
    """Mixed into an item pipeline's drop: give the lease's URL back to its queue."""
