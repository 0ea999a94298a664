"""Where the crawler may connect, enforced in a crawl: no loopback, private
or metadata addresses.

A crawler inside a company network must not become a proxy into it. A seed,
link, redirect hop or meta refresh naming ``10.0.0.5``, ``169.254.169.254``
(or ``2852039166``, ``[::ffff:a9fe:a9fe]``), or a name resolving to one, is
refused. Which addresses are refused, and why, is ``crawler.network.policy``
(pure logic: ``refusal``, ``ip_of_host``, ``NetworkPolicy``); this module
is its Scrapy side.

Settings:

- ``NETWORK_ALLOWLIST`` - networks allowed anyway: a list or comma-separated
  string of CIDRs or addresses (``127.0.0.0/8,::1``). An entry allows that
  network only (``127.0.0.1`` allows neither ``127.0.0.2`` nor ``::1``; an
  IPv4-mapped address counts as its IPv4 address); ``0.0.0.0/0,::/0`` turns
  the guard off. A bad entry stops the crawl at start, naming the entry.
- ``TWISTED_DNS_RESOLVER = "crawler.network.guard.GuardedResolver"`` - the
  connect-time filter (Scrapy 2.19 deprecates ``DNS_RESOLVER`` for it).

No ``request.meta`` key opts out: requests come from pages and the shared
frontier, and an opt-out they could carry would be anyone's. Meta ``proxy``
is checked like the URL's host. Stats: ``netguard/refused/<reason>``, one
per refused request.

``NetworkGuardMiddleware`` (downloader middleware, before robots.txt
handling, whose requests pass through it too) raises ``AddressRefused`` (an
``IgnoreRequest``) for a host that is a refused IP literal or resolves to a
refused address: "refused 10.0.0.5 (private network) for host
intranet.example; allow with NETWORK_ALLOWLIST", logged at WARNING once per
host. A name that does not resolve passes: the connection then fails with
Scrapy's own DNS error (or a proxy resolves it, below).

``GuardedResolver`` (Scrapy's ``CachingThreadedResolver``) drops refused
answers when the connection resolves the host, so a name that rebinds after
the middleware's check is still refused. That shows up as Scrapy's DNS
failure, "CannotResolveHostError: DNS lookup failed: no results for hostname
lookup: NAME." (retried like any DNS failure), with a WARNING from here
naming the address and reason; FTP and proxy-tunnel connections fail with
``AddressRefusedLookupError``'s own message.

Why the check sees the address connected to (Scrapy 2.19, Twisted 26):

- The HTTP/1.1 and HTTP/2 handlers connect through ``HostnameEndpoint``,
  which hands every host, IP literals included, to ``reactor.nameResolver``:
  with Scrapy's resolver, ``SimpleResolverComplexifier`` calling
  ``getHostByName``. This resolver thus sees every address connected to: one
  IPv4 address per name (``socket.gethostbyname``), cached with no expiry in
  ``scrapy.resolver.dnscache``. The middleware looks names up through the
  same resolver and cache, so it checks the address the connection gets.
- Numeric IPv4 forms (``2852039166``, ``0x7f.1``, ``127.1``) reach
  ``gethostbyname`` as names and glibc reads them as addresses; an empty
  host (``http:///x``) becomes 0.0.0.0, this machine. ``ip_of_host`` reads
  them the same way.
- IPv6 literals never connect with Scrapy's default resolver
  (``gethostbyname("::1")`` fails: a DNS error). The middleware refuses
  refused ones with their reason all the same.
- ``TCP4ClientEndpoint`` (HTTPS through a proxy) and the FTP handler use
  ``reactor.connectTCP``: names go through this resolver, IP literals
  through no resolver at all; only the middleware sees those.
- ``CrawlerProcess``/``AsyncCrawlerProcess`` (so ``scrapy crawl``) install
  the resolver from the process's settings: a spider's ``custom_settings``
  do not reach it, and ``CrawlerRunner`` installs none. Without it the
  middleware resolves through the reactor's resolver (every address, every
  family), checks before connecting only, and says so once at WARNING.
  Handlers that resolve by themselves (aiohttp's) get that check only.

Proxies (``HTTP_PROXY``/``HTTPS_PROXY``, meta ``proxy``): the proxy resolves
the target and connects to it, out of the guard's sight. The target's host
is still checked as resolved here (a refused IP literal is always refused; a
name unknown here goes to the proxy), and so is the proxy's own address:
meta ``proxy`` in the middleware, the environment's proxies (which
``HttpProxyMiddleware`` adds after the middleware ran) when connecting, by
name, or for plain HTTP even as a literal. A proxy on a refused address
needs its address in ``NETWORK_ALLOWLIST`` (``10.1.2.3/32``); what it may
reach is then the proxy's policy.
"""

from __future__ import annotations

import logging
from ipaddress import ip_address
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlparse

from scrapy.exceptions import IgnoreRequest
from scrapy.resolver import CachingThreadedResolver
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.url import add_http_if_no_scheme
from twisted.internet.defer import Deferred
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolutionReceiver
from zope.interface import implementer

from crawler.network.policy import IPAddress, NetworkPolicy, Refusal, ip_of_host, parse_networks
from crawler.requestmeta import PROXY

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy import Request
    from scrapy.crawler import Crawler
    from twisted.internet.base import ReactorBase
    from twisted.internet.interfaces import IAddress, IHostResolution
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = [
    "AddressRefused",
    "AddressRefusedLookupError",
    "GuardedResolver",
    "NetworkGuardMiddleware",
]


def _policy(settings: Any) -> NetworkPolicy:
    return NetworkPolicy(parse_networks(settings.get("NETWORK_ALLOWLIST")))


