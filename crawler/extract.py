"""One pass over a page's HTML: links, title, main text, abstract, robots
directives and the features the page classifier reads. Pure logic, no Scrapy.

The page is parsed once with lxml and walked once (``lxml.etree.iterwalk``,
iterative, so hostile nesting cannot overflow the Python stack). Text is cut
into blocks at block-level tags; a block's share of link text and whether it
sits in navigation (``nav``, ``header``, ``footer``, ``aside``, or a class/id
such as ``menu`` or ``sidebar``) decide whether it belongs to the main text.
That main text is what the SimHash of a later stage fingerprints, so the
same article framed by different navigation reads the same.

``decode_html`` turns a response body into text as a browser would (byte
order mark, header, ``<meta>``, WHATWG labels), and where a browser would
guess, guesses with the page's language and the site's other pages.

Any string or bytes is a page: control characters, noncharacters and lone
surrogates, as raw characters or as character references, never make
``analyze`` raise. Text, titles and anchors come out without them (form feed
and vertical tab read as spaces, C1 controls as the windows-1252 characters
they almost always stand for); hrefs are kept as written, for the URL parser
to read as a browser does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, cast

import lxml.etree
from w3lib.encoding import to_unicode

__all__ = ["Page", "analyze", "decode_html", "encoding_name", "parse_html"]

SKIP_TAGS = frozenset(
    {"script", "style", "noscript", "template", "svg", "math", "iframe", "object",
     "embed", "canvas", "select", "textarea", "head"}
)
BLOCK_TAGS = frozenset(
    {"address", "article", "aside", "blockquote", "body", "br", "caption", "center",
     "dd", "details", "dialog", "div", "dl", "dt", "fieldset", "figcaption", "figure",
     "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "html",
     "li", "main", "menu", "nav", "ol", "p", "pre", "section", "summary", "table",
     "tbody", "td", "tfoot", "th", "thead", "tr", "ul"}
)
BOILER_TAGS = frozenset({"nav", "header", "footer", "aside", "form", "menu"})
_BOILER_ATTR = re.compile(
    r"(?:^|[\s_-])(?:nav|navbar|navigation|menu|footer|sidebar|side-bar|breadcrumbs?|"
    r"cookie|banner|share|social|related|widget|toolbar|masthead|pagination|pager)"
    r"(?:$|[\s_-])",
    re.I,
)
_LD_TYPE = re.compile(r'"@type"\s*:\s*\[?\s*"([^"]+)"')
_CART = re.compile(r"\badd to (?:cart|bag|basket|trolley)\b", re.I)
_PRICE = re.compile(r"(?:[$€£¥]\s?\d[\d,]*(?:\.\d\d)?|\d[\d,]*(?:\.\d\d)?\s?(?:USD|EUR|GBP|€))")
_PRICE_HINTS = ("$", "€", "£", "¥", "USD", "EUR", "GBP")
REPEAT_TAGS = frozenset({"li", "div", "article", "tr", "section"})
LONG_BLOCK = 150  # characters of non-link text that make a block a "paragraph"

# lxml.etree's parser, not lxml.html's: the latter calls back into Python to
# pick an element class for every element touched, which cost more than all
# of the analysis below.
_PARSER = lxml.etree.HTMLParser(
    encoding="utf-8", recover=True, remove_comments=True, remove_pis=True,
    huge_tree=True, no_network=True,
)


@dataclass(slots=True)
class Block:
    text: str
    link_chars: int
    boiler: bool
    tag: str


@dataclass(slots=True)
class Page:
    """What the crawler keeps of one HTML page."""

    title: str = ""
    text: str = ""
    abstract: str = ""
    links: list[tuple[str, str]] = field(default_factory=list)  # (href, anchor)
    base_href: str | None = None
    robots: frozenset[str] = frozenset()
    features: dict[str, float] = field(default_factory=dict)
    ld_types: frozenset[str] = frozenset()
    h1: str = ""


# -- decoding: bytes to text, as a browser would, and better where it guesses

# WHATWG Encoding Standard labels (https://encoding.spec.whatwg.org/#names-and-labels),
# by encoding name, and the Python codec whose decoder matches it. The
# "replacement" labels (ISO-2022-KR, HZ, ISO-2022-CN) are left out: a browser
# shows such a page as one U+FFFD for safety; a crawler loses less by
# reading on to the next clue. So is x-user-defined, which no page needs.
_WHATWG = """\
utf-8 utf-8: unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8
ibm866 cp866: 866 cp866 csibm866 ibm866
iso-8859-2 iso8859_2: csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2
iso-8859-3 iso8859_3: csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3
iso-8859-4 iso8859_4: csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4
iso-8859-5 iso8859_5: csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 \
iso_8859-5:1988
iso-8859-6 iso8859_6: arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 iso-8859-6-e \
iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987
iso-8859-7 iso8859_7: csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 iso88597 \
iso_8859-7 iso_8859-7:1987 sun_eu_greek
iso-8859-8 iso8859_8: csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 iso88598 \
iso_8859-8 iso_8859-8:1988 visual
iso-8859-8-i iso8859_8: csiso88598i iso-8859-8-i logical
iso-8859-10 iso8859_10: csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6
iso-8859-13 iso8859_13: iso-8859-13 iso8859-13 iso885913
iso-8859-14 iso8859_14: iso-8859-14 iso8859-14 iso885914
iso-8859-15 iso8859_15: csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9
iso-8859-16 iso8859_16: iso-8859-16
koi8-r koi8_r: cskoi8r koi koi8 koi8-r koi8_r
koi8-u koi8_u: koi8-ru koi8-u
macintosh mac_roman: csmacintosh mac macintosh x-mac-roman
windows-874 cp874: dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874
windows-1250 cp1250: cp1250 windows-1250 x-cp1250
windows-1251 cp1251: cp1251 windows-1251 x-cp1251
windows-1252 cp1252: ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 \
iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252
windows-1253 cp1253: cp1253 windows-1253 x-cp1253
windows-1254 cp1254: cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 iso_8859-9:1989 l5 \
latin5 windows-1254 x-cp1254
windows-1255 cp1255: cp1255 windows-1255 x-cp1255
windows-1256 cp1256: cp1256 windows-1256 x-cp1256
windows-1257 cp1257: cp1257 windows-1257 x-cp1257
windows-1258 cp1258: cp1258 windows-1258 x-cp1258
x-mac-cyrillic mac_cyrillic: x-mac-cyrillic x-mac-ukrainian
gbk gb18030: chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk
gb18030 gb18030: gb18030
big5 big5hkscs: big5 big5-hkscs cn-big5 csbig5 x-x-big5
euc-jp euc_jp: cseucpkdfmtjapanese euc-jp x-euc-jp
iso-2022-jp iso2022_jp: csiso2022jp iso-2022-jp
shift_jis cp932: csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis
euc-kr cp949: cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601 ksc_5601 \
windows-949
utf-16be utf-16-be: unicodefffe utf-16be
utf-16le utf-16-le: csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le
"""
_LABELS: dict[str, str] = {}
_CODEC: dict[str, str] = {}
for _line in _WHATWG.replace("\\\n", "").splitlines():
    _names, _, _labels = _line.partition(": ")
    _name, _codec = _names.split()
    _CODEC[_name] = _codec
    _LABELS.update(dict.fromkeys(_labels.split(), _name))
# Decoders that can fail on bytes the encoding does not allow: a declared
# encoding of these that the body breaks is a wrong declaration. Single-byte
# encodings read any byte, so nothing can be told from them.
_MULTIBYTE = frozenset({"utf-8", "utf-16le", "utf-16be", "gbk", "gb18030", "big5", "euc-jp",
                        "iso-2022-jp", "shift_jis", "euc-kr"})
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xfe\xff", "utf-16be"), (b"\xff\xfe", "utf-16le"))


def encoding_name(label: str | None) -> str | None:
    """The WHATWG name of an encoding label (``latin1`` -> ``windows-1252``,
    ``gb2312`` -> ``gbk``), or None for a label the standard does not know."""
    return _LABELS.get(label.strip().lower()) if label else None


def decode_html(body: bytes, content_type: str | None = None, hint: str | None = None) -> tuple[str, str]:
    """Text of an HTML document and the encoding it was read with (a WHATWG
    name: ``utf-8``, ``windows-1252``, ``gbk``, ``big5``, ``shift_jis`` ...).

    Clues in the order a browser takes them: a byte order mark; the
    ``Content-Type`` charset; a ``<meta>`` charset before ``<body>`` in the
    first 4,096 bytes (the WHATWG prescan reads 1,024, but a browser that
    meets one later reloads the page in it; Scrapy and w3lib read 4,096).
    A declared multi-byte encoding the body breaks (more than one bad
    sequence in twenty good ones) is taken for a wrong declaration and the
    next clue read instead. Undeclared, UTF-8 if the body reads as UTF-8;
    then the page's language (``<html lang>``, or a content-language
    ``<meta>``) and ``hint``, the encoding the same site's other pages were
    read with, choose among the legacy encodings; with neither, a Chinese,
    Japanese or Korean encoding when one reads the page as common text in
    its language, else windows-1252 (the WHATWG default) for Latin-script
    text, else the best single-byte code page by charset-normalizer. Bytes
    the chosen encoding cannot read become U+FFFD; never raises.
    """
    for bom, name in _BOMS:
        if body.startswith(bom):
            return _decode(body[len(bom):], name)[0], name
    head = body[:4096]
    declared = [encoding_name(_header_charset(content_type)), _meta_charset(head)]
    for label in declared:
        if label is not None:
            text, errors = _decode(body, label)
            if label not in _MULTIBYTE or _reads(text, errors, label):
                return text, label
    if b"\x1b$" in body:  # ISO-2022-JP is 7-bit and would read as UTF-8: its escapes tell it
        text, errors = _decode(body, "iso-2022-jp")
        if not errors:
            return text, "iso-2022-jp"
    text, errors = _decode(body, "utf-8")
    if _reads(text, errors, "utf-8"):
        return text, "utf-8"
    name = _detect(body, _page_language(body[:8192]), encoding_name(hint))
    return _decode(body, name)[0], name


def _decode(body: bytes, name: str) -> tuple[str, int]:
    """Text and the number of bytes or sequences replaced by U+FFFD."""
    codec = _CODEC[name]
    try:
        return body.decode(codec), 0
    except UnicodeDecodeError:
        # w3lib's to_unicode: gb18030 with the WHATWG's euro sign for 0x80.
        text = to_unicode(body, codec)
        return text, text.count("\ufffd")


def _reads(text: str, errors: int, name: str) -> bool:
    """Whether a multi-byte decoder read the body: a few bad sequences (a
    page cut short, a stray byte) among many good ones are the page's own.
    Legacy text read as UTF-8 makes at most one good sequence for three bad
    ones (GBK; Latin-1 none), so two good ones for each bad one is UTF-8 with
    a few bytes damaged. A wrong double-byte encoding reads more by chance
    (Latin-1 as GBK: three good for one bad): it needs twenty."""
    if not errors:
        return True
    good = len(text) - len(text.encode("ascii", "ignore")) - errors
    return errors * (2 if name == "utf-8" else 20) <= good


_CHARSET_PARAM = re.compile(r"""charset\s*=\s*["']?\s*([^\s"';,]+)""", re.I)
# The WHATWG prescan, in brief: the first <meta> that carries a charset
# attribute, or http-equiv="content-type" with a charset= in its content;
# comments are skipped, a quoted value may hold '>'.
_META_TAG = re.compile(rb"""<!--.*?(?:-->|$)|<meta[\s/]((?:[^>"']|"[^"]*"|'[^']*')*)""", re.I | re.S)
_BODY_TAG = re.compile(rb"<body[\s/>]", re.I)
_ATTR = re.compile(rb"""([^\s/>"'=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s>]*)))?""")


def _header_charset(content_type: str | None) -> str | None:
    match = _CHARSET_PARAM.search(content_type) if content_type else None
    return match.group(1) if match else None


def _meta_attrs(head: bytes, *names: bytes) -> list[dict[bytes, str]]:
    """Attributes of the ``<meta>`` tags of ``head`` naming any of ``names``."""
    tags = []
    body = _BODY_TAG.search(head)
    for match in _META_TAG.finditer(head, 0, body.start() if body else len(head)):
        raw = match.group(1)
        if raw is None or not any(n in raw.lower() for n in names):
            continue
        attrs: dict[bytes, str] = {}
        for name, *values in _ATTR.findall(raw):
            attrs.setdefault(name.lower(), b"".join(values).decode("latin-1").strip())
        tags.append(attrs)
    return tags


def _meta_charset(head: bytes) -> str | None:
    for attrs in _meta_attrs(head, b"charset"):
        label = attrs.get(b"charset")
        if label is None and attrs.get(b"http-equiv", "").lower() == "content-type":
            label = _header_charset(attrs.get(b"content"))
        name = encoding_name(label)
        if name is not None:
            # A page that reads its own <meta> in ASCII is not UTF-16 (WHATWG).
            return "utf-8" if name.startswith("utf-16") else name
    return None


_HTML_LANG = re.compile(
    rb"""<html\b(?:[^>"']|"[^"]*"|'[^']*')*?\blang\s*=\s*["']?\s*([a-z]{2,3}(?:[-_][a-z0-9]{1,8})*)""", re.I)


def _page_language(head: bytes) -> str:
    """The page's language tag, lowercased (``zh-tw``), or ""."""
    match = _HTML_LANG.search(head)
    if match:
        return match.group(1).decode("ascii").lower().replace("_", "-")
    for attrs in _meta_attrs(head, b"content-language"):
        if attrs.get(b"http-equiv", "").lower() == "content-language":
            return attrs.get(b"content", "").split(",")[0].strip().lower().replace("_", "-")
    return ""


# Legacy encodings by language, most used first (after the WHATWG's
# locale defaults in the HTML standard's encoding sniffing algorithm).
_LANG_ENCODINGS = {
    "zh": ("gbk", "big5"), "zh-hant": ("big5", "gbk"), "ja": ("shift_jis", "euc-jp", "iso-2022-jp"),
    "ko": ("euc-kr",),
    **dict.fromkeys(("ru", "uk", "be", "bg", "mk", "sr", "kk", "ky", "tt", "ba"),
                    ("windows-1251", "koi8-r", "koi8-u", "ibm866", "iso-8859-5")),
    **dict.fromkeys(("pl", "cs", "sk", "hu", "sl", "hr", "bs", "ro"), ("windows-1250", "iso-8859-2")),
    "el": ("windows-1253", "iso-8859-7"), "tr": ("windows-1254",), "az": ("windows-1254",),
    "he": ("windows-1255", "iso-8859-8"), "yi": ("windows-1255",), "ar": ("windows-1256", "iso-8859-6"),
    "fa": ("windows-1256",), "ur": ("windows-1256",), "lt": ("windows-1257", "iso-8859-13"),
    "lv": ("windows-1257", "iso-8859-13"), "vi": ("windows-1258",), "th": ("windows-874",),
}
_CJK_ENCODINGS = ("gbk", "big5", "shift_jis", "euc-jp", "euc-kr")
_SINGLE_BYTE = tuple(name for name in _CODEC if name not in _MULTIBYTE and name != "iso-8859-8-i")
_LEGACY = _SINGLE_BYTE + _CJK_ENCODINGS
_LATIN = frozenset({"windows-1252", "windows-1250", "windows-1254", "windows-1257", "windows-1258",
                    "iso-8859-2", "iso-8859-3", "iso-8859-4", "iso-8859-10", "iso-8859-13",
                    "iso-8859-14", "iso-8859-15", "iso-8859-16", "macintosh"})


def _language_encodings(lang: str) -> tuple[str, ...]:
    primary, _, rest = lang.partition("-")
    if primary == "zh" and any(tag in rest.split("-") for tag in ("tw", "hk", "mo", "hant")):
        return _LANG_ENCODINGS["zh-hant"]
    return _LANG_ENCODINGS.get(primary, ("windows-1252", "iso-8859-15") if primary else ())


def _detect(body: bytes, lang: str, hint: str | None) -> str:
    """The legacy encoding of an undeclared page that is not UTF-8."""
    # The statistics read 64 KB from the first byte above ASCII: past the
    # scripts and styles that fill many a page's head, plenty, and bounded.
    first = _FIRST_HIGH.search(body)
    start = max(first.start() - 64, 0) if first else len(body)  # before it, ASCII only
    body = body[start:start + _SAMPLE]
    # A site that declares gb18030 elsewhere writes GBK here: one decoder.
    hint = {"gb18030": "gbk", "iso-8859-8-i": "iso-8859-8"}.get(hint or "", hint)
    hinted = tuple(dict.fromkeys(((hint,) if hint in _LEGACY else ()) + _language_encodings(lang)))
    scores = {name: _cjk_score(body, name) for name in _CJK_ENCODINGS}
    # The site's own encoding first, then the page's language: a short page
    # holds too little text to tell GBK from EUC-KR by statistics alone.
    for name in hinted:
        if scores.get(name, 0.0) >= 0.6:
            return name
    best = max(scores, key=lambda name: scores[name])
    if scores[best] >= 0.9:
        return best  # plainly CJK text, whatever a single-byte clue says
    if _latin_script(body):
        return _latin_page(body, [name for name in hinted if name in _LATIN] or _LATIN_TRIED)
    # Other scripts (Cyrillic, Greek, Arabic, Hebrew, Thai): charset-normalizer
    # reads their letter frequencies well, among the hinted code pages first.
    from charset_normalizer import from_bytes

    others = [name for name in hinted if name in _SINGLE_BYTE and name not in _LATIN]
    for tried in (others, _LEGACY) if others else (_LEGACY,):
        match = from_bytes(body, cp_isolation=[_CODEC[name] for name in tried]).best()
        found = next((name for name in tried if match is not None and _CODEC[name] == match.encoding), None)
        if found is not None:
            # Its statistics need more text than a short CJK page holds:
            # among CJK encodings, ours choose.
            return best if found in scores else found
    return best if scores[best] >= 0.6 else "windows-1252"


_LATIN_WORD = re.compile(rb"[A-Za-z]*[\x80-\xff][A-Za-z\x80-\xff]*")
_HIGH_BYTES = bytes(range(0x80, 0x100))


def _latin_script(body: bytes) -> bool:
    """Latin-script text in a single-byte encoding: in the words that hold
    bytes above ASCII, most bytes are ASCII letters ("forêt", "Größe",
    "zbierający"), where other scripts and double-byte encodings write
    whole words of high bytes."""
    words = b"".join(_LATIN_WORD.findall(body))
    return bool(words) and len(words.translate(None, _HIGH_BYTES)) * 2 >= len(words)


_SAMPLE = 65536
_FIRST_HIGH = re.compile(rb"[\x80-\xff]")
# Latin code pages a page without clues is tried in, the WHATWG default first.
_LATIN_TRIED = ("windows-1252", "iso-8859-15", "windows-1250", "iso-8859-2", "windows-1257")
_IN_WORD = re.compile(r"(?<=[^\W\d_])[^\x00-\x7f](?=[^\W\d_])")
_WORD_PUNCTUATION = frozenset("\u2019\u00b4\u00b7\u2010\u2011\u2013\u2014")  # l’école, l·l, Jean–Paul


def _latin_page(body: bytes, tried: Sequence[str]) -> str:
    """The first of ``tried`` (windows-1252 unless a clue says otherwise),
    unless it reads symbols into the middle of words (Polish "ą ł ż" as
    windows-1252's "¹ ³ ¿") that another code page reads as letters."""
    def misread(name: str) -> int:
        text = _decode(body, name)[0]
        return sum(1 for c in _IN_WORD.findall(text) if not c.isalpha() and c not in _WORD_PUNCTUATION)

    counts = {name: misread(name) for name in tried}
    return min(tried, key=lambda name: counts[name])  # the first of equals


@lru_cache(maxsize=8)
def _common_chars(name: str) -> re.Pattern[str]:
    """The characters of everyday text in a CJK encoding: its punctuation
    rows and its first (most used) level of ideographs, kana or Hangul, as
    the encoding's own standard orders them."""
    codec, rows, trails = {
        "gbk": ("gb2312", [0xA1, 0xA3, *range(0xB0, 0xD8)], range(0xA1, 0xFF)),
        "big5": ("big5", range(0xA1, 0xC7), [*range(0x40, 0x7F), *range(0xA1, 0xFF)]),
        "shift_jis": ("euc_jp", [0xA1, 0xA4, 0xA5, *range(0xB0, 0xD0)], range(0xA1, 0xFF)),
        "euc-jp": ("euc_jp", [0xA1, 0xA4, 0xA5, *range(0xB0, 0xD0)], range(0xA1, 0xFF)),
        "euc-kr": ("euc_kr", [0xA1, *range(0xB0, 0xC9)], range(0xA1, 0xFF)),
    }[name]
    chars = bytes(b for lead in rows for trail in trails for b in (lead, trail)).decode(codec, "ignore")
    return re.compile("[" + re.escape("".join(sorted(set(chars) - {"\ufffd"}))) + "]")


def _cjk_score(body: bytes, name: str) -> float:
    """How well ``name`` reads the page as CJK text: the share of its
    non-ASCII characters that are everyday characters of the language
    standing next to another (CJK text runs on, where Latin text misread
    as Big5 scatters lone ideographs: "zbieraj帷y"), less four for each
    byte it cannot read; a little more for what only the right reading
    shows: hiragana in Japanese, Hangul without Hanja in Korean."""
    text, errors = _decode(body, name)
    high = len(text) - len(text.encode("ascii", "ignore"))
    if high < 2:
        return 0.0
    score = (len(_common_chars(name).findall("".join(_CJK_RUN.findall(text)))) - 4 * errors) / high
    if name in ("shift_jis", "euc-jp") and len(_HIRAGANA.findall(text)) * 10 >= high:
        score += 0.05
    elif name == "euc-kr" and len(_HANGUL.findall(text)) * 2 >= high and len(_HAN.findall(text)) * 20 < high:
        score += 0.05
    return score


_CJK_RUN = re.compile(r"[^\x00-\x7f]{2,}")
_HIRAGANA = re.compile("[\u3041-\u309f]")
_HANGUL = re.compile("[\uac00-\ud7a3]")
_HAN = re.compile("[\u4e00-\u9fff]")


def parse_html(html: str | bytes) -> Any:
    """lxml root of ``html``, or None for an empty or unparsable document.
    ``bytes`` are decoded with ``decode_html`` first."""
    if isinstance(html, bytes):
        html = decode_html(html)[0]
    if not html.strip():
        return None
    try:
        data = html.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: one U+FFFD each, as a decoder would give
        data = _SURROGATE.sub("\ufffd", html).encode("utf-8")
    try:
        return lxml.etree.fromstring(data, _PARSER)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError):
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")
# What no stored text should hold, and what lxml refuses to write back into
# the tree ("All strings must be XML compatible"), though its parser lets it
# through from the page or from a character reference (&#12;): C0 controls
# but tab, LF and CR; DEL; C1 controls; the noncharacters U+FDD0..U+FDEF
# (which hold the markers below) and U+FFFE, U+FFFF.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufdd0-\ufdef\ufffe\uffff]")


