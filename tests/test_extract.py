import html as html_lib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.extract import analyze, decode_html, encoding_name, parse_html, parse_robots_directives
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


CHINESE = "网络爬虫是一种按照一定的规则自动抓取万维网信息的程序。分布式爬虫把任务分给多台机器，共享待抓取的地址队列。" * 3
TRADITIONAL = "網路爬蟲是一種按照一定的規則自動抓取全球資訊網資訊的程式。它從一個或若干初始網頁的位址開始。" * 3


@pytest.mark.parametrize(("codec", "text"), [("gbk", CHINESE), ("big5", TRADITIONAL), ("utf-8", CHINESE)])
@pytest.mark.parametrize("declared", ["meta", "none"])
def test_chinese_encodings_decode_to_the_same_text(codec, text, declared):
    meta = f'<meta charset="{codec}">' if declared == "meta" else ""
    raw = f"<html><head>{meta}<title>T</title></head><body><p>{text}</p></body></html>".encode(codec)
    page = analyze(raw)
    assert page.text == text
    assert decode_html(raw)[0].count(text) == 1


def test_header_charset_wins_over_guessing():
    raw = f"<html><body><p>{CHINESE}</p></body></html>".encode("gbk")
    assert decode_html(raw, "text/html; charset=gbk") == (raw.decode("gbk"), "gbk")


def test_real_pages_do_not_raise():
    """Every page of the labelled sample parses and yields a title or text;
    all but three (pages whose links are all written by scripts) yield links."""
    rows = labels()
    assert len(rows) == 112
    with_links = 0
    for row in rows:
        page = analyze(body(row))
        assert page.title or page.text, row["file"]
        assert not _UNSAFE_OUT.intersection(page.text + page.title), row["file"]
        with_links += bool(page.links)
    assert with_links == 109


# -- encodings: what decode_html reads, and the name it gives

def doc(body: str, lang: str | None = None, head: str = "") -> str:
    lang_attr = f' lang="{lang}"' if lang else ""
    return f"<!DOCTYPE html><html{lang_attr}><head>{head}<title>T</title></head><body>{body}</body></html>"


FRENCH = "<p>À la découverte de la forêt : où sont les élèves ? Ça dépend, répondit le maître près du lac.</p>"
PORTUGUESE = "<p>A informação é útil : não há razão para não ler o capítulo sobre a administração pública.</p>"
GERMAN = "<p>Die Größe der Straße überrascht: Müller fährt täglich über die Brücke zur Universität.</p>"
SPANISH = "<p>¿Dónde está el niño? ¡Qué año! El señor García compró 3 ½ kilos de jamón.</p>"
WINDOWS_1252 = "<p>L’école coûte 10 € — « très cher », dit-il… Œuvre, cœur.</p>"  # bytes 0x80..0x9F
POLISH = "<p>Zażółć gęślą jaźń: robot internetowy zbierający informacje o stronach.</p>"
SHORT_CHINESE = ["欢迎光临", "网络爬虫", "关于我们", "北京天气预报", "联系我们 | 公司简介"]
TRADITIONAL_SHORT = "網路爬蟲是一種自動抓取網頁的程式。"
JAPANESE = "ウェブクローラーは、ウェブページを自動的に収集するプログラムです。"
KOREAN = "웹 크롤러는 조직적, 자동화된 방법으로 월드 와이드 웹을 탐색하는 컴퓨터 프로그램이다."
RUSSIAN = "Поисковый робот - программа, предназначенная для перебора страниц Интернета."


@pytest.mark.parametrize("body", [FRENCH, PORTUGUESE, GERMAN, SPANISH])
@pytest.mark.parametrize("lang", [None, "fr", "en"])
def test_undeclared_iso_8859_1_reads_as_windows_1252(body, lang):
    """Not cp1257 (à -> ą) nor cp1250, as charset-normalizer would have it."""
    assert decode_html(doc(body, lang).encode("iso-8859-1")) == (doc(body, lang), "windows-1252")


