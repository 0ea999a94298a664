"""URL normalisation, sites and scope: pure logic, no Scrapy imports.

``normalize`` implements the syntax- and scheme-based normalisation of
RFC 3986 section 6.2.2 and 6.2.3 for http(s) URLs:

- lowercase scheme and host, IDNA-encode non-ASCII hosts;
- drop the fragment, the default port and an empty port (``http://h:/``);
- decode percent-escapes of unreserved characters, uppercase the others,
  percent-encode characters that may not appear raw (UTF-8 first);
- resolve ``.`` and ``..`` path segments; an empty path becomes ``/``.

The query string is kept in its order: reordering parameters changes the
meaning of some sites' URLs, and the crawler dedups on what it would fetch.

``site_of`` maps a host to its site: the registrable domain from the Public
Suffix List bundled with ``tldextract`` (private suffixes such as
``github.io`` included, so ``a.github.io`` and ``b.github.io`` are two
sites), the host itself for IP addresses and single-label hosts.
"""

from __future__ import annotations

import ipaddress
import re
from functools import lru_cache
from urllib.parse import SplitResult, quote, urljoin, urlsplit

import tldextract

__all__ = [
    "InvalidURL",
    "LinkResolver",
    "in_scope",
    "normalize",
    "site_of",
    "url_site",
]


class InvalidURL(ValueError):
    """A URL the crawler cannot fetch, with the reason in the message."""


SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443}
SCOPES = ("site", "host", "any")

_UNRESERVED = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
)
_PCT = re.compile(r"%([0-9A-Fa-f]{2})")
# Characters allowed raw in a path or query (RFC 3986 pchar, plus "/" and "?"),
# and "%" so that existing escapes survive quote().
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
_NEEDS_QUOTING = re.compile(r"[^A-Za-z0-9/%:@!$&'()*+,;=\-._~?]")

_extract = tldextract.TLDExtract(
    # Never fetch the list at run time: the snapshot inside the package is used.
    suffix_list_urls=(),
    cache_dir=None,
    include_psl_private_domains=True,
)