def _safe_char(c: int) -> str:
    if c in (0x0B, 0x0C) or 0x1C <= c <= 0x1F:
        return " "  # whitespace to HTML (form feed) or to str.split() (the rest)
    if 0x80 <= c <= 0x9F:
        # C1 controls in a page are windows-1252 text mislabelled as
        # ISO-8859-1 along the way; the HTML parser reads &#x80;..&#x9F; the
        # same way. The five bytes windows-1252 leaves undefined are dropped.
        return bytes([c]).decode("cp1252", "ignore")
    return ""


_SAFE = {chr(c): _safe_char(c) for c in [*range(0x20), *range(0x7F, 0xA0), *range(0xFDD0, 0xFDF0), 0xFFFE, 0xFFFF]}


def _scrub(text: str) -> str:
    return _UNSAFE.sub(lambda m: _SAFE[m.group()], text)


def _scrub_tree(root: Any) -> None:
    for el in root.iter():
        if el.text and _UNSAFE.search(el.text):
            el.text = _scrub(el.text)
        if el.tail and _UNSAFE.search(el.tail):
            el.tail = _scrub(el.tail)


def _clean(text: str) -> str:
    # split()/join() folds every run of whitespace, as \s+ would, and is
    # about twice as fast on the short strings of blocks and anchors.
    return " ".join(text.split())


