import html as html_lib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.reading.extract import analyze
from crawler.reading.html import parse_html
from crawler.reading.head import parse_robots_directives
from tests.data.pagetypes import body, labels

ARTICLE = """<html><head><title> An  article </title>
<meta name="description" content="A short description of the article, long enough to use.">
<meta name="robots" content="noarchive, NOFOLLOW"></head>
<body><nav class="main-menu"><a href="/">Home</a> <a href="/news/">News</a></nav>
<article><h1>Heading</h1><p>First paragraph with <a href="/x">a link</a> and more words.</p>
<p>Second paragraph.<script>var x = "not text";</script></p></article>
<footer>Copyright <a href="/about">About us</a></footer></body></html>"""


def test_title_text_abstract_links_robots():
    page = analyze(ARTICLE)
    assert page.title == "An article"
    assert page.text == "Heading\nFirst paragraph with a link and more words.\nSecond paragraph."
    assert page.abstract == "A short description of the article, long enough to use."
    assert page.links == [("/", "Home"), ("/news/", "News"), ("/x", "a link"), ("/about", "About us")]
    assert page.robots == {"noarchive", "nofollow"}


def test_abstract_falls_back_to_text_and_is_cut_at_a_word():
    words = " ".join(f"word{i}" for i in range(200))
    page = analyze(f"<html><body><p>{words}</p></body></html>")
    assert page.abstract.endswith("…")
    assert len(page.abstract) <= 301
    assert page.abstract[:-1] == words[: len(page.abstract) - 1]


def test_base_href_and_area_links():
    page = analyze('<html><head><base href="http://cdn.example/base/"></head><body>'
                   '<map><area href="a.html" alt="Area"></map><a href="b.html" title="T"><img></a></body></html>')
    assert page.base_href == "http://cdn.example/base/"
    assert page.links == [("a.html", "Area"), ("b.html", "T")]


@pytest.mark.parametrize("html", [
    "", "   ", b"", "<", "<html><body><p>unclosed <b>bold <i>italic</body>",
    "<div>" * 5000 + "deep" + "</div>" * 5000,  # nesting deeper than Python's stack
    b"\xff\xfe\x00garbage\x00\x01", "<html><body>\x00nul</body></html>",
    '<?xml version="1.0" encoding="utf-8"?><html><body><p>xml declaration</p></body></html>',
])
def test_malformed_html_does_not_raise(html):
    page = analyze(html)
    assert isinstance(page.text, str)


def test_deep_nesting_keeps_text():
    # Far deeper than Python's recursion limit; libxml2 itself stops near 2048 levels.
    assert analyze("<div>" * 2000 + "deep" + "</div>" * 2000).text == "deep"


def test_empty_document_parses_to_none():
    assert parse_html("") is None
    assert analyze("").links == []


@pytest.mark.parametrize(("value", "expected"), [
    ("noindex, nofollow", {"noindex", "nofollow"}),
    ("NONE", {"noindex", "nofollow"}),
    ("googlebot: noindex", set()),  # addressed to another crawler
    ("robots: noindex", {"noindex"}),
    ("max-snippet:20, noindex", {"max-snippet", "noindex"}),
    ("unavailable_after: 2030-01-01", {"unavailable_after"}),
    ("", set()),
])
def test_robots_directives(value, expected):
    assert parse_robots_directives(value) == expected




def test_real_pages_do_not_raise():
    """Every page of the labelled sample parses and yields a title or text;
    all but one (a page whose links are all written by scripts) yield links:
    two more than before a <noscript> holding a page of text was read as
    the page (its links are what a client without scripts follows)."""
    rows = labels()
    assert len(rows) == 112
    with_links = 0
    for row in rows:
        page = analyze(body(row))
        assert page.title or page.text, row["file"]
        assert not _UNSAFE_OUT.intersection(page.text + page.title), row["file"]
        with_links += bool(page.links)
    assert with_links == 111


