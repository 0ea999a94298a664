"""URL rules and the prefix scope as pure logic (crawler/scope/rules.py,
crawler/scope/urls.py): what is allowed, what is denied, what is refused at start."""

from __future__ import annotations

import time

import pytest

from crawler.scope.rules import MAX_PATTERNS, RulesError, UrlRules, read_rules_file
from crawler.scope.urls import in_scope, on_prefix_host, normalize, url_prefix


@pytest.mark.parametrize(("allow", "deny", "url", "verdict"), [
    ((), ("/search",), "https://a.org/docs/search?q=x", "denied"),
    ((), ("/search",), "https://a.org/searching/", "denied"),  # searched anywhere in the URL, as LinkExtractor does
    ((), ("/search",), "https://a.org/docs/", None),
    (("/docs/",), (), "https://a.org/blog/", "not_allowed"),
    (("/docs/",), (), "https://a.org/docs/x.html", None),
    (("/docs/",), ("\\.pdf$",), "https://a.org/docs/x.pdf", "denied"),  # deny wins
    (("^https://a\\.org/", "^https://b\\.org/"), (), "https://b.org/x", None),
    ((), (), "https://anything/", None),
])
def test_allow_and_deny(allow, deny, url, verdict):
    assert UrlRules(allow, deny).verdict(url) == verdict


def test_a_pattern_that_backtracks_catastrophically_is_bounded():
    rules = UrlRules(deny=("(x+x+)+y",))
    t0 = time.monotonic()
    assert rules.verdict("https://a.org/" + "x" * 5000) == "timeout"
    assert time.monotonic() - t0 < 1.0
    assert rules.verdict("https://a.org/xxy") == "denied"


@pytest.mark.parametrize(("allow", "deny", "message"), [
    (("(",), (), "-a allow='(' is not a regular expression (missing )"),
    ((), ("",), "-a deny= is empty: give a regular expression"),
    (("a" * 1001,), (), "characters; at most 1000"),
    (("x",) * (MAX_PATTERNS + 1), (), f"{MAX_PATTERNS + 1} patterns; at most {MAX_PATTERNS}"),
])
def test_bad_patterns_are_refused_with_the_pattern_named(allow, deny, message):
    with pytest.raises(RulesError) as exc:
        UrlRules(allow, deny)
    assert message in str(exc.value)


def test_rules_files_json_and_yaml_and_their_errors(tmp_path):
    (tmp_path / "r.yaml").write_text("allow:\n  - /docs/\ndeny: /private/\n")
    assert read_rules_file(str(tmp_path / "r.yaml")) == UrlRules(("/docs/",), ("/private/",))
    (tmp_path / "r.json").write_text('{"deny": ["/search", "\\\\?sort="]}')
    assert read_rules_file(str(tmp_path / "r.json")) == UrlRules((), ("/search", "\\?sort="))
    (tmp_path / "bad.json").write_text('{"deny": ["/x"], "max_depth": 3}')
    with pytest.raises(RulesError, match=r"unknown field max_depth \(rules have 'allow' and 'deny'\)"):
        read_rules_file(str(tmp_path / "bad.json"))
    (tmp_path / "bad.yaml").write_text("deny: [/x\n")
    with pytest.raises(RulesError, match=r"not valid YAML \(line 1, column 7: while parsing a flow sequence; line 2, column 1: "):
        read_rules_file(str(tmp_path / "bad.yaml"))
    (tmp_path / "list.json").write_text('["/x"]')
    with pytest.raises(RulesError, match="rules are a mapping"):
        read_rules_file(str(tmp_path / "list.json"))


def test_rules_travel_as_json_and_join():
    rules = UrlRules(("/docs/",), ("/search",)).joined(UrlRules((), ("/private/", "/search")))
    assert rules == UrlRules(("/docs/",), ("/search", "/private/"))
    assert UrlRules.from_json(rules.to_json()) == rules
    assert not UrlRules() and rules
    with pytest.raises(RulesError):
        UrlRules.from_json('{"deny": [7]}')


@pytest.mark.parametrize(("seed", "prefix"), [
    ("https://a.org/docs/intro.html", "a.org/docs/"),
    ("https://a.org/docs/", "a.org/docs/"),
    ("https://A.org", "a.org/"),
    ("http://a.org:8080/x/y/z.html?q=/w/", "a.org:8080/x/y/"),
])
def test_a_seeds_prefix_is_its_host_and_directory(seed, prefix):
    assert url_prefix(normalize(seed)) == prefix


@pytest.mark.parametrize(("url", "inside"), [
    ("https://a.org/docs/b/c.html", True),
    ("http://a.org/docs/", True),  # the scheme does not matter
    ("https://a.org/docsx/", False),
    ("https://a.org/", False),
    ("https://www.a.org/docs/", False),  # another host
])
def test_prefix_scope(url, inside):
    assert in_scope("prefix", normalize(url), frozenset({"a.org"}), frozenset({"a.org"}),
                    frozenset({"a.org/docs/"})) is inside


@pytest.mark.parametrize(("url", "on_host"), [
    ("https://a.org/sitemap.xml", True),  # the site's root, outside the prefix
    ("http://a.org/maps/docs.xml.gz", True),
    ("https://a.org:8080/sitemap.xml", False),  # another port: another place
    ("https://www.a.org/sitemap.xml", False),
    ("https://b.org/a.org/sitemap.xml", False),
])
def test_a_prefix_crawls_sitemaps_are_on_its_prefixes_hosts(url, on_host):
    assert on_prefix_host(normalize(url), frozenset({"a.org/docs/", "b.org:81/x/"})) is on_host
    assert not in_scope("prefix", normalize(url), frozenset({"a.org"}), frozenset({"a.org"}),
                        frozenset({"a.org/docs/"}))