def _is_boiler(el: Any, tag: str) -> bool:
    if tag in BOILER_TAGS:
        return True
    role = el.get("role")
    if role in ("navigation", "banner", "contentinfo", "complementary", "menu"):
        return True
    attrs = (el.get("class") or "") + " " + (el.get("id") or "")
    if len(attrs) > 256:  # kept out of the cache: a hostile page could fill it with megabytes
        return _BOILER_ATTR.search(attrs) is not None
    return len(attrs) > 1 and _boiler_attrs(attrs)


# A site's template repeats its class lists on every page (and a page within
# itself): remembered, the regex runs for one in four of them on real pages.
@lru_cache(maxsize=16384)
def _boiler_attrs(attrs: str) -> bool:
    return _BOILER_ATTR.search(attrs) is not None


# Markers written into the tree so that lxml's C code can flatten it in one
# itertext() pass: Unicode noncharacters (U+FDD0...), which are valid in XML
# text and never occur in interchange text.
_BLOCK = "\ufdd0"
_LINK_OPEN, _LINK_CLOSE = "\ufdd1", "\ufdd2"
_BOIL_OPEN, _BOIL_CLOSE = "\ufdd3", "\ufdd4"
_H1 = "\ufdd5"
_LINK_SPLIT = re.compile("([\ufdd1\ufdd2])")
_EDGE = " \t\n\r\f\v\ufdd3\ufdd4\ufdd5"
_STRING = lxml.etree.XPath("string()", smart_strings=False)
_HEADING_LINKS = lxml.etree.XPath(
    "count(//h1//a[@href] | //h2//a[@href] | //h3//a[@href] | //h4//a[@href] | "
    "//h5//a[@href] | //h6//a[@href])"
)


