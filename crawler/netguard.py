"""Where the crawler may connect: no loopback, private or metadata addresses.

A crawler inside a company network must not become a proxy into it. A seed,
link, redirect hop or meta refresh naming ``10.0.0.5``, ``169.254.169.254``
(or ``2852039166``, ``[::ffff:a9fe:a9fe]``), or a name resolving to one, is
refused. Pure part (no Scrapy): ``refusal`` says why an address is refused
(``REASONS``: the stat suffix and the message's words): loopback, private
(RFC 1918, fc00::/7, local-use NAT64), link-local, cgnat (100.64.0.0/10),
multicast, broadcast, reserved (240.0.0.0/4, IETF blocks, IPv6 outside
2000::/3), unspecified, this-network (0.0.0.0/8), benchmarking,
documentation, site-local (fec0::/10), cloud-metadata (``METADATA``);
IPv4-mapped, -compatible, 6to4 and NAT64 addresses are judged by the IPv4
address inside. ``ip_of_host`` reads a URL host as an address,
``parse_networks`` the setting, ``NetworkPolicy`` combines them.

Settings:

- ``NETWORK_ALLOWLIST`` - networks allowed anyway: a list or comma-separated
  string of CIDRs or addresses (``127.0.0.0/8,::1``). An entry allows that
  network only (``127.0.0.1`` allows neither ``127.0.0.2`` nor ``::1``; an
  IPv4-mapped address counts as its IPv4 address); ``0.0.0.0/0,::/0`` turns
  the guard off. A bad entry stops the crawl at start, naming the entry.
- ``TWISTED_DNS_RESOLVER = "crawler.netguard.GuardedResolver"`` - the
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
from dataclasses import dataclass
from ipaddress import (
    IPv4Address,
    IPv4Network,
    IPv6Address,
    IPv6Network,
    ip_address,
    ip_network,
)
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import unquote, urlparse

from scrapy.exceptions import IgnoreRequest
from scrapy.resolver import CachingThreadedResolver
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from scrapy.utils.url import add_http_if_no_scheme
from twisted.internet.defer import Deferred
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolutionReceiver
from zope.interface import implementer

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from scrapy import Request
    from scrapy.crawler import Crawler
    from twisted.internet.base import ReactorBase
    from twisted.internet.interfaces import IAddress, IHostResolution
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = [
    "METADATA",
    "REASONS",
    "AddressRefused",
    "AddressRefusedLookupError",
    "GuardedResolver",
    "NetworkGuardMiddleware",
    "NetworkPolicy",
    "Refusal",
    "ip_of_host",
    "parse_networks",
    "refusal",
]

IPAddress = IPv4Address | IPv6Address
IPNetwork = IPv4Network | IPv6Network

# reason (the stat suffix) -> what the message calls it
REASONS = {
    "loopback": "loopback",
    "private": "private network",
    "link-local": "link-local",
    "cgnat": "carrier-grade NAT",
    "multicast": "multicast",
    "broadcast": "broadcast",
    "reserved": "reserved",
    "unspecified": "unspecified address",
    "this-network": "this-network block",
    "benchmarking": "benchmarking network",
    "documentation": "documentation network",
    "site-local": "site-local",
    "cloud-metadata": "cloud metadata service",
}

# Instance metadata and platform endpoints: credentials live there. Most are
# link-local anyway; named apart for the clearer reason, and because two are
# not: Alibaba's sits in CGNAT space and Azure's WireServer on a public
# address that only means something inside Azure.
METADATA = (
    "169.254.169.254",  # AWS, GCP, Azure IMDS, OpenStack, Oracle, DigitalOcean ...
    "169.254.170.2",  # AWS ECS task metadata and credentials
    "169.254.0.23",  # Tencent Cloud
    "100.100.100.200",  # Alibaba Cloud
    "192.0.0.192",  # Oracle Cloud (older endpoint)
    "168.63.129.16",  # Azure WireServer
    "fd00:ec2::254",  # AWS IMDS over IPv6
    "fd20:ce::254",  # GCP metadata over IPv6
)


def _table(*rows: tuple[str, str]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ip_network(net), reason) for net, reason in rows)


# First match wins: single addresses before the blocks that hold them.
_V4 = _table(
    *((a, "cloud-metadata") for a in METADATA if ":" not in a),
    ("0.0.0.0/32", "unspecified"),
    ("0.0.0.0/8", "this-network"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "cgnat"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),  # IETF protocol assignments
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "reserved"),  # the retired 6to4 relay anycast
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
)
_V6_FIRST = _table(
    *((a, "cloud-metadata") for a in METADATA if ":" in a),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
)
_V6 = _table(
    ("64:ff9b:1::/48", "private"),  # local-use NAT64 (RFC 8215)
    ("2001:2::/48", "benchmarking"),
    ("2001:db8::/32", "documentation"),
    ("2001::/23", "reserved"),  # IETF protocol assignments, Teredo among them
    ("3fff::/20", "documentation"),
    ("fc00::/7", "private"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)
_GLOBAL_UNICAST = IPv6Network("2000::/3")
_MAPPED = IPv6Network("::ffff:0:0/96")
_NAT64 = IPv6Network("64:ff9b::/96")
_COMPATIBLE = IPv6Network("::/96")


@dataclass(frozen=True)
class Refusal:
    """Why ``address`` is refused; ``embedded`` is the IPv4 address judged
    inside an IPv6 ``form`` (IPv4-mapped, IPv4-compatible, 6to4, NAT64)."""

    address: IPAddress
    reason: str
    embedded: IPv4Address | None = None
    form: str | None = None

    @property
    def shown(self) -> str:
        # Python 3.11 prints ::ffff:10.0.0.1 as ::ffff:a00:1; show what was meant.
        if self.form == "IPv4-mapped":
            return f"::ffff:{self.embedded}"
        return str(self.address)

    def __str__(self) -> str:
        via = f", {self.form} {self.embedded}" if self.form else ""
        return f"{self.shown} ({REASONS[self.reason]}{via})"


def _match(address: IPAddress, table: Iterable[tuple[IPNetwork, str]]) -> str | None:
    for network, reason in table:
        if address.version == network.version and address in network:
            return reason
    return None


def _embedded(address: IPv6Address) -> tuple[IPv4Address, str] | None:
    if address in _MAPPED:
        return IPv4Address(int(address) & 0xFFFFFFFF), "IPv4-mapped"
    if address in _NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF), "NAT64"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address in _COMPATIBLE:
        return IPv4Address(int(address) & 0xFFFFFFFF), "IPv4-compatible"
    return None


def refusal(address: IPAddress) -> Refusal | None:
    """Why the crawler must not connect to ``address``; None if it may."""
    if isinstance(address, IPv4Address):
        reason = _match(address, _V4)
        return Refusal(address, reason) if reason else None
    reason = _match(address, _V6_FIRST)
    if reason:
        return Refusal(address, reason)
    inside = _embedded(address)
    if inside is not None:
        v4, form = inside
        reason = _match(v4, _V4)
        if reason:
            return Refusal(address, reason, v4, form)
        # IPv4-compatible addresses are deprecated and routed nowhere.
        return Refusal(address, "reserved") if form == "IPv4-compatible" else None
    reason = _match(address, _V6)
    if reason is None and address not in _GLOBAL_UNICAST:
        reason = "reserved"
    return Refusal(address, reason) if reason else None


_DIGITS = {16: frozenset("0123456789abcdef"), 10: frozenset("0123456789"), 8: frozenset("01234567")}


def _ipv4_number(part: str) -> int | None:
    if part[:2] == "0x":
        base, digits = 16, part[2:]
    elif len(part) > 1 and part[0] == "0":
        base, digits = 8, part[1:]
    else:
        base, digits = 10, part
    if not set(digits) <= _DIGITS[base]:
        return None
    return int(digits, base) if digits else 0


def _numeric_ipv4(host: str) -> IPv4Address | None:
    # The WHATWG URL standard's IPv4 parser, which is also what glibc's
    # inet_aton (and so gethostbyname) accepts: 1 to 4 parts, each decimal,
    # 0x-hex or 0-octal, the last filling the remaining bytes.
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    if not 1 <= len(parts) <= 4 or "" in parts:
        return None
    numbers = [_ipv4_number(p) for p in parts]
    if None in numbers:
        return None
    *head, last = [n for n in numbers if n is not None]
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(parts)):
        return None
    value = last
    for i, n in enumerate(head):
        value += n << (8 * (3 - i))
    return IPv4Address(value)


def ip_of_host(host: str) -> IPAddress | None:
    """The address a URL host names literally, or None for a name.

    Reads ``[v6]`` with or without brackets and zone (``fe80::1%25eth0``),
    dotted quads, and the numeric IPv4 forms browsers and ``inet_aton``
    accept (``2852039166``, ``0x7f.1``, ``127.1``, ``0177.0.0.1``, a trailing
    dot). An empty host is 0.0.0.0: where Twisted connects for it.
    """
    host = host.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host:
        return IPv4Address(0)
    if ":" in host:
        try:
            return IPv6Address(unquote(host).split("%", 1)[0])
        except ValueError:
            return None
    try:
        return ip_address(host)
    except ValueError:
        return _numeric_ipv4(host)


def parse_networks(value: object) -> tuple[IPNetwork, ...]:
    """``NETWORK_ALLOWLIST`` as networks: a list or comma-separated string of
    CIDRs or addresses; ValueError naming the setting and the bad entry."""
    if value is None:
        return ()
    if isinstance(value, str):
        entries: list[object] = list(value.split(","))
    elif isinstance(value, (list, tuple, set, frozenset)):
        entries = list(value)
    else:
        raise ValueError(
            "NETWORK_ALLOWLIST: must be a list or a comma-separated string of networks (CIDR) "
            f"or addresses, not {type(value).__name__}"
        )
    networks: list[IPNetwork] = []
    for entry in entries:
        if isinstance(entry, (IPv4Network, IPv6Network)):
            networks.append(entry)
            continue
        if not isinstance(entry, str):
            raise ValueError(f"NETWORK_ALLOWLIST: entry {entry!r} is not an IP address or network (CIDR)")
        text = entry.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        if not text:
            continue
        try:
            networks.append(ip_network(text))
        except ValueError:
            try:
                meant = ip_network(text, strict=False)
            except ValueError:
                raise ValueError(
                    f"NETWORK_ALLOWLIST: entry {entry!r} is not an IP address or network (CIDR)"
                ) from None
            raise ValueError(
                f"NETWORK_ALLOWLIST: entry {entry!r} has host bits set; did you mean {str(meant)!r}?"
            ) from None
    return tuple(networks)


class NetworkPolicy:
    """``refusal`` minus the allow-list."""

    def __init__(self, allow: Iterable[IPNetwork] = ()) -> None:
        self.allow = tuple(allow)

    def _allowed(self, address: IPAddress) -> bool:
        # An IPv4-mapped address is that IPv4 address on a dual-stack socket.
        candidates: list[IPAddress] = [address]
        if isinstance(address, IPv6Address) and address in _MAPPED:
            candidates.append(IPv4Address(int(address) & 0xFFFFFFFF))
        return any(a.version == n.version and a in n for a in candidates for n in self.allow)

    def check(self, address: IPAddress) -> Refusal | None:
        found = refusal(address)
        return None if found is None or self._allowed(address) else found


def _policy(settings: Any) -> NetworkPolicy:
    return NetworkPolicy(parse_networks(settings.get("NETWORK_ALLOWLIST")))


# --- Scrapy --------------------------------------------------------------------------


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
        proxy = request.meta.get("proxy")
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
            "The reactor's resolver is %(resolver)s, not crawler.netguard.GuardedResolver "
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
