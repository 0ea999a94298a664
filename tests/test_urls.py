from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.scope.urls import (
    InvalidURL, LinkResolver, host_of, max_segment_repeats, normalize, site_of, url_shape,
)
from tests.support.urls_conformance import DATA, DEVIATIONS, conformance_cases

# RFC 3986 section 6.2.2 and 6.2.3: each pair is equivalent, the right side normal.
RFC_6 = [
    ("HTTP://www.EXAMPLE.com/", "http://www.example.com/"),  # 6.2.2.1 case
    ("http://example.com/a%3ab", "http://example.com/a%3Ab"),  # 6.2.2.1 escapes uppercase
    ("http://example.com/%7Esmith/home.html", "http://example.com/~smith/home.html"),  # 6.2.2.2
    ("http://example.com/%41%62%2D%5F%2e", "http://example.com/Ab-_."),  # unreserved decoded
    ("http://example.com/a%2Fb%20c", "http://example.com/a%2Fb%20c"),  # reserved kept
    ("http://example.com/../a/b/../c/./d.html", "http://example.com/a/c/d.html"),  # 6.2.2.3
    ("http://a/./b/../b/%63/%7bfoo%7d", "http://a/b/c/%7Bfoo%7D"),  # 6.2.2 example
    ("http://example.com", "http://example.com/"),  # 6.2.3
    ("http://example.com:/", "http://example.com/"),
    ("http://example.com:80/", "http://example.com/"),
    ("https://example.com:443/x", "https://example.com/x"),
    ("http://example.com:8080/x", "http://example.com:8080/x"),
    ("http://example.com/data/", "http://example.com/data/"),  # trailing slash significant
    ("http://example.com/p?q=1#frag", "http://example.com/p?q=1"),  # fragment dropped
    ("http://example.com/p?b=2&a=1", "http://example.com/p?b=2&a=1"),  # query order kept
    ("http://example.com/a b", "http://example.com/a%20b"),
    ("http://example.com/caf\u00e9", "http://example.com/caf%C3%A9"),
    ("http://b\u00fccher.de/", "http://xn--bcher-kva.de/"),  # IDNA
    ("http://EXAMPLE.com./", "http://example.com/"),
    ("http://[::1]:8080/", "http://[::1]:8080/"),
    # Credentials are dropped (the issue: they were stored; before it this
    # case expected "http://user:pw@example.com/").
    ("http://user:pw@Example.com/", "http://example.com/"),
    ("  http://example.com/x  ", "http://example.com/x"),
]


@pytest.mark.parametrize(("url", "expected"), RFC_6)
def test_normalize_rfc3986_section6(url, expected):
    assert normalize(url) == expected
    assert normalize(expected) == expected  # idempotent