def analyze(html: str | bytes | Any) -> Page:
    """Analyse a page given as text, bytes or an lxml root (which is modified)."""
    root = parse_html(html) if isinstance(html, (str, bytes)) else html
    page = Page()
    if root is None:
        page.features = _features([], 0, {}, 0)
        return page
    head_info = _read_head(root, page)
    lxml.etree.strip_elements(root, *SKIP_TAGS, with_tail=False)
    # One check of all the text, and the rare page that needs it cleaned:
    # cheaper than checking each string written back below.
    if _UNSAFE.search(cast(str, _STRING(root))) is not None:
        _scrub_tree(root)

    counts: dict[str, int] = {}
    repeats: dict[tuple[str, str], int] = {}
    for el in root.iter(*_COUNTED_TAGS):
        tag = el.tag
        counts[tag] = counts.get(tag, 0) + 1
        if tag in REPEAT_TAGS:
            cls = el.get("class")
            if cls:
                key = (tag, cls)
                repeats[key] = repeats.get(key, 0) + 1
    counts["heading_link"] = int(cast(float, _HEADING_LINKS(root)))

    links = page.links
    for el in root.iter("a", "area"):
        href = el.get("href")
        if href is None:
            continue
        if el.tag == "area":
            links.append((href, _clean(_scrub(el.get("alt") or ""))))
            continue
        text = el.text if len(el) == 0 else cast(str, _STRING(el))
        links.append((href, _clean(text or "") or _clean(_scrub(el.get("title") or ""))))
        el.text = _LINK_OPEN + (el.text or "")
        el.tail = _LINK_CLOSE + (el.tail or "")
    for el in root.iter(*BLOCK_TAGS):
        tag = el.tag
        opening = _BLOCK
        closing = _BLOCK
        if _is_boiler(el, tag):
            opening += _BOIL_OPEN
            closing = _BOIL_CLOSE + _BLOCK
        if tag == "h1":
            opening += _H1
        el.text = opening + (el.text or "")
        el.tail = closing + (el.tail or "")

    blocks, h1_before_para = _blocks(cast(str, _STRING(root)))
    counts["h1_before_para"] = h1_before_para
    main = [b for b in blocks if not b.boiler and b.link_chars * 2 < len(b.text)]
    if not main:
        main = [b for b in blocks if b.link_chars * 2 < len(b.text)] or blocks
    page.text = "\n".join(b.text for b in main)
    page.h1 = next((b.text for b in blocks if b.tag == "h1"), "")[:500]
    if not page.title:
        page.title = page.h1
    page.abstract = _abstract(head_info.get("description", ""), page.text)
    all_text = "\n".join(b.text for b in blocks)
    # Cheap substring checks first: most pages have no prices or carts, and
    # the regexes would scan the whole text to find that out.
    counts["cart"] = len(_CART.findall(all_text)) if "add to" in all_text.lower() else 0
    counts["price"] = len(_PRICE.findall(all_text)) if any(c in all_text for c in _PRICE_HINTS) else 0
    counts["repeat"] = max(repeats.values(), default=0)
    page.features = _features(blocks, len(page.text), counts, len(page.links))
    return page


