"""crawler/reading/metadata.py and metafields.py: each syntax, the
normalised fields, and hostile metadata (bounded, counted, never raising)."""

from __future__ import annotations

import json

import lxml.etree
import pytest

from crawler.reading.html import parse_html
from crawler.reading.metadata import MAX_BLOB, MAX_DEPTH, MAX_ITEMS, MAX_STRING, MAX_TOTAL, read_metadata
from crawler.reading.metafields import iso_date

PAGE = """<html><head><title>Big Story | Daily Planet</title>
<meta property="og:title" content="Big Story"><meta property="og:type" content="article">
<meta property="og:image" content="https://ex.com/a.jpg"><meta property="og:image" content="https://ex.com/b.jpg">
<meta property="article:published_time" content="2025-09-04T10:00:00+0000">
<meta name="twitter:card" content="summary"><meta name="description" content="All about it.">
<script type="application/ld+json">{"@context":"https://schema.org","@graph":[{"@type":"WebSite","name":"Daily Planet"},
{"@type":"NewsArticle","headline":"Big Story","author":[{"@type":"Person","name":"Lois Lane"},
{"@type":"Person","name":"Clark Kent"}],"datePublished":"2025-09-04","dateModified":"2025-09-05T08:00:00Z"}]}</script>
</head><body><h1>Big Story</h1>
<div itemscope itemtype="https://schema.org/Product"><span itemprop="name">Cape</span>
<div itemprop="offers" itemscope itemtype="https://schema.org/Offer"><meta itemprop="price" content="9.99"></div>
<a itemprop="url" href="/cape">x</a></div>
<div vocab="https://schema.org/" typeof="Person"><span property="name">Jimmy Olsen</span></div>
</body></html>"""


def meta(html: str) -> dict:
    found = read_metadata(parse_html(html), "https://ex.com/story")
    json.dumps(found, allow_nan=False)  # JSON-safe
    return found


def test_every_syntax_and_the_normalised_fields():
    assert meta(PAGE) == {
        "title": "Big Story", "author": "Lois Lane, Clark Kent", "published": "2025-09-04",
        "modified": "2025-09-05T08:00:00Z", "description": "All about it.", "site_name": "Daily Planet",
        "image": "https://ex.com/a.jpg", "type": "article",
        "jsonld": [{"@type": "WebSite", "name": "Daily Planet"},
                   {"@type": "NewsArticle", "headline": "Big Story",
                    "author": [{"@type": "Person", "name": "Lois Lane"}, {"@type": "Person", "name": "Clark Kent"}],
                    "datePublished": "2025-09-04", "dateModified": "2025-09-05T08:00:00Z"}],
        "microdata": [{"@type": "https://schema.org/Product", "name": "Cape",
                       "offers": {"@type": "https://schema.org/Offer", "price": "9.99"}, "url": "/cape"}],
        "rdfa": [{"@type": "Person", "name": "Jimmy Olsen"}],
        "opengraph": {"og:title": "Big Story", "og:type": "article",
                      "og:image": ["https://ex.com/a.jpg", "https://ex.com/b.jpg"],
                      "article:published_time": "2025-09-04T10:00:00+0000"},
        "twitter": {"twitter:card": "summary"},
    }


def test_the_tree_is_not_changed():
    root = parse_html(PAGE)
    before = lxml.etree.tostring(root)
    read_metadata(root, "https://ex.com/")
    assert lxml.etree.tostring(root) == before


def test_a_page_without_metadata_gives_the_markup_fields_only():
    assert meta("<html><head><title>Home - Site</title></head><body><p>x</p></body></html>") == {"title": "Home"}
    assert read_metadata(None) == {}


def test_meta_tags_and_markup():
    html = """<html><head><title>How to Fold Paper | Crafts</title>
    <meta name="author" content="By Ann Smith"><meta name="citation_publication_date" content="2021/03/07">
    <meta name="dcterms.modified" content="March 9, 2021"></head>
    <body><h1>How to fold paper</h1><a rel="author" href="/ann">Someone Else</a></body></html>"""
    assert meta(html) == {"title": "How to fold paper", "author": "Ann Smith", "published": "2021-03-07",
                          "modified": "2021-03-09"}