# -- hostile characters: nothing a page holds makes analyze raise

C0 = [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"]
C1 = [chr(c) for c in range(0x80, 0xA0)]
NONCHARACTERS = ["\ufdd0", "\ufdd1", "\ufdd2", "\ufdd3", "\ufdd4", "\ufdd5", "\ufdef", "\ufffe", "\uffff"]
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]
HOSTILE = C0 + ["\x7f"] + C1 + NONCHARACTERS + SURROGATES
# What no text, title or anchor may hold once analysed: every noncharacter
# of U+FDD0..U+FDEF, not only those HOSTILE samples (hypothesis drew U+FDD6).
_UNSAFE_OUT = frozenset(C0 + ["\x7f"] + C1 + [chr(c) for c in range(0xFDD0, 0xFDF0)] + NONCHARACTERS + SURROGATES)


def expected_text(raw: str) -> str:
    """What analyze should make of ``raw`` written as text: an oracle written
    apart from the module's own table."""
    out = []
    for ch in raw.replace("\r\n", "\n"):
        c = ord(ch)
        if ch == "\x00" or 0xD800 <= c <= 0xDFFF:
            out.append("\ufffd")  # the parser's replacement for NUL; a decoder's for a lone surrogate
        elif ch in "\x0b\x0c\x1c\x1d\x1e\x1f":
            out.append(" ")
        elif 0x80 <= c <= 0x9F:
            out.append(bytes([c]).decode("cp1252", "ignore"))
        elif ch not in _UNSAFE_OUT:
            out.append(ch)
    return " ".join("".join(out).split())


def expected_attr(raw: str) -> str:
    """An href as analyze hands it on: as written, but for what the HTML
    parser itself replaces (NUL, CR) and lone surrogates."""
    out = raw.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")
    return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in out)


@pytest.mark.parametrize(("html", "text"), [
    ("<pre>a\x0cb</pre>", "a b"),  # the page
    ("<pre>a\x0bb</pre>", "a b"),
    ("<p>a&#12;b</p>", "a b"),  # as a character reference
    ("<p>a&#x0B;b</p>", "a b"),
    ("<p>a\x01b\x08c\x7fd</p>", "abcd"),
    ("<p>a&#1;b&#x7f;c</p>", "abc"),
    ("<p>a\x1fb</p>", "a b"),  # str.split() reads U+001C..U+001F as spaces already
    ("<p>a\x00b</p>", "a\ufffdb"),
    ("<p>a&#0;b</p>", "a\ufffdb"),
    ("<p>a\ud800b\udfffc</p>", "a\ufffdb\ufffdc"),
    ("<p>a&#xd800;b</p>", "a\ufffdb"),
    ("<p>a\ufffeb\uffffc\ufdd0d\ufdefe</p>", "abcde"),
    ("<p>a&#xfffe;b&#xffff;c&#xfdd1;d</p>", "abcd"),
    ("<p>Caf\x82 \x93quoted\x94 \x97 dash\x85</p>", "Caf‚ “quoted” — dash…"),  # C1: windows-1252
    ("<p>a&#x93;b&#x97;c</p>", "a“b—c"),  # the parser's own reading of such references
    ("<p>a\x81b\x8dc\x8fd\x90e\x9df</p>", "abcdef"),  # undefined in windows-1252
    ("<p>\U0001fffe kept</p>", "\U0001fffe kept"),  # valid XML: left alone
])
def test_hostile_characters_in_text(html, text):
    page = analyze(html)
    assert page.text == text
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in html):  # bytes cannot hold a lone surrogate
        assert analyze(html.encode()).text == text