_COUNTED_TAGS = ("article", "time", "img", "input", "li", "h1", "div", "tr", "section")


def _blocks(flat: str) -> tuple[list[Block], int]:
    """Cut the marked, flattened text into blocks with link and boilerplate
    information. Returns the blocks and whether an h1 precedes the first
    long paragraph."""
    blocks: list[Block] = []
    boiler_depth = 0
    link_depth = 0
    long_seen = False
    h1_before_para = 0
    for part in flat.split(_BLOCK):
        if not part or part.isspace():  # most parts: whitespace between tags
            continue
        # Boilerplate and h1 markers only ever sit at the edges of a part
        # (every marked element is a block): count them, then strip them.
        is_h1 = part.startswith(_H1) or part.startswith(_BOIL_OPEN + _H1)
        opens = part.count(_BOIL_OPEN)
        in_boiler = boiler_depth + opens > 0
        if opens or _BOIL_CLOSE in part:
            boiler_depth = max(boiler_depth + opens - part.count(_BOIL_CLOSE), 0)
        part = part.strip(_EDGE)
        if _LINK_OPEN in part or _LINK_CLOSE in part:
            link_chars = 0
            pieces = []
            for piece in _LINK_SPLIT.split(part):
                if piece == _LINK_OPEN:
                    link_depth += 1
                elif piece == _LINK_CLOSE:
                    link_depth = max(link_depth - 1, 0)
                elif piece:
                    pieces.append(piece)
                    if link_depth:
                        link_chars += len(piece.strip())
            text = _clean("".join(pieces))
        else:
            text = _clean(part)
            link_chars = len(text) if link_depth else 0
        if not text:
            continue
        if is_h1 and not long_seen:
            h1_before_para = 1
        if len(text) - link_chars >= LONG_BLOCK:
            long_seen = True
        blocks.append(Block(text, min(link_chars, len(text)), in_boiler, "h1" if is_h1 else ""))
    return blocks, h1_before_para


