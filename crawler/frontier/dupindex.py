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
- **Exact copies** (same text: the content key; for a short page, the
  text with its links): ``content``, in the shard of the key's hash.

Memory (Redis keeps each page's entries, so every byte counts): records
and content entries live in ``DUPEFILTER_BUCKETS`` small hashes per shard,
which Redis keeps in its compact listpack encoding while their values fit
``hash-max-listpack-value``; a site is named by a 10-digit tag
(``site_tag``), not its name; a page with a SimHash is named in the content
index by that fingerprint ("=<simhash>"), its URL kept once, in its
record; only 64 bits of a content key are kept.

Atomicity, argued. A page's check touches up to six shards, so it cannot be
one script. Instead:

1. Each block table adds the page's fingerprint *and* returns the
   candidates already there in one script (``BLOCK``): per table the check
   and the insert are atomic. Of two fingerprints within distance 3 that
   share block table i, whichever reaches table i second sees the other.
2. Every page carries an order key (its worker's clock in ms; ties broken
   by URL), written with its ``shurl`` record in the same pipeline. A
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

import hashlib
import time
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crawler.urls import url_site

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
        self.buckets = frontier.buckets
        self._last_order = ""

    def _order(self) -> str:
        """This check's place in time: ms in 11 hex digits (until year 7541),
        made unique and increasing for this worker; compared as strings,
        ties between workers broken by URL."""
        order = f"{int(time.time() * 1000):011x}"
        if order <= self._last_order:
            order = f"{int(self._last_order, 16) + 1:011x}"
        self._last_order = order
        return order

    def _block_key(self, i: int, block: int) -> str:
        return self.keys.dup_shards[(i * 65536 + block) % self.keys.shards].block(i, block)

    def _record_key(self, fp: int) -> str:
        shards = self.keys.shards
        return self.keys.dup_shards[(fp >> 16) % shards].shurl((fp >> 32) % self.buckets)

    def _content_key(self, content_key: str) -> tuple[str, str]:
        """(bucket key, field) of a content key: 64 bits of it suffice."""
        crc = zlib.crc32(content_key.encode("utf-8", "surrogatepass"))
        shard = self.keys.dup_shards[crc % self.keys.shards]
        return shard.content((crc // self.keys.shards) % self.buckets), content_key[:16]

    def check(self, url: str, site: str, content_key: str | None, fingerprint: int | None,
              max_distance: int = 3, max_candidates: int = 1000, mirror_min_pages: int = 20,
              mirror_share: float = 0.5) -> Duplicate:
        """Is ``url``'s text a copy? ``content_key`` finds exact copies
        (same text), ``fingerprint`` (an unsigned 64-bit SimHash; None for a
        short page) near ones; the page is indexed in the same step unless it
        copies a page of its own site."""
        f = self.frontier
        site_keys = self.keys.site(site)
        tag = site_tag(site)
        calls: list[tuple[str, list[str], list[Any]]] = [
            ("MIRROR", [*site_keys.fixed, site_keys.mirror(site)], [site, "", mirror_min_pages, mirror_share])]
        fp_hex = f"{fingerprint:016x}" if fingerprint is not None else ""
        if content_key:
            bucket, field = self._content_key(content_key)
            # A page with a SimHash is named by it: its URL is in its record.
            calls.append(("EXACT", [bucket], [field, tag, "=" + fp_hex if fp_hex else url]))
        first_block = len(calls)
        order = self._order()
        if fingerprint is not None:
            for i in range(4):
                block = (fingerprint >> (48 - 16 * i)) & _MASK16
                rest = _without_block(fingerprint, i)
                calls.append(("BLOCK", [self._block_key(i, block)],
                              [rest >> 32, rest & 0xFFFFFFFF, max_distance, max_candidates, rest]))
            calls.append(("RECORD", [self._record_key(fingerprint)], [fp_hex, tag, f"{order}\t{url}"]))
        results = f.run_many(calls)
        mirror = _s(results[0]) or None
        exact_other: _Candidate | None = None
        if content_key:
            out = [_s(x) for x in results[1]]
            if out[0] != "new":
                first = self._resolve(out[1], tag if out[0] == "own" else None)
                if first is not None and first != url:
                    if out[0] == "own":
                        self._undo(calls, results, first_block, site_keys.stats, "exact")
                        return Duplicate("exact", first, 0, True, mirror)
                    exact_other = _Candidate(first, url_site(first), 0, "")
        near_other: _Candidate | None = None
        if fingerprint is not None:
            found: dict[int, int] = {}
            for i in range(4):
                out = results[first_block + i]
                block = (fingerprint >> (48 - 16 * i)) & _MASK16
                for j in range(1, len(out), 3):
                    fp = _with_block((int(out[j]) << 32) | int(out[j + 1]), i, block)
                    found[fp] = int(out[j + 2])
            own, near_other = self._candidates(found, url, tag, order)
            if own is not None:
                self._undo(calls, results, first_block, site_keys.stats, "near")
                return Duplicate("near", own.url, own.distance, True, mirror)
        copy, kind = (exact_other, "exact") if exact_other is not None else (near_other, "near")
        if copy is None:
            return Duplicate("new", mirror_of=mirror)
        mirror = _s(f.run_many([("MIRROR", [*site_keys.fixed, site_keys.mirror(site)],
                                 [site, copy.site, mirror_min_pages, mirror_share, kind])])[0]) or None
        return Duplicate(kind, copy.url, copy.distance, False, mirror)

    def _resolve(self, page: str, tag: str | None) -> str | None:
        """The URL of a page as the exact index names it: a URL, or
        "=<simhash>": the first page with that fingerprint on the site of
        ``tag`` (when given and there is one), else the first anywhere.
        None if there is no such record."""
        if not page.startswith("="):
            return page
        fields = [page[1:]] + ([f"{page[1:]}\t{tag}"] if tag else [])
        try:
            key = self._record_key(int(page[1:], 16))
        except ValueError:
            return None
        values = self.frontier.run_many([("HMGET", [key], fields)])[0]
        if tag and values[1] is not None:
            cand = _parse(_s(values[1]), "", 0)
        elif values[0] is not None:
            cand = _parse(_s(values[0])[10:], "", 0)
        else:
            return None
        return cand.url if cand is not None else None

    def _undo(self, calls: list[tuple[str, list[str], list[Any]]], results: list[Any], first_block: int,
              stats: str, kind: str) -> None:
        """A copy of a page of its own site: counted, and taken out of the
        near-duplicate candidates (what its check added to the block tables,
        and only that: a fingerprint another page had added stays). Its
        record stays: the exact index may name the page by it."""
        undo: list[tuple[str, list[str], list[Any]]] = [("HINCRBY", [stats], [f"{kind}_duplicates", 1])]
        for i in range(4 if len(calls) > first_block else 0):
            _, keys, args = calls[first_block + i]
            if int(results[first_block + i][0]):
                undo.append(("SREM", keys, [args[4]]))
        self.frontier.run_many(undo)

    def _candidates(self, found: dict[int, int], url: str, tag: str,
                    order: str) -> tuple[_Candidate | None, _Candidate | None]:
        """The nearest earlier page of this site and of another site among
        the fingerprints ``found`` (fingerprint -> distance)."""
        if not found:
            return None, None
        plan = list(found)
        results = self.frontier.run_many(
            [("HMGET", [self._record_key(fp)], [f"{fp:016x}", f"{fp:016x}\t{tag}"]) for fp in plan])
        own: _Candidate | None = None
        other: _Candidate | None = None
        for fp, (first, mine) in zip(plan, results):
            d = found[fp]
            if first is None:
                continue  # its page's record is not written yet: a later page
            text = _s(first)
            same_site = text[:10] == tag
            cand = _parse(text[10:], "", d)
            if cand is None or cand.url == url or (cand.order, cand.url) >= (order, url):
                continue
            if not same_site and mine is not None:
                own_cand = _parse(_s(mine), "", d)
                if own_cand is not None and own_cand.url != url and (own_cand.order, own_cand.url) < (order, url):
                    cand, same_site = own_cand, True
            if same_site:
                if own is None or (cand.distance, cand.order) < (own.distance, own.order):
                    own = cand
            elif other is None or (cand.distance, cand.order) < (other.distance, other.order):
                other = cand
        if other is not None:
            other.site = url_site(other.url)
        return own, other


def site_tag(site: str) -> str:
    """10 hex digits (40 bits) naming a site in the duplicate index's values,
    shorter than the site itself: two sites share one with probability
    about 10^-12 a pair (for 100,000 sites, 0.5 % that any two do)."""
    digest = hashlib.blake2b(site.encode("utf-8", "surrogatepass"), digest_size=5).hexdigest()
    return digest


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