# URLs as browsers read them (the list), each with its exact normal form.
WHATWG_READING = [
    # Numeric IPv4 forms are one server, so one site and one politeness queue.
    ("http://2130706433/", "http://127.0.0.1/"),
    ("http://0x7f000001/", "http://127.0.0.1/"),
    ("http://127.1/", "http://127.0.0.1/"),
    ("http://0177.0.0.1/", "http://127.0.0.1/"),
    ("http://0x7f.1:8080/a", "http://127.0.0.1:8080/a"),
    ("http://127.0.0.1./", "http://127.0.0.1/"),
    ("http://[0:0::1]/", "http://[::1]/"),
    ("http://[::FFFF:1.2.3.4]/", "http://[::ffff:102:304]/"),
    # Backslashes are slashes in http(s) URLs.
    ("http:\\\\h\\a\\b.png", "http://h/a/b.png"),
    ("http://h/a\\..\\b", "http://h/b"),
    # Hosts are percent-decoded, then IDNA (UTS #46, nontransitional).
    ("http://%65xample.com/", "http://example.com/"),
    ("http://%e2%98%83.net/", "http://xn--n3h.net/"),
    ("http://fa\u00df.example/", "http://xn--fa-hia.example/"),  # not fass.example
    ("http://\uff27\uff4f.com/", "http://go.com/"),  # fullwidth
    ("http://a\u3002b.com/", "http://a.b.com/"),  # ideographic full stop
    # Credentials are never stored.
    ("http://user:pw@h/", "http://h/"),
    ("http://:@host", "http://host/"),
    ("http://user@h:8080/x", "http://h:8080/x"),
    # Scheme without slashes.
    ("http:example.com", "http://example.com/"),
    ("https:/example.com/a", "https://example.com/a"),
    # Tabs and newlines vanish anywhere; controls and spaces around are dropped.
    ("ht\ttp://ex\nample.com/p\r", "http://example.com/p"),
    ("\x00\x1f http://h/ \x01", "http://h/"),
    # Default ports however written.
    ("http://h:080/", "http://h/"),
    ("https://h:00443/", "https://h/"),
    ("http://h:0/", "http://h:0/"),
    # Percent-escapes: unreserved decoded, others uppercased, a lone "%" made
    # an escape so that decoding never forms a new one (idempotence).
    ("http://h/%%36%31", "http://h/%2561"),
    ("http://h/%2561", "http://h/%2561"),
    ("http://h/100%", "http://h/100%25"),
    ("http://h/%zz?%", "http://h/%25zz?%25"),
    ("http://h/%2e%2E/a/.%2e/b", "http://h/b"),
    ("http://h/a%2Eb?%7e%2f", "http://h/a.b?~%2F"),
    # Characters RFC 3986 allows nowhere raw are escaped; others stay raw.
    ("http://h/a|b[c]^`{}", "http://h/a%7Cb%5Bc%5D%5E%60%7B%7D"),
    ("http://h/?q=a|b[]^`{}\\", "http://h/?q=a%7Cb%5B%5D%5E%60%7B%7D%5C"),
    ("http://h/!$&'()*+,;=:@?!$&()*+,;=:@/?", "http://h/!$&'()*+,;=:@?!$&()*+,;=:@/?"),
    ("http://h/?q='", "http://h/?q=%27"),  # WHATWG escapes ' in special queries
    ("http://h/\u00e9?\u00e9", "http://h/%C3%A9?%C3%A9"),
    ("http://h/a\x00b", "http://h/a%00b"),
    # Empty query and fragment.
    ("http://h/p?", "http://h/p"),
    ("http://h/p?#", "http://h/p"),
    ("http://h/p??", "http://h/p??"),
    ("http://h/p#?x", "http://h/p"),
    # A domain's trailing dots go, unless the name would then be an IPv4 address.
    ("http://example.com.:8080/", "http://example.com:8080/"),
    ("http://a..//", "http://a//"),
    ("http://1.2../", "http://1.2../"),
    ("http://a.0x../", "http://a.0x../"),
    # Characters a WHATWG domain may hold and an RFC 3986 host may not.
    ("http://a{b}`\"/", "http://a%7Bb%7D%60%22/"),
    # Lone surrogates (from a broken page decoder) read as U+FFFD, as in browsers.
    ("http://h/\ud800", "http://h/%EF%BF%BD"),
    ("http://h/\ud83d\ude00", "http://h/%F0%9F%98%80"),  # a surrogate pair is one character
]


@pytest.mark.parametrize(("url", "expected"), WHATWG_READING)
def test_normalize_reads_urls_as_browsers_do(url, expected):
    assert normalize(url) == expected
    assert normalize(expected) == expected


# Relative references as browsers resolve them.
WHATWG_JOIN = [
    ("..\\img\\a.png", "http://h/dir/x.html", "http://h/img/a.png"),
    ("\\\\other\\x", "http://h/dir/x.html", "http://other/x"),
    ("/\\other/x", "https://h/", "https://other/x"),
    ("http:g", "http://h/dir/x.html", "http://h/dir/g"),  # same scheme: relative
    ("https:g", "http://h/dir/x.html", "https://g/"),  # other scheme: absolute
    (" \t?q\n", "http://h/a?b", "http://h/a?q"),
    ("\t", "http://h/a?b", "http://h/a?b"),
    ("%2e%2e/x", "http://h/a/b/c", "http://h/a/x"),
    ("//[::1]:80/", "http://h/", "http://[::1]/"),
    ("g", "http://u:p@h/a/b", "http://h/a/g"),  # the base's credentials are not inherited
    ("http://x/", "mailto:a@b", "http://x/"),  # an absolute href needs no usable base
]


