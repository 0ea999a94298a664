"""Which addresses the crawler may connect to: no loopback, private or
metadata addresses. Pure logic, no Scrapy (``crawler/network/guard.py`` enforces
it in a crawl).

``refusal`` says why an address is refused (``REASONS``: the stat suffix
and the message's words): loopback, private (RFC 1918, fc00::/7, local-use
NAT64), link-local, cgnat (100.64.0.0/10), multicast, broadcast, reserved
(240.0.0.0/4, IETF blocks, IPv6 outside 2000::/3), unspecified,
this-network (0.0.0.0/8), benchmarking, documentation, site-local
(fec0::/10), cloud-metadata (``METADATA``); IPv4-mapped, -compatible, 6to4
and NAT64 addresses are judged by the IPv4 address inside. ``ip_of_host``
reads a URL host as an address, ``parse_networks`` the setting,
``NetworkPolicy`` combines them; ``allow_hint`` is the ``NETWORK_ALLOWLIST``
entry that would allow a refused address (the block it was refused as).

Settings:

- ``NETWORK_ALLOWLIST`` - networks allowed anyway: a list or comma-separated
  string of CIDRs or addresses (``127.0.0.0/8,::1``). An entry allows that
  network only (``127.0.0.1`` allows neither ``127.0.0.2`` nor ``::1``; an
  IPv4-mapped address counts as its IPv4 address); ``0.0.0.0/0,::/0`` turns
  the guard off. A bad entry stops the crawl at start, naming the entry
  (``parse_networks``, called by ``crawler/config.py``).

No stats here: ``crawler.network.guard`` counts ``netguard/refused/<reason>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import (
    IPv4Address,
    IPv4Network,
    IPv6Address,
    IPv6Network,
    ip_address,
    ip_network,
)
from typing import TYPE_CHECKING
from urllib.parse import unquote

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "METADATA",
    "REASONS",
    "IPAddress",
    "IPNetwork",
    "NetworkPolicy",
    "Refusal",
    "allow_hint",
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
    network: IPNetwork | None = None  # the block it was refused as (None: outside 2000::/3)

    @property
    def shown(self) -> str:
        # Python 3.11 prints ::ffff:10.0.0.1 as ::ffff:a00:1; show what was meant.
        if self.form == "IPv4-mapped":
            return f"::ffff:{self.embedded}"
        return str(self.address)

    def __str__(self) -> str:
        via = f", {self.form} {self.embedded}" if self.form else ""
        return f"{self.shown} ({REASONS[self.reason]}{via})"


def _match(address: IPAddress, table: Iterable[tuple[IPNetwork, str]]) -> tuple[str, IPNetwork] | None:
    for network, reason in table:
        if address.version == network.version and address in network:
            return reason, network
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
        found = _match(address, _V4)
        return Refusal(address, found[0], network=found[1]) if found else None
    found = _match(address, _V6_FIRST)
    if found:
        return Refusal(address, found[0], network=found[1])
    inside = _embedded(address)
    if inside is not None:
        v4, form = inside
        found = _match(v4, _V4)
        if found:
            return Refusal(address, found[0], v4, form, found[1])
        # IPv4-compatible addresses are deprecated and routed nowhere.
        return Refusal(address, "reserved") if form == "IPv4-compatible" else None
    found = _match(address, _V6)
    if found:
        return Refusal(address, found[0], network=found[1])
    return None if address in _GLOBAL_UNICAST else Refusal(address, "reserved")


def allow_hint(found: Refusal) -> str:
    """The ``NETWORK_ALLOWLIST`` entry that allows ``found``'s address: the
    block it was refused as (``127.0.0.0/8`` for 127.0.0.2, ``10.0.0.0/8``,
    ``::1/128``); for an IPv4 address inside another IPv6 form than
    IPv4-mapped (which the allow-list reads as its IPv4 address), and
    outside any named block, the address alone."""
    if found.network is not None and (found.form in (None, "IPv4-mapped")):
        return str(found.network)
    return str(ip_network(found.address))


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
