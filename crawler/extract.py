"""One pass over a page's HTML: links, title, main text, abstract, robots
directives and the features the page classifier reads. Pure logic, no Scrapy.

The page is parsed once with lxml and walked once (``lxml.etree.iterwalk``,
iterative, so hostile nesting cannot overflow the Python stack). Text is cut
into blocks at block-level tags; a block's share of link text and whether it
sits in navigation (``nav``, ``header``, ``footer``, ``aside``, or a class/id
such as ``menu`` or ``sidebar``) decide whether it belongs to the main text.
That main text is what the SimHash of a later stage fingerprints, so the
same article framed by different navigation reads the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import lxml.etree
import lxml.html

__all__ = ["Page", "analyze", "parse_html"]

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
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
BOILER_TAGS = frozenset({"nav", "header", "footer", "aside", "form", "menu"})
_BOILER_ATTR = re.compile(
    r"(?:^|[\s_-])(?:nav|navbar|navigation|menu|footer|sidebar|side-bar|breadcrumbs?|"
    r"cookie|banner|share|social|related|widget|toolbar|masthead|pagination|pager)"
    r"(?:$|[\s_-])",
    re.I,
)
_WS = re.compile(r"\s+")
_LD_TYPE = re.compile(r'"@type"\s*:\s*\[?\s*"([^"]+)"')
_CART = re.compile(r"\badd to (?:cart|bag|basket|trolley)\b", re.I)
_PRICE = re.compile(r"(?:[$€£¥]\s?\d[\d,]*(?:\.\d\d)?|\d[\d,]*(?:\.\d\d)?\s?(?:USD|EUR|GBP|€))")
REPEAT_TAGS = frozenset({"li", "div", "article", "tr", "section"})
LONG_BLOCK = 150  # characters of non-link text that make a block a "paragraph"

_PARSER = lxml.html.HTMLParser(
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


def decode_html(data: bytes, content_type: str | None = None) -> str:
    """Text of an HTML document: BOM, then the Content-Type charset, then a
    ``<meta>`` charset, then UTF-8 if it decodes, then a statistical guess
    (charset-normalizer: GBK, Big5, Shift-JIS ... pages that declare nothing)."""
    from w3lib.encoding import html_to_unicode

    _, text = html_to_unicode(content_type, data, auto_detect_fun=_detect_encoding)
    return text


def _detect_encoding(data: bytes) -> str | None:
    try:
        data.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    match = from_bytes(data).best()
    return match.encoding if match else None


def parse_html(html: str | bytes) -> Any:
    """lxml root of ``html``, or None for an empty or unparsable document.
    ``bytes`` are decoded with ``decode_html`` first."""
    if isinstance(html, bytes):
        html = decode_html(html)
    if not html.strip():
        return None
    try:
        return lxml.etree.fromstring(html.encode("utf-8", "surrogatepass"), _PARSER)
    except (lxml.etree.ParserError, lxml.etree.XMLSyntaxError, ValueError):
        return None


def _clean(text: str) -> str:
    return _WS.sub(" ", text).strip()


def _is_boiler(el: Any, tag: str) -> bool:
    if tag in BOILER_TAGS:
        return True
    role = el.get("role")
    if role in ("navigation", "banner", "contentinfo", "complementary", "menu"):
        return True
    attrs = (el.get("class") or "") + " " + (el.get("id") or "")
    return len(attrs) > 1 and _BOILER_ATTR.search(attrs) is not None


def analyze(html: str | bytes | Any) -> Page:
    """Analyse a page given as text, bytes or an lxml root."""
    root = parse_html(html) if isinstance(html, (str, bytes)) else html
    page = Page()
    if root is None:
        page.features = _features([], 0, {}, 0)
        return page
    head_info = _read_head(root, page)

    blocks: list[Block] = []
    buf: list[str] = []
    buf_link = 0
    link_depth = 0
    boiler_stack: list[bool] = [False]
    cur_href: str | None = None
    anchor: list[str] = []
    counts: dict[str, int] = {"a": 0, "article": 0, "time": 0, "img": 0,
                              "heading_link": 0, "h1": 0, "li": 0, "input": 0,
                              "h1_before_para": 0}
    heading_depth = 0
    long_seen = False
    repeats: dict[tuple[str, str], int] = {}
    block_tag = "body"

    def flush(tag: str) -> None:
        nonlocal buf, buf_link, long_seen
        if buf:
            text = _clean("".join(buf))
            if text:
                blocks.append(Block(text, min(buf_link, len(text)), boiler_stack[-1], tag))
                if len(text) - buf_link >= LONG_BLOCK:
                    long_seen = True
        buf = []
        buf_link = 0

    walker = lxml.etree.iterwalk(root, events=("start", "end"))
    for event, el in walker:
        tag = el.tag
        if not isinstance(tag, str):
            continue
        tag = tag.lower()
        if event == "start":
            if tag in SKIP_TAGS:
                walker.skip_subtree()
                continue
            if tag in BLOCK_TAGS:
                flush(block_tag)
                block_tag = tag
                boiler_stack.append(boiler_stack[-1] or _is_boiler(el, tag))
                if tag in HEADINGS:
                    heading_depth += 1
                    if tag == "h1":
                        counts["h1"] += 1
                        if not long_seen:
                            counts["h1_before_para"] = 1
                elif tag == "li":
                    counts["li"] += 1
                if tag in REPEAT_TAGS:
                    cls = el.get("class")
                    if cls:
                        key = (tag, cls)
                        repeats[key] = repeats.get(key, 0) + 1
            elif tag == "a":
                href = el.get("href")
                if href is not None:
                    counts["a"] += 1
                    if heading_depth:
                        counts["heading_link"] += 1
                    if link_depth == 0:
                        cur_href = href
                        anchor = []
                link_depth += 1
            elif tag in ("article", "time", "img", "input"):
                counts[tag] += 1
            elif tag in ("area",):
                href = el.get("href")
                if href is not None:
                    page.links.append((href, _clean(el.get("alt") or "")))
            text = el.text
            if text:
                buf.append(text)
                if link_depth:
                    buf_link += len(text.strip())
                    anchor.append(text)
        else:  # end
            if tag in SKIP_TAGS:
                pass
            elif tag in BLOCK_TAGS:
                flush(tag)
                boiler_stack.pop()
                block_tag = "body"
                if tag in HEADINGS:
                    heading_depth -= 1
            elif tag == "a" and link_depth:
                link_depth -= 1
                if link_depth == 0 and cur_href is not None:
                    page.links.append((cur_href, _clean("".join(anchor)) or
                                       _clean(el.get("title") or "")))
                    cur_href = None
                    anchor = []
            tail = el.tail
            if tail:
                buf.append(tail)
                if link_depth:
                    buf_link += len(tail.strip())
                    anchor.append(tail)
    flush(block_tag)

    main = [b for b in blocks if not b.boiler and b.link_chars * 2 < len(b.text)]
    if not main:
        main = [b for b in blocks if b.link_chars * 2 < len(b.text)] or blocks
    page.text = "\n".join(b.text for b in main)
    if not page.title:
        page.title = next((b.text for b in blocks if b.tag == "h1"), "")[:500]
    page.abstract = _abstract(head_info.get("description", ""), page.text)
    all_text = "\n".join(b.text for b in blocks)
    counts["cart"] = len(_CART.findall(all_text))
    counts["price"] = len(_PRICE.findall(all_text))
    counts["repeat"] = max(repeats.values(), default=0)
    page.features = _features(blocks, len(page.text), counts, len(page.links))
    return page


def _read_head(root: Any, page: Page) -> dict[str, str]:
    info: dict[str, str] = {}
    ld_types: set[str] = set()
    for el in root.iter("title", "meta", "base", "script", "link"):
        tag = el.tag
        if tag == "title":
            if not page.title and el.text:
                page.title = _clean(el.text)[:500]
        elif tag == "meta":
            name = (el.get("name") or el.get("property") or "").lower()
            content = el.get("content") or ""
            if name in ("robots", "googlebot"):
                page.robots = page.robots | parse_robots_directives(content)
            elif name in ("description", "og:description") and "description" not in info:
                info["description"] = _clean(content)
            elif name == "og:type":
                ld_types.add(content.strip().lower())
        elif tag == "base":
            if page.base_href is None and el.get("href"):
                page.base_href = el.get("href").strip()
        elif tag == "script":
            if (el.get("type") or "").lower() == "application/ld+json" and el.text:
                ld_types.update(t.lower() for t in _LD_TYPE.findall(el.text))
    page.ld_types = frozenset(ld_types)
    return info


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