@pytest.mark.parametrize(("href", "base", "expected"), WHATWG_JOIN)
def test_normalize_joins_as_browsers_do(href, base, expected):
    assert normalize(href, base) == expected


# RFC 3986 section 5.4: reference resolution against a base.
BASE = "http://a/b/c/d;p?q"
RFC_5_4 = [
    ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"),
    ("/g", "http://a/g"), ("//g", "http://g/"), ("?y", "http://a/b/c/d;p?y"),
    ("g?y", "http://a/b/c/g?y"), ("#s", "http://a/b/c/d;p?q"), ("g#s", "http://a/b/c/g"),
    (";x", "http://a/b/c/;x"), ("", "http://a/b/c/d;p?q"), (".", "http://a/b/c/"),
    ("./", "http://a/b/c/"), ("..", "http://a/b/"), ("../", "http://a/b/"),
    ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../g", "http://a/g"),
    ("../../../g", "http://a/g"), ("/./g", "http://a/g"), ("/../g", "http://a/g"),
    ("g.", "http://a/b/c/g."), ("..g", "http://a/b/c/..g"), ("./g/.", "http://a/b/c/g/"),
    ("g/./h", "http://a/b/c/g/h"), ("g/../h", "http://a/b/c/h"),
]


@pytest.mark.parametrize(("href", "expected"), RFC_5_4)
def test_resolve_rfc3986_section5_4(href, expected):
    assert normalize(href, BASE) == expected


def test_link_resolver_matches_normalize_and_caches_per_directory():
    resolver = LinkResolver()
    for href, expected in RFC_5_4:
        assert resolver.resolve(BASE, href) == expected
    # Same directory, other page: relative links resolve the same, "" and "#" do not.
    other = "http://a/b/c/other.html"
    assert resolver.resolve(other, "g") == "http://a/b/c/g"
    assert resolver.resolve(other, "") == "http://a/b/c/other.html"
    assert resolver.resolve(other, "#s") == "http://a/b/c/other.html"
    assert resolver.resolve(other, "?y") == "http://a/b/c/other.html?y"
    assert resolver.resolve("https://a/b/c/d", "//g/x") == "https://g/x"
    assert resolver.resolve("http://a/b/c/d", "//g/x") == "http://g/x"
    assert resolver.resolve(other, "mailto:x@y") is None
    assert resolver.resolve(other, "javascript:void(0)") is None


def test_link_resolver_keys_hrefs_that_strip_to_the_page_on_the_whole_page_url():
    # " ?y" and "\t" are "?y" and "" once WHATWG strips them: they depend on the
    # page's last segment and query, not only on its directory.
    resolver = LinkResolver()
    assert resolver.resolve("http://a/b/c?x=1", " ?y") == "http://a/b/c?y"
    assert resolver.resolve("http://a/b/d?x=1", " ?y") == "http://a/b/d?y"
    assert resolver.resolve("http://a/b/c?x=1", "\t") == "http://a/b/c?x=1"
    assert resolver.resolve("http://a/b/c?x=2", "\t") == "http://a/b/c?x=2"


def test_link_resolver_is_bounded():
    resolver = LinkResolver(max_size=10)
    for i in range(25):
        assert resolver.resolve("http://a/", f"p{i}") == f"http://a/p{i}"
    assert len(resolver._cache) <= 10


def test_link_resolver_survives_malformed_hrefs():
    # One bad link used to raise ValueError out of urljoin and lose the page.
    resolver = LinkResolver()
    page = "http://h/dir/x.html"
    for href in ("http://[::1.]/x", "http://2001::1]", "//[", "http://h:99999/", "http://a b/"):
        assert resolver.resolve(page, href) is None
    assert resolver.resolve(page, "ok.html") == "http://h/dir/ok.html"
    assert resolver.resolve(page, "\ud800:") == "http://h/dir/%EF%BF%BD:"


