"""The crawl's archived payloads, cluster-wide: which response archives a
payload in full, so that an exact copy fetched later or at the same time
(anywhere in the cluster) is written as a revisit of it.

Kept beside the duplicate index, in its shards (``crawler/redis/keys.py``:
``warc:<bucket>``): field the first 16 base-32 characters of the payload's
sha1, value "<the other 16> <WARC-Date> <URI>" once the response's record is
on disk.

A writer *claims* a payload before it writes it (``claim_many``, one Lua
script a payload, ``lua/warc_claim.lua``): the first claimant gets it, with
the WARC-Date and URI its record will carry (both known before the record
is written) and a deadline in Redis time ("<rest> <date> <URI> <owner>
<deadline ms>"); it writes the record in full and then *settles* the claim
(``settle_many``: the value becomes "<rest> <date> <URI>"; a claim whose
record was not written is removed). A copy that finds the payload:

- written: a revisit of it;
- claimed by its own writer: a revisit of it (the writer writes in order,
  and stops at its first failed write, so the original is on disk first);
- claimed by another writer, still pending: waits (``writer.py``) and
  asks again, so a revisit never names a record that is not on disk;
- claimed past the deadline (its writer died, or stalled, between claim
  and write): the claim is taken over and this copy archived in full. A
  stalled writer that writes after all leaves two full records of one
  payload (harmless); its settle finds the other's claim and leaves it.

A value that is not what this module writes (another digest, a date or URI
that does not parse) is no original: the copy is archived in full, and the
value left alone.
"""

from __future__ import annotations

import secrets
import zlib
from dataclasses import dataclass
from typing import Any

from crawler.redis.gateway import Gateway, text
from crawler.redis.keys import Keys
from crawler.redis.scripts import SCRIPTS, WARC_SCRIPTS
from crawler.warc.records import Original, http_date_ok, uri_ok

__all__ = ["CLAIMED", "CLAIM_TTL_MS", "PENDING", "UNKNOWN", "WRITTEN", "ArchiveIndex", "Claim"]

# How long a claim holds before another writer may take it over: a writer
# settles its claims once the batch it claimed them for is written (well
# under a second), so only a writer that died (or stalled this long) between
# claim and write leaves one to expire. Copies of its payloads wait as long.
CLAIM_TTL_MS = 10_000

CLAIMED, WRITTEN, PENDING, UNKNOWN = "claimed", "written", "pending", "unknown"


@dataclass(slots=True, frozen=True)
class Claim:
    """What the index holds of a payload, as a writer about to archive it
    asked: ``claimed`` (by this writer now: archive it in full, then
    settle), ``written`` or ``pending`` (the response ``original`` archives
    it; pending: not on disk yet, unless ``mine``), ``unknown`` (Redis away
    or a value this module did not write: archive it in full, unclaimed)."""

    state: str
    original: Original | None = None
    mine: bool = False
    held: str = ""  # the value in Redis (a claim to settle)


class ArchiveIndex:
    def __init__(self, client: Any, keys: Keys, buckets: int, owner: str | None = None,
                 ttl_ms: int = CLAIM_TTL_MS) -> None:
        self.gateway = Gateway(client, {name: SCRIPTS[name] for name in WARC_SCRIPTS})
        self.keys = keys
        self.buckets = max(1, buckets)
        self.owner = owner or secrets.token_hex(6)  # this writer's claims
        self.ttl_ms = ttl_ms
        self.malformed = 0
        self.taken_over = 0  # expired claims this writer took over

    def _where(self, digest: str) -> tuple[str, str, str]:
        body = digest.partition(":")[2]
        crc = zlib.crc32(body.encode("ascii", "replace"))
        shard = self.keys.dup_shards[crc % self.keys.shards]
        return shard.archived((crc // self.keys.shards) % self.buckets), body[:16], body[16:]

    def lookup(self, digest: str) -> Original | None:
        """The response that archived this payload, if it is on disk."""
        return self.ask([], [digest])[1][0]

    def ask(self, claiming: list[tuple[str, str, str]], looking_up: list[str]) -> tuple[list[Claim], list[Original | None]]:
        """In one round trip: claim each payload (digest, uri, date) this
        writer is about to archive (see the module), and look up the
        responses on disk that archived others (digests). A Redis error of
        one call is an ``unknown`` claim or no original; one of the whole
        round trip is raised."""
        if not claiming and not looking_up:
            return [], []
        calls: list[tuple[str, list[str], list[Any]]] = []
        rests = []
        for digest, uri, date in claiming:
            key, field, rest = self._where(digest)
            calls.append(("WARC_CLAIM", [key], [field, f"{rest} {date} {uri} {self.owner}", self.ttl_ms]))
            rests.append(rest)
        for digest in looking_up:
            key, field, rest = self._where(digest)
            calls.append(("HGET", [key], [field]))
            rests.append(rest)
        replies = self.gateway.run_many(calls, raise_on_error=False)
        if all(isinstance(r, Exception) for r in replies):
            raise replies[0]
        claims = []
        for reply, rest, (_, uri, date) in zip(replies, rests, claiming):
            if isinstance(reply, Exception):
                claims.append(Claim(UNKNOWN))
            elif int(reply[0]) > 0:
                self.taken_over += int(reply[0]) == 2
                claims.append(Claim(CLAIMED, Original(uri, date), mine=True, held=text(reply[1])))
            else:
                claims.append(self._read(reply[1], rest))
        found = []
        for reply, rest in zip(replies[len(claiming):], rests[len(claiming):]):
            got = self._read(reply, rest) if reply is not None and not isinstance(reply, Exception) else Claim(UNKNOWN)
            found.append(got.original if got.state == WRITTEN else None)
        return claims, found

    def _read(self, raw: Any, rest: str) -> Claim:
        held = text(raw)
        parts = held.split(" ")
        if (len(parts) in (3, 5) and parts[0] == rest and http_date_ok(parts[1]) and uri_ok(parts[2])
                and (len(parts) == 3 or (parts[3].isalnum() and parts[4].isdigit()))):
            if len(parts) == 3:
                return Claim(WRITTEN, Original(parts[2], parts[1]), held=held)
            return Claim(PENDING, Original(parts[2], parts[1]), mine=parts[3] == self.owner, held=held)
        self.malformed += 1
        return Claim(UNKNOWN)

    def settle_many(self, settled: list[tuple[str, Claim, bool]]) -> None:
        """Settle this writer's claims (digest, claim, whether its record
        was written), in one round trip: written ones become originals,
        the others are released."""
        calls = []
        for digest, claim, written in settled:
            key, field, rest = self._where(digest)
            assert claim.original is not None
            done = f"{rest} {claim.original.date} {claim.original.uri}" if written else ""
            calls.append(("WARC_SETTLE", [key], [field, claim.held, done]))
        if calls:
            self.gateway.run_many(calls)

    def register(self, digest: str, uri: str, date: str) -> None:
        """This response archived this payload (if none did before), without a claim."""
        key, field, rest = self._where(digest)
        self.gateway.run_many([("HSETNX", [key], [field, f"{rest} {date} {uri}"])])