def _read_head(root: Any, page: Page) -> dict[str, str]:
    info: dict[str, str] = {}
    ld_types: set[str] = set()
    for el in root.iter("title", "meta", "base", "script", "link"):
        tag = el.tag
        if tag == "title":
            if not page.title and el.text:
                page.title = _clean(_scrub(el.text))[:500]
        elif tag == "meta":
            name = (el.get("name") or el.get("property") or "").lower()
            content = el.get("content") or ""
            if name in ("robots", "googlebot"):
                page.robots = page.robots | parse_robots_directives(content)
            elif name in ("description", "og:description") and "description" not in info:
                info["description"] = _clean(_scrub(content))
            elif name == "og:type":
                ld_types.add(content.strip().lower())
        elif tag == "base":
            href = el.get("href")
            if page.base_href is None and href and href.strip(_C0_OR_SPACE):
                # The URL parser's own trim: C0 controls and spaces only.
                page.base_href = href.strip(_C0_OR_SPACE)
        elif tag == "script":
            if (el.get("type") or "").lower() == "application/ld+json" and el.text:
                ld_types.update(t.lower() for t in _LD_TYPE.findall(el.text))
    page.ld_types = frozenset(ld_types)
    return info


_C0_OR_SPACE = "".join(map(chr, range(0x21)))