def test_byline_link_and_time_element():
    html = """<html><body><h1>Title</h1><p>by <a rel="author" href="/b">Bob Ray</a>
    <time datetime="2020-01-02T03:04:05+0100">Jan 2</time></p></body></html>"""
    assert meta(html) == {"title": "Title", "author": "Bob Ray", "published": "2020-01-02T03:04:05+01:00"}


def test_an_author_given_as_a_url_or_json_is_no_name():
    html = """<html><head><meta property="article:author" content="https://facebook.com/someone">
    <script type="application/ld+json">{"@type":"Article","author":{"@type":"Person","url":"https://x.com/a"}}</script>
    </head><body></body></html>"""
    found = meta(html)
    assert "author" not in found
    assert found["jsonld"] == [{"@type": "Article", "author": {"@type": "Person", "url": "https://x.com/a"}}]


@pytest.mark.parametrize("written, iso", [
    ("2025-09-04", "2025-09-04"), ("2025-09-04T10:00:00+0000", "2025-09-04T10:00:00+00:00"),
    ("2025-09-04 10:00", "2025-09-04T10:00:00"), ("Thu, 04 Sep 2025 10:00:00 GMT", "2025-09-04"),
    ("September 4th, 2025", "2025-09-04"), ("4 Sept. 2025", "2025-09-04"), ("4. März 2025", "2025-03-04"),
    ("09/04/2025", "2025-09-04"), ("25/12/2024", "2024-12-25"), ("04.09.2025", "2025-09-04"),
    ("20250904", "2025-09-04"), ("2025-13-40", ""), ("yesterday", ""), ("", ""), ("1 of 2025", ""),
])
def test_dates_as_iso_8601(written, iso):
    assert iso_date(written) == iso


def test_malformed_json_ld_is_repaired_where_cheap_else_counted():
    html = """<html><head>
    <script type="application/ld+json"><!-- {"@type": "Article", "headline": "A",} --></script>
    <script type="application/ld+json">{"@type": "Thing", "name": "B"}{"@type": "Thing", "name": "C"}</script>
    <script type="application/ld+json">{"@type": "Thing", "name": "line
break\x01"}</script>
    <script type="application/ld+json">{"@type": "Thing", "name": </script>
    <script type="application/ld+json">{"value": NaN, "big": 123456789012345678901234567890}</script>
    </head><body></body></html>"""
    assert meta(html) == {
        "title": "A", "type": "article",
        "jsonld": [{"@type": "Article", "headline": "A"}, {"@type": "Thing", "name": "B"},
                   {"@type": "Thing", "name": "C"}, {"@type": "Thing", "name": "line\nbreak"},
                   {"value": None, "big": "123456789012345678901234567890"}],
        "errors": 1,
    }


def test_hostile_metadata_is_bounded():
    deep = '{"a":' * 5000 + "1" + "}" * 5000
    nested = {"@type": "Thing"}
    cur = nested
    for _ in range(MAX_DEPTH + 5):
        cur["x"] = {}
        cur = cur["x"]
    html = f"""<html><head>
    <script type="application/ld+json">{"[" + "1," * MAX_BLOB + "1]"}</script>
    <script type="application/ld+json">{deep}</script>
    <script type="application/ld+json">{json.dumps(nested)}</script>
    <script type="application/ld+json">{json.dumps({"@type": "Thing", "list": list(range(MAX_ITEMS + 10)),
                                                    "name": "n" * (MAX_STRING + 5), "$where": "1"})}</script>
    <meta property="og:title" content="&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;">
    </head><body></body></html>"""
    found = meta(html)
    assert found["errors"] == 2  # the blob over MAX_BLOB, the nesting JSON cannot read
    thing = found["jsonld"][0]
    depth = 0
    while isinstance(thing.get("x"), dict):
        thing, depth = thing["x"], depth + 1
    assert depth == MAX_DEPTH - 2 and thing == {"x": None}  # the item is at depth 1
    assert found["jsonld"][1] == {"@type": "Thing", "list": list(range(MAX_ITEMS)), "name": "n" * MAX_STRING,
                                  "_$where": "1"}
    assert found["cut"] == 3
    assert found["opengraph"] == {"og:title": "</script><script>alert(1)</script>"}
    assert found["title"] == "alert(1)"  # markup taken out of a normalised field


