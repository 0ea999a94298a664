"""One headless Chromium per worker, driven by Playwright, with no network
of its own.

- **Launched on first use** from ``RENDER_BROWSER`` (a path; default: the
  first of ``chromium``, ``chromium-browser``, ``google-chrome`` on PATH):
  the machine's browser through Playwright's ``executable_path``, so
  nothing is downloaded at run time. A crawl that never renders never
  starts it.
- **No network of its own.** Every request a page makes is intercepted
  (``context.route``) and answered by the router (``router.py``) with what
  Scrapy's downloader fetched, or refused. Behind that, the browser's proxy
  is a sink on 127.0.0.1 that this worker holds (``--proxy-server``, with
  ``<-loopback>`` so that loopback goes there too): anything that escaped
  interception (a preconnect, a WebSocket) lands there, is refused and
  counted (``render/escaped``; Chromium's own update and time checks to
  its vendor: ``render/browser_own_refused``), and reaches no server. WebRTC may not use
  UDP outside the proxy.
- **Bounded.** One browser context per page, closed after it; the V8 heap
  of a page is capped at ``RENDER_MEMORY_MB`` (a page over it crashes, which
  costs a retry); the browser is restarted after ``RENDER_PAGES_PER_BROWSER``
  pages, and at once when it crashed or a page hung (``restart``).
- Downloads are refused (``accept_downloads=False``; Chromium's download
  manager asks outside interception, so a download's request is one the
  proxy sink refuses), service workers blocked, ``window.open`` opens
  nothing (``NO_POPUPS``: the URL is kept as a link) and a pop-up that
  opens anyway is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from playwright.async_api import Browser as PwBrowser
    from playwright.async_api import BrowserContext, Playwright

logger = logging.getLogger(__name__)

__all__ = ["BROWSERS", "Browser", "BrowserUnavailable", "ProxySink", "find_browser"]

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


# Run in every frame before the page's scripts: window.open opens nothing and
# keeps the URL asked for, which the renderer reads as a link of the page.
NO_POPUPS = """(() => {
  const opened = [];
  Object.defineProperty(window, '__crawlerOpened', {value: opened});
  window.open = function (url) {
    try { if (opened.length < 100) opened.push(String(new URL(url, location.href))); } catch (e) {}
    return null;
  };
})();"""


class BrowserUnavailable(RuntimeError):
    """No browser to render with (a configuration error, not a page's)."""


def find_browser(configured: str | None) -> str:
    """The browser executable: ``configured`` (a path or a name on PATH), or
    the first of ``BROWSERS`` on PATH; ``BrowserUnavailable`` with what to do."""
    names = (configured,) if configured else BROWSERS
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    if configured:
        raise BrowserUnavailable(f"RENDER_BROWSER={configured!r} is not an executable")
    raise BrowserUnavailable("-a render needs a Chromium and none is installed: apt-get install chromium "
                             "(or set RENDER_BROWSER to a Chromium or Chrome executable)")


class ProxySink:
    """The browser's proxy: a listening socket on 127.0.0.1 that answers
    every connection with 403 and closes it, counting what tried to leave
    (``on_escape(first_line)``). Interception answers every request before
    it would get here; a connection here is something that escaped it."""

    def __init__(self, on_escape: Callable[[str], None]) -> None:
        self.on_escape = on_escape
        self.server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self.port

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            self.on_escape(line[:300].decode("latin-1", "replace").strip())
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


class Browser:
    """This worker's Chromium: ``context()`` gives a fresh browser context
    for one page; ``page_done()`` counts pages and restarts the browser
    after ``pages_per_browser``; ``restart()`` drops it at once."""

    def __init__(self, executable: str, *, memory_mb: int, pages_per_browser: int, user_agent: str | None,
                 on_escape: Callable[[str], None]) -> None:
        self.executable = executable
        self.memory_mb = memory_mb
        self.pages_per_browser = max(1, pages_per_browser)
        self.user_agent = user_agent
        self.sink = ProxySink(on_escape)
        self._playwright: Playwright | None = None
        self._browser: PwBrowser | None = None
        self._lock = asyncio.Lock()
        self._pages = 0
        self.launches = 0
        self._closed = False

    def _args(self, port: int) -> list[str]:
        return [
            f"--proxy-server=http://127.0.0.1:{port}",
            "--proxy-bypass-list=<-loopback>",
            "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
            "--webrtc-ip-handling-policy=disable_non_proxied_udp",
            "--dns-prefetch-disable",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-domain-reliability",
            "--disable-sync",
            "--no-pings",
            "--disable-default-apps",
            "--no-default-browser-check",
            "--disable-client-side-phishing-detection",
            "--disable-features=NetworkPrediction,Translate,OptimizationHints,MediaRouter,"
            "OptimizationGuideModelDownloading,AutofillServerCommunication,CertificateTransparencyComponentUpdater",
            f"--js-flags=--max-old-space-size={self.memory_mb}",
        ]

    async def _ensure(self) -> PwBrowser:
        async with self._lock:
            if self._closed:
                raise BrowserUnavailable("the renderer is closed")
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            await self._drop()
            from playwright.async_api import async_playwright

            if self.sink.server is None:
                await self.sink.start()
            self._playwright = await async_playwright().start()
            try:
                self._browser = await self._playwright.chromium.launch(
                    executable_path=self.executable, headless=True, args=self._args(self.sink.port),
                    handle_sigint=False, handle_sigterm=False, handle_sighup=False)
            except Exception as exc:
                await self._drop()
                raise BrowserUnavailable(f"could not start {self.executable}: {str(exc).splitlines()[0]}") from exc
            self.launches += 1
            self._pages = 0
            return self._browser

    async def context(self) -> BrowserContext:
        """A new browser context (its own cookies, cache and storage) for one page."""
        browser = await self._ensure()
        kwargs: dict[str, Any] = {"service_workers": "block", "accept_downloads": False,
                                  "java_script_enabled": True, "viewport": {"width": 1280, "height": 1024}}
        if self.user_agent:
            kwargs["user_agent"] = self.user_agent
        context = await browser.new_context(**kwargs)
        await context.add_init_script(NO_POPUPS)

        def close_popup(page: Any) -> None:
            if len(context.pages) > 1:
                asyncio.ensure_future(page.close())

        context.on("page", close_popup)
        return context

    async def page_done(self) -> None:
        """One page rendered: the browser is restarted every ``pages_per_browser``."""
        self._pages += 1
        if self._pages >= self.pages_per_browser:
            async with self._lock:
                await self._drop()

    async def restart(self) -> None:
        """The browser crashed or a page hung in it: drop it, started anew on next use."""
        async with self._lock:
            await self._drop()

    async def _drop(self) -> None:
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = None
        if browser is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(browser.close(), 10)
        if playwright is not None:
            # Stopping the driver ends the browser it started, hung or not.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(playwright.stop(), 10)

    @property
    def running(self) -> bool:
        return self._browser is not None and self._browser.is_connected()

    async def close(self) -> None:
        self._closed = True
        async with self._lock:
            await self._drop()
        self.sink.close()