@pytest.mark.parametrize(("url", "reason"), [
    ("example.com/page", "no scheme"),
    ("example.com:8080/x", "no scheme"),
    ("localhost:8080", "no scheme"),
    ("ftp://example.com/file", "unsupported scheme 'ftp'"),
    ("mailto:someone@example.com", "unsupported scheme 'mailto'"),
    ("javascript:alert(1)", "unsupported scheme 'javascript'"),
    ("http://", "no host"),
    ("http://user@/x", "no host"),
    ("http://./", "no host"),  # only dots: nothing is left of the domain
    ("http://exa mple.com/", "bad host"),
    ("http://a<b/", "bad host"),
    ("http://1.2.3.256/", "bad host"),
    ("http://%00/", "bad host"),
    ("http://example.com:99999/", "bad port"),
    ("http://example.com:8o/", "bad port"),
    ("http://h:" + "9" * 5000 + "/", "bad port"),  # beyond int()'s digit limit
    ("http://2001::1]", "bad port"),
    ("http://[::1/", "unparsable"),
    ("http://[::1.]/x", "bad IPv6 address"),
    ("http://[www.example.com]/", "bad IPv6 address"),
])
def test_invalid_urls_say_why(url, reason):
    with pytest.raises(InvalidURL, match=re.escape(reason)):
        normalize(url)


@pytest.mark.parametrize(("href", "base", "reason"), [
    ("x", "garbage", "bad base URL 'garbage'"),
    ("x", "http://[::1.]/", "bad base URL"),  # a malformed <base href>
    ("x", "", "bad base URL"),
    ("g", "mailto:a@b", "cannot resolve URL 'g' against 'mailto:a@b'"),
    ("mailto:a@b", "http://h/", "unsupported scheme 'mailto'"),
    ("//exa mple/", "http://h/", "bad host"),
])
def test_invalid_joins_say_why(href, base, reason):
    with pytest.raises(InvalidURL, match=re.escape(reason)):
        normalize(href, base)


def test_long_urls_are_shortened_in_messages():
    with pytest.raises(InvalidURL) as info:
        normalize("ftp://h/" + "a" * 100_000)
    assert len(str(info.value)) < 300


# --- Conformance: public test data (tests/data/urls/README.md) -------------

CONFORMANCE = conformance_cases()


def _outcome(url: str, base: str | None = None) -> str | None:
    try:
        return normalize(url, base)
    except InvalidURL:
        return None


def test_conformance_corpus_is_whole():
    # 423 http(s) cases of urltestdata, 83 of urlcanon's supplemental_whatwg
    # (the rest are file: and other schemes), 48 of its funky_ipv4.
    sources = [source for source, *_ in CONFORMANCE]
    assert (sources.count("whatwg"), sources.count("urlcanon"), sources.count("urlcanon-ipv4")) \
        == (423, 83, 48)


@pytest.mark.parametrize(
    ("source", "url", "base", "expected"), CONFORMANCE,
    ids=[f"{source}-{i}" for i, (source, *_) in enumerate(CONFORMANCE)])
def test_conformance(source, url, base, expected):
    deviation = DEVIATIONS.get((source, url))
    if deviation is not None:
        assert expected != deviation[0]  # a listed deviation must be one
        expected = deviation[0]
    assert _outcome(url, base) == expected


def test_deviations_are_all_in_the_corpus():
    keys = {(source, url) for source, url, *_ in CONFORMANCE}
    assert set(DEVIATIONS) <= keys


def _all_inputs() -> list[tuple[str, str | None]]:
    inputs: list[tuple[str, str | None]] = [(url, base) for _, url, base, _ in CONFORMANCE]
    # urlcanon's idempotence inputs: all schemes, garbage, controls.
    idempotence = json.loads((DATA / "urlcanon-idempotence.json").read_text(encoding="utf-8"))
    inputs += [(url, None) for url in idempotence]
    inputs += [(url, "http://example.org/foo/bar") for url in idempotence]
    return inputs


@pytest.mark.parametrize(("url", "base"), _all_inputs())
def test_corpus_raises_only_invalid_url_and_is_idempotent(url, base):
    result = _outcome(url, base)
    if result is not None:
        assert normalize(result) == result
        assert _VALID_RFC3986.fullmatch(result), result


# --- Properties over arbitrary input ----------------------------------------