@pytest.mark.parametrize("char", HOSTILE)
def test_every_hostile_character_everywhere(char):
    """One character in every place a page can hold it: no raise, exact outcomes."""
    ref = f"&#{ord(char)};"
    html = (f'<html><head><title>T{char}1{ref}</title><base href=" /b{char}/ ">'
            f'<meta name="description" content="D{char}{ref} {"long enough to be used " * 2}">'
            f'<meta name="robots" content="noindex{char}">'
            f'</head><body><h1>H{char}</h1><p title="x{char}">P{char}{ref}q</p>'
            f'<a href="/a{char}b">A{char}{ref}</a><a href="/t" title="T{char}"></a>'
            f'<map><area href="/m{char}" alt="M{char}"></map>'
            f'<nav>N{char}<a href="/n">n</a></nav><pre>pre{char}{ref}</pre></body></html>')
    page = analyze(html)
    e = expected_text
    assert page.title == e(f"T{char}1{char}")
    assert page.h1 == e(f"H{char}")
    assert page.text == "\n".join(x for x in (e(f"H{char}"), e(f"P{char}{char}q"), e(f"pre{char}{char}")) if x)
    assert page.abstract == e(f"D{char}{char} {'long enough to be used ' * 2}")
    assert page.links == [(expected_attr(f"/a{char}b"), e(f"A{char}{char}")), ("/t", e(f"T{char}")),
                          (expected_attr(f"/m{char}"), e(f"M{char}")), ("/n", "n")]
    assert page.base_href == expected_attr(f"/b{char}/")
    assert not _UNSAFE_OUT.intersection(page.text + page.title + page.abstract + page.h1)
    if char not in SURROGATES:  # bytes cannot hold a lone surrogate
        assert analyze(html.encode()).links == page.links


@pytest.mark.parametrize("marker", ["\ufdd0", "\ufdd1", "\ufdd2", "\ufdd3", "\ufdd4", "\ufdd5"])
def test_a_page_cannot_forge_the_block_markers(marker):
    """The noncharacters that mark links, blocks and navigation inside analyze
    are taken out of the page first: a page holding them is read as without."""
    prose = "A sentence of an article that goes on without any links at all. " * 4
    html = (f"<html><body><nav><a href='/'>Home</a></nav><p>Intro {marker}here</p>"
            f"<div>{marker}{marker}<a href='/x'>x</a></div><p>{prose}</p></body></html>")
    page = analyze(html)
    clean = analyze(html.replace(marker, ""))
    assert page.text == clean.text == f"Intro here\n{prose.strip()}"
    assert page.features == clean.features


@pytest.mark.parametrize(("base", "expected"), [
    (" \x0c\thttp://cdn.example/b/\x0c\x01 ", "http://cdn.example/b/"),  # the URL parser's trim
    ("\x0c", None),
    ("http://cdn.example/\xa0", "http://cdn.example/\xa0"),  # not C0: kept for the URL parser
])
def test_base_href_is_trimmed_as_the_url_parser_would(base, expected):
    assert analyze(f'<html><head><base href="{base}"></head><body>x</body></html>').base_href == expected


_HOSTILE_TEXT = st.text(st.one_of(st.sampled_from(HOSTILE + ["\t", "\n", "\r", " ", "\xa0", "&", "<", '"']),
                                  st.characters(codec="utf-8")), max_size=40)


