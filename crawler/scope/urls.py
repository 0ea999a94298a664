"""URL normalisation: pure logic, no Scrapy imports (a URL's site and scope: sites.py).

``normalize`` reads a URL as a browser reads it, then writes it in the normal
form of RFC 3986 section 6.2.2 and 6.2.3, for http(s) URLs only:

1. Parse, and resolve against the base, with the WHATWG URL Standard
   (``ada_url``, the parser Node.js uses): leading and trailing spaces and
   controls are dropped, tabs and newlines anywhere; ``\\`` is ``/``; the
   scheme and host are lowercased; hosts are percent-decoded, mapped with
   UTS #46 (nontransitional: ``faß.example`` is ``xn--fa-hia.example``, not
   IDNA2003's ``fass.example``, another domain) and punycoded; numeric IPv4 forms (``2130706433``, ``0x7f.1``, ``127.1``)
   become dotted quads and IPv6 addresses are compressed; the default port
   is dropped (``:080`` and ``:`` too); ``.`` and ``..`` segments (also as
   ``%2e``) are resolved; an empty path becomes ``/``; other characters are
   percent-encoded as UTF-8.
2. Then, on the WHATWG serialisation:

   - only http and https are accepted (:class:`InvalidURL` says why);
   - userinfo is dropped: credentials are never stored, and a page reached
     with and without them is one page;
   - the fragment is dropped, and an empty query (``page?`` is ``page``);
   - the trailing dots of a domain name are dropped (``example.com.``),
     unless the name would then read as an IPv4 address (``1.2..``);
   - in path and query: escapes of unreserved characters are decoded
     (``%7E`` is ``~``), the hex digits of the others are uppercased; a
     ``%`` that starts no escape becomes ``%25``, so that decoding never
     forms a new escape (``%%36%31`` would become ``%61``, then ``a``: not
     idempotent); the characters RFC 3986 allows nowhere raw and WHATWG
     leaves raw (``| [ ] \\ ^ ` { }``) are escaped. The result is an ASCII
     RFC 3986 URI, and ``normalize(normalize(u)) == normalize(u)``;
   - for the same reason ``" ` { }``, which WHATWG allows in a domain name
     and RFC 3986 does not, are escaped there (``a%7Bb``: no DNS name has
     them, but a browser would try).

The query string is kept in its order: reordering parameters changes the
meaning of some sites' URLs, and the crawler dedups on what it would fetch.

``site_of``, ``host_of``, ``in_scope`` and the other names of a URL's
site and scope are in ``crawler/scope/sites.py``, importable from here too.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import ada_url

from crawler.scope.sites import (SCOPES, host_of, in_scope, on_prefix_host, queue_key, site_of, url_prefix,
                           url_site)

__all__ = [
    "SCOPES",
    "InvalidURL",
    "LinkResolver",
    "redact_credentials",
    "url_prefix",
    "on_prefix_host",
    "host_of",
    "in_scope",
    "max_segment_repeats",
    "normalize",
    "queue_key",
    "site_of",
    "url_shape",
    "url_site",
]


class InvalidURL(ValueError):
    """A URL the crawler cannot fetch, with the reason in the message."""


SCHEMES = frozenset({"http", "https"})

_UNRESERVED = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
)
_HEX = "0123456789ABCDEFabcdef"


def _fix_table() -> dict[str, str]:
    table = {"%": "%25"}
    for char in "|[]\\^`{}\"":
        table[char] = f"%{ord(char):02X}"
    for a in _HEX:
        for b in _HEX:
            char = chr(int(a + b, 16))
            table["%" + a + b] = char if char in _UNRESERVED else ("%" + a + b).upper()
    return table


# What the RFC 3986 pass rewrites in a WHATWG path and query: every escape,
# a "%" that starts none, and the characters WHATWG leaves raw but RFC 3986
# allows nowhere raw. One table lookup each.
_FIX_TABLE = _fix_table()
_FIX = re.compile(r"%[0-9A-Fa-f]{2}|[%|\[\]\\^`{}]")
_NEEDS_FIX = re.compile(r"[%|\[\]\\^`{}]")
# Domain characters WHATWG allows and RFC 3986 does not (it allows their escapes).
_HOST_FIX = re.compile(r'["`{}]')


def _fix_match(match: re.Match[str]) -> str:
    return _FIX_TABLE[match.group()]

# WHATWG drops these around a URL, and tabs and newlines anywhere in it.
_C0_SPACE = "".join(chr(i) for i in range(0x21))
_TAB_NEWLINE = {0x09: None, 0x0A: None, 0x0D: None}
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_AUTHORITY_END = re.compile(r"[/\\?#]")
_IPV4_NUMBER = re.compile(r"(?:[0-9]+|0[xX][0-9A-Fa-f]*)")


def _show(value: str) -> str:
    # Messages end up in logs and stored error records: a megabyte-long
    # href should not.
    shown = repr(value)
    return shown if len(shown) <= 200 else shown[:200] + "..."


def _usv(value: str) -> str:
    """``value`` with lone surrogates replaced by U+FFFD, as a browser's
    DOMString-to-USVString conversion does (they cannot be UTF-8 encoded)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return value