# An ASCII absolute http(s) URI of RFC 3986 (the characters it allows raw,
# escapes with uppercase hex), with a host and a path.
_VALID_RFC3986 = re.compile(
    r"https?://(?:(?:[a-z0-9\-._~!$&'()*+,;=]|%[0-9A-F]{2})+|\[[0-9a-f:]+\])(?::[0-9]+)?"
    r"/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-F]{2})*"
    r"(?:\?(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-F]{2})+)?")

_PIECES = [
    *"aAzZ09.-_~%/\\?#@:[]!$&'()*+,;=|^`{}\"<> \t\n\r\x00\x01\x7f",
    "http://", "https://", "HTTP:", "http:", "ftp://", "mailto:", "//", "\\\\", "..", "./",
    "%2e", "%2E", "%25", "%41", "%7e", "%zz", "%%", "%3", "0x", "0x7f", "127.0.0.1", "1.2",
    "4294967296", "[::1]", "[", "]", ":80", ":443", ":65536", "xn--", "xn--n3h", "example.com",
    "\u00df", "\u00e9", "\u3002", "\uff0e", "\u200b", "\u00ad", "\ufffd", "\ud800", "\udfff",
    "\ud83d\ude00", "\u0660", "\uff05",
]
_url_text = st.lists(st.sampled_from(_PIECES), max_size=24).map("".join)
_urls = st.one_of(_url_text, st.text(max_size=40),
                  st.tuples(st.sampled_from(["http://", "https://", "http:", "//"]), _url_text)
                  .map("".join))
_bases = st.one_of(
    st.none(),
    st.sampled_from(["http://h/dir/page.html", "https://a.example/b/c?q=1", "http://[::1]:8080/",
                     "http://127.0.0.1/a/", "mailto:x@y", "about:blank"]),
    _urls,
)
_QUICK = settings(max_examples=1500, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow])


@_QUICK
@given(_urls, _bases)
def test_normalize_raises_only_invalid_url_and_is_idempotent(url, base):
    try:
        result = normalize(url, base)
    except InvalidURL:
        return
    assert normalize(result) == result
    if base is not None:  # a valid base, or normalize would have raised
        assert normalize(result, base) == result
    assert _VALID_RFC3986.fullmatch(result), result


@_QUICK
@given(st.lists(st.tuples(st.sampled_from([
    "http://a/b/c/d;p?q", "http://a/b/c/e", "http://a/b/x/d?q", "https://a/b/c/d",
    "http://b/b/c/d", "http://a:8080/b/c/d", "http://a/", "http://a/b/c/d;p?r",
]), _urls), max_size=20))
def test_link_resolver_agrees_with_normalize_whatever_it_cached(pairs):
    resolver = LinkResolver()
    for base, href in pairs:
        assert resolver.resolve(base, href) == _outcome(href, base)


# --- Sites and shapes -------------------------------------------------------

@pytest.mark.parametrize(("host", "site"), [
    ("docs.python.org", "python.org"),
    ("python.org", "python.org"),
    ("a.b.example.co.uk", "example.co.uk"),
    ("foo.github.io", "foo.github.io"),  # private suffix: each user is a site
    ("127.0.0.2", "127.0.0.2"),  # IP addresses are their own site
    ("[::1]", "[::1]"),
    ("localhost", "localhost"),
    ("WWW.Example.COM.", "example.com"),
])
def test_site_of(host, site):
    assert site_of(host) == site


def test_numeric_ipv4_forms_are_one_site():
    sites = {site_of(host_of(normalize(u))) for u in (
        "http://2130706433/", "http://0x7f000001/", "http://127.1/", "http://127.0.0.1/")}
    assert sites == {"127.0.0.1"}


def test_host_of():
    assert host_of("http://u:p@example.com:8080/x") == "example.com"
    assert host_of("http://[::1]:8080/x") == "[::1]"


def test_url_shape_masks_digits_and_query_values():
    assert url_shape("http://h/cal?y=2024&m=5") == url_shape("http://h/cal?m=6&y=2023")
    assert url_shape("http://h/2024/05/a.html") == "h/0/0/a.html"
    assert url_shape("http://h/a.html") != url_shape("http://h/b.html")


def test_max_segment_repeats():
    assert max_segment_repeats("http://h/a/b/a/b/a/b") == 3
    assert max_segment_repeats("http://h/a/b/c") == 1
    assert max_segment_repeats("http://h/") == 0
