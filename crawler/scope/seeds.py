"""Seeds: where a crawl starts.

``-a seeds=URL,...`` and ``-a seeds_file=PATH`` (one URL a line, ``#``
starts a comment) are read here (``read_seeds``) and normalised by the
spider (``SiteSpider.check_arguments``). A seed the store holds as an error
(state E) or gone (D) is tried again when given again (``seeds_again``):
a seed refused by a run before (a private address before
``NETWORK_ALLOWLIST`` was set, a server that was down) is queued again
past the URL dedup, with this run's settings, by one worker of the crawl
only (``frontier.meta.claim_again``: every worker of a ``CRAWL_PROCESSES`` run
brings the same seeds). A seed stored as done is not fetched again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from crawler.config import ConfigError
from crawler.frontier.tracking import AGAIN_ERROR, AGAIN_GONE

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from crawler.frontier.faces import SpiderFace

logger = logging.getLogger(__name__)

__all__ = ["read_seeds", "seeds_again"]


def read_seeds(seeds: str | None, seeds_file: str | None) -> list[str]:
    raw: list[str] = []
    if seeds:
        raw += [s for s in seeds.split(",") if s.strip()]
    if seeds_file:
        try:
            text = Path(seeds_file).read_text(encoding="utf-8")
        except (OSError, UnicodeError) as exc:
            raise ConfigError(f"-a seeds_file={seeds_file}: cannot read it ({exc})") from None
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                raw.append(line)
    return raw


def seeds_again(crawler: Crawler, frontier: SpiderFace, seed_urls: Sequence[str]) -> dict[str, int]:
    """The seeds the store of the crawl holds as errors (or gone), not
    as done, that this worker is to queue again (the first worker to claim
    each), with the ``AGAIN_META`` value each carries (what its
    acknowledgement counts: ``frontier/tracking.py``)."""
    from crawler.store import StoreNotFound, open_store

    if not seed_urls:
        return {}
    try:
        store = open_store(crawler.settings, frontier.crawl, create=False)
    except StoreNotFound:
        return {}  # a new crawl: nothing stored yet
    try:
        stored = store.revisit_state(list(seed_urls))
        # The reason, for the few not done (revisit_state reads no error).
        not_done = {url: store.get_page(url) or page for url, page in stored.items() if page.get("state") != "C"}
    finally:
        store.close()
    again: dict[str, int] = {}
    for url, page in not_done.items():
        stamp = f"{page.get('fetched_at')}\t{page.get('state')}\t{str(page.get('error') or '')[:100]}"
        if frontier.meta.claim_again(url, stamp):
            again[url] = AGAIN_ERROR if page.get("state") == "E" else AGAIN_GONE
            logger.info("Seed %(url)s is stored as %(state)s (%(error)s): trying it again",
                        {"url": url, "state": page.get("state"), "error": page.get("error") or "no reason"},
                        extra={"spider": crawler.spider})
    return again
