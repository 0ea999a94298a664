"""What a page says about itself for machines: JSON-LD, microdata, RDFa,
OpenGraph and Twitter cards, and the normalised fields taken from them.
Pure logic, no Scrapy.

``read_metadata(root, url)`` reads the parsed page before its scripts are
stripped (``crawler.reading.extract.analyze`` calls it) and never changes
the tree.

No settings, no stats.
"""

from __future__ import annotations

from typing import Any

__all__ = ["read_metadata"]


def read_metadata(root: Any, url: str | None = None) -> dict[str, Any]:
    """Stub (to be written): the page's metadata."""
    return {}