@settings(max_examples=300, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(title=_HOSTILE_TEXT, base=_HOSTILE_TEXT, desc=_HOSTILE_TEXT, p1=_HOSTILE_TEXT, p2=_HOSTILE_TEXT,
       href=_HOSTILE_TEXT, anchor=_HOSTILE_TEXT)
def test_generated_pages_keep_exactly_their_text_and_links(title, base, desc, p1, p2, href, anchor):
    """Pages generated with hostile characters anywhere (escaped as a page
    writes them): analyze keeps exactly the text and links it should."""
    esc = html_lib.escape
    html = (f'<html><head><title>{esc(title)}</title><base href="{esc(base)}">'
            f'<meta name="description" content="{esc(desc)}"></head><body>'
            f'<p>{esc(p1)}</p><a href="{esc(href)}">{esc(anchor)}</a><p>{esc(p2)}</p></body></html>')
    page = analyze(html)
    e = expected_text
    paragraphs = [x for x in (e(p1), e(p2)) if x]
    assert page.title == e(title)[:500]
    assert page.links == [(expected_attr(href), e(anchor))]
    assert page.text == "\n".join(paragraphs or [e(anchor)] if e(anchor) else paragraphs)
    assert page.base_href == (expected_attr(base).strip("".join(map(chr, range(0x21)))) or None)
    if len(e(desc)) >= 40:
        assert page.abstract == e(desc)
    assert not _UNSAFE_OUT.intersection(page.text + page.title + page.abstract + page.h1 + e(anchor))


_SOUP = st.lists(st.one_of(
    st.sampled_from(["<p>", "</p>", "<a href='", "'>", "</a>", "<nav>", "</nav>", "<h1>", "<title>",
                     "</title>", "<base href=", "<meta content='", "' name=description>", "<pre>", "<br>",
                     "<!--", "-->", "<script>", "</script>", "&#", ";", "&#x", "<?xml ?>", "<![CDATA[",
                     "<div class='menu'>", "</div>", "<table><tr><td>", "<li>", "<area alt='"]),
    st.text(st.sampled_from(HOSTILE + list("ab \n&#;x0123456789<>='\"/")), max_size=8),
    st.text(max_size=8),
), max_size=40).map("".join)


@settings(max_examples=500, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(soup=_SOUP)
def test_tag_soup_never_raises(soup):
    """Unbalanced, hostile markup as text and as bytes: no raise, and no
    control character or noncharacter in what is kept."""
    for page in (analyze(soup), analyze(soup.encode("utf-8", "surrogatepass"))):
        assert not _UNSAFE_OUT.intersection(page.text + page.title + page.abstract + page.h1)
        assert not _UNSAFE_OUT.intersection("".join(anchor for _, anchor in page.links))


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(data=st.binary(max_size=300))
def test_any_bytes_never_raise(data):
    page = analyze(data)
    assert not _UNSAFE_OUT.intersection(page.text + page.title)


def test_a_content_container_named_after_the_page_is_not_navigation():
    """Sphinx names the content's container after the page: the Django
    manual's page on pagination is ``<div id="topics-pagination">``. It holds
    the page's title, so it is the page; an id alone that reads like a menu
    and holds no h1 is still navigation, and so is a class that does."""
    html = ('<html><body><div id="hd"><h1><a href="/">Django documentation</a></h1>'
            '<p>A mirror kept for students.</p><div id="global-nav"><a href="/">Home</a></div></div>'
            '<div id="topics-pagination"><h1>Pagination</h1><p>Django provides high-level and low-level ways '
            'to help you manage paginated data, split across several pages.</p></div>'
            '<div id="site-navigation"><p>Browse the whole site from here, section by section.</p></div>'
            '<div class="pagination"><h1>Pages</h1><p>Page one of many, and the rest after it.</p></div>'
            '</body></html>')
    page = analyze(html)
    assert [(b.text, b.boiler) for b in page.blocks] == [
        ("Django documentation", False), ("A mirror kept for students.", False), ("Home", True),
        ("Pagination", False),
        ("Django provides high-level and low-level ways to help you manage paginated data, split across "
         "several pages.", False),
        ("Browse the whole site from here, section by section.", True),
        ("Pages", True), ("Page one of many, and the rest after it.", True)]
    assert page.text == ("A mirror kept for students.\nPagination\nDjango provides high-level and low-level ways "
                         "to help you manage paginated data, split across several pages.")


@pytest.mark.parametrize("wrapper", [
    # The Read the Docs theme: the page's own column is "wy-nav-content".
    '<section class="wy-nav-content-wrap"><div class="wy-nav-content">{}</div></section>',
    '<div class="container sidebar-right">{}</div>',
])
def test_a_themes_wrapper_named_after_navigation_is_the_page_when_it_holds_the_title(wrapper):
    side = '<nav class="wy-nav-side"><ul><li><a href="/a">Guide</a></li><li><a href="/b">API</a></li></ul></nav>'
    content = ('<h1>Magic numbers</h1><p>This file is a registry of the magic numbers in use, kept so that '
               'nobody picks one twice.</p><div class="menu-small"><h1>Other</h1><p>A teaser.</p></div>')
    # Every class of WordPress's body that reads like navigation: still the page.
    page = analyze(f'<html class="nav-open"><body class="has-sidebar single">{side}'
                   f'{wrapper.format(content)}</body></html>')
    assert [(b.text, b.boiler) for b in page.blocks] == [
        ("Guide", True), ("API", True), ("Magic numbers", False),
        ("This file is a registry of the magic numbers in use, kept so that nobody picks one twice.", False),
        # A block inside that does not hold the page's title: navigation by its class.
        ("Other", True), ("A teaser.", True)]
    # Without a paragraph beside it, a navigation bar holding the h1 (a site
    # logo) is still navigation.
    bar = analyze('<html><body><div class="navbar"><h1>Site</h1><a href="/">Home</a></div>'
                  '<div><p>Body text of the page, long enough.</p></div></body></html>')
    assert [(b.text, b.boiler) for b in bar.blocks] == [("Site", True), ("Home", True),
                                                       ("Body text of the page, long enough.", False)]


def test_link_contexts_and_own_text_only_when_asked():
    html = ("<html><body><h1>Vacuum</h1><p>Words of the page <a href='/x'>galaxy link</a> and more words after "
            "it, enough to make a paragraph.</p><ul><li><a href='/a'>nebula</a> six words of context here</li>"
            "<li><a href='/b'>comet</a></li></ul><a href='/d'>direct</a></body></html>")
    plain = analyze(html, "http://h/")
    assert plain.link_contexts == [] and plain.own_text == ""
    page = analyze(html, "http://h/", link_context=True)
    assert page.text == plain.text  # the main text does not change
    assert page.link_contexts == [
        "Words of the page galaxy link and more words after it, enough to make a paragraph.",
        "nebula six words of context here", "comet", ""]
    assert page.own_text == ("Vacuum\nWords of the page and more words after it, enough to make a paragraph.\n"
                             "six words of context here")


def test_a_links_surroundings_are_read_only_so_far():
    # Thousands of empty links under one parent: each link's context is
    # read once a parent, and never more than CONTEXT_NODES elements deep.
    from crawler.reading.links import CONTEXT_NODES

    html = ("<html><body><div>" + "<a href='/e'></a>" * 2000 + "<a href='/t'>far away text</a></div>"
            "<p><a href='/n'>near</a> words</p></body></html>")
    page = analyze(html, "http://h/", link_context=True)
    assert len(page.link_contexts) == 2002
    assert set(page.link_contexts[:2001]) == {""}  # the text lies beyond the first CONTEXT_NODES elements
    assert page.link_contexts[2001] == "near words"
    assert CONTEXT_NODES < 2000


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(text=st.text(alphabet=st.sampled_from("$€£¥ 0123456789,.USDEGBPa"), max_size=40))
def test_prices_are_counted_as_the_one_regex_counts_them(text):
    """Where no currency follows a number, prices are found with the prefix
    regex alone: the same count as the full one."""
    from crawler.reading.extract import _PRICE, _PRICE_PREFIX, _SUFFIX_HINTS

    if not any(c in text for c in _SUFFIX_HINTS):
        assert _PRICE_PREFIX.findall(text) == _PRICE.findall(text)
    page = analyze(f"<html><body><p>{html_lib.escape(text)}</p></body></html>")
    assert page.features["n_price"] == (len(_PRICE.findall(page.text)) if page.text else 0)
