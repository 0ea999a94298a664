"""crawler.reading.encoding: which encoding a body is read in, and the text."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.reading.encoding import decode_html, encoding_name
from crawler.reading.extract import analyze

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
    from crawler.reading.encoding import _page_language

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