def test_the_whole_dict_is_capped():
    items = [{"@type": "Thing", "name": f"{i}" + "x" * 1900} for i in range(MAX_ITEMS)]
    html = f"""<html><head><script type="application/ld+json">{json.dumps(items)}</script>
    <meta property="og:title" content="T"></head><body></body></html>"""
    found = meta(html)
    assert "jsonld" not in found and found["opengraph"] == {"og:title": "T"} and found["cut"] == 1
    assert len(json.dumps(found)) <= MAX_TOTAL


def test_non_string_values_and_odd_types():
    html = """<html><head><script type="application/ld+json">
    [1, "x", null, {"@type": ["Article", 5], "headline": 7, "author": {"name": ["Ann", "Bob"]},
      "datePublished": 20250101, "image": [{"url": "https://ex.com/i.png"}]}]</script></head><body></body></html>"""
    assert meta(html) == {
        "author": "Ann", "image": "https://ex.com/i.png", "type": "article",
        "jsonld": [{"@type": ["Article", 5], "headline": 7, "author": {"name": ["Ann", "Bob"]},
                    "datePublished": 20250101, "image": [{"url": "https://ex.com/i.png"}]}],
    }


def test_control_characters_and_surrogates_in_values():
    html = ('<html><head><script type="application/ld+json">{"@type": "Thing", "name": "a\\u0000b\\ud800c"}'
            '</script></head><body></body></html>')
    assert meta(html)["jsonld"] == [{"@type": "Thing", "name": "ab\ufffdc"}]  # NUL dropped, the surrogate replaced


def test_a_byline_and_a_dateline_near_the_h1_when_the_metadata_gives_none():
    html = """<html><body><div class="post"><header><h1>Fold paper</h1>
    <div class="meta"><span class="date">Published August 7, 2023</span>
    <span class="post-author">By Nicole Burke</span></div></header><p>Text.</p></div>
    <div class="comments"><p>By Someone Else on 1 May 2024</p></div></body></html>"""
    assert meta(html) == {"title": "Fold paper", "author": "Nicole Burke", "published": "2023-08-07"}
    html = """<html><body><article><h1>Title</h1><p>Written by Ann Lee-Smith, 2 March 2021</p>
    <p class="author-bio">More posts by 3 people</p></article></body></html>"""
    assert meta(html) == {"title": "Title", "author": "Ann Lee-Smith", "published": "2021-03-02"}


def test_no_byline_from_words_that_are_no_name():
    html = """<html><body><main><h1>Title</h1><span class="author">Name *</span>
    <p>Supported by AI</p><p class="byline">undefined</p></main></body></html>"""
    assert meta(html) == {"title": "Title"}


def test_hostile_markup_costs_little_and_is_bounded():
    import time

    nested = "<div itemscope>" + '<div itemscope itemprop="x">' * 1500 + "deep" + "</div>" * 1501
    props = '<div itemscope itemtype="T">' + '<span itemprop="p">v</span>' * 5000 + "</div>"
    wrapped = '<div class="author byline" itemscope><span itemprop="name">' + "word " * 200_000 + "</span></div>"
    metas = "".join(f"<meta name=m{i} content=c>" for i in range(5000))
    found = []
    start = time.process_time()
    for body in (nested, props, wrapped):
        found.append(read_metadata(parse_html(f"<html><head>{metas}</head><body><h1>H</h1>{body}</body></html>")))
    assert time.process_time() - start < 3.0
    item, depth = found[0]["microdata"][0], 0
    while isinstance(item.get("x"), dict):
        item, depth = item["x"], depth + 1
    assert (depth, found[0]["cut"]) == (MAX_DEPTH - 1, 1)
    assert found[1]["microdata"] == [{"@type": "T", "p": ["v"] * MAX_ITEMS}] and found[1]["cut"] == 2
    assert found[2]["microdata"] == [{"name": ("word " * 401)[:MAX_STRING]}] and found[2]["cut"] == 1
    assert found[2]["title"] == "H" and "author" not in found[2]  # 200,000 words are no name

