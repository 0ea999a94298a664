"""The main content of a page as Markdown and as plain text, from one walk
of its tree. Pure logic, no Scrapy.

``render(elements, url)`` walks the given elements (the main content's
containers, in page order, chosen by ``crawler.reading.content``) and
leaves out every element marked ``SKIP`` (an attribute the content step
sets on boilerplate inside them). It returns the Markdown and the text;
the words of the one are the words of the other.

No settings, no stats.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["SKIP", "Rendered", "render"]

# The attribute crawler.reading.content sets on an element left out of the main content.
SKIP = "data-crawler-skip"


@dataclass(slots=True)
class Rendered:
    markdown: str = ""
    text: str = ""


def render(elements: Sequence[Any], url: str | None = None) -> Rendered:
    """Stub: plain text only, blocks on their own lines (to be replaced)."""
    parts: list[str] = []
    for root in elements:
        for el in root.iter():
            if el.get(SKIP) is not None:
                continue
            if el.text and el.text.strip() and not any(a.get(SKIP) is not None for a in el.iterancestors()):
                parts.append(el.text.strip())
            if el.tail and el.tail.strip() and el is not root:
                parts.append(el.tail.strip())
    text = "\n".join(parts)
    return Rendered(text, text)
