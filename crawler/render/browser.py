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
  costs a retry); a browser is retired after ``RENDER_PAGES_PER_BROWSER``
  pages (new pages go to a new one; it closes once its last page has
  ended), and dropped at once when a page hung in it (``restart``).
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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from playwright.async_api import Browser as PwBrowser
    from playwright.async_api import BrowserContext, Playwright

logger = logging.getLogger(__name__)

__all__ = ["BROWSERS", "Browser", "BrowserUnavailable", "ProxySink", "find_browser"]

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Seconds the browser has to answer a question about a page (its DOM, its
# closing) once the page's own time is up.
ANSWER = 10.0


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


@dataclass(eq=False)
class _Generation:
    """One launched browser (and the Playwright driver that started it)."""

    playwright: Playwright
    browser: PwBrowser
    started: int = 0  # pages begun in it
    active: int = 0  # pages in it now
    closed: bool = False


class Browser:
    """This worker's Chromium: ``context()`` gives a fresh browser context
    for one page and the call that ends it. After ``pages_per_browser``
    pages a browser is retired: new pages go to a new one, and the old one
    is closed once its last page has ended (a recycle fails no page);
    ``restart()`` drops a browser at once (one that hung)."""

    def __init__(self, executable: str, *, memory_mb: int, pages_per_browser: int, user_agent: str | None,
                 on_escape: Callable[[str], None]) -> None:
        self.executable = executable
        self.memory_mb = memory_mb
        self.pages_per_browser = max(1, pages_per_browser)
        self.user_agent = user_agent
        self.sink = ProxySink(on_escape)
        self._current: _Generation | None = None
        self._all: set[_Generation] = set()
        self._lock = asyncio.Lock()
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

    async def _generation(self) -> _Generation:
        """The browser new pages go to: launched when there is none, the
        last one died, or it has had its ``pages_per_browser``."""
        async with self._lock:
            if self._closed:
                raise BrowserUnavailable("the renderer is closed")
            gen = self._current
            if gen is not None and gen.browser.is_connected() and gen.started < self.pages_per_browser:
                return gen
            self._current = None
            if gen is not None and (gen.active <= 0 or not gen.browser.is_connected()):
                await self._close(gen)
            from playwright.async_api import async_playwright

            if self.sink.server is None:
                await self.sink.start()
            playwright = await async_playwright().start()
            try:
                browser = await playwright.chromium.launch(
                    executable_path=self.executable, headless=True, args=self._args(self.sink.port),
                    handle_sigint=False, handle_sigterm=False, handle_sighup=False)
            except Exception as exc:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(playwright.stop(), ANSWER)
                raise BrowserUnavailable(f"could not start {self.executable}: {str(exc).splitlines()[0]}") from exc
            self.launches += 1
            self._current = _Generation(playwright, browser)
            self._all.add(self._current)
            return self._current

    async def context(self) -> tuple[BrowserContext, Callable[[], Awaitable[None]]]:
        """A new browser context (its own cookies, cache and storage) for one
        page, and the call that ends it (closes the context; a context that
        cannot be closed takes its browser with it)."""
        gen = await self._generation()
        gen.started += 1
        gen.active += 1
        try:
            kwargs: dict[str, Any] = {"service_workers": "block", "accept_downloads": False,
                                      "java_script_enabled": True, "viewport": {"width": 1280, "height": 1024}}
            if self.user_agent:
                kwargs["user_agent"] = self.user_agent
            context = await gen.browser.new_context(**kwargs)
            await context.add_init_script(NO_POPUPS)
        except BaseException:
            gen.active -= 1
            await self._retire_if_done(gen)
            raise

        def close_popup(page: Any) -> None:
            if len(context.pages) > 1:
                asyncio.ensure_future(page.close())

        context.on("page", close_popup)

        async def end() -> None:
            try:
                await asyncio.wait_for(context.close(), ANSWER)
            except Exception:  # noqa: BLE001 - a page that holds its context: the browser goes
                await self.restart(gen)
            finally:
                gen.active -= 1
                await self._retire_if_done(gen)

        return context, end

    async def _retire_if_done(self, gen: _Generation) -> None:
        if gen is not self._current and gen.active <= 0:
            await self._close(gen)

    async def restart(self, gen: _Generation | None = None) -> None:
        """A browser hung (or crashed): drop it now, whatever pages it still
        has (they fail: retries); new pages get a new one."""
        gen = gen or self._current
        if gen is None:
            return
        if gen is self._current:
            self._current = None
        await self._close(gen)

    async def _close(self, gen: _Generation) -> None:
        if gen.closed:
            return
        gen.closed = True
        self._all.discard(gen)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(gen.browser.close(), ANSWER)
        # Stopping the driver ends the browser it started, hung or not.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(gen.playwright.stop(), ANSWER)

    async def close(self) -> None:
        self._closed = True
        async with self._lock:
            self._current = None
            for gen in list(self._all):
                await self._close(gen)
        self.sink.close()
