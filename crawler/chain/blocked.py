"""Step ``blocked``: a 200 page that is a bot wall is not the page.

A page ``crawler/reading/blocked.py`` takes for a block or challenge page
(an access-denied or captcha interstitial) is not stored as content, not
fingerprinted and its links not followed: the chain stops. It is counted
(``blocked/<kind>``), its site slowed for every worker as a refusal would
slow it (``crawler/rate.py``: with ``ADAPTIVE_RATE``), and its URL retried
later through the frontier (``RETRY_TIMES``, with the retry's backoff; in
this worker through another proxy of ``PROXY_LIST`` than the one that met
the wall, which counts it as a failure);
when the retries run out it is recorded as an error, ``blocked: <kind>``.
No challenge is solved. ``BLOCKED_PAGES=False`` turns the check off (a
crawl of walls on purpose).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.retry import get_retry_request

from crawler.chain.page import HTML, Page
from crawler.chain.parts import PartStep
from crawler.chain.record import blocked as blocked_record
from crawler.rate import SiteSlower
from crawler.reading.blocked import block_reason
from crawler.requestmeta import DOWNLOAD_LATENCY, PROXY_POOL

if TYPE_CHECKING:
    from crawler.chain.parts import Parts

__all__ = ["Blocked"]


class Blocked(PartStep):
    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        self.enabled = parts.crawler.settings.getbool("BLOCKED_PAGES")
        self.slower = SiteSlower.from_crawler(parts.crawler)

    def process_page(self, page: Page) -> None:
        if not self.enabled or page.kind != HTML or page.analysis is None or page.response.status != 200:
            return
        analysis = page.analysis
        kind = block_reason(analysis.title or "", len(analysis.text), len(analysis.links), page.text,
                            page.response.headers)
        if kind is None:
            return
        parts, response = self.parts, page.response
        parts.stats.inc_value(f"blocked/{kind}")
        pool = getattr(parts.crawler, "proxy_pool", None)
        through = response.meta.get(PROXY_POOL)
        if pool is not None and isinstance(through, str):
            pool.met_wall(response.url, through)  # its retry here goes through another proxy
        latency = response.meta.get(DOWNLOAD_LATENCY)
        self.slower.slow(response.url, 0.0, float(latency) if isinstance(latency, (int, float)) else 0.0, "blocked")
        request = response.request
        retry = get_retry_request(request, spider=parts.spider, reason=f"blocked {kind}") \
            if request is not None else None
        if retry is not None:
            retry.meta.pop(DOWNLOAD_LATENCY, None)
            page.emit(retry)
        else:
            parts.stats.inc_value("blocked/gave_up")
            page.emit(blocked_record(parts.crawler, response, f"blocked: {kind}"))
        page.stop()
