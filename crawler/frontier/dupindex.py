"""The cluster's duplicate index: is this page's text a copy of a page seen
before, anywhere in the crawl?

Two indexes, spread over the duplicate-index shards by fingerprint bits
(``crawler/frontier/keys.py``):

- **Near duplicates** (pages with a SimHash). Manku, Jain and Das Sarma's
  block tables: the 64-bit fingerprint is cut into four 16-bit blocks; two
  fingerprints within Hamming distance 3 agree on at least one block
  exactly, so the candidates are the members of four sets, one per block
  table, each keyed by the block's value and living in the shard that value
  chooses. ``shurl`` maps each fingerprint to its first page (and to the
  first on each other site), in the shard of the fingerprint's low bits.
- **Exact copies of short pages** (no SimHash: the text alone is too short
  to fingerprint, so the key is the text with its links): ``content``, in
  the shard of the key's hash.

Atomicity, argued. A page's check touches up to six shards, so it cannot be
one script. Instead:

1. Each block table adds the page's fingerprint *and* returns the
   candidates already there in one script (``BLOCK``): per table the check
   and the insert are atomic. Of two fingerprints within distance 3 that
   share block table i, whichever reaches table i second sees the other.
2. Every page carries an order key (its worker's clock in ms, the worker,
   a counter), written with its ``shurl`` record in the same pipeline. A
   candidate counts only if its record is there and its order is earlier.
   So two pages never both count as copies of each other: of a pair, at
   most the later is a copy.
3. What can be lost: two near copies checked at the same moment by two
   workers, each reaching the shared table before the other, within the
   clock skew of their workers: both are kept as originals (as a single
   index would have kept whichever it saw first). A copy is never missed
   once the first page's check has returned. Exact copies of short pages
   are one script on one key: atomic as before.

A copy of a page of its own site is taken out of the index again (what the
check added for it, and only that), as the single-script index this
replaces never put it in: the index holds the first page of each content on
each site, and ``dup_of`` names the nearest earlier one (a page of the same
site first). A copy of another site's page stays in, so that its own copies
on its site are found.

A copy of a page of another site counts towards its site being a mirror of
that site (``MIRROR``, in the site's own shard).
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crawler.frontier.keys import shard_of

if TYPE_CHECKING:
    from crawler.frontier.frontier import Frontier

__all__ = ["Duplicate", "DuplicateIndex"]

_MASK16 = 0xFFFF


@dataclass(slots=True, frozen=True)
class Duplicate:
    """The verdict of the duplicate index: ``kind`` "new", "exact" or "near";
    the first page with that content (on this site when there is one), the
    Hamming distance to it, whether it is on the same site, and the site this
    page's site mirrors (None: not a mirror)."""

    kind: str
    first: str | None = None
    distance: int = -1
    same_site: bool = False
    mirror_of: str | None = None


@dataclass(slots=True)
class _Candidate:
    url: str
    site: str
    distance: int
    order: str


