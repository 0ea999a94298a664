"""crawler.reading.markdown: the main content as Markdown and text from one
walk; exact Markdown for each construct, the words of the one the words of
the other on every HTML page the test-suite has, hostile trees."""

from __future__ import annotations

import gzip
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import lxml.etree
import pytest

from crawler.reading.extract import SKIP_TAGS, analyze
from crawler.reading.html import parse_html
from crawler.reading.markdown import MAX_CHARS, SKIP, Rendered, render

DATA = Path(__file__).parent / "data"
URL = "http://example.com/docs/page.html"


def body(html: str | bytes) -> Any:
    """The tree the content step hands over: parsed, its scripts and such stripped."""
    root = parse_html(html)
    assert root is not None
    lxml.etree.strip_elements(root, *SKIP_TAGS, with_tail=False)
    found = root.find("body")
    return found if found is not None else root


def md(html: str, url: str | None = URL) -> Rendered:
    return render([body(f"<html><body>{html}</body></html>")], url)


# ---- the words of the Markdown, read back as a reader of Markdown would

_FENCE = re.compile(r"^[ >]*(?:[-+:]\s|\d{1,9}[.)]\s)?[ >]*(```+|~~~+)")
_LEADS = re.compile(r"^(?:\s*(?:>|[-+]\s|\d{1,9}[.)]\s|:\s|#{1,6}\s))*")
# Left to right, as a reader of Markdown: an escape (its character is text), a code span (taken as
# written), an image's "![", a link's "](url)", emphasis and brackets.
_INLINE = re.compile(r"\\([!-/:-@\[-`{-~])|(`+)(.+?)(?<!`)\2(?!`)|!\[|\]\([^)\s]*\)|[*\[\]]")
_WORD = re.compile(r"\w+")


def _text(m: re.Match[str]) -> str:
    if m.group(3) is not None:
        return m.group(3).replace("\\|", "|")
    return m.group(1) or ""


def md_words(markdown: str) -> Counter[str]:
    """\\w+ words of Markdown read as text: without fences, list and quote
    marks, link and image URLs, emphasis, escapes (code as written)."""
    words: Counter[str] = Counter()
    fence = None
    for line in markdown.split("\n"):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1) == fence:
                fence = None
            else:
                words.update(_WORD.findall(line))
            continue
        if m:
            fence = m.group(1)
            continue
        words.update(_WORD.findall(_INLINE.sub(_text, _LEADS.sub("", line))))
    return words


def same_words(out: Rendered) -> bool:
    return md_words(out.markdown) == Counter(_WORD.findall(out.text))


# ---- exact Markdown of each construct

def test_paragraphs_headings_emphasis() -> None:
    out = md("<h1>Title <em>one</em></h1><div>First <b>bold</b> and <i> spaced </i>.</div>"
             "<p>Second<br>line</p><h7>not a heading</h7><h3><strong></strong></h3>")
    assert out.markdown == ("# Title *one*\n\nFirst **bold** and *spaced* .\n\nSecond\\\nline\n\n"
                            "not a heading")
    assert out.text == "Title one\nFirst bold and spaced .\nSecond\nline\nnot a heading"


def test_links_relative_absolute_dropped() -> None:
    out = md('<p><a href="../a b.html">rel</a> <a href="https://x.org/q?a=1_">abs</a> '
             '<a href="javascript:void(0)">js</a> <a href="data:text/html,x">data</a> '
             '<a href="#sec">frag</a> <a>none</a> <a href="/e"> </a>end</p>')
    assert out.markdown == ("[rel](http://example.com/a%20b.html) [abs](https://x.org/q?a=1_) js data "
                            "[frag](http://example.com/docs/page.html#sec) none end")
    assert out.text == "rel abs js data frag none end"
    assert md('<a href="/x">x</a>', url=None).markdown == "[x](/x)"


def test_heading_inside_link_and_link_inside_heading() -> None:
    out = md('<a href="/post"><h2>Post title</h2><p>Teaser</p></a><h3><a href="/b">B</a> side</h3>')
    assert out.markdown == "## [Post title](http://example.com/post)\n\n[Teaser](http://example.com/post)\n\n" \
                           "### [B](http://example.com/b) side"
    assert out.text == "Post title\nTeaser\nB side"


