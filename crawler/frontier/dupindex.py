"""The cluster's duplicate index: is this page's text a copy of a page seen
before, anywhere in the crawl?

Two indexes, spread over the duplicate-index shards by hash bits
(``crawler/redis/keys.py``):

- **Near duplicates** (pages with a sketch, ``crawler.duplicates.fingerprint.Sketch``):
  a page is a near duplicate of an earlier one when their word 3-shingles'
  resemblance is at least ``NEARDUP_RESEMBLANCE`` (0.9). A page is named
  by its page id (64 bits of its content key: one text, one id) and
  referred to by the id's top 5 bytes (its reference). Candidates come
  from 10 LSH band tables (bands of 5 of a one-permutation MinHash): each
  band key names the pages that had it, in the shard and bucket its bits
  choose. Each candidate's odd sketch (``osk``, in the shard of its
  reference) then gives the resemblance. ``rec`` maps each reference to
  the first page with that text (and to the first on each other site), in
  the same shard. Lookup cost does not grow with the index: 10 hash field
  reads, then at most ``max_candidates`` record and sketch reads.
- **Exact copies**: for a page with a sketch, its record: a record there
  with the same page id is the same text. For a page too short for one
  (its text with its links: the content key), ``content``, in the shard of
  the key's hash.

Memory (Redis keeps each page's entries, so every byte counts): records,
sketches, band keys and content entries live in ``DUPEFILTER_BUCKETS`` small
hashes per shard and table, which Redis keeps in its compact listpack
encoding while their values fit ``hash-max-listpack-value`` (128 bytes: the
embedded Redis's setting; ``docs/reference.md``). Band tables, records and
sketches are grown (``crawler/frontier/buckets.py``): a table starts with
a 256th of its buckets and splits them as they fill, so that a small crawl
does not pay for the keys of a large one; a site is named by a
40-bit tag (``site_tag``), an order key by 7 bytes, a page by its 5-byte
reference; a band key keeps 24 bits beyond those that chose its bucket (a
bucket of 100 keys takes another page's key for a page's with probability
6 x 10^-6: a candidate more, whose sketch then decides); an
odd sketch is 102 bytes (``NEARDUP_SKETCH_BITS`` 512). About 300 B of
Redis a page with a sketch at a million pages (bench/RESULTS.md, "Redis
memory at scale"), under 450 B at 2,000 (tests/test_redis_memory.py).
Two page ids share a reference with probability 2^-40 a pair (0.5 pairs
expected at a million pages, half a million at a billion): the later
page's record is not written (``record.lua`` answers 2), so its text is
not found as an original; what band keys name it by leads to the other
page, whose sketch decides as for any candidate.

Atomicity, argued. A page's check touches up to 19 shards, so it cannot be
one script. Instead:

1. Each band table adds the page *and* returns the pages already under its
   band key in one script (``BAND``, one call for the tables of one shard):
   per table the check and the insert are atomic. Of two pages that share
   band key i, whichever reaches table i second sees the other. A pair of
   resemblance 0.9 shares at least one of 10 band keys with probability
   0.9999. The record's check and insert are one script too (``RECORD``):
   of two exact copies, one writes the record and the other finds it.
2. Every page carries an order key (its worker's clock in µs; ties broken
   by URL), written with its record (``rec``) in the same pipeline. A
   candidate counts only if its record is there and its order is earlier.
   So two pages never both count as copies of each other: of a pair, at
   most the later is a copy. A URL keeps the order key of its first check:
   the store keeps it with the page (``dup_order``) and a re-crawl passes
   it back (``first``), so that re-crawled, changed or not, an original is
   not taken for a copy of a copy made of it since. (Redis kept it, 20 B a
   page, until the index had to fit a billion pages.)
3. What can be lost: two near copies checked at the same moment by two
   workers, each reaching the shared tables before the other, within the
   clock skew of their workers: both are kept as originals (as a single
   index would have kept whichever it saw first). A copy is never missed
   once the first page's check has returned, and, on another machine, the
   two machines' clock skew has passed (but for the LSH's 0.0001).
   Exact copies are one script on one key: atomic as before.

Round trips: one pipeline for the band tables, the record and sketch (or
the content key) and the URL's first order key; one for the candidates'
records and sketches (when there are candidates); one more for the mirror
count of a copy of another site. Malformed entries (a band value that is
not whole 5-byte references, a sketch without its magic byte or of the
wrong length, a record without a URL) are no evidence: the page is
compared with what remains.

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

import time
import zlib
from typing import TYPE_CHECKING, Any

from crawler.duplicates.fingerprint import Sketch
from crawler.frontier.buckets import SPLIT_AT, bucket_width, grown_sizes, parse_sizes, sizes_text
from crawler.frontier.dupentries import (ORDER, Candidate, Duplicate, is_url, page_id, record_of, site_of_url,
                                         site_tag, text_of)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from crawler.redis.gateway import Gateway
    from crawler.redis.keys import Keys

__all__ = ["Duplicate", "DuplicateIndex", "page_id", "site_tag"]

_MASK24 = (1 << 24) - 1
_BAND_CAP = 8  # pages kept a band key: more pages alike than that are candidates enough


class DuplicateIndex:
    """The cluster's duplicate index (see the module), through ``gateway``;
    ``buckets``: ``DUPEFILTER_BUCKETS``."""

    def __init__(self, gateway: Gateway, keys: Keys, buckets: int) -> None:
        self.gateway = gateway
        self.keys = keys
        self.buckets = buckets
        self._last_order = ""
        self._levels: str | None = None  # the grown tables' levels (buckets.py), read once
        self._width = bucket_width(buckets)

    @property
    def levels(self) -> str:
        """The levels of the crawl's grown tables (``crawler/frontier/buckets.py``):
        as its meta records them; a crawl an earlier version started (its
        meta has a layout, no levels) keeps its flat tables; a crawl not
        started yet gets this version's."""
        if self._levels is None:
            shards, recorded = self.gateway.run("HMGET", [self.keys.meta], ["shards", "dup_levels"])
            if recorded is None and shards is not None:
                sizes = [self.buckets]
            else:
                sizes = parse_sizes(text_of(recorded), self.buckets) or grown_sizes(self.buckets)
            self._levels = sizes_text(sizes)
        return self._levels

    def _order(self) -> str:
        """This check's place in time: microseconds in 14 hex digits (until
        year 4253), made unique and increasing for this worker; compared as
        strings, ties between workers broken by URL. Microseconds, not
        milliseconds: a check takes longer than one, so (given a clock that
        resolves microseconds and does not step back) a check begun after
        another's returned on this machine is always later. In
        milliseconds two checks a worker began within one had to be made
        unique by counting on, which ran a busy worker's clock ahead of the
        others' and let a page checked after its original returned be taken
        for the earlier of the two (a copy missed)."""
        order = f"{time.time_ns() // 1000:014x}"
        if order <= self._last_order:
            order = f"{int(self._last_order, 16) + 1:014x}"
        self._last_order = order
        return order

    def _ref(self, pid: int) -> bytes:
        """A page's reference in the near-duplicate index: the top 5 bytes of its page id."""
        return (pid >> 24).to_bytes(5, "big")

    def _record_key(self, ref: bytes) -> str:
        r = int.from_bytes(ref, "big")
        return self.keys.dup_shards[r % self.keys.shards].record((r >> 16) % self.buckets)

    def _sketch_key(self, ref: bytes) -> str:
        r = int.from_bytes(ref, "big")
        return self.keys.dup_shards[r % self.keys.shards].sketch((r >> 16) % self.buckets)

    def holding(self, key: str) -> str:
        """The key that holds final bucket ``key``'s entries now: in a grown
        table, the coarse bucket of the first level not split yet (as
        ``grow.lua`` finds it; for tools and tests)."""
        prefix, _, bucket = key.rpartition(":")
        offset = 0
        for n in [int(x) for x in self.levels.split(",")][:-1]:
            if not self.gateway.run("GETBIT", [prefix + ":grown"], [offset + int(bucket) % n]):
                return f"{prefix}:{n}/{int(bucket) % n}"
            offset += n
        return key

    def band_entry(self, i: int, key: int) -> tuple[str, bytes]:
        """(key, field) where band table i keeps band key ``key`` now."""
        _, final, field = self._band(i, key)
        live = self.holding(final)
        return live, field if live != final else field[self._width:]

    def _content_key(self, content_key: str) -> tuple[str, str]:
        """(bucket key, field) of a content key: 64 bits of it suffice."""
        crc = zlib.crc32(content_key.encode("utf-8", "surrogatepass"))
        shard = self.keys.dup_shards[crc % self.keys.shards]
        return shard.content((crc // self.keys.shards) % self.buckets), content_key[:16]

    def _band(self, i: int, key: int) -> tuple[int, str, bytes]:
        """(shard, final bucket, field) of band table i's band key ``key``;
        the field as a coarse bucket keeps it: the final bucket's number,
        then 3 bytes of the key (band.lua drops the number in the final bucket)."""
        shard = (i * 65536 + (key >> 48)) % self.keys.shards
        bucket = (key >> 32) % self.buckets
        return shard, self.keys.dup_shards[shard].band(i, bucket), \
            bucket.to_bytes(self._width, "big") + (key & _MASK24).to_bytes(3, "big")

    def check(self, url: str, site: str, content_key: str | None,
              sketch: Sketch | None = None, resemblance: float = 0.9, max_candidates: int = 32,
              mirror_min_pages: int = 20, mirror_share: float = 0.5,
              also: Sequence[tuple[str, Sequence[str], Sequence[Any]]] = (),
              also_results: list[Any] | None = None, first: str | None = None) -> Duplicate:
        """Is ``url``'s text a copy? ``content_key`` finds exact copies
        (same text); ``sketch`` near ones, pages whose shingles' resemblance
        to it is at least ``resemblance`` (None: no near check, a short
        page). A page with a sketch is named by 64 bits of its content key
        (its page id), not by its SimHash: the SimHash leaves dates and
        versions out, so pages that differ only by them share one. The page
        is indexed in the same step unless it copies a page of its own site.
        At most ``max_candidates`` pages (those sharing most band keys) are
        compared. ``also``: other calls of the page sent in the check's
        first round trip (the site template's count), their answers (or
        errors) put in ``also_results``. ``first``: the order key of the
        URL's first check, as its store kept it (a re-crawl), which the page
        keeps; the verdict's ``order`` is the one to store."""
        site_keys = self.keys.site(site)
        tag = site_tag(site)
        calls: list[tuple[str, list[str], list[Any]]] = [
            ("MIRROR", [*site_keys.fixed, site_keys.mirror(site)], [site, "", mirror_min_pages, mirror_share])]
        pid = page_id(content_key) if content_key and sketch is not None else None
        if content_key and pid is None:
            content_bucket, content_field = self._content_key(content_key)
            calls.append(("EXACT", [content_bucket], [content_field, tag, url]))
        first_band = len(calls)
        by_shard: dict[int, tuple[list[str], list[Any]]] = {}
        order = self._order()
        if first is not None and ORDER.match(first) and first < order:
            order = first  # re-crawled: an original stays earlier than the copies made of it since
        ref = b""
        if pid is not None:
            assert sketch is not None
            ref = self._ref(pid)
            # One script call per shard on a Redis Cluster (a script's keys
            # share a slot); on one Redis, one call for all the band tables:
            # fewer commands to pack and parse a page.
            cluster = self.gateway.cluster
            levels = self.levels
            for i, key in enumerate(sketch.bands):
                shard, band_bucket, band_field = self._band(i, key)
                keys, args = by_shard.setdefault(shard if cluster else 0,
                                                 ([], [ref, _BAND_CAP, levels, SPLIT_AT, self._width]))
                keys.append(band_bucket)
                args.append(band_field)
            calls.extend(("BAND", keys, args) for keys, args in by_shard.values())
            # The record and the sketch of a page reference live in one shard: one script.
            calls.append(("RECORD", [self._record_key(ref), self._sketch_key(ref)],
                          [ref, (pid & 0xFFFFFF).to_bytes(3, "big"), bytes.fromhex(tag),
                           bytes.fromhex(order), url, sketch.odd, levels, SPLIT_AT]))
        answered = self.gateway.run_many([*calls, *also], raise_on_error=False)
        results = answered[:len(calls)]
        if also_results is not None:
            also_results[:] = answered[len(calls):]
        for r in results:
            if isinstance(r, Exception):
                raise r
        mirror = text_of(results[0]) or None
        exact_other: Candidate | None = None
        if content_key and pid is None:
            out = [text_of(x) for x in results[1]]
            if out[0] != "new" and is_url(out[1]) and out[1] != url:
                if out[0] == "own":
                    self.gateway.run_many([("HINCRBY", [site_keys.stats], ["exact_duplicates", 1])])
                    return Duplicate("exact", out[1], 0, True, mirror, 1.0)
                exact_other = Candidate(out[1], site_of_url(out[1]), 0, "")
        near_other: Candidate | None = None
        if pid is not None:
            assert sketch is not None
            created, before, own_before, _ = results[-1]
            if int(created) == 0:
                # This text has a record: an exact copy, unless it is this very page's.
                main = record_of(before, with_rest=True)
                own = record_of(own_before) if own_before else None
                if main is not None and main.url == url and main.order < order:
                    order = main.order  # this page again, unchanged: it keeps its place in time
                if main is not None and main.url != url:
                    if bytes(before[3:8]) == bytes.fromhex(tag) or (own is not None and own.url != url):
                        original = main.url if own is None else own.url
                        self._undo(calls, results, first_band, len(by_shard), site_keys.stats, "exact")
                        return Duplicate("exact", original, 0, True, mirror, 1.0, order)
                    exact_other = Candidate(main.url, site_of_url(main.url), 0, "")
            hits: dict[bytes, int] = {}
            for out in results[first_band:first_band + len(by_shard)]:
                for pages in out[1::2]:
                    if isinstance(pages, bytes) and len(pages) % 5 == 0 and len(pages) <= 5 * _BAND_CAP:
                        for k in range(0, len(pages), 5):
                            other = pages[k:k + 5]
                            if other != ref:
                                hits[other] = hits.get(other, 0) + 1
            best = sorted(hits, key=lambda other: -hits[other])[:max_candidates]
            own_near, near_other = self._candidates(best, sketch, resemblance, url, bytes.fromhex(tag), order)
            if own_near is not None:
                self._undo(calls, results, first_band, len(by_shard), site_keys.stats, "near")
                return Duplicate("near", own_near.url, own_near.distance, True, mirror, own_near.resemblance, order)
        copy, kind = (exact_other, "exact") if exact_other is not None else (near_other, "near")
        if copy is None:
            return Duplicate("new", mirror_of=mirror, order=order if pid is not None else "")
        mirror = text_of(self.gateway.run_many([("MIRROR", [*site_keys.fixed, site_keys.mirror(site)],
                                 [site, copy.site, mirror_min_pages, mirror_share, kind])])[0]) or None
        return Duplicate(kind, copy.url, copy.distance, False, mirror, copy.resemblance,
                         order if pid is not None else "")

    def mirror_of(self, site: str) -> str | None:
        """The site ``site`` mirrors, as its pages' copies have said (None: none)."""
        v = self.gateway.run("HGET", [self.keys.site(site).mirrors], [site])
        return text_of(v) if v is not None else None

    def _undo(self, calls: list[tuple[str, list[str], list[Any]]], results: list[Any], first_band: int,
              band_calls: int, stats: str, kind: str) -> None:
        """A copy of a page of its own site: counted, and taken out of the
        near-duplicate candidates (what its check added to the band tables
        and the sketches, and only that: what another page had added stays).
        Its record stays: it names the page's text, so that its own exact
        copies are found."""
        undo: list[tuple[str, list[str], list[Any]]] = [("HINCRBY", [stats], [f"{kind}_duplicates", 1])]
        if band_calls:
            for n in range(first_band, first_band + band_calls):
                _, keys, args = calls[n]
                added = [int(x) for x in results[n][0::2]]
                mine = [k for k, a in enumerate(added) if a]
                if mine:
                    undo.append(("BAND_UNDO", [keys[k] for k in mine],
                                 [args[0], args[2], args[4], *(args[5 + k] for k in mine)]))
            _, keys, args = calls[first_band + band_calls]
            if int(results[first_band + band_calls][3]):  # RECORD wrote the sketch
                undo.append(("GROWN", keys, ["drop", self.levels, args[0]]))
        self.gateway.run_many(undo)

    def _candidates(self, plan: list[bytes], sketch: Sketch, threshold: float, url: str,
                    tag: bytes, order: str) -> tuple[Candidate | None, Candidate | None]:
        """The most resembling earlier page of this site and of another site
        among the pages ``plan`` names (by reference), of resemblance at
        least ``threshold``."""
        if not plan:
            return None, None
        levels = self.levels
        results = self.gateway.run_many([("GROWN", [self._record_key(ref), self._sketch_key(ref)],
                                          ["read", levels, ref, ref + tag]) for ref in plan])
        own: Candidate | None = None
        other: Candidate | None = None
        for first, mine, stored in results:
            if first is None:
                continue  # its page's record is not written yet: a later page
            r = sketch.resemblance(stored if isinstance(stored, bytes) else None)
            if r is None or r < threshold:
                continue  # no sketch (taken out again), not one this index wrote, or too far
            cand = record_of(first, with_rest=True, resemblance=r)
            if cand is None or cand.url == url or (cand.order, cand.url) >= (order, url):
                continue  # not a record this index wrote, or not an earlier page
            same_site = bytes(first[3:8]) == tag
            if not same_site and mine is not None:
                own_cand = record_of(mine, resemblance=r)
                if own_cand is not None and own_cand.url != url and (own_cand.order, own_cand.url) < (order, url):
                    cand, same_site = own_cand, True
            if same_site:
                if own is None or (-cand.resemblance, cand.order) < (-own.resemblance, own.order):
                    own = cand
            elif other is None or (-cand.resemblance, cand.order) < (-other.resemblance, other.order):
                other = cand
        if other is not None:
            other.site = site_of_url(other.url)
        return own, other
