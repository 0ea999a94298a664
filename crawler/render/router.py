"""The requests of one rendered page: each is answered with what Scrapy's
downloader fetched, or refused. The browser itself fetches nothing.

``PageRequests.handle`` is the page's ``route`` handler:

- the page's own navigation is answered with the response the crawl
  already fetched (the page is not fetched twice);
- a later navigation of the main frame (``location = ...``, a form, a
  download link clicked by a script, a pop-up's) is not made (answered
  ``204 No Content``, so the page stays) and its URL is kept as a link of
  the page (``navigations``);
- a resource type in ``RENDER_BLOCK`` (images, media, fonts, style sheets
  by default: the text and links do not depend on them) is refused;
- anything but GET and HEAD, and any scheme but http(s), is refused;
- a URL the crawl's URL rules exclude, a URL of another site when
  ``RENDER_OTHER_SITES`` is off, and requests past ``RENDER_MAX_REQUESTS``
  a page are refused;
- the rest becomes a Scrapy request downloaded by the engine
  (``engine.download_async``): through every downloader middleware, so the
  network guard (with its connect-time check), robots.txt, the site's
  politeness for the whole cluster (``SendSpacingMiddleware``), backoff and
  WARC output hold for it as for any page. Scripts fetched whole (200) are
  kept in the worker's script cache (``RENDER_CACHE_MB``) for the next page.

A frame's document that comes as a download (``Content-Disposition:
attachment``) is refused too. What was refused is counted
(``render/refused/<reason>``, ``render/blocked/<type>``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from urllib.parse import urlsplit
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from crawler.requestmeta import (
    DONT_REDIRECT, DONT_RETRY, DOWNLOAD_SLOT, DOWNLOAD_TIMEOUT, HANDLE_HTTPSTATUS_ALL, RENDER_FOR,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from playwright.async_api import Request as PwRequest
    from playwright.async_api import Route
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

__all__ = ["RENDER_META", "PageRequests", "ScriptCache"]

# request.meta of a request a rendered page made: the page's URL.
RENDER_META = RENDER_FOR  # the registry's name; this one kept for importers

# Not passed on: the downloader sets its own, or they describe the browser's connection.
_DROP_REQUEST = frozenset({"host", "content-length", "connection", "accept-encoding", "keep-alive",
                           "proxy-connection", "upgrade", "te", "transfer-encoding"})
# Describe the bytes as they came over the wire; Scrapy hands them decoded.
_DROP_RESPONSE = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"})


def browser_headers(response: Response) -> dict[str, str]:
    """A Scrapy response's headers as Playwright fulfils them."""
    out: dict[str, str] = {}
    for name, values in response.headers.items():
        key = name.decode("latin-1").lower()
        if key in _DROP_RESPONSE:
            continue
        text = [v.decode("latin-1") for v in values]
        out[key] = "\n".join(text) if key == "set-cookie" else ", ".join(text)
    return out


