import pytest

from crawler.urls import (
    InvalidURL, LinkResolver, host_of, max_segment_repeats, normalize, site_of, url_shape,
)

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
    ("http://user:pw@Example.com/", "http://user:pw@example.com/"),
    ("  http://example.com/x  ", "http://example.com/x"),
]


@pytest.mark.parametrize(("url", "expected"), RFC_6)
def test_normalize_rfc3986_section6(url, expected):
    assert normalize(url) == expected
    assert normalize(expected) == expected  # idempotent


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


def test_link_resolver_is_bounded():
    resolver = LinkResolver(max_size=10)
    for i in range(25):
        assert resolver.resolve("http://a/", f"p{i}") == f"http://a/p{i}"
    assert len(resolver._cache) <= 10


@pytest.mark.parametrize(("url", "reason"), [
    ("example.com/page", "no scheme"),
    ("ftp://example.com/file", "unsupported scheme 'ftp'"),
    ("mailto:someone@example.com", "unsupported scheme 'mailto'"),
    ("http://", "no host"),
    ("http://exa mple.com/", "bad host"),
    ("http://example.com:99999/", "bad port"),
    ("http://[::1/", "unparsable"),
])
def test_invalid_urls_say_why(url, reason):
    with pytest.raises(InvalidURL, match=reason.replace("(", r"\(")):
        normalize(url)


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