class DuplicateIndex:
    def __init__(self, frontier: Frontier) -> None:
        self.frontier = frontier
        self.keys = frontier.keys
        self._tag = frontier.node_tag
        self._counter = itertools.count()

    def _order(self) -> str:
        # Fixed width: ms in 11 hex digits (until year 7541), the node's tag,
        # a per-node counter; compared as strings.
        return f"{int(time.time() * 1000):011x}{self._tag}{next(self._counter) % 4096:03x}"

    def _block_shard(self, i: int, block: int) -> Any:
        return self.keys.dup_shards[(i * 65536 + block) % self.keys.shards]

    def _record_shard(self, fp: int) -> Any:
        return self.keys.dup_shards[(fp >> 16) % self.keys.shards]

    def check(self, url: str, site: str, content_key: str | None, fingerprint: int | None,
              max_distance: int = 3, max_candidates: int = 1000, mirror_min_pages: int = 20,
              mirror_share: float = 0.5) -> Duplicate:
        """Is ``url``'s text a copy? ``content_key`` finds exact copies
        (same text), ``fingerprint`` (an unsigned 64-bit SimHash; None for a
        short page) near ones; the page is indexed in the same step unless it
        copies a page of its own site."""
        f = self.frontier
        site_keys = self.keys.site(site)
        calls: list[tuple[str, list[str], list[Any]]] = [
            ("MIRROR", [*site_keys.fixed, site_keys.mirror(site)], [site, "", mirror_min_pages, mirror_share])]
        if content_key:
            shard = self.keys.dup_shards[shard_of(content_key, self.keys.shards)]
            calls.append(("EXACT", [shard.content], [content_key, site, url]))
        first_block = len(calls)
        order = self._order()
        if fingerprint is not None:
            for i in range(4):
                block = (fingerprint >> (48 - 16 * i)) & _MASK16
                rest = _without_block(fingerprint, i)
                calls.append(("BLOCK", [self._block_shard(i, block).block(i, block)],
                              [rest >> 32, rest & 0xFFFFFFFF, max_distance, max_candidates, rest]))
            calls.append(("RECORD", [self._record_shard(fingerprint).shurl],
                          [f"{fingerprint:016x}", site, f"{order}\t{url}"]))
        results = f.run_many(calls)
        mirror = _s(results[0]) or None
        exact_other: _Candidate | None = None
        if content_key:
            out = [_s(x) for x in results[1]]
            if out[0] == "own":
                self._undo(calls, results, first_block, site_keys.stats, "exact")
                return Duplicate("exact", out[1], 0, True, mirror)
            if out[0] == "other":
                exact_other = _Candidate(out[1], out[2], 0, "")
        near_other: _Candidate | None = None
        if fingerprint is not None:
            found: dict[int, int] = {}
            for i in range(4):
                out = results[first_block + i]
                block = (fingerprint >> (48 - 16 * i)) & _MASK16
                for j in range(1, len(out), 3):
                    fp = _with_block((int(out[j]) << 32) | int(out[j + 1]), i, block)
                    found[fp] = int(out[j + 2])
            own, near_other = self._candidates(found, url, site, order)
            if own is not None:
                self._undo(calls, results, first_block, site_keys.stats, "near")
                return Duplicate("near", own.url, own.distance, True, mirror)
        copy, kind = (exact_other, "exact") if exact_other is not None else (near_other, "near")
        if copy is None:
            return Duplicate("new", mirror_of=mirror)
        mirror = _s(f.run_many([("MIRROR", [*site_keys.fixed, site_keys.mirror(site)],
                                 [site, copy.site, mirror_min_pages, mirror_share, kind])])[0]) or None
        return Duplicate(kind, copy.url, copy.distance, False, mirror)

    def _undo(self, calls: list[tuple[str, list[str], list[Any]]], results: list[Any], first_block: int,
              stats: str, kind: str) -> None:
        """A copy of a page of its own site: counted, and taken out of the
        near-duplicate index (what its check added there, and only that: a
        fingerprint another page had added stays)."""
        undo: list[tuple[str, list[str], list[Any]]] = [("HINCRBY", [stats], [f"{kind}_duplicates", 1])]
        if len(calls) <= first_block:
            self.frontier.run_many(undo)
            return
        for i in range(4):
            name, keys, args = calls[first_block + i]
            if int(results[first_block + i][0]):
                undo.append(("SREM", keys, [args[4]]))
        field = _s(results[first_block + 4])
        if field:
            undo.append(("HDEL", calls[first_block + 4][1], [field]))
        self.frontier.run_many(undo)

    def _candidates(self, found: dict[int, int], url: str, site: str,
                    order: str) -> tuple[_Candidate | None, _Candidate | None]:
        """The nearest earlier page of this site and of another site among
        the fingerprints ``found`` (fingerprint -> distance)."""
        if not found:
            return None, None
        by_shard: dict[Any, list[int]] = defaultdict(list)
        for fp in found:
            by_shard[self._record_shard(fp)].append(fp)
        calls: list[tuple[str, list[str], list[Any]]] = []
        plan: list[int] = []
        for shard, fps in by_shard.items():
            for fp in fps:
                calls.append(("HMGET", [shard.shurl], [f"{fp:016x}", f"{fp:016x}\t{site}"]))
                plan.append(fp)
        results = self.frontier.run_many(calls)
        own: _Candidate | None = None
        other: _Candidate | None = None
        for fp, (first, mine) in zip(plan, results):
            d = found[fp]
            if first is None:
                continue  # its page's record is not written yet: a later page
            fsite, _, rest = _s(first).partition("\t")
            cand = _parse(rest, fsite, d)
            if cand is None or cand.url == url or cand.order >= order:
                continue
            if fsite != site and mine is not None:
                own_cand = _parse(_s(mine), site, d)
                if own_cand is not None and own_cand.url != url and own_cand.order < order:
                    cand = own_cand
            if cand.site == site:
                if own is None or (cand.distance, cand.order) < (own.distance, own.order):
                    own = cand
            elif other is None or (cand.distance, cand.order) < (other.distance, other.order):
                other = cand
        return own, other


def _parse(value: str, site: str, distance: int) -> _Candidate | None:
    order, sep, url = value.partition("\t")
    if not sep or not url:
        return None  # not a record this index wrote: ignored
    return _Candidate(url, site, distance, order)


def _without_block(fp: int, i: int) -> int:
    """The 48 bits of ``fp`` other than its i-th 16-bit block (0 = highest)."""
    shift = 48 - 16 * i
    high = fp >> (shift + 16)
    low = fp & ((1 << shift) - 1)
    return (high << shift) | low


def _with_block(rest: int, i: int, block: int) -> int:
    shift = 48 - 16 * i
    high = rest >> shift
    low = rest & ((1 << shift) - 1)
    return (high << (shift + 16)) | (block << shift) | low


def _s(value: Any) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