def test_nested_lists_and_numbering() -> None:
    out = md("<ul><li>one<ul><li>one.a<ol start='7'><li>seven</li><li>eight</li></ol></li></ul></li>"
             "<li><p>two</p><p>two again</p></li><li></li></ul><p>after</p>"
             "<ol start='x'><li>first</li></ol>")
    assert out.markdown == ("- one\n  - one.a\n    7. seven\n    8. eight\n- two\n  two again\n\nafter\n\n"
                            "1. first")
    assert out.text == "one\none.a\nseven\neight\ntwo\ntwo again\nafter\nfirst"


def test_table_with_spans_and_escapes() -> None:
    out = md("<table><caption>Prices</caption><thead><tr><th>Name</th><th colspan='2'>Cost</th></tr></thead>"
             "<tbody><tr><td rowspan='2'>tea|coffee</td><td>1</td><td>2<br>3</td></tr>"
             "<tr><td colspan='2'><p>both</p><p>cells</p></td></tr><tr><td>x</td></tr></tbody></table>")
    assert out.markdown == ("Prices\n\n| Name | Cost |  |\n| --- | --- | --- |\n| tea\\|coffee | 1 | 2 3 |\n"
                            "|  | both cells |  |\n| x |  |  |")
    assert out.text == "Prices\nName Cost\ntea|coffee 1 2 3\nboth cells\nx"


def test_table_without_th_and_layout_tables() -> None:
    assert md("<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>").markdown == \
        "| a | b |\n| --- | --- |\n| c | d |"
    one_column = md("<table><tr><td><h2>Menu</h2></td></tr><tr><td><p>Body <b>text</b></p></td></tr></table>")
    assert one_column.markdown == "## Menu\n\nBody **text**"
    nested = md("<table><tr><td>left</td><td><table><tr><td>x</td><td>y</td></tr></table></td></tr></table>")
    assert nested.markdown == "left\n\n| x | y |\n| --- | --- |"
    assert nested.text == "left\nx y"
    assert md("<table><tr><td> </td><td></td></tr></table>").markdown == ""


def test_code_blocks_with_language_and_inline_code() -> None:
    out = md('<pre><code class="hljs language-python">def f(x):\n    return x * 2\n</code></pre>'
             '<div class="highlight-rust notranslate"><div class="highlight"><pre><span>fn</span> main() {}'
             '</pre></div></div><pre data-lang="js">a<br>b</pre><pre class="brush: sql">SELECT 1;</pre>'
             "<pre>```\nfenced\n```</pre><p>Use <code>a_b*c</code>, <kbd>`x`</kbd> and <code>``</code>.</p>")
    assert out.markdown == ("```python\ndef f(x):\n    return x * 2\n```\n\n```rust\nfn main() {}\n```\n\n"
                            "```js\na\nb\n```\n\n```sql\nSELECT 1;\n```\n\n````\n```\nfenced\n```\n````\n\n"
                            "Use `a_b*c`, `` `x` `` and ``` `` ```.")
    assert out.text == "def f(x):\nreturn x * 2\nfn main() {}\na\nb\nSELECT 1;\n```\nfenced\n```\nUse a_b*c, `x` and ``."


def test_adjacent_code_spans_and_odd_urls() -> None:
    out = md('<p>Press <kbd>Ctrl</kbd><kbd>K</kbd>, <code>a</code> <code>b</code>; '
             '<a href="/x/9.57\u202fAM (1).jpg">shot</a> <a href=" /y\n z ">y</a></p>')
    assert out.markdown == ("Press `Ctrl`K, `a` `b`; [shot](http://example.com/x/9.57%E2%80%AFAM%20%281%29.jpg) "
                            "[y](http://example.com/y%20z)")
    assert out.text == "Press CtrlK, a b; shot y"
    assert same_words(out)


def test_quotes_rules_definitions_images() -> None:
    out = md("<p>intro</p><blockquote><p>quoted</p><blockquote>deeper</blockquote></blockquote><hr>"
             '<dl><dt>Term</dt><dd>Meaning</dd></dl><p><img alt="A cat" src="cat.png">'
             '<img src="x.png" alt=""><img alt="inline" src="data:image/png;base64,AA">tail</p>'
             '<a href="/p"><img alt="Photo" src="/p.jpg"></a>')
    assert out.markdown == ("intro\n\n> quoted\n>\n> > deeper\n\n---\n\nTerm\n: Meaning\n\n"
                            "![A cat](http://example.com/docs/cat.png) inline tail\n\n"
                            "[![Photo](http://example.com/p.jpg)](http://example.com/p)")
    assert out.text == "intro\nquoted\ndeeper\nTerm\nMeaning\nA cat inline tail\nPhoto"


