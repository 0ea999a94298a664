"""The normalised URLs one worker has sent to the frontier, bounded
(``FRONTIER_URL_CACHE``; T-spider's URL cache).

A documentation page carries ~180 links, almost all seen before; building a
Request for each only for the frontier's dedup to drop it was most of plain
Scrapy's CPU time. ``Follower`` (``crawler/following/follow.py``) asks this first; the
frontier's shared dedup in Redis stays behind it as the record for the
whole cluster. Pure: no Scrapy, no Redis.
"""

from __future__ import annotations

__all__ = ["UrlCache"]


class UrlCache:
    """The normalised URLs this worker has sent to the frontier (T-spider's
    URL cache), bounded: two generations of at most ``size`` URLs each; when
    the newer one fills, the older is dropped. A URL forgotten this way is
    sent again and the frontier's shared dedup drops it: work, not a loss."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._new: set[str] = set()
        self._old: set[str] = set()

    def __contains__(self, url: object) -> bool:
        return url in self._new or url in self._old

    def add(self, url: str) -> None:
        if len(self._new) >= self.size:
            self._old, self._new = self._new, set()
        self._new.add(url)

    def __len__(self) -> int:
        return len(self._new) + len(self._old)