class ScriptCache:
    """Scripts fetched for rendering (200, whole), by URL, least recently
    used dropped past ``limit`` bytes: the next page of a site reuses its
    scripts without asking the site again, as a browser's cache would."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self._entries: OrderedDict[str, tuple[int, dict[str, str], bytes]] = OrderedDict()
        # Scripts being fetched for one page, which another page waits for
        # rather than asking the site again (None: the fetch gave nothing to keep).
        self.pending: dict[str, asyncio.Future[tuple[int, dict[str, str], bytes] | None]] = {}

    def get(self, url: str) -> tuple[int, dict[str, str], bytes] | None:
        entry = self._entries.get(url)
        if entry is not None:
            self._entries.move_to_end(url)
        return entry

    def put(self, url: str, status: int, headers: dict[str, str], body: bytes) -> None:
        if len(body) > self.limit // 8 or url in self._entries:
            return
        self._entries[url] = (status, headers, body)
        self.size += len(body)
        while self.size > self.limit and self._entries:
            _, (_, _, old) = self._entries.popitem(last=False)
            self.size -= len(old)


class PageRequests:
    """The route handler of one rendered page, and what it saw."""

    def __init__(self, page_url: str, first: Response, *, fetch: Callable[[Request], Awaitable[Response]],
                 refuse: Callable[[str], str | None], blocked: frozenset[str], max_requests: int,
                 cache: ScriptCache, stats: StatsCollector, deadline: float) -> None:
        self.page_url = page_url
        self.first = first
        self.fetch = fetch
        self.refuse = refuse  # why a URL may not be fetched for the page (None: it may)
        self.blocked = blocked
        self.max_requests = max_requests
        self.cache = cache
        self.stats = stats
        self.deadline = deadline
        self.navigations: list[str] = []
        self.requests = 0
        # Set at the first request refused for RENDER_MAX_REQUESTS: the page
        # is taken as it is then rather than waited for (918 iframes ...).
        self.over_limit = asyncio.Event()
        # Set when a request of the page was cut at the page's deadline (its
        # download timeout is the time the page has left): the page then
        # "loads", but only because RENDER_TIMEOUT ran out.
        self.cut_at_deadline = False
        self.inflight = 0
        self.last_activity = time.monotonic()
        self._answered_first = False
        self._tasks: set[asyncio.Task[Any]] = set()

    def quiet_for(self) -> float:
        """Seconds since the last request ended (0 while one is in flight)."""
        return 0.0 if self.inflight else time.monotonic() - self.last_activity

    async def handle(self, route: Route, request: PwRequest) -> None:
        self.inflight += 1
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            await self._handle(route, request)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await route.abort("aborted")
            raise
        except Exception as exc:  # noqa: BLE001 - the page closed under us, or Playwright refused an answer
            logger.debug("Render request %(url)s: %(exc)s", {"url": request.url, "exc": exc})
        finally:
            self.inflight -= 1
            self.last_activity = time.monotonic()
            if task is not None:
                self._tasks.discard(task)

    def cancel(self) -> None:
        """The page is over: stop what it still waits for."""
        for task in list(self._tasks):
            task.cancel()

    async def _refused(self, route: Route, reason: str, code: str = "blockedbyclient", frame: bool = False) -> None:
        self.stats.inc_value(f"render/refused/{reason}")
        if frame:
            # A frame's document: 204 No Content leaves the frame empty.
            # Aborted, each would load Chromium's error page, and a page of
            # 918 iframes (libstdc++'s inherits.html) hung its renderer so.
            await route.fulfill(status=204, body=b"")
            return
        await route.abort(code)

    async def _handle(self, route: Route, request: PwRequest) -> None:
        url = request.url
        navigation = request.is_navigation_request()
        main = navigation and request.frame.parent_frame is None
        if main:
            if not self._answered_first:
                self._answered_first = True
                await route.fulfill(status=self.first.status, headers=browser_headers(self.first),
                                    body=self.first.body)
                return
            # The page moves itself elsewhere: a link, not this page's content.
            # Answered 204 No Content, on which a browser stays where it is
            # (refused, it would show its error page in the page's place).
            if url.startswith(("http://", "https://")) and url not in self.navigations:
                self.navigations.append(url)
            self.stats.inc_value("render/refused/navigation")
            await route.fulfill(status=204, body=b"")
            return
        kind = request.resource_type
        if kind in self.blocked:
            self.stats.inc_value(f"render/blocked/{kind}")
            await route.abort("blockedbyclient")
            return
        if not url.startswith(("http://", "https://")):
            await self._refused(route, "scheme", frame=navigation)
            return
        if request.method not in ("GET", "HEAD"):
            await self._refused(route, "method", frame=navigation)
            return
        cached = self.cache.get(url) if kind == "script" else None
        if cached is None and kind == "script" and url in self.cache.pending:
            cached = await asyncio.shield(self.cache.pending[url])
        if cached is not None:
            self.stats.inc_value("render/cache_hits")
            status, headers, body = cached
            await route.fulfill(status=status, headers=headers, body=body)
            return
        if self.requests >= self.max_requests:
            self.over_limit.set()
            await self._refused(route, "limit", frame=navigation)
            return
        why = self.refuse(url)
        if why is not None:
            await self._refused(route, why, frame=navigation)
            return
        self.requests += 1
        if kind != "script" or request.method != "GET":
            await self._download(route, request, url, kind, navigation)
            return
        pending = self.cache.pending[url] = asyncio.get_running_loop().create_future()
        try:
            pending.set_result(await self._download(route, request, url, kind, navigation))
        finally:
            if not pending.done():
                pending.set_result(None)
            self.cache.pending.pop(url, None)

    async def _download(self, route: Route, request: PwRequest, url: str, kind: str,
                        frame: bool) -> tuple[int, dict[str, str], bytes] | None:
        """Fetch through the engine and answer the browser; what the script
        cache keeps (a script fetched whole), else None."""
        headers = {k: v for k, v in (await request.all_headers()).items() if k.lower() not in _DROP_REQUEST}
        remaining = self.deadline - time.monotonic()
        if remaining <= 0.5:
            await self._refused(route, "time", "timedout", frame=frame)
            return None
        # A downloader slot of its own: in the host's slot it would queue
        # behind the pages the frontier leased there, and the page being
        # rendered would wait for the whole queue. Politeness does not
        # depend on it: the site's timeline in Redis spaces it (RESERVE).
        scrapy_request = Request(url, method=request.method, headers=headers, dont_filter=True, meta={
            RENDER_FOR: self.page_url, DONT_REDIRECT: True, HANDLE_HTTPSTATUS_ALL: True, DONT_RETRY: True,
            DOWNLOAD_TIMEOUT: remaining, DOWNLOAD_SLOT: "render " + (urlsplit(url).hostname or "")})
        self.stats.inc_value("render/requests")
        try:
            response = await self.fetch(scrapy_request)
        except IgnoreRequest as exc:
            # The network guard, robots.txt, or the crawl stopping: said by them, counted here.
            reason = "robots" if "robots" in type(exc).__name__.lower() or "robots" in str(exc).lower() else (
                "address" if type(exc).__name__ == "AddressRefused" else "ignored")
            await self._refused(route, reason, frame=frame)
            return None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed download is the page's failed request
            self.stats.inc_value("render/request_errors")
            logger.debug("Render request %(url)s failed: %(exc)s", {"url": url, "exc": exc})
            timed_out = "timeout" in type(exc).__name__.lower()
            self.cut_at_deadline = self.cut_at_deadline or timed_out
            await route.abort("timedout" if timed_out else "failed")
            return None
        if frame and b"attachment" in (response.headers.get(b"Content-Disposition") or b"").lower():
            await self._refused(route, "download", frame=frame)
            return None
        out_headers = browser_headers(response)
        kept = None
        if kind == "script" and response.status == 200 and request.method == "GET":
            kept = (response.status, out_headers, response.body)
            self.cache.put(url, *kept)
        await route.fulfill(status=response.status, headers=out_headers, body=response.body)
        return kept