@pytest.mark.parametrize(("body", "codec", "lang", "expected"), [
    (WINDOWS_1252, "cp1252", None, "windows-1252"),
    (FRENCH.replace("lac", "lac, cœur"), "iso-8859-15", None, "iso-8859-15"),  # 0xBD is œ, not ½ inside a word
    (POLISH, "cp1250", None, "windows-1250"),  # "¿ó³æ" inside words: not windows-1252
    (POLISH, "iso-8859-2", None, "iso-8859-2"),
    (POLISH, "iso-8859-2", "pl", "iso-8859-2"),
    ("<p>Árvíztűrő tükörfúrógép</p>", "cp1250", "hu", "windows-1250"),
    ("<p>Arama motoru örümceği, ışık</p>", "cp1254", "tr", "windows-1254"),
    ("<p>Paieškos robotas naršo žiniatinklį</p>", "cp1257", "lt", "windows-1257"),
    (f"<p>{RUSSIAN}</p>", "cp1251", None, "windows-1251"),
    (f"<p>{RUSSIAN}</p>", "koi8-r", None, "koi8-r"),
    (f"<p>{RUSSIAN}</p>", "koi8-r", "ru", "koi8-r"),
    ("<p>Ο ανιχνευτής ιστού είναι ένα πρόγραμμα.</p>", "cp1253", "el", "windows-1253"),
    ("<p>זחלן רשת הוא תוכנה הסורקת את האינטרנט.</p>", "cp1255", "he", "windows-1255"),
    ("<p>زاحف الشبكة هو برنامج يتصفح الشبكة العالمية.</p>", "cp1256", None, "windows-1256"),
    ("<p>โปรแกรมรวบรวมข้อมูลเว็บเป็นโปรแกรมที่ท่องเว็บ</p>", "cp874", None, "windows-874"),
])
def test_undeclared_single_byte_pages(body, codec, lang, expected):
    raw = doc(body, lang).encode(codec)
    assert decode_html(raw) == (doc(body, lang), expected)


@pytest.mark.parametrize("title", SHORT_CHINESE)
@pytest.mark.parametrize(("lang", "hint"), [
    (None, None), ("zh", None), ("zh-CN", None), (None, "gbk"), (None, "gb2312"), ("en", "gbk"),
])
def test_short_undeclared_gbk_page_reads_as_gbk(title, lang, hint):
    """Short enough for charset-normalizer to call it EUC-KR (cp949)."""
    html = doc(f"<h1>{title}</h1>", lang)
    assert decode_html(html.encode("gbk"), None, hint) == (html, "gbk")


@pytest.mark.parametrize(("body", "codec", "lang", "expected"), [
    (TRADITIONAL_SHORT, "big5", "zh-TW", "big5"),
    (TRADITIONAL_SHORT, "big5", "zh-Hant", "big5"),
    (TRADITIONAL_SHORT, "big5", "zh-HK", "big5"),
    (TRADITIONAL_SHORT, "big5", None, "big5"),
    (CHINESE, "gbk", None, "gbk"),
    (CHINESE, "gb18030", "zh", "gbk"),  # GBK's decoder is gb18030's
    (JAPANESE, "shift_jis", None, "shift_jis"),
    (JAPANESE, "shift_jis", "ja", "shift_jis"),
    (JAPANESE, "euc-jp", None, "euc-jp"),  # as Big5 it is everyday Chinese too; hiragana tell
    (JAPANESE, "euc-jp", "ja", "euc-jp"),
    (JAPANESE, "iso-2022-jp", None, "iso-2022-jp"),  # 7-bit: reads as UTF-8 but for its escapes
    (KOREAN, "euc-kr", None, "euc-kr"),  # as GBK it is everyday Chinese too; Hangul without Hanja tell
    (KOREAN, "euc-kr", "ko", "euc-kr"),
])
def test_undeclared_cjk_pages(body, codec, lang, expected):
    html = doc(f"<p>{body}</p>", lang)
    assert decode_html(html.encode(codec)) == (html, expected)


@pytest.mark.parametrize(("head", "lang"), [
    ('<meta http-equiv="Content-Language" content="zh-TW">', "zh-tw"),
    ("<meta content='ko' http-equiv='content-language'>", "ko"),
])
def test_language_from_a_content_language_meta(head, lang):
    from crawler.extract import _page_language

    assert _page_language(doc("", None, head).encode()) == lang


def test_detection_reads_past_a_long_ascii_head():
    """100 KB of script before the text: the statistics start where it does."""
    html = doc(f"<p>{CHINESE}</p>", None, "<script>var x = 1;</script>" * 4000)
    assert decode_html(html.encode("gbk")) == (html, "gbk")


def test_the_site_hint_decides_what_the_page_cannot():
    """Four hanzi whose GBK bytes are all Hangul in EUC-KR: alone, the page
    reads as Korean; the site's other pages say GBK."""
    html = doc("<h1>北京广告</h1>")  # every lead byte in B0..C8
    assert decode_html(html.encode("gbk")) == (html.encode("gbk").decode("euc-kr"), "euc-kr")
    assert decode_html(html.encode("gbk"), hint="gbk") == (html, "gbk")


