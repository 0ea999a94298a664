"""Rendering pages whose content scripts build (``-a render``).

``-a render=never`` (default) renders nothing. ``always`` renders every
HTML page; ``auto`` only pages whose static HTML looks built by scripts
(``crawler/render/decide.py``), and stops on a site where rendering never
paid off. The choice is the crawl's, recorded in its meta like ``-a
follow``.

A page is rendered *after* its fetch, from the response the crawl got: the
browser is handed that response as the page's document, runs its scripts,
and every request they make goes through Scrapy's downloader
(``router.py``); the DOM, once the network has been quiet for
``RENDER_SETTLE`` seconds (or at ``RENDER_TIMEOUT``), is the page's HTML
for extraction, typing, the duplicate check and link following. So the
page's own fetch keeps its lease, politeness and WARC record, and a
rendering that fails (the browser crashed, hung, or ran the page out of
memory) is a retry of the page (``RenderFailed``; the spider asks for it),
never its loss; after ``RETRY_TIMES`` the page is stored from its static
HTML with ``rendered`` false.

Settings:

- ``RENDER_BROWSER`` - the Chromium to drive (a path or a name on PATH;
  default: ``chromium``, ``chromium-browser``, ``google-chrome``); a crawl
  with ``-a render=auto|always`` and none stops at start.
- ``RENDER_CONCURRENCY`` - pages rendered at once by a worker.
- ``RENDER_TIMEOUT`` - seconds a page may take, load and settle; then its
  DOM is taken as it is.
- ``RENDER_SETTLE`` - seconds without a request in flight, after the load
  event and Playwright's network idle (500 ms without one), after which the
  page is taken as built.
- ``RENDER_MAX_REQUESTS`` - requests one page may make.
- ``RENDER_BLOCK`` - resource types not fetched.
- ``RENDER_OTHER_SITES`` - whether a page may load from other sites (each
  under its own site's robots.txt and politeness).
- ``RENDER_MEMORY_MB`` - a page's JavaScript heap.
- ``RENDER_PAGES_PER_BROWSER`` - pages after which a browser is retired (new
  pages go to a new one; it closes once its last page has ended).
- ``RENDER_CACHE_MB`` - the worker's script cache.
- ``RENDER_AUTO_PROBE`` - once a site has had this many renderings and
  fewer than one in this many paid off, ``auto`` stops rendering it.

Stats: ``render/pages``, ``render/candidates`` and ``render/candidate/<why>``
(``auto``), ``render/paid_off``, ``render/site_static``, ``render/skipped_static_site``,
``render/load_timeout``, ``render/settle_timeout``, ``render/over_limit``, ``render/failed/<reason>``,
``render/gave_up``,
``render/requests``, ``render/cache_hits``, ``render/request_errors``,
``render/refused/<reason>``, ``render/blocked/<type>``, ``render/navigations``,
``render/escaped``, ``render/browser_launches``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.downloadermiddlewares.retry import get_retry_request

from crawler.reading.resolve import resolve_links
from crawler.render.browser import ANSWER, Browser, BrowserUnavailable, find_browser
from crawler.render.decide import RENDER_MODES, Shape, SiteMemory, looks_scripted, paid_off, shape_of
from crawler.render.router import PageRequests, ScriptCache
from crawler.requestmeta import DOWNLOAD_LATENCY
from crawler.scope.urls import LinkResolver, url_site

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from crawler.reading.extract import Page
    from crawler.following.follow import Follower
    from crawler.items import PageItem

logger = logging.getLogger(__name__)

__all__ = ["RENDER_MODES", "RenderFailed", "Rendered", "Renderer"]

# The first line a request to the proxy sink sent, when it is Chromium's own
# (its vendor's update, time and account services), not a page's.
_BROWSER_OWN = re.compile(r"^(?:CONNECT |[A-Z]+ https?://)(?:[a-z0-9-]+\.)*(?:google\.com|googleapis\.com|gstatic\.com|"
                          r"gvt1\.com|googleusercontent\.com)(?::\d+)?[/ ]")


async def _unless(work: Awaitable[Any], event: asyncio.Event) -> bool:
    """Await ``work`` unless ``event`` is set first (``work`` is then
    cancelled): whether the event came first."""
    task = asyncio.ensure_future(work)
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if task.done():
        task.result()  # its error, if any
        return False
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved: an error of the abandoned wait is of no interest
    return True


class RenderFailed(Exception):
    """The browser could not render the page (crashed, hung, out of memory):
    a retry of the page. ``reason`` is a stat name part."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Rendered:
    html: str
    navigations: list[str] = field(default_factory=list)
    requests: int = 0


