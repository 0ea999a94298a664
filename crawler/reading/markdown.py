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
    import lxml.etree
    parts: list[str] = []
    for root in elements:
        skipping = 0
        for event, el in lxml.etree.iterwalk(root, events=("start", "end")):
            if event == "start":
                if el.get(SKIP) is not None:
                    skipping += 1
                elif not skipping and el.text and el.text.strip():
                    parts.append(el.text.strip())
            else:
                if el.get(SKIP) is not None:
                    skipping -= 1
                if not skipping and el is not root and el.tail and el.tail.strip():
                    parts.append(el.tail.strip())
    text = " ".join(" ".join(parts).split())
    return Rendered(text, text)