@pytest.mark.parametrize(("body", "codec", "hint", "expected"), [
    (FRENCH, "iso-8859-1", "gbk", "windows-1252"),  # GBK cannot read it: the hint is passed over
    (f"<p>{CHINESE}</p>", "gbk", "windows-1252", "gbk"),  # plainly Chinese: a single-byte hint is passed over
    (FRENCH, "iso-8859-1", "utf-8", "windows-1252"),  # not UTF-8, whatever the site's other pages were
    (FRENCH, "iso-8859-1", "no-such-encoding", "windows-1252"),
    (f"<p>{RUSSIAN}</p>", "koi8-r", "koi8-r", "koi8-r"),
    ("<h1>北京广告</h1>", "gbk", "gb18030", "gbk"),  # GB18030 declared elsewhere on the site: GBK's decoder
])
def test_hints_that_do_not_fit_are_passed_over(body, codec, hint, expected):
    html = doc(body)
    assert decode_html(html.encode(codec), hint=hint) == (html, expected)


@pytest.mark.parametrize(("raw", "content_type", "expected"), [
    # The byte order mark first, whatever the header says.
    (b"\xef\xbb\xbf<p>\xc3\xa9</p>", "text/html; charset=gbk", ("<p>é</p>", "utf-8")),
    ("\ufeff<p>é</p>".encode("utf-16-le"), None, ("<p>é</p>", "utf-16le")),
    ("\ufeff<p>é</p>".encode("utf-16-be"), "text/html; charset=utf-8", ("<p>é</p>", "utf-16be")),
    # Then the header, over the page's <meta> and over any guess.
    (doc(f"<p>{CHINESE}</p>", None, '<meta charset="big5">').encode("gbk"), "text/html; charset=GB2312",
     (doc(f"<p>{CHINESE}</p>", None, '<meta charset="big5">'), "gbk")),
    (b"<p>\x80 caf\xe9</p>", "text/html; charset=ISO-8859-1", ("<p>€ café</p>", "windows-1252")),
    (b"<p>caf\xe9</p>", 'text/html;charset="latin1"', ("<p>café</p>", "windows-1252")),
    (b"<p>caf\xe9</p>", "text/html; charset=us-ascii", ("<p>café</p>", "windows-1252")),
    (b"<p>caf\xe9</p>", "text/html; charset=iso-8859-9", ("<p>café</p>", "windows-1254")),
    ("<p>ソ</p>".encode("cp932"), "text/html; charset=x-sjis", ("<p>ソ</p>", "shift_jis")),
    ("<p>한</p>".encode("euc-kr"), "text/html; charset=ks_c_5601-1987", ("<p>한</p>", "euc-kr")),
    # A declared single-byte encoding reads anything: it wins, as in a browser.
    ("<p>café</p>".encode(), "text/html; charset=iso-8859-1", ("<p>cafÃ©</p>", "windows-1252")),
    # Then the <meta>, in either form.
    (doc("<p>é</p>", None, '<meta charset="windows-1250">').encode("cp1250"), None,
     (doc("<p>é</p>", None, '<meta charset="windows-1250">'), "windows-1250")),
    (doc("<p>ą</p>", None, '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-2">')
     .encode("iso-8859-2"), "text/html",
     (doc("<p>ą</p>", None, '<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-2">'),
      "iso-8859-2")),
    (b'<!-- <meta charset="big5"> --><meta charset="gbk"><p>\xd6\xd0</p>', None,
     ('<!-- <meta charset="big5"> --><meta charset="gbk"><p>中</p>', "gbk")),  # comments skipped
    (b'<meta charset="utf-16"><p>\xc3\xa9</p>', None, ('<meta charset="utf-16"><p>é</p>', "utf-8")),
    # A <meta> past the first 1,024 bytes still counts (a browser reloads the page in it) ...
    (b"<head><title>" + b"x" * 3000 + b'</title><meta charset="gbk"></head><p>\xd6\xd0</p>', None,
     ("<head><title>" + "x" * 3000 + '</title><meta charset="gbk"></head><p>中</p>', "gbk")),
    # ... but not one in the body.
    (b'<head></head><body><meta charset="gbk"><p>caf\xc3\xa9</p>', None,
     ('<head></head><body><meta charset="gbk"><p>café</p>', "utf-8")),
])
def test_declared_charsets_win(raw, content_type, expected):
    assert decode_html(raw, content_type) == expected


@pytest.mark.parametrize(("raw", "content_type", "expected"), [
    # Unknown labels, and UTF-7 (no WHATWG label: it smuggles markup), are no declaration.
    (doc(FRENCH).encode("latin-1"), "text/html; charset=foo", (doc(FRENCH), "windows-1252")),
    (b"<p>+ADw-script+AD4-</p>", "text/html; charset=utf-7", ("<p>+ADw-script+AD4-</p>", "utf-8")),
    # A declared multi-byte encoding the body breaks is wrong: the next clue is read.
    (doc(f"<p>{CHINESE}</p>", None, '<meta charset="gbk">').encode("gbk"), "text/html; charset=utf-8",
     (doc(f"<p>{CHINESE}</p>", None, '<meta charset="gbk">'), "gbk")),
    (doc(f"<p>{CHINESE}</p>").encode("gbk"), "text/html; charset=utf-8", (doc(f"<p>{CHINESE}</p>"), "gbk")),
    (doc(FRENCH).encode("latin-1"), "text/html; charset=shift_jis", (doc(FRENCH), "windows-1252")),
    (doc(f"<p>{CHINESE}</p>").encode(), "text/html; charset=euc-kr", (doc(f"<p>{CHINESE}</p>"), "utf-8")),
])
def test_a_declaration_that_cannot_be_used_is_passed_over(raw, content_type, expected):
    assert decode_html(raw, content_type) == expected