def _fix_escape(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    if char in _UNRESERVED:
        return char
    return "%" + match.group(1).upper()


def _normalize_component(value: str, safe: str) -> str:
    if _NEEDS_QUOTING.search(value):
        value = quote(value, safe=safe, encoding="utf-8", errors="strict")
    if "%" in value:
        value = _PCT.sub(_fix_escape, value)
    return value


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, for absolute paths."""
    if "." not in path:
        return path
    segments = path.split("/")
    out: list[str] = []
    for seg in segments[1:]:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    # A trailing "." or ".." names a directory: keep the trailing slash.
    if segments[-1] in (".", ".."):
        out.append("")
    return "/" + "/".join(out)


def _host(parts: SplitResult, url: str) -> str:
    host = parts.hostname
    if not host:
        raise InvalidURL(f"no host in URL {url!r}")
    if ":" in host:  # IPv6 literal: hostname drops the brackets
        try:
            return "[" + ipaddress.IPv6Address(host).compressed + "]"
        except ValueError:
            raise InvalidURL(f"bad IPv6 address in URL {url!r}") from None
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise InvalidURL(f"host is not a valid IDNA name in URL {url!r}") from None
    host = host.rstrip(".")
    if not host or any(c in host for c in " <>\"{}|\\^`"):
        raise InvalidURL(f"bad host in URL {url!r}")
    return host


def normalize(url: str, base: str | None = None) -> str:
    """Return the normal form of ``url`` (joined to ``base`` when given).

    Raises :class:`InvalidURL` for URLs that are not absolute http(s) URLs.
    """
    url = url.strip()
    if base is not None:
        url = urljoin(base, url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise InvalidURL(f"unparsable URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    # "example.com:8080/x" parses with scheme "example.com": a missing scheme too.
    if not scheme or "." in scheme or (scheme not in SCHEMES and parts.path[:1].isdigit()):
        raise InvalidURL(f"no scheme in URL {url!r} (expected http:// or https://)")
    if scheme not in SCHEMES:
        raise InvalidURL(f"unsupported scheme {scheme!r} in URL {url!r}")
    host = _host(parts, url)
    try:
        port = parts.port
    except ValueError:
        raise InvalidURL(f"bad port in URL {url!r}") from None
    netloc = host
    if port is not None and port != DEFAULT_PORTS[scheme]:
        netloc = f"{host}:{port}"
    if "@" in parts.netloc:
        netloc = parts.netloc.rpartition("@")[0] + "@" + netloc
    try:
        path = _normalize_component(parts.path, _PATH_SAFE) or "/"
        query = _normalize_component(parts.query, _QUERY_SAFE)
    except UnicodeError:
        raise InvalidURL(f"undecodable characters in URL {url!r}") from None
    path = remove_dot_segments(path)
    return f"{scheme}://{netloc}{path}?{query}" if query else f"{scheme}://{netloc}{path}"


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


def in_scope(scope: str, url: str, seed_sites: frozenset[str], seed_hosts: frozenset[str]) -> bool:
    if scope == "any":
        return True
    if scope == "host":
        return host_of(url) in seed_hosts
    return url_site(url) in seed_sites


class LinkResolver:
    """Turns (page URL, href) into normalised absolute URLs, remembering the
    answer so that the navigation links repeated on every page of a site cost
    one dict lookup instead of a join and a normalisation.

    The cache key is the part of the page URL that the href depends on: nothing
    for absolute hrefs, the directory for relative paths, the whole URL for
    query-only hrefs. Bounded: cleared when it reaches ``max_size``.
    """

    def __init__(self, max_size: int = 200_000) -> None:
        self.max_size = max_size
        self._cache: dict[tuple[str, str], str | None] = {}

    def resolve(self, base: str, href: str) -> str | None:
        """Normalised absolute URL, or None for hrefs that are not http(s)
        links (``mailto:``, ``javascript:``, malformed)."""
        # The fragment never changes the result, and documentation pages are
        # full of "page.html#section" links: drop it before the lookup.
        if "#" in href:
            href = href.partition("#")[0]
        if href.startswith(("http://", "https://")):
            key_base = ""
        elif href.startswith("//"):  # protocol-relative: depends on the scheme
            key_base = base[: base.find(":")]
        elif not href or href.startswith(("?", "#")):  # the page itself
            key_base = base.partition("#")[0]
        else:
            key_base = base[: base.rfind("/", 0, _query_start(base)) + 1]
        key = (key_base, href)
        try:
            return self._cache[key]
        except KeyError:
            pass
        try:
            result: str | None = normalize(href, base)
        except InvalidURL:
            result = None
        if len(self._cache) >= self.max_size:
            self._cache.clear()
        self._cache[key] = result
        return result


def _query_start(url: str) -> int:
    q = url.find("?")
    return q if q >= 0 else len(url)


_DIGITS = re.compile(r"\d+")


def url_shape(url: str) -> str:
    """A URL with its digits masked and its query reduced to sorted keys:
    ``/cal?y=2024&m=5`` and ``/cal?m=6&y=2024`` share the shape ``/cal?m&y``.
    Links between URLs of one shape form the chains of calendar and
    "next page" traps."""
    parts = urlsplit(url)
    keys = sorted({kv.split("=", 1)[0] for kv in parts.query.split("&") if kv})
    shape = parts.netloc + _DIGITS.sub("0", parts.path)
    return shape + "?" + "&".join(keys) if keys else shape


def max_segment_repeats(url: str) -> int:
    """How often the most repeated path segment occurs (``/a/b/a/b`` -> 2)."""
    segments = [s for s in urlsplit(url).path.split("/") if s]
    if len(segments) < 2:
        return len(segments)
    counts: dict[str, int] = {}
    for s in segments:
        counts[s] = counts.get(s, 0) + 1
    return max(counts.values())


def queue_key(host: str, queue_by: str = "site") -> str:
    """The politeness unit a host belongs to: its site, or the host itself."""
    return host if queue_by == "host" else site_of(host)
