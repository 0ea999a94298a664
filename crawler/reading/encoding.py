"""Turn a response body into text as a browser would, and guess where a
browser would guess, better: pure logic, no Scrapy.

``decode_html(body, content_type, hint)`` reads, in order: a byte order mark,
the Content-Type charset, a ``<meta>`` charset before ``<body>`` in the
first 4 KB, ISO-2022-JP escapes, UTF-8; then, for a page that declares
nothing, detection guided by the site ``hint`` (the encoding the same site's
other pages used) and the page's ``lang``: CJK encodings by their everyday
characters, Latin-script text as windows-1252 (the WHATWG default), other
single-byte code pages by charset-normalizer. Labels follow the WHATWG
Encoding Standard (``iso-8859-1`` reads as windows-1252, ``gb2312`` as GBK).
It never raises: bytes it cannot read become U+FFFD.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache

from w3lib.encoding import to_unicode

__all__ = ["decode_html", "encoding_name"]

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


class EncodingHints:
    """Each site's last legacy encoding: the hint ``decode_html`` takes for
    the site's pages that declare none (a hint is used only when a page's
    bytes read well in it). Bounded: least recently used sites first out."""

    def __init__(self, max_sites: int = 10_000) -> None:
        self.max_sites = max_sites
        self._hints: OrderedDict[str, str] = OrderedDict()

    def get(self, site: str) -> str | None:
        return self._hints.get(site)

    def remember(self, site: str, encoding: str) -> None:
        if encoding in ("utf-8", "utf-16le", "utf-16be"):
            return
        self._hints[site] = encoding
        self._hints.move_to_end(site)
        if len(self._hints) > self.max_sites:
            self._hints.popitem(last=False)
