"""The URL conformance corpus: public test data (tests/data/urls/README.md)
read into cases, and where the data and our parser part ways.

``conformance_cases()`` gives (source, input, base, expected normal form or
None for ``InvalidURL``) from WHATWG's urltestdata (its http(s) cases) and
urlcanon's supplemental and funky-IPv4 sets, each WHATWG href turned into
our normal form by ``expected_normal_form`` (the ``crawler.scope.urls`` module
docstring's step 2, written again as a plain loop so that it checks the
module's table-driven version). ``DEVIATIONS`` lists the cases where the
data predate today's standard: the case, our exact output and why.

``tests/test_urls.py`` checks ``crawler.scope.urls.normalize`` against them;
``bench.bench_urls`` measures conformance and speed on them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["DATA", "DEVIATIONS", "conformance_cases", "expected_normal_form"]

DATA = Path(__file__).resolve().parent.parent / "data" / "urls"

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HEX = frozenset("0123456789abcdefABCDEF")


def _rfc3986_component(text: str) -> str:
    """Step 2 of the module docstring on a path or query, written as a plain
    character loop so that it checks the module's table-driven version."""
    out = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "%" and text[i + 1:i + 2] in _HEX and text[i + 2:i + 3] in _HEX:
            decoded = chr(int(text[i + 1:i + 3], 16))
            out.append(decoded if decoded in _UNRESERVED else text[i:i + 3].upper())
            i += 3
            continue
        if char == "%":
            out.append("%25")
        elif char in "|[]\\^`{}":
            out.append(f"%{ord(char):02X}")
        else:
            out.append(char)
        i += 1
    return "".join(out)


def expected_normal_form(href: str) -> str | None:
    """Our normal form of a WHATWG href (http or https): the module
    docstring's step 2. None where it leaves no URL (a host of dots)."""
    match = re.fullmatch(r"(https?://)(?:[^@/]*@)?([^/]*)(/[^?#]*)(\?[^#]*)?(#.*)?", href)
    assert match, href
    scheme, hostport, path, query, _fragment = match.groups()
    if hostport.startswith("["):
        end = hostport.index("]") + 1
        host, port = hostport[:end], hostport[end:]
    else:
        host, colon, port = hostport.partition(":")
        port = colon + port
        if host.endswith("."):
            stripped = host.rstrip(".")
            if not stripped:
                return None
            if not re.fullmatch(r"[0-9]+|0[xX][0-9a-fA-F]*", stripped.rpartition(".")[2]):
                host = stripped
        host = "".join(f"%{ord(c):02X}" if c in '"`{}' else c for c in host)
    query = "" if query in (None, "?") else _rfc3986_component(query)
    return scheme + host + port + _rfc3986_component(path) + query


def conformance_cases() -> list[tuple[str, str, str | None, str | None]]:
    """(source, input, base, expected normal form or None for InvalidURL)."""
    cases: list[tuple[str, str, str | None, str | None]] = []
    whatwg = json.loads((DATA / "whatwg-urltestdata-http.json").read_text(encoding="utf-8"))
    for case in whatwg:
        if isinstance(case, str):
            continue  # a comment
        expected = None if case.get("failure") else expected_normal_form(case["href"])
        cases.append(("whatwg", case["input"], case.get("base"), expected))
    # urlcanon's expectations are WHATWG hrefs (of its WHATWG canonicaliser);
    # the file also holds file: and other schemes, left out here.
    supplemental = json.loads(
        (DATA / "urlcanon-supplemental_whatwg.json").read_text(encoding="utf-8"))
    for url, href in supplemental.items():
        if href.startswith(("http:", "https:")):
            cases.append(("urlcanon", url, None, expected_normal_form(href)))
    ipv4 = json.loads((DATA / "urlcanon-funky_ipv4.json").read_text(encoding="utf-8"))
    for host, address in ipv4.items():
        cases.append(("urlcanon-ipv4", f"http://{host}/", None,
                      None if address is None else f"http://{address}/"))
    return cases


# Where the data and the parser part ways, the case, our exact output and why.
_XN = ("the data predate a change to the URL Standard that ada 4.0 follows: IDNA "
       "no longer fails an ASCII host, so an xn-- label that is not valid Punycode is kept")
_FORBIDDEN = ("urlcanon accepts the host; WHATWG rejects it (a forbidden host code point, "
              "once percent-decoded: space, control, '#', '%'); urlcanon's testdata/notes.txt "
              "lists these inputs as WHATWG failures")
_DOTS = ("urlcanon expects 0.0.0.0 (an old IPv4 parser read empty parts as 0); WHATWG now "
         "reads a host of dots as a domain name, and our normal form drops a domain's "
         "trailing dots, which leaves no host")
_ENDS_IN_NUMBER = ("the data predate WHATWG's 'ends in a number' rule: a host whose last label "
                   "is numeric is IPv4 or nothing ('09' is not octal: failure), one whose last "
                   "label is not a number ('0000xa') is a domain")
_MOJIBAKE = ("urlcanon's harness feeds the UTF-8 bytes of U+2603 as Latin-1 code points; "
             "as text, U+0098 and U+0083 are C1 controls, which UTS #46 disallows")
DEVIATIONS: dict[tuple[str, str], tuple[str | None, str]] = {
    ("whatwg", "http://a.b.c.xn--pokxncvks"): ("http://a.b.c.xn--pokxncvks/", _XN),
    ("whatwg", "http://10.0.0.xn--pokxncvks"): ("http://10.0.0.xn--pokxncvks/", _XN),
    ("whatwg", "http://a.b.c.XN--pokxncvks"): ("http://a.b.c.xn--pokxncvks/", _XN),
    ("whatwg", "http://a.b.c.Xn--pokxncvks"): ("http://a.b.c.xn--pokxncvks/", _XN),
    ("whatwg", "http://10.0.0.XN--pokxncvks"): ("http://10.0.0.xn--pokxncvks/", _XN),
    ("whatwg", "http://10.0.0.xN--pokxncvks"): ("http://10.0.0.xn--pokxncvks/", _XN),
    ("whatwg", "https://xn--/"): ("https://xn--/", _XN),
    **{("urlcanon", url): (None, _FORBIDDEN) for url in [
        "http:// leadingspace.com/", "http://%20leadingspace.com/", "http://\x01\x80.com/",
        "http://host%23.com/%257Ea%2521b%2540c%2523d%2524e%25f%255E00%252611%252A22%252833"
        "%252944_55%252B",
        "http://%%300/", "http://%/", "http://%00%01", "http://%2561%2562%2563/",
        "http:/%%300/", "http:/%/", "http:/%00%01", "http:/%2561%2562%2563/",
        "http:%%300/", "http:%/", "http:%00%01", "http:%2561%2562%2563/",
    ]},
    **{("urlcanon", f"http:{slashes}{dots}/a/b"): (None, _DOTS)
       for slashes in ("", "/", "//", "///") for dots in ("%2e", "%2e%2e", "%2e%2e%2e")},
    ("urlcanon", "http://09/"): (None, _ENDS_IN_NUMBER),
    ("urlcanon-ipv4", "http://0000xa/"): ("http://0000xa/", _ENDS_IN_NUMBER),
    ("urlcanon", "http://\u00e2\x98\x83.net/"): (None, _MOJIBAKE),
}