def parse_robots_directives(value: str) -> frozenset[str]:
    """Directives of a robots meta tag or an X-Robots-Tag header value.

    ``none`` means ``noindex, nofollow``. A header value may name a user agent
    (``googlebot: noindex``); such agent-specific values are ignored here
    unless they name no agent.
    """
    out: set[str] = set()
    for part in value.lower().split(","):
        part = part.strip()
        head, sep, rest = part.partition(":")
        if sep and head.strip() not in _VALUED_DIRECTIVES:
            if head.strip() not in ("*", "robots"):
                continue  # addressed to another crawler ("googlebot: noindex")
            part = rest.strip()
        if part == "none":
            out.update(("noindex", "nofollow"))
        elif part:
            out.add(part.split(":")[0].strip())
    return frozenset(out)


_VALUED_DIRECTIVES = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)


def _abstract(description: str, text: str, limit: int = 300) -> str:
    if len(description) >= 40:
        source = description
    else:
        source = text.replace("\n", " ")
    if len(source) <= limit:
        return source
    cut = source.rfind(" ", 0, limit)
    return source[: cut if cut > limit // 2 else limit].rstrip() + "…"


def _features(blocks: list[Block], main_chars: int, counts: dict[str, int],
              n_links: int) -> dict[str, float]:
    text_chars = sum(len(b.text) for b in blocks)
    link_chars = sum(b.link_chars for b in blocks)
    own = [len(b.text) - b.link_chars for b in blocks]
    long_blocks = [b for b, n in zip(blocks, own) if n >= LONG_BLOCK and b.link_chars * 3 < len(b.text)]
    linky_blocks = sum(1 for b in blocks if b.link_chars * 2 >= len(b.text))
    # Longest run of prose: consecutive link-poor blocks; a link-heavy block
    # (a teaser title, a menu) ends the run. Articles have one long run,
    # listings many short ones.
    run = best_run = 0
    for b in blocks:
        if b.link_chars * 5 < len(b.text) and not b.boiler:
            run += len(b.text) - b.link_chars
            best_run = max(best_run, run)
        elif len(b.text) >= 30 or b.link_chars:
            run = 0
    return {
        "text_chars": float(text_chars),
        "link_chars": float(link_chars),
        "link_density": link_chars / text_chars if text_chars else 1.0,
        "n_links": float(n_links),
        "longest_block": float(max(own, default=0)),
        "n_long_blocks": float(len(long_blocks)),
        "long_chars": float(sum(len(b.text) for b in long_blocks)),
        "main_chars": float(main_chars),
        "n_blocks": float(len(blocks)),
        "linky_block_share": linky_blocks / len(blocks) if blocks else 1.0,
        "n_article": float(counts.get("article", 0)),
        "n_time": float(counts.get("time", 0)),
        "n_img": float(counts.get("img", 0)),
        "n_heading_links": float(counts.get("heading_link", 0)),
        "n_h1": float(counts.get("h1", 0)),
        "n_li": float(counts.get("li", 0)),
        "n_input": float(counts.get("input", 0)),
        "h1_before_para": float(counts.get("h1_before_para", 0)),
        "n_cart": float(counts.get("cart", 0)),
        "n_price": float(counts.get("price", 0)),
        "max_repeat": float(counts.get("repeat", 0)),
        "best_run": float(best_run),
    }
