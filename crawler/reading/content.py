"""The page's main content: which of its elements hold what the page is
about, and that content as text and Markdown. Pure logic, no Scrapy.

No settings, no stats.
"""

from __future__ import annotations

from typing import Any

from crawler.reading.markdown import Rendered, render

__all__ = ["main_content"]


def main_content(root: Any, url: str | None = None) -> Rendered:
    """Stub: the whole body."""
    body = root.find("body")
    return render([body if body is not None else root], url)