def test_escaping_only_where_text_would_be_syntax() -> None:
    out = md("<p># not heading</p><p>1. not a list</p><p>- not an item</p><p>> not a quote</p>"
             "<p>snake_case a*b [x](y) _lead trail_ &amp;amp; <b>4 < 5</b> <span>&lt;tag&gt;</span> C:\\dir</p>"
             "<p>2024 was good. -5 degrees. #tag</p>")
    assert out.markdown == ("\\# not heading\n\n1\\. not a list\n\n\\- not an item\n\n\\> not a quote\n\n"
                            "snake_case a\\*b \\[x\\](y) \\_lead trail\\_ \\&amp; **4 < 5** \\<tag> C:\\\\dir\n\n"
                            "2024 was good. -5 degrees. #tag")
    assert same_words(out)


def test_skip_marks_leave_out_the_subtree_keep_the_tail() -> None:
    out = md(f"<div>keep <span {SKIP}>gone <b>too</b></span>tail <a href='/x' {SKIP}>menu</a>kept</div>"
             f"<ul><li {SKIP}>ad</li><li>item</li></ul>")
    assert out.markdown == "keep tail kept\n\n- item"
    assert out.text == "keep tail kept\nitem"
    root = body(f"<html><body><div {SKIP}>all</div></body></html>")
    assert render([root.find("div")]) == Rendered("", "")


def test_several_containers_in_order_and_their_tails_left_out() -> None:
    root = body("<html><body><main><p>one</p></main>between<article>two</article>after</body></html>")
    out = render([root.find("main"), root.find("article")], URL)
    assert out == Rendered("one\n\ntwo", "one\ntwo")
    assert render([], URL) == Rendered("", "")


def test_text_is_clean_and_cells_do_not_glue() -> None:
    out = md("<div>  many \n\t spaces </div><table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr>"
             "</table><p>x<span>y</span> z</p>")
    assert out.text == "many spaces\na b\nc d\nxy z"


# ---- hostile trees

def nested(tag: str, depth: int, text: str = "x") -> Any:
    root = lxml.etree.Element("body")
    el = root
    for _ in range(depth):
        el = lxml.etree.SubElement(el, tag)
        el.text = text
        if tag in ("ul", "ol"):
            el = lxml.etree.SubElement(el, "li")
            el.text = text
    return root


# lxml builds a deep tree in time quadratic in its depth (lxml's parser stops at 2,048): 50,000
# divs, 20,000 (20 times Python's recursion limit) of the others.
@pytest.mark.parametrize(("tag", "depth"), [("div", 50_000), *((t, 20_000) for t in (
    "ul", "ol", "blockquote", "dd", "b", "a", "table", "code", "h2", "pre"))])
def test_hostile_nesting_never_recurses(tag: str, depth: int) -> None:
    root = nested(tag, depth)
    if tag == "a":
        for el in root.iter("a"):
            el.set("href", "/x")
    started = time.process_time()
    out = render([root], URL)
    assert time.process_time() - started < 20
    assert same_words(out)
    # Every x, or as many as MAX_CHARS of Markdown hold (deep quotes and lists are long).
    assert out.text.count("x") == (2 if tag in ("ul", "ol") else 1) * depth or len(out.markdown) > MAX_CHARS - 1000
    assert md_words(out.markdown) == Counter(_WORD.findall(out.text))


def test_output_is_bounded() -> None:
    root = lxml.etree.Element("body")
    for i in range(40_000):
        lxml.etree.SubElement(root, "p").text = f"paragraph {i} " + "word " * 10
    out = render([root])
    assert MAX_CHARS - 1000 < len(out.markdown) <= MAX_CHARS
    assert out.text.endswith(out.markdown[-30:])
    assert same_words(out)
    big = lxml.etree.Element("body")
    big.text = "w " * 2_000_000
    out = render([big])
    assert 0 < len(out.markdown) <= MAX_CHARS and same_words(out)


def test_hostile_values_never_raise() -> None:
    out = md('<table><tr><td colspan="99999999" rowspan="-3">a</td><td colspan="x">b</td></tr>'
             '<tr><td rowspan="5000">c</td></tr></table><ol start="-99999999999999999999"><li>i</li></ol>'
             '<a href="http://[::1">bad</a> <a href="https://x/\ufdd3(y)">pua</a> '
             '<img alt="[x]\ufdd4" src="javascript:alert(1)">')
    assert same_words(out)
    assert "[bad](http://[::1) [pua](https://x/%28y%29) \\[x\\]" in out.markdown
    # Noncharacters in text (the walk's syntax) are taken out of every page before (scrub).
    page = analyze("<html><body><p>\ufdd0\ufdd2odd\ufdd3(x)\ufdd4</p></body></html>")
    assert page.main == "odd(x)" and page.markdown == "odd(x)"
    lxml_root = lxml.etree.Element("body")
    lxml.etree.SubElement(lxml_root, "p").append(lxml.etree.Comment("c"))
    assert render([lxml_root]).text == ""


