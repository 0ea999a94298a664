"""What the spiders read of a response's headers and meta: pure helpers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crawler.requestmeta import DUP_ORDER, REVISIT

if TYPE_CHECKING:
    from scrapy.http import Response, TextResponse

__all__ = ["content_length", "dup_order_of", "header", "is_html", "media_type", "revisit_due"]


def revisit_due(meta: dict[str, Any]) -> int | None:
    """The due time of a re-crawl's visit (``recrawl`` spider), else None."""
    due = meta.get(REVISIT)
    return due if isinstance(due, int) and not isinstance(due, bool) else None


def dup_order_of(meta: dict[str, Any]) -> str | None:
    """The URL's first duplicate check, as a re-crawl passes it from the store
    (``dup_order``: 14 hex digits), else None: anything else read back is no
    evidence."""
    value = meta.get(DUP_ORDER)
    return value if isinstance(value, str) and len(value) == 14 and all(c in "0123456789abcdef" for c in value) \
        else None


def content_length(response: Response) -> int | None:
    """The response's Content-Length header as sent (None: absent or not a
    length). For a HEAD, the length a GET would have had."""
    value = response.headers.get(b"Content-Length")
    if not value or not value.isdigit() or len(value) > 15:
        return None
    return int(value)


def header(response: Response | None, name: bytes) -> str | None:
    """A header's value as text (None: absent, or no response)."""
    if response is None:
        return None
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None


def media_type(response: Response) -> str | None:
    """The response's media type, lower case, without parameters (None: none sent)."""
    value = response.headers.get(b"Content-Type")
    if not value:
        return None
    kind = value.split(b";")[0].strip().lower().decode("latin-1")
    return kind[:100] if kind else None


def is_html(response: TextResponse) -> bool:
    ctype = (response.headers.get(b"Content-Type") or b"text/html").split(b";")[0].strip().lower()
    return ctype in (b"text/html", b"application/xhtml+xml", b"text/plain") or not ctype
