"""Per-site sessions (``-a sites=sites.yaml``, ``crawler/sessions/config.py``):
a downloader middleware that gives a site's requests its headers and
cookies, logs in when the site has a login, and logs in again when the site
answers with its login page.

- **Cookies** are per site: the file's and those the site sets. A site
  with a login shares them with the crawl's other workers through Redis,
  encrypted (Fernet) with a key derived from the site's secrets, which only
  the workers that hold them (from their environment or files) can
  derive: Redis never holds a session in the clear. A worker that needs a
  session takes the shared one before logging in itself.
- **The login**: the login page is fetched, its form filled with the
  fields and posted (``FormRequest.from_response``: hidden fields such as
  a CSRF token kept), redirects followed; the session holds when the answer
  is not the login page again. Neither request is stored, followed or
  archived with its body (the WARC request record's body is
  ``[redacted]``; ``Set-Cookie`` and ``Cookie`` headers too).
- **The crawl's file**: the first worker's sites file (it holds no
  secret) is recorded in the crawl; a worker that joins without ``-a
  sites`` takes it, its secrets from its own environment and files (one
  that lacks them stops with the reason).
- **Logged out**: a response redirected to, or a 401 for, the login path
  (``logged_out``) ends the session; the worker logs in again and the
  request is retried (``RETRY_TIMES``). Paths the file says never to fetch
  (and, with a login, any logout path) are refused before they are sent.

Stats: ``session/logins``, ``session/login_failed``, ``session/expired``,
``session/shared`` (a session taken from another worker), ``session/never``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
from http.cookies import CookieError, SimpleCookie
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.downloadermiddlewares.retry import get_retry_request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import FormRequest, HtmlResponse
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from crawler.frontier.faces import FrontierFaces
from crawler.requestmeta import DONT_OBEY_ROBOTSTXT, SESSION, SESSION_LOGIN
from crawler.sessions.config import SiteSession, SitesError, origin_of, parse_sites

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = ["SessionMiddleware"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _fernet(session: SiteSession, crawl: str) -> Any:
    from cryptography.fernet import Fernet

    digest = hashlib.sha256(b"site-crawler session\n" + crawl.encode() + b"\n" + session.secret()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


class SessionMiddleware:
    def __init__(self, crawler: Crawler, given: tuple[str, dict[str, SiteSession]] | None) -> None:
        self.crawler = crawler
        self.given = given
        self.sessions: dict[str, SiteSession] = given[1] if given is not None else {}
        self.settled = False  # the crawl's recorded sites file read, or this worker's recorded
        self.jars: dict[str, dict[str, str]] = {}
        self.stale: dict[str, dict[str, str]] = {}  # the cookies of a session that ended, by site
        self.locks: dict[str, asyncio.Lock] = {}
        self.faces = FrontierFaces(crawler)
        self.crawl = crawler.settings.get("CRAWL_NAME") or "site"

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        spider = crawler.spider
        # The site spider's -a sites; the re-crawl's (and any spider's) the crawl's recorded one.
        mw = cls(crawler, getattr(spider, "sessions", None))
        crawler.signals.connect(mw._settle, signal=signals.spider_opened)  # the frontier is open by then
        return mw

    def _settle(self) -> None:
        """Record this worker's sites file as the crawl's (the first worker's
        stays), or take the crawl's recorded one (its secrets from this
        worker's environment and files). Once, as the spider opens, before
        any request: a worker that cannot use the crawl's file stops."""
        if self.settled:
            return
        self.settled = True
        try:
            recorded = self.faces.spider.meta.crawl_policy("sites", self.given[0] if self.given else None)
        except Exception as exc:  # Redis away at the first request: this worker's own file, if any
            logger.warning("Could not read the crawl's sites file: %(exc)s", {"exc": exc})
            return
        if self.given is not None:
            if recorded is not None and recorded != self.given[0]:
                logger.warning("This worker's -a sites differs from the crawl's recorded sites file: it uses its own")
            return
        if recorded is None:
            return
        try:
            self.sessions = parse_sites(recorded, "the crawl's sites file (recorded by its first worker)")
        except SitesError as exc:
            logger.error("%(exc)s: this worker cannot crawl those sites as the crawl does; it stops",
                         {"exc": exc})
            deferred_from_coro(self.crawler.engine.close_spider_async(reason="sites_file_unusable"))
            return
        logger.info("Sessions for %(n)d sites from the crawl's recorded sites file", {"n": len(self.sessions)})

    # -- cookies -------------------------------------------------------------------------------------

    def _cookie_header(self, session: SiteSession) -> str:
        cookies = {**session.cookies, **self.jars.get(session.origin, {})}
        return "; ".join(f"{k}={v}" for k, v in cookies.items())

    def _absorb(self, session: SiteSession, response: Response) -> bool:
        """The response's Set-Cookie into the site's jar; whether it changed."""
        jar = self.jars.setdefault(session.origin, {})
        changed = False
        for raw in response.headers.getlist(b"Set-Cookie"):
            cookie: SimpleCookie = SimpleCookie()
            try:
                cookie.load(raw.decode("latin-1"))
            except CookieError:
                continue
            for name, morsel in cookie.items():
                gone = morsel["max-age"] in ("0", "-1") or morsel.value == ""
                if gone:
                    changed = jar.pop(name, None) is not None or changed
                elif jar.get(name) != morsel.value:
                    jar[name] = morsel.value
                    changed = True
        return changed

    def _share(self, session: SiteSession) -> None:
        jar = self.jars.get(session.origin)
        if not jar or session.login_url is None:
            return
        token = _fernet(session, self.crawl).encrypt(json.dumps(jar, sort_keys=True).encode())
        try:
            self.faces.spider.meta.set_session(session.origin, token.decode("ascii"))
        except Exception as exc:  # Redis away: this worker keeps its session
            logger.warning("Could not share the session of %(site)s: %(exc)s", {"site": session.origin, "exc": exc})

    def _shared(self, session: SiteSession) -> dict[str, str] | None:
        from cryptography.fernet import InvalidToken

        try:
            token = self.faces.spider.meta.session(session.origin)
        except Exception:
            return None
        if not token:
            return None
        try:
            jar = json.loads(_fernet(session, self.crawl).decrypt(token.encode("ascii")))
        except (InvalidToken, ValueError, UnicodeError):
            return None  # written with other secrets, or not by a worker
        if not isinstance(jar, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in jar.items()):
            return None
        return jar

    # -- the login -------------------------------------------------------------------------------------

    async def _download(self, request: Request) -> Response:
        return await maybe_deferred_to_future(self.crawler.engine.download(request))

    async def _session(self, session: SiteSession, stale: dict[str, str] | None = None) -> None:
        """A session for the site: this worker's, the shared one, or a login."""
        lock = self.locks.setdefault(session.origin, asyncio.Lock())
        async with lock:
            jar = self.jars.get(session.origin)
            if jar and jar != stale:
                return  # another request logged in meanwhile
            shared = self._shared(session)
            if shared and shared != stale:
                self.jars[session.origin] = shared
                self.crawler.stats.inc_value("session/shared")
                return
            await self._login(session)

    async def _login(self, session: SiteSession) -> None:
        stats = self.crawler.stats
        assert session.login_url is not None
        self.jars[session.origin] = {}
        # The operator's own login: not held to robots.txt (many sites disallow /login to crawlers).
        meta = {SESSION_LOGIN: session.origin, DONT_OBEY_ROBOTSTXT: True}
        try:
            page = await self._download(Request(session.login_url, dont_filter=True, meta=dict(meta)))
            if not isinstance(page, HtmlResponse):
                raise ValueError(f"the login page is not HTML ({page.status})")
            form = FormRequest.from_response(page, formdata=session.login_fields, dont_filter=True,
                                             meta=dict(meta))
            answer = await self._download(form)
        except Exception as exc:
            stats.inc_value("session/login_failed")
            logger.error("Login to %(site)s failed: %(exc)s", {"site": session.origin,
                                                                "exc": type(exc).__name__ + ": " + str(exc)[:200]})
            return
        path = urlsplit(answer.url).path
        again = session.logged_out is not None and path.startswith(session.logged_out) and \
            b'type="password"' in answer.body.lower()
        if answer.status >= 400 or again or not self.jars.get(session.origin):
            stats.inc_value("session/login_failed")
            logger.error("Login to %(site)s failed: the site answered %(status)s at %(path)s",
                         {"site": session.origin, "status": answer.status, "path": path})
            return
        stats.inc_value("session/logins")
        logger.info("Logged in to %(site)s", {"site": session.origin})
        self._share(session)

    # -- requests and responses ------------------------------------------------------------------------

    async def process_request(self, request: Request, spider: Spider | None = None) -> None:
        if not self.settled:
            self._settle()
        if not self.sessions:
            return
        origin = origin_of(request.url)
        session = self.sessions.get(origin or "")
        if session is None:
            return
        meta = request.meta
        if session.never_fetched(urlsplit(request.url).path or "/"):
            self.crawler.stats.inc_value("session/never")
            raise IgnoreRequest(f"never fetched: {request.url} (the sites file's never, or a logout)")
        for name, value in session.headers.items():
            request.headers[name] = value
        # robots.txt needs no session (and the login's own requests wait for it: never the other way round).
        if session.login_url is not None and not meta.get(SESSION_LOGIN) and not meta.get(DONT_OBEY_ROBOTSTXT) \
                and not self.jars.get(session.origin):
            await self._session(session, self.stale.get(session.origin))
        cookie = self._cookie_header(session)
        if cookie:
            request.headers[b"Cookie"] = cookie
        meta[SESSION] = session.origin

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Any:
        origin = request.meta.get(SESSION)
        session = self.sessions.get(origin) if isinstance(origin, str) else None
        if session is None:
            return response
        self._absorb(session, response)
        if request.meta.get(SESSION_LOGIN) or session.login_url is None or session.logged_out is None:
            return response
        target = ""
        if response.status in _REDIRECTS:
            target = urlsplit(response.urljoin((response.headers.get(b"Location") or b"").decode("latin-1"))).path
        asked = urlsplit(request.url).path
        if asked.startswith(session.logged_out):
            return response  # the login page itself, asked for
        if response.status == 401 or (target and target.startswith(session.logged_out)):
            stats = self.crawler.stats
            stats.inc_value("session/expired")
            logger.info("The session of %(site)s ended (%(status)s): logging in again",
                        {"site": session.origin, "status": response.status})
            self.stale[session.origin] = self.jars.get(session.origin) or {}
            self.jars[session.origin] = {}
            retry = get_retry_request(request, spider=self.crawler.spider, reason="session ended") \
                if self.crawler.spider is not None else None
            if retry is not None:
                retry.meta.pop(SESSION, None)
                return retry
        return response