def _whatwg(url: str, base: str | None) -> str:
    """The WHATWG href of ``url`` against ``base``; ValueError if none."""
    if base is None:
        return ada_url.normalize_url(url)
    return ada_url.join_url(base, url)


def _why(url: str, base: str | None) -> str:
    """Why the WHATWG parser refused ``url``: it says only that it did."""
    if base is not None and not ada_url.check_url(base):
        return f"bad base URL {_show(base)}"
    text = url.strip(_C0_SPACE).translate(_TAB_NEWLINE)
    match = _SCHEME.match(text)
    if match is not None:
        scheme = match.group(1).lower()
        rest = text[match.end():]
        if scheme not in SCHEMES:
            return _scheme_reason(scheme, rest, url, base)
    elif base is None:
        return f"no scheme in URL {_show(url)} (expected http:// or https://)"
    elif text.startswith(("//", "\\\\", "/\\", "\\/")):
        rest = text
    else:
        return f"cannot resolve URL {_show(url)} against {_show(base)}"
    # Special schemes: any run of slashes and backslashes, then the authority.
    authority = _AUTHORITY_END.split(rest.lstrip("/\\"), maxsplit=1)[0]
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        end = hostport.find("]")
        port = hostport[end + 1:] if end >= 0 else ""
        if port and not (port.startswith(":") and _port_ok(port[1:])):
            return f"bad port in URL {_show(url)}"
        return f"unparsable URL {_show(url)}: bad IPv6 address"
    host, colon, port = hostport.partition(":")
    if colon and not _port_ok(port):
        return f"bad port in URL {_show(url)}"
    if not host:
        return f"no host in URL {_show(url)}"
    return f"bad host in URL {_show(url)}"


def _port_ok(port: str) -> bool:
    # No int() of the whole string: a 5,000-digit port would raise ValueError
    # (int's digit limit) instead of returning False.
    if not port:
        return True
    if not (port.isascii() and port.isdigit()):
        return False
    digits = port.lstrip("0")
    return len(digits) <= 5 and int(digits or "0") <= 65535


def _scheme_reason(scheme: str, rest: str, url: str, base: str | None) -> str:
    # "example.com:8080/x" and "localhost:8080" parse as scheme and path:
    # they are host names without a scheme.
    if base is None and ("." in scheme or rest[:1].isdigit()):
        return f"no scheme in URL {_show(url)} (expected http:// or https://)"
    return f"unsupported scheme {scheme!r} in URL {_show(url)}"


def _strip_root_dots(netloc: str) -> str:
    """``netloc`` without the trailing dots of its domain name."""
    host, colon, port = netloc.rpartition(":") if not netloc.endswith(".") else (netloc, "", "")
    stripped = host.rstrip(".")
    if not stripped:
        raise ValueError("empty host")
    # "1.2.." is a domain to WHATWG (its last label is empty), "1.2" an IPv4
    # address: another server. Such a name keeps its dots.
    if _IPV4_NUMBER.fullmatch(stripped.rpartition(".")[2]):
        return netloc
    return stripped + colon + port


