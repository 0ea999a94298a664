import gzip
import json

import pytest

from crawler.extract import analyze, decode_html, parse_html, parse_robots_directives
from tests.conftest import SHARED

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


CHINESE = "网络爬虫是一种按照一定的规则自动抓取万维网信息的程序。分布式爬虫把任务分给多台机器，共享待抓取的地址队列。" * 3
TRADITIONAL = "網路爬蟲是一種按照一定的規則自動抓取全球資訊網資訊的程式。它從一個或若干初始網頁的位址開始。" * 3


@pytest.mark.parametrize(("codec", "text"), [("gbk", CHINESE), ("big5", TRADITIONAL), ("utf-8", CHINESE)])
@pytest.mark.parametrize("declared", ["meta", "none"])
def test_chinese_encodings_decode_to_the_same_text(codec, text, declared):
    meta = f'<meta charset="{codec}">' if declared == "meta" else ""
    raw = f"<html><head>{meta}<title>T</title></head><body><p>{text}</p></body></html>".encode(codec)
    page = analyze(raw)
    assert page.text == text
    assert decode_html(raw).count(text) == 1


def test_header_charset_wins_over_guessing():
    raw = f"<html><body><p>{CHINESE}</p></body></html>".encode("gbk")
    assert CHINESE in decode_html(raw, "text/html; charset=gbk")


def test_real_pages_do_not_raise():
    """Every page of the labelled sample parses, yields a title or text, and links."""
    labels = [json.loads(line) for line in (SHARED / "data/pagetypes/labels.jsonl").read_text().splitlines()]
    assert len(labels) == 516
    with_links = 0
    for row in labels[::5]:
        page = analyze(gzip.decompress((SHARED / "data/pagetypes" / row["file"]).read_bytes()))
        assert page.title or page.text, row["file"]
        with_links += bool(page.links)
    assert with_links >= 100