# ---- every HTML page the test-suite has

def support_pages() -> list[tuple[str, bytes]]:
    from tests.support import app_server, hostile_server, mockserver
    pages: list[tuple[str, bytes]] = []
    for name, site in (("mock", mockserver.build_site(1)), ("partner", mockserver.partner_site()),
                       ("hostile", hostile_server.main_site(1)), ("other", hostile_server.other_site()),
                       ("copier", hostile_server.copier_site())):
        for path, (_, headers, raw) in site.items():
            if "html" in headers.get("Content-Type", "") and "Content-Encoding" not in headers and raw:
                pages.append((f"{name}{path}", raw))
    for path in ("/ref/index.html", "/ref/class1.html", *app_server.REF_MENU):
        pages.append((path, (app_server.reference(path) or "").encode()))
    pages += [(f"calendar{m}", mockserver.calendar(m)) for m in range(-1, 2)]
    pages += [(p, page) for p in mockserver.grid_paths()[:5] if (page := mockserver.grid_page(p, 1))]
    return pages


def data_pages() -> list[tuple[str, bytes]]:
    return [(str(p.relative_to(DATA)), gzip.decompress(p.read_bytes())) for p in sorted(DATA.rglob("*.html.gz"))]


def test_words_of_markdown_are_words_of_text_on_every_fixture() -> None:
    pages = data_pages() + support_pages()
    assert len(pages) > 180
    differ = []
    for name, raw in pages:
        root = parse_html(raw)
        if root is None:
            continue
        lxml.etree.strip_elements(root, *SKIP_TAGS, with_tail=False)
        out = render([root.find("body") if root.find("body") is not None else root], "http://127.0.0.1/" + name)
        if not same_words(out) or (out.text != "") != (out.markdown != ""):
            differ.append(name)
    assert differ == []


def test_analyze_stores_both() -> None:
    page = analyze("<html><body><article><h1>T</h1><p>Some <em>text</em> here.</p></article></body></html>",
                   URL)
    assert "*text*" in page.markdown and "text" in page.main
    assert md_words(page.markdown) == Counter(_WORD.findall(page.main))


def test_links_joined_without_urljoin_are_joined_as_urljoin_joins_them():
    """The two hrefs a page holds most ("#x", "dir/page.html#x") are joined
    to the page's URL without urljoin: the same URL as urljoin's (what
    ``Urls`` wrote before) for every href, the odd ones included."""
    import random

    from crawler.reading.mdparts import Urls

    bases = ["http://h.org/a/b/c.html", "https://h.org/a/b/?q=1#f", "http://h.org/", "http://h.org",
             "http://h.org/a/b/c.html?x=1&y=2", "https://h.org:8080/a/b/", "http://h.org/a//b/c.html"]
    hrefs = ["#x", "#", "a.html", "a/b.html#c", "x.html?y=1#z", "a:b.html", "a/b:c.html", "./a.html", "../a.html",
             "a/../b.html", "a/./b", ".hidden", "a b.html", "a\tb.html", "c.html#", "%20x.html", "a/b/", "mailto:x@y",
             "a?b=c:d", "?q=2", "//other.org/x", "a\\b.html", "x/.y", "..a", "é.html", "#a\nb", "x?", "a//b", "a#b//c"]
    rnd = random.Random(3)
    hrefs += ["".join(rnd.choice("ab/.:?#%_- \t\\é") for _ in range(rnd.randint(1, 9))) for _ in range(20_000)]
    for base in bases:
        fast, joined = Urls(base), Urls(base)
        joined.here = joined.folder = ""  # every href through urljoin, as before
        assert [fast.url_of(h) for h in hrefs] == [joined.url_of(h) for h in hrefs], base
    fast = Urls("http://h.org/docs/lib/os.html?v=3#top")
    assert (fast.here, fast.folder) == ("http://h.org/docs/lib/os.html?v=3", "http://h.org/docs/lib/")
    assert fast.url_of("path.html#os.getcwd") == "http://h.org/docs/lib/path.html#os.getcwd"
