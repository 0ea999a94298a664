"""What the duplicate index (``dupindex.py``) reads and answers: its
verdict (``Duplicate``), a page's and a site's names in the index
(``page_id``, ``site_tag``), and the entries read back from Redis (records
as ``record.lua`` writes them, URLs, order keys), checked before they count
as evidence: a malformed entry is none. Pure: no Redis, no Scrapy.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from crawler.scope.urls import url_site

__all__ = ["ORDER", "Candidate", "Duplicate", "is_url", "page_id", "record_of", "site_of_url", "site_tag", "text_of"]


@dataclass(slots=True, frozen=True)
class Duplicate:
    """The verdict of the duplicate index: ``kind`` "new", "exact" or "near";
    the first page with that content (on this site when there is one), the
    Hamming distance of their SimHashes, whether it is on the same site, the
    site this page's site mirrors (None: not a mirror), and the resemblance
    of their shingles (1.0: exact; as the samples tell)."""

    kind: str
    first: str | None = None
    distance: int = -1
    same_site: bool = False
    mirror_of: str | None = None
    resemblance: float = 0.0
    order: str = ""  # the page's place in time (a page with a sketch), to be stored with it


@dataclass(slots=True)
class Candidate:
    """A page the index names as this page's earlier copy, as read back."""

    url: str
    site: str
    distance: int
    order: str
    resemblance: float = 1.0


def site_tag(site: str) -> str:
    """10 hex digits (40 bits) naming a site in the duplicate index's values,
    shorter than the site itself: two sites share one with probability
    about 10^-12 a pair (for 100,000 sites, 0.5 % that any two do)."""
    digest = hashlib.blake2b(site.encode("utf-8", "surrogatepass"), digest_size=5).hexdigest()
    return digest


def page_id(content_key: str) -> int:
    """A page's name in the near-duplicate index: 64 bits of its content key
    (the same text, the same name)."""
    return int.from_bytes(hashlib.blake2b(content_key.encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "big")


def record_of(value: Any, with_rest: bool = False, resemblance: float = 1.0) -> Candidate | None:
    """A record as ``record.lua`` writes it: [3 bytes of page id, 5 of site
    tag,] 7 of order, then the URL; None when it is not one (no evidence)."""
    if not isinstance(value, bytes):
        return None
    head = 8 if with_rest else 0
    if len(value) < head + 7 + 8:
        return None
    url = value[head + 7:].decode("utf-8", "replace")
    if not is_url(url):
        return None
    return Candidate(url, "", 0, value[head:head + 7].hex(), resemblance)


_URL = re.compile(r"https?://[^\s/?#]+[/?#]?\S*\Z")
ORDER = re.compile(r"[0-9a-f]{14}\Z")


def is_url(value: str) -> bool:
    return bool(_URL.match(value)) and site_of_url(value) != ""


def site_of_url(url: str) -> str:
    """The site of a URL read back from Redis ("" when it is not one)."""
    try:
        return url_site(url)
    except (ValueError, IndexError):
        return ""


def text_of(value: Any) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