class Renderer:
    """This worker's rendering: which pages, and the browser that renders them."""

    def __init__(self, crawler: Crawler, follower: Follower, resolver: LinkResolver | None = None) -> None:
        s = crawler.settings
        self.crawler = crawler
        self.follower = follower
        self.mode = "never"
        self.configured_browser = s.get("RENDER_BROWSER") or None
        self.concurrency = s.getint("RENDER_CONCURRENCY")
        self.timeout = s.getfloat("RENDER_TIMEOUT")
        self.settle = s.getfloat("RENDER_SETTLE")
        self.max_requests = s.getint("RENDER_MAX_REQUESTS")
        self.blocked = frozenset(s.getlist("RENDER_BLOCK"))
        self.other_sites = s.getbool("RENDER_OTHER_SITES")
        self.memory_mb = s.getint("RENDER_MEMORY_MB")
        self.pages_per_browser = s.getint("RENDER_PAGES_PER_BROWSER")
        self.cache = ScriptCache(s.getint("RENDER_CACHE_MB") * 1024 * 1024)
        self.memory = SiteMemory(probe=s.getint("RENDER_AUTO_PROBE"))
        self._resolver = resolver or LinkResolver()  # the spider's: the links of its pages resolved once
        self.user_agent = s.get("USER_AGENT")
        self.browser: Browser | None = None
        self._slots: asyncio.Semaphore | None = None
        self._escape_said = False
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @property
    def stats(self) -> Any:
        return self.crawler.stats

    def configure(self, mode: str | None) -> None:
        """The crawl's ``-a render`` (settled with its meta). A mode that
        renders needs a browser: missing, it is a ``ConfigError``-like stop
        (``BrowserUnavailable``) now, not a crawl that quietly renders nothing."""
        self.mode = mode if mode in RENDER_MODES else "never"
        if self.mode != "never" and self.browser is None:
            executable = find_browser(self.configured_browser)
            self.browser = Browser(executable, memory_mb=self.memory_mb, pages_per_browser=self.pages_per_browser,
                                   user_agent=self.user_agent, on_escape=self._escaped)
            self._slots = asyncio.Semaphore(max(1, self.concurrency))

    # -- which pages -------------------------------------------------------------------
    def wants(self, site: str, shape: Shape) -> bool:
        """Whether to render a page of ``site`` whose static HTML has ``shape``."""
        if self.mode == "always":
            return True
        if self.mode != "auto":
            return False
        why = looks_scripted(shape)
        if why is None:
            return False
        self.stats.inc_value("render/candidates")
        self.stats.inc_value(f"render/candidate/{why.replace(' ', '_')}")
        if not self.memory.worth_rendering(site):
            self.stats.inc_value("render/skipped_static_site")
            return False
        return True

    def new_links(self, url: str, static: Page, rendered: Page) -> int:
        """Links of the rendered page that neither its static HTML nor this
        worker's crawl had (``Follower.seen``): what rendering found."""
        before, _ = resolve_links(self._resolver, url, static)
        after, _ = resolve_links(self._resolver, url, rendered)
        seen = self.follower.seen
        return sum(1 for u in after if u not in before and u not in seen)

    def learn(self, site: str, static: Shape, rendered: Shape) -> None:
        """What a rendering gave, against the static page: the site's memory."""
        paid = paid_off(static, rendered)
        if paid:
            self.stats.inc_value("render/paid_off")
        if self.memory.record(site, paid) and self.mode == "auto":
            self.stats.inc_value("render/site_static")
            done, got = self.memory.counts(site)
            logger.info("Rendering paid off on %(paid)d of %(n)d pages of %(site)s: its pages are no longer rendered",
                        {"site": site, "n": done, "paid": got})

    # -- rendering ---------------------------------------------------------------------
    def _refuse(self, page_site: str) -> Any:
        follower = self.follower

        def refuse(url: str) -> str | None:
            try:
                site = url_site(url)
            except Exception:  # noqa: BLE001 - a URL the browser made up that ours cannot read
                return "url"
            if not self.other_sites and site != page_site:
                return "other_site"
            if follower.allows(url) is not None:
                return "rules"
            return None

        return refuse

    async def _fetch(self, request: Request) -> Response:
        engine = self.crawler.engine
        assert engine is not None
        return await engine.download_async(request)

    async def page_step(self, spider: Spider, response: Response, item: PageItem, page: Page,
                        extract: Callable[[str], Page]) -> Request | tuple[str, Page, list[str]] | None:
        """The render step of a page's life (``crawler/spiders/site.py``):
        the page's DOM, its extraction (``extract``) and the URLs its scripts
        tried to send the browser to; None to keep the static page; a retry
        of the page when the browser failed it (after ``RETRY_TIMES``: the
        static page, said). Sets ``item.rendered``."""
        stats = self.stats
        item.rendered = False
        if item.content_type not in (None, "text/html", "application/xhtml+xml"):
            return None  # plain text: nothing runs in it
        static = shape_of(response.body, len(page.text), len(page.links))
        if not self.wants(item.site, static):
            return None
        try:
            rendered = await self.render(response, item.url, item.site)
        except (RenderFailed, BrowserUnavailable) as exc:
            reason = exc.reason if isinstance(exc, RenderFailed) else "no_browser"
            stats.inc_value(f"render/failed/{reason}")
            retry = get_retry_request(response.request, spider=spider, reason=f"render {reason}") \
                if response.request is not None else None
            if retry is not None:
                retry.meta.pop(DOWNLOAD_LATENCY, None)  # the last fetch's, not the retry's
                logger.warning("%(exc)s: the page is retried", {"exc": exc}, extra={"spider": spider})
                return retry
            stats.inc_value("render/gave_up")
            logger.warning("Gave up rendering %(url)s (%(exc)s): stored from its static HTML",
                           {"url": item.url, "exc": exc}, extra={"spider": spider})
            return None
        if rendered is None:
            return None
        again = extract(rendered.html)
        self.learn(item.site, static, Shape(len(again.text), static.links + self.new_links(item.url, page, again)))
        item.rendered = True
        return rendered.html, again, rendered.navigations

    async def render(self, response: Response, url: str, site: str | None = None) -> Rendered | None:
        """The page's DOM after its scripts ran; ``RenderFailed`` when the
        browser failed it; None when, by the page's turn, ``auto`` has taken
        ``site`` as static (renderings that waited for a slot then)."""
        assert self.browser is not None and self._slots is not None
        async with self._slots:
            if site is not None and self.mode == "auto" and not self.memory.worth_rendering(site):
                self.stats.inc_value("render/skipped_static_site")
                return None
            started = time.monotonic()
            try:
                rendered = await asyncio.wait_for(self._render(response, url, started), self.timeout + 30)
            except asyncio.TimeoutError:
                # Past every bound of _render: the browser itself no longer answers.
                await self.browser.restart()
                raise RenderFailed("hung", f"the browser stopped answering while rendering {url}: "
                                           "restarted") from None
            except (BrowserUnavailable, RenderFailed):
                raise
            except Exception as exc:  # noqa: BLE001 - Playwright's errors: the page or the browser went away
                # A browser that died is started again on next use (Browser._ensure).
                raise RenderFailed("browser", f"rendering {url} failed: {str(exc).splitlines()[0][:300]}") from exc
            self.stats.inc_value("render/pages")
            if rendered.navigations:
                self.stats.inc_value("render/navigations", len(rendered.navigations))
            return rendered

    async def _render(self, response: Response, url: str, started: float) -> Rendered:
        assert self.browser is not None
        context, end = await self.browser.context()
        self.stats.set_value("render/browser_launches", self.browser.launches)
        deadline = started + self.timeout
        requests = PageRequests(url, response, fetch=self._fetch, refuse=self._refuse(url_site(url)),
                                blocked=self.blocked, max_requests=self.max_requests, cache=self.cache,
                                stats=self.stats, deadline=deadline)
        crashed: list[str] = []
        try:
            await context.route("**/*", requests.handle)
            page = await context.new_page()
            page.on("crash", lambda _: crashed.append("crash"))
            try:
                over = await _unless(page.goto(url, wait_until="load",
                                               timeout=max(1.0, deadline - time.monotonic()) * 1000), requests.over_limit)
                # Loaded only because a request of its was cut at the page's
                # deadline: as much a load timeout as the one below (which of
                # the two comes first is a race).
                late = requests.cut_at_deadline and time.monotonic() >= deadline - 1.0
            except Exception as exc:  # noqa: BLE001 - never loaded in time: the DOM as it is then
                if not crashed and "Timeout" not in type(exc).__name__:
                    raise
                late = not crashed
                over = False
            if late:
                self.stats.inc_value("render/load_timeout")
                logger.debug("%(url)s did not finish loading in RENDER_TIMEOUT: its DOM as it is", {"url": url})
            if not over and not crashed and time.monotonic() < deadline:
                # Network idle as Playwright's driver counts it (500 ms with no
                # request in flight, those waiting on the router included: it
                # sees them before this process does), then RENDER_SETTLE of
                # quiet as the router saw it.
                try:
                    over = await _unless(page.wait_for_load_state(
                        "networkidle", timeout=max(0.1, deadline - time.monotonic()) * 1000), requests.over_limit)
                except Exception as exc:  # noqa: BLE001 - never idle in time (a page that polls): as it is
                    if crashed or "Timeout" not in type(exc).__name__:
                        raise
                    self.stats.inc_value("render/settle_timeout")
            while not over and not crashed and time.monotonic() < deadline and requests.quiet_for() < self.settle:
                await asyncio.sleep(0.05)
            if over and not crashed:
                # Past RENDER_MAX_REQUESTS: what the page still asks for is
                # refused anyway. Its loading is stopped and its DOM taken now.
                self.stats.inc_value("render/over_limit")
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(page.evaluate("window.stop()"), ANSWER)
            try:
                html = await asyncio.wait_for(page.content(), ANSWER)
                opened = await asyncio.wait_for(page.evaluate("window.__crawlerOpened || []"), ANSWER)
            except asyncio.TimeoutError:
                raise RenderFailed("hung", f"the page's scripts held its renderer past RENDER_TIMEOUT: {url}") from None
        except Exception as exc:
            if crashed or "crashed" in str(exc).lower():
                raise RenderFailed("crashed", f"the page crashed its renderer (out of memory: RENDER_MEMORY_MB?): "
                                              f"{url}") from exc
            raise
        finally:
            requests.cancel()
            await end()
        for target in opened if isinstance(opened, list) else ():
            if isinstance(target, str) and target.startswith(("http://", "https://")) \
                    and target not in requests.navigations:
                requests.navigations.append(target[:4096])
        return Rendered(html, requests.navigations, requests.requests)

    def _escaped(self, line: str) -> None:
        if not line:
            # A connection opened ahead of need (Chromium connects to its
            # proxy early) that sent nothing: nothing left.
            self.stats.inc_value("render/proxy_idle_connections")
            return
        if _BROWSER_OWN.search(line):
            # Chromium's own background requests (update checks, time,
            # accounts) to its vendor's services: no page's, refused all the same.
            self.stats.inc_value("render/browser_own_refused")
            logger.debug("The browser's own request refused at its proxy: %(line)s", {"line": line})
            return
        # A download (Chromium's download manager asks outside interception)
        # or anything else that went around it: it reached no server.
        self.stats.inc_value("render/escaped")
        if not self._escape_said:
            self._escape_said = True
            logger.info("A request went around the renderer's interception (a download?) and was refused at its "
                        "proxy: %(line)s (counted in render/escaped; not said again)", {"line": line})
        else:
            logger.debug("Refused at the renderer's proxy: %(line)s", {"line": line})

    async def _closed(self, spider: Any) -> None:
        if self.browser is not None:
            await self.browser.close()
