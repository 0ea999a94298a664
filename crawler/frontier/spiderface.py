"""What the frontier needs of the spider it serves, declared once.

The scheduler, the frontier service and the request serializer read these
attributes and nothing else of a spider; a spider run with the frontier
(``SCHEDULER = crawler.frontier.scheduler.FrontierScheduler``) declares all
of them, as ``SiteSpider`` and ``RecrawlSpider`` do, and the scheduler
refuses at open a spider that does not (a plain Scrapy spider has no
``frontier_callbacks``: its requests could not be queued).

- ``EntrySpider``: what a frontier entry is written and read against
  (``serialize.py``): the callbacks and errbacks an entry may name, and the
  callbacks whose requests are HEADs.
- ``FrontierSpider``: adds what the scheduler and the service read: how the
  crawl's queues are ordered, the seeds this worker was given, whether it
  revisits pages the crawl stored (it then says itself what was due), and
  ``parse``, the callback of a request that names none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["EntrySpider", "FrontierSpider"]


class EntrySpider(Protocol):
    """A spider's part in a frontier entry (``serialize.py``)."""

    @property
    def name(self) -> str:
        """Named in the errors of an entry refused."""

    # The only callbacks (method names) a frontier entry may name; an entry
    # without one names ``parse``.
    frontier_callbacks: frozenset[str]
    # The only errbacks; an entry without one names ``errback`` when it is here.
    frontier_errbacks: frozenset[str]
    # Callbacks whose requests are HEADs (the method follows from the callback).
    frontier_head_callbacks: frozenset[str]


@runtime_checkable
class FrontierSpider(EntrySpider, Protocol):
    """A spider the frontier's scheduler serves."""

    @property
    def frontier_order(self) -> str | None:
        """How the crawl's queues are ordered (``CrawlMeta.check_layout``):
        "fifo", "lifo", "importance", "topic:<digest>", "any", or None to
        join the crawl as it was made."""

    @property
    def seed_urls(self) -> Sequence[str]:
        """The seeds this worker was given: none, and the scheduler waits
        (``FRONTIER_JOIN_WAIT``) for a crawl nobody has seeded yet."""

    @property
    def revisits(self) -> bool:
        """True for a re-crawl: it says itself what was due, so a crawl with
        nothing pending is not reported as finished already."""

    def parse(self, response: Any, **kwargs: Any) -> Any:
        """The callback of a leased request that names none."""
