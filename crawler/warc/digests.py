"""The crawl's archived payloads, cluster-wide: which response first
archived a payload, so that an exact copy fetched later (anywhere in the
cluster) is written as a revisit of it.

Kept beside the duplicate index, in its shards (``crawler/redis/keys.py``:
``warc:<bucket>``): field the first 16 base-32 characters of the payload's
sha1, value "<the other 16> <WARC-Date> <URI>". A response is registered
only once its record is written, so a revisit never names a record that is
not on disk; two workers archiving the same payload at once both write it
in full (harmless). A value that is not what this module writes (another
digest, a date or URI that does not parse) is no original: the copy is
archived in full.
"""

from __future__ import annotations

import zlib
from typing import Any

from crawler.redis.gateway import Gateway, text
from crawler.redis.keys import Keys
from crawler.warc.records import Original, http_date_ok, uri_ok

__all__ = ["ArchiveIndex"]


class ArchiveIndex:
    def __init__(self, gateway: Gateway, keys: Keys, buckets: int) -> None:
        self.gateway = gateway
        self.keys = keys
        self.buckets = max(1, buckets)
        self.malformed = 0

    def _where(self, digest: str) -> tuple[str, str, str]:
        body = digest.partition(":")[2]
        crc = zlib.crc32(body.encode("ascii", "replace"))
        shard = self.keys.dup_shards[crc % self.keys.shards]
        return shard.archived((crc // self.keys.shards) % self.buckets), body[:16], body[16:]

    def lookup(self, digest: str) -> Original | None:
        """The first response archived with this payload, if any."""
        return self.lookup_many([digest])[0]

    def lookup_many(self, digests: list[str]) -> list[Original | None]:
        """``lookup`` of each, in one round trip."""
        if not digests:
            return []
        where = [self._where(d) for d in digests]
        replies: list[Any] = self.gateway.run_many([("HGET", [key], [field]) for key, field, _ in where])
        return [self._original(raw, rest) for raw, (_, _, rest) in zip(replies, where)]

    def _original(self, raw: Any, rest: str) -> Original | None:
        if raw is None:
            return None
        parts = text(raw).split(" ", 2)
        if len(parts) != 3 or parts[0] != rest or not http_date_ok(parts[1]) or not uri_ok(parts[2]):
            self.malformed += 1
            return None
        return Original(parts[2], parts[1])

    def register(self, digest: str, uri: str, date: str) -> None:
        """This response archived this payload (if none did before)."""
        self.register_many([(digest, uri, date)])

    def register_many(self, archived: list[tuple[str, str, str]]) -> None:
        """``register`` of each (digest, uri, date), in one round trip."""
        calls = []
        for digest, uri, date in archived:
            key, field, rest = self._where(digest)
            calls.append(("HSETNX", [key], [field, f"{rest} {date} {uri}"]))
        if calls:
            self.gateway.run_many(calls)
