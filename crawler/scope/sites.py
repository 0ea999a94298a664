"""A normalised URL's host and site, its politeness unit and the crawl's
scope: pure logic, no Scrapy imports (``crawler.scope.urls`` re-exports every
name, and normalises the URLs these functions take).

``site_of`` maps a host to its site: the registrable domain from the Public
Suffix List bundled with ``tldextract`` (private suffixes such as
``github.io`` included, so ``a.github.io`` and ``b.github.io`` are two
sites), the host itself for IP addresses and single-label hosts.

``queue_key`` is the politeness unit of a host (``FRONTIER_QUEUE_BY``: its
site or the host itself); ``in_scope`` tells whether a URL is in a crawl's
``-a scope`` (``SCOPES``), given its seeds' sites, hosts and prefixes
(``url_prefix``).
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

import tldextract

__all__ = ["SCOPES", "host_of", "in_scope", "on_prefix_host", "queue_key", "site_of", "url_prefix", "url_site"]

SCOPES = ("site", "host", "prefix", "any")

_extract = tldextract.TLDExtract(
    # Never fetch the list at run time: the snapshot inside the package is used.
    suffix_list_urls=(),
    cache_dir=None,
    include_psl_private_domains=True,
)


def host_of(url: str) -> str:
    """The host of a normalised URL (no port, no credentials)."""
    netloc = url.split("/", 3)[2]
    netloc = netloc.rpartition("@")[2]
    if netloc.startswith("["):
        return netloc[: netloc.index("]") + 1]
    return netloc.partition(":")[0]


@lru_cache(maxsize=65536)
def site_of(host: str) -> str:
    """The site of a host: its registrable domain, or the host itself for
    IP addresses and names without a public suffix (``localhost``)."""
    host = host.lower().rstrip(".")
    if host.startswith("["):
        return host
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    result = _extract(host)
    return result.top_domain_under_public_suffix or host


def url_site(url: str) -> str:
    return site_of(host_of(url))


def url_prefix(url: str) -> str:
    """A normalised URL's place for ``-a scope=prefix``: its host (and port)
    and the directory of its path, without the scheme (Heritrix's SURT
    prefix from a seed: ``https://a.org/docs/intro.html`` keeps
    ``a.org/docs/``; a seed at a site's root keeps the whole host)."""
    rest = url.split("://", 1)[1].split("?", 1)[0]
    return rest[: rest.rindex("/") + 1] if "/" in rest else rest + "/"


def on_prefix_host(url: str, seed_prefixes: frozenset[str]) -> bool:
    """Whether ``url`` is on the host (and port) of one of ``seed_prefixes``
    (``url_prefix``), wherever its path: where a ``-a scope=prefix`` crawl
    reads the site's sitemaps, which sit at its root."""
    authority = url.split("://", 1)[1].split("/", 1)[0]
    return any(prefix.split("/", 1)[0] == authority for prefix in seed_prefixes)


def in_scope(scope: str, url: str, seed_sites: frozenset[str], seed_hosts: frozenset[str],
             seed_prefixes: frozenset[str] = frozenset()) -> bool:
    """Whether ``url`` is in the crawl's scope: ``site`` (a seed's
    registrable domain), ``host`` (a seed's host), ``prefix`` (under a
    seed's directory, ``url_prefix``) or ``any``."""
    if scope == "any":
        return True
    if scope == "host":
        return host_of(url) in seed_hosts
    if scope == "prefix":
        place = url.split("://", 1)[1]
        return any(place.startswith(prefix) for prefix in seed_prefixes)
    return url_site(url) in seed_sites


def queue_key(host: str, queue_by: str = "site") -> str:
    """The politeness unit a host belongs to: its site, or the host itself."""
    return host if queue_by == "host" else site_of(host)