def test_a_utf8_page_cut_short_stays_utf8():
    """A page cut inside its last character (DOWNLOAD_MAXSIZE) is still UTF-8."""
    html = doc(f"<p>{FRENCH}{CHINESE}</p>")
    raw = html.encode()[:-len("</p></body></html>") - 1]
    text, name = decode_html(raw)
    assert name == "utf-8"
    assert text == html[:-len("。</p></body></html>")] + "\ufffd"


def test_a_utf8_page_with_a_stray_byte_stays_utf8():
    """Three curly quotes and one Latin-1 byte pasted in: UTF-8 with one U+FFFD
    (read as windows-1252 the quotes would turn to â€™)."""
    raw = "<p>It’s the crawler’s “home”</p>".encode() + b"<p>caf\xe9</p>"
    assert decode_html(raw) == ("<p>It’s the crawler’s “home”</p><p>caf\ufffd</p>", "utf-8")
    assert decode_html(b"<p>caf\xe9 \xe0 la cr\xe8me</p>") == ("<p>café à la crème</p>", "windows-1252")


def test_undecodable_bytes_are_replaced():
    raw = f"<p>{CHINESE}</p>".encode("gbk").replace("。".encode("gbk"), b"\xff", 1)
    assert decode_html(raw, "text/html; charset=gbk") == (f"<p>{CHINESE}</p>".replace("。", "\ufffd", 1), "gbk")
    assert decode_html(b"<p>a\x81b</p>", "text/html; charset=windows-1252") == ("<p>a\ufffdb</p>", "windows-1252")


@pytest.mark.parametrize(("label", "name"), [
    ("latin1", "windows-1252"), ("ISO-8859-1", "windows-1252"), ("ascii", "windows-1252"),
    (" US-ASCII ", "windows-1252"), ("gb2312", "gbk"), ("GBK", "gbk"), ("x-gbk", "gbk"),
    ("gb18030", "gb18030"), ("big5-hkscs", "big5"), ("sjis", "shift_jis"), ("windows-31j", "shift_jis"),
    ("EUC-KR", "euc-kr"), ("windows-949", "euc-kr"), ("tis-620", "windows-874"), ("utf8", "utf-8"),
    ("unicode-1-1-utf-8", "utf-8"), ("utf-16", "utf-16le"), ("koi8", "koi8-r"),
    ("utf-7", None), ("iso-2022-kr", None), ("x-user-defined", None), ("", None), (None, None),
])
def test_whatwg_labels(label, name):
    assert encoding_name(label) == name


_NAMES = {"utf-8", "utf-16le", "utf-16be", "windows-1252", "gbk", "gb18030", "big5", "shift_jis", "euc-jp",
          "iso-2022-jp", "euc-kr"}


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(raw=st.one_of(st.binary(max_size=400), st.text(max_size=100).map(str.encode),
                     st.text(max_size=60).map(lambda t: t.encode("gbk", "replace"))),
       content_type=st.one_of(st.none(), st.text(max_size=30), st.sampled_from(
           ["text/html; charset=utf-8", "text/html; charset=gbk", "text/html; charset=utf-16", "charset=",
            "text/html; charset=foo", "text/html; charset=shift_jis"])),
       hint=st.one_of(st.none(), st.text(max_size=10), st.sampled_from(sorted(_NAMES))))
def test_decoding_never_raises(raw, content_type, hint):
    text, name = decode_html(raw, content_type, hint)
    assert isinstance(text, str)
    assert encoding_name(name) == name  # always a WHATWG name


# -- hostile characters: nothing a page holds makes analyze raise

C0 = [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"]
C1 = [chr(c) for c in range(0x80, 0xA0)]
NONCHARACTERS = ["\ufdd0", "\ufdd1", "\ufdd2", "\ufdd3", "\ufdd4", "\ufdd5", "\ufdef", "\ufffe", "\uffff"]
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]
HOSTILE = C0 + ["\x7f"] + C1 + NONCHARACTERS + SURROGATES
# What no text, title or anchor may hold once analysed.
_UNSAFE_OUT = frozenset(C0 + ["\x7f"] + C1 + NONCHARACTERS + SURROGATES)


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