class AddressRefused(IgnoreRequest):
    """A request the guard would not send; the message names host, address, reason."""

    def __init__(self, host: str, found: Refusal, role: str = "host") -> None:
        self.host = host
        self.refusal = found
        super().__init__(f"refused {found} for {role} {host}; allow with NETWORK_ALLOWLIST")


class AddressRefusedLookupError(DNSLookupError):
    """A DNS answer dropped at connect time; a DNSLookupError so that Twisted
    and Scrapy treat it as the name not resolving."""

    def __init__(self, name: str, found: Refusal) -> None:
        self.name = name
        self.refusal = found
        super().__init__(f"refused {found} for host {name} at connect time; allow with NETWORK_ALLOWLIST")


class _Once:
    """Says yes the first time it sees a key. It forgets everything after
    ``limit`` keys, so a crawl of millions of hosts keeps memory bounded at
    the price of an occasional repeated log line."""

    def __init__(self, limit: int = 10_000) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def __call__(self, key: str) -> bool:
        if key in self.seen:
            return False
        if len(self.seen) >= self.limit:
            self.seen.clear()
        self.seen.add(key)
        return True


class GuardedResolver(CachingThreadedResolver):
    """Scrapy's default resolver, without refused answers (see the module docstring)."""

    def __init__(self, reactor: ReactorBase, cache_size: int, timeout: float,
                 policy: NetworkPolicy | None = None) -> None:
        super().__init__(reactor, cache_size, timeout)
        self.policy = policy or NetworkPolicy()
        self._first = _Once()

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: ReactorBase) -> Self:
        # ``crawler`` is the CrawlerProcess: its settings are the process's.
        resolver = super().from_crawler(crawler, reactor)
        resolver.policy = _policy(crawler.settings)
        return resolver

    def lookup(self, name: str) -> Deferred[str]:
        """The cached, unfiltered answer: what the connection will be given
        unless the policy drops it (the middleware judges it itself)."""
        return super().getHostByName(name)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> Deferred[str]:
        d = super().getHostByName(name, timeout)
        d.addCallback(self._filter, name)
        return d

    def _filter(self, answer: str, name: str) -> str:
        found = self.policy.check(ip_address(answer))
        if found is None:
            return answer
        if self._first(name):
            logger.warning(
                "DNS answer %(refusal)s for %(name)s refused at connect time: the request fails "
                "as a DNS lookup error. Allow with NETWORK_ALLOWLIST.",
                {"refusal": found, "name": name},
            )
        raise AddressRefusedLookupError(name, found)


@implementer(IResolutionReceiver)
class _Addresses:
    def __init__(self) -> None:
        self.addresses: list[str] = []
        self.done: Deferred[list[str]] = Deferred()

    def resolutionBegan(self, resolutionInProgress: IHostResolution) -> None:
        pass

    def addressResolved(self, address: IAddress) -> None:
        host = getattr(address, "host", None)  # IPv4Address or IPv6Address
        if isinstance(host, str):
            self.addresses.append(host)

    def resolutionComplete(self) -> None:
        self.done.callback(self.addresses)


# Schemes whose URL host is the host connected to (data:, file: have none).
_NETWORK_SCHEMES = frozenset({"http", "https", "ftp"})


class NetworkGuardMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.policy = _policy(crawler.settings)
        self.crawler = crawler
        self._first = _Once()
        self._resolver_checked = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        parsed = urlparse_cached(request)
        if parsed.scheme not in _NETWORK_SCHEMES:
            return
        await self._check(request, parsed.hostname or "", "host")
        proxy = request.meta.get(PROXY)
        if proxy:
            await self._check(request, urlparse(add_http_if_no_scheme(proxy)).hostname or "", "proxy")

    async def _check(self, request: Request, host: str, role: str) -> None:
        literal = ip_of_host(host)
        addresses = [literal] if literal is not None else await self._resolve(host)
        for address in addresses:
            found = self.policy.check(address)
            if found is not None:
                self._refuse(request, AddressRefused(host, found, role))

    async def _resolve(self, host: str) -> list[IPAddress]:
        from twisted.internet import reactor

        resolver = reactor.resolver
        if isinstance(resolver, GuardedResolver):
            try:
                answer: str = await maybe_deferred_to_future(resolver.lookup(host))
            except DNSLookupError:
                return []  # the connection fails the same way; a proxy may resolve it
            return [ip_address(answer)]
        self._warn_unguarded(resolver)
        receiver = _Addresses()
        reactor.nameResolver.resolveHostName(receiver, host, 0)
        return [ip_address(a) for a in await maybe_deferred_to_future(receiver.done)]

    def _warn_unguarded(self, resolver: object) -> None:
        if self._resolver_checked:
            return
        self._resolver_checked = True
        logger.warning(
            "The reactor's resolver is %(resolver)s, not crawler.network.guard.GuardedResolver "
            "(TWISTED_DNS_RESOLVER, installed by `scrapy crawl`): addresses are checked before "
            "each request but not when connecting, so a name that rebinds gets through.",
            {"resolver": type(resolver).__name__}, extra={"spider": self.crawler.spider},
        )

    def _refuse(self, request: Request, exc: AddressRefused) -> NoReturn:
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(f"netguard/refused/{exc.refusal.reason}")
        if self._first(exc.host):
            logger.warning(
                "%(request)s: %(exc)s (further requests to this host are counted in "
                "netguard/refused/%(reason)s, not logged)",
                {"request": request, "exc": exc, "reason": exc.refusal.reason},
                extra={"spider": self.crawler.spider},
            )
        raise exc