def normalize(url: str, base: str | None = None) -> str:
    """Return the normal form of ``url`` (joined to ``base`` when given).

    Raises :class:`InvalidURL`, and nothing else, for every input that does
    not make an absolute http(s) URL, whatever ``url`` and ``base`` hold.
    """
    try:
        href = _whatwg(url, base)
    except ValueError:
        clean_url = _usv(url)
        clean_base = None if base is None else _usv(base)
        try:
            href = _whatwg(clean_url, clean_base)
        except ValueError:
            raise InvalidURL(_why(clean_url, clean_base)) from None
    if href.startswith("http://"):
        start = 7
    elif href.startswith("https://"):
        start = 8
    else:
        scheme = href.partition(":")[0]
        raise InvalidURL(_scheme_reason(scheme, href[len(scheme) + 1:], url, base))
    # A special URL's path always starts with "/", and nothing before it may
    # hold a raw "/": the authority ends at the first one.
    slash = href.find("/", start)
    netloc = href[start:slash]
    if "@" in netloc:
        netloc = netloc.rpartition("@")[2]
    if netloc.endswith(".") or ".:" in netloc:
        try:
            netloc = _strip_root_dots(netloc)
        except ValueError:
            raise InvalidURL(f"no host in URL {_show(url)}") from None
    if _HOST_FIX.search(netloc):
        netloc = _HOST_FIX.sub(_fix_match, netloc)
    rest = href[slash:]
    hash_at = rest.find("#")
    if hash_at >= 0:
        rest = rest[:hash_at]
    if rest[-1] == "?" and rest.find("?") == len(rest) - 1:
        rest = rest[:-1]
    if _NEEDS_FIX.search(rest):
        rest = _FIX.sub(_fix_match, rest)
    return href[:start] + netloc + rest


class LinkResolver:
    """Turns (page URL, href) into normalised absolute URLs, remembering the
    answer so that the navigation links repeated on every page of a site cost
    one dict lookup instead of a join and a normalisation.

    The cache key is the part of the page URL that the href depends on: nothing
    for absolute hrefs, the directory for relative paths, the whole URL for
    query-only hrefs. Bounded: cleared when it reaches ``max_size``.
    The page URL must be normalised (as the spider's are): then it has a path,
    no userinfo and no fragment, which the keys rely on.
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
            head = href.partition("#")[0]
            # Unless it ends with a space or control: "a #" is "a%20", "a" is "a".
            if not head or head[-1] > " ":
                href = head
        if href.startswith(("http://", "https://")):
            key_base = ""
        elif href.startswith("//"):  # protocol-relative: depends on the scheme
            key_base = base[: base.find(":")]
        elif not href or href[0] == "?" or href[0] <= " ":
            # The page itself ("", "?q"), or an href that WHATWG strips of
            # leading spaces and controls: it may be either.
            key_base = base
        elif _KEY_ODD.search(href) is None:
            # A relative path ("a", "../a", "/a", "\\h\a"): at most the
            # base's directory plays a part.
            key_base = base[: base.rfind("/", 0, _query_start(base)) + 1]
        else:
            key_base = _odd_key_base(base, href)
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


# A scheme, or tabs and newlines, which WHATWG removes anywhere: "ht\ttp:" and
# "http:?q" are the page itself to an http page, not a relative path.
_KEY_ODD = re.compile(r"[:\t\n\r]")


def _odd_key_base(base: str, href: str) -> str:
    match = _SCHEME.match(href)
    if (
        match is not None
        and not base.startswith(match.group(1).lower() + ":")
        and _KEY_ODD.search(href, match.end()) is None
    ):
        return ""  # an absolute URL of another scheme ("mailto:", "https:g"): no base
    return base  # rare: the whole page URL, which is always right


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


_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^@/?#]*@")


def redact_credentials(url: str) -> str:
    """``url`` (a Redis, MongoDB or web address) with its credentials shown
    as ``***``: what log lines and error messages show of it."""
    return _USERINFO.sub(r"\1***@", url)
