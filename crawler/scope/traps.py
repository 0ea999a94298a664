"""Path-level spider traps: pure logic, no Scrapy imports.

``crawler.scope.urls.url_shape`` masks digits only, so a chain of links whose path
grows a level at every step (``/x1/y2/z3/...``) or carries a fresh session
token at every step (``/s/<random>/``) changes shape each time and is never
cut. This module judges each followed link by evidence about the chain of
links that led to it, carried in ``request.meta`` like ``shape_run`` (small
ints, JSON, omitted when 0):

- ``descent_run``: links in the chain that went deeper (more path levels,
  counted as slashes) than the page they were found on, since the chain last
  went up. A sideways link keeps the count, a link upwards resets it, so it
  never exceeds the link's own depth: a real tree, however large, keeps it
  below its depth, while a generator that adds a level a page grows it
  without end.
- ``numbered_run``: the same, counting only deeper links whose new levels
  carry a digit or a random token (``x1``, ``2024``, ``3f9a2c7e...``); a
  deeper link to named levels (``library/``, ``java/util/``) resets it. Real
  trees nest words; numbers nest a few levels only (year/month/day, a version).
- ``token_run``: links in a row each of which brings a random-looking token
  (``looks_random``: hashes, UUIDs, base64/base36 ids) that the page it was
  found on did not have. Session ids issued afresh on every page do that; a
  site's own names and ids do not come new at every step. Where the page had
  a token, a part of the same length in the same place counts as the next
  token even if it happens to look like a word.

A chain of one link a page is thus cut after a fixed number of pages. A
session trap whose pages each link to many sections would multiply before
``token_run`` ends it, so per host a bounded count is kept of the followed
links that brought a fresh token naming a directory to one place (the path
up to it, tokens and digits masked: ``/s/*``). Once a place has
``TRAP_MAX_TOKEN_VARIANTS``, links continuing a token chain there
(``token_run`` of 2 or more) are dropped. Leaves are not counted (Doxygen's
``dir_<md5>.html``, a git UI's ``/commit/<sha>``), and first steps are not
dropped, so a git web UI keeps every commit its log pages list.

Why chain evidence rather than per-site depth statistics (a median): the
evidence travels with the request through Redis, so every worker of the
cluster judges a chain alike, across restarts, and a trap cannot shift it as
it shifts a median by filling its site with deep URLs. A cut drops one
discovery of a URL, not the URL: found again through another chain, it is
judged on that one.

Settings (read by ``crawler.middlewares.TrapGuardMiddleware``; 0 turns a rule
off; the defaults are ``TrapLimits``'s):

- ``TRAP_MAX_DESCENT_RUN`` (20): most links of a chain going deeper.
- ``TRAP_MAX_NUMBERED_RUN`` (8): most links of a chain going deeper into
  numbered or token levels.
- ``TRAP_MAX_TOKEN_RUN`` (10): most links in a row each bringing a fresh token.
- ``TRAP_MAX_TOKEN_VARIANTS`` (10): links with a fresh token followed into one
  place of a host, after which links continuing a token chain there are
  dropped.
- ``TRAP_HOSTS_TRACKED`` (4096): hosts whose token places are remembered
  (least recently used forgotten first), each with at most
  ``PLACES_PER_HOST`` places: about 12 MB when full, whatever the crawl.

Meta keys: ``descent_run``, ``numbered_run``, ``token_run``.
Stats (counted by the middleware): ``trap/dropped/<reason>`` with the reasons
``descent_run``, ``numbered_run``, ``token_run``, ``token_variants``.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from crawler.requestmeta import TRAP_EVIDENCE

__all__ = [
    "META_KEYS",
    "PathEvidence",
    "LinkParent",
    "PathTrapGuard",
    "TrapLimits",
    "Verdict",
    "looks_random",
    "path_tokens",
]

META_KEYS = TRAP_EVIDENCE  # the registry's; this name kept for importers
PLACES_PER_HOST = 16  # token places remembered per host (least recently used forgotten)

_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_PART = re.compile(r"[A-Za-z0-9_-]+")
_EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,4}$")
_HEX = re.compile(r"[0-9a-f]+|[0-9A-F]+")
# Words of an identifier: "getElementById2" -> get, Element, By, Id, 2.
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|[0-9]+")
_LETTERS = re.compile(r"[A-Za-z]+")
_DIGITS = re.compile(r"[0-9]+")
_SEPARATOR = re.compile(r"[-_]")
_CONSONANTS = re.compile(r"[b-df-hj-np-tv-xz]{5,}", re.IGNORECASE)


def looks_random(part: str) -> bool:
    """Whether a run of ``[A-Za-z0-9_-]`` looks machine-made: a hash, a
    session id, a UUID, base64/base36 ids. Names people give (``library``,
    ``sqlite3``, ``getElementById``, ``x86_64-linux-gnu``, ``ch01s02s03``,
    ``_mm256_cmpgt_epi16``) do not. Under 8 characters never: too little to
    tell."""
    if len(part) < 8:
        return False
    alnum = part.replace("-", "").replace("_", "")
    if len(alnum) < 8 or alnum.isdigit():
        return False  # numbers: url_shape masks them, numbered_run counts them
    has_digit = not alnum.isalpha()
    pieces = [piece for piece in _SEPARATOR.split(part) if len(piece) >= 8]
    if has_digit and any(_HEX.fullmatch(piece) and not piece.isdigit() and not piece.isalpha()
                         for piece in pieces):
        return True  # hashes, UUIDs (their first group)
    if not alnum.islower() and not alnum.isupper():
        # Mixed case: camel-case names break into few, long words; base62 and
        # base64 ids into many one- or two-letter pieces.
        words = _WORD.findall(part)
        return len(words) >= 4 and len(alnum) <= 2.5 * len(words)
    # One case: letters alone cannot be told from words; with digits, look at
    # each piece between "-" and "_" (snake_case names are words joined).
    return has_digit and any(_one_case_random(piece) for piece in pieces)


def _one_case_random(piece: str) -> bool:
    """base36/base32 ids: letters and digits interleave at random, or letters
    run on without a vowel. Zero-padded numbering (``ch01s02s03``, ``a00231``)
    is a scheme, not a token."""
    digit_runs = _DIGITS.findall(piece)
    if not digit_runs or all(len(d) >= 2 and d[0] == "0" for d in digit_runs):
        return False
    if len(digit_runs) + len(_LETTERS.findall(piece)) >= 4:
        return True
    return _CONSONANTS.search(piece) is not None


def _parts(segment: str) -> list[str]:
    """The ``[A-Za-z0-9_-]`` runs of a path segment, a file extension left out."""
    if "%" in segment:
        segment = _ESCAPE.sub(" ", segment)
    return _PART.findall(_EXTENSION.sub("", segment))


def path_tokens(path: str) -> list[tuple[int, int, str]]:
    """(segment index, part index, part) of every random-looking part of a
    path (``/s/AbC9xY2kQ/p`` -> ``[(1, 0, "AbC9xY2kQ")]``)."""
    return [(i, j, p) for i, seg in enumerate(path.split("/")[1:])
            for j, p in enumerate(_parts(seg)) if looks_random(p)]


def _mask_digits(text: str) -> str:
    return _DIGITS.sub("0", text)


@dataclass(frozen=True, slots=True)
class PathEvidence:
    """What the chain of links leading to a URL looked like (see module doc)."""

    descent_run: int = 0
    numbered_run: int = 0
    token_run: int = 0

    @classmethod
    def from_meta(cls, meta: Mapping[str, object]) -> PathEvidence:
        """Read from ``request.meta``; anything but a non-negative int is 0
        (meta comes back from Redis as JSON, possibly written by older code)."""
        values = [meta.get(key) for key in META_KEYS]
        return cls(*(v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0 for v in values))

    def to_meta(self) -> dict[str, int]:
        """The non-zero counts: a queued request costs Redis memory."""
        values = (self.descent_run, self.numbered_run, self.token_run)
        return {key: v for key, v in zip(META_KEYS, values) if v}


@dataclass(frozen=True, slots=True)
class TrapLimits:
    """The settings of the path rules; 0 turns a rule off."""

    max_descent_run: int = 20  # a real tree reached one level a link: its own depth at most
    max_numbered_run: int = 8  # year/month/day/post is 4; a version or a chapter adds one
    max_token_run: int = 10
    max_token_variants: int = 10
    hosts_tracked: int = 4096

    def __post_init__(self) -> None:
        for name in ("max_descent_run", "max_numbered_run", "max_token_run", "max_token_variants"):
            value = getattr(self, name)
            if value < 0:
                raise ValueError(f"TRAP_{name.upper()} ({value!r}) must be 0 (off) or more.")
        if self.hosts_tracked < 1:
            raise ValueError(f"TRAP_HOSTS_TRACKED ({self.hosts_tracked!r}) must be 1 or more.")

    @property
    def enabled(self) -> bool:
        return bool(self.max_descent_run or self.max_numbered_run or self.max_token_run
                    or self.max_token_variants)


@dataclass(frozen=True, slots=True)
class Verdict:
    """``reason`` is None for a link to follow, with ``evidence`` to carry on."""

    evidence: PathEvidence
    reason: str | None = None


class LinkParent:
    """A page whose links are judged: its path parsed once for all its links."""

    __slots__ = ("evidence", "masked", "segments", "tokens")

    def __init__(self, url: str, evidence: PathEvidence) -> None:
        path = urlsplit(url).path or "/"
        self.segments = path.split("/")[1:]
        self.tokens = path_tokens(path)
        self.masked = {_mask_digits(t) for _, _, t in self.tokens}
        self.evidence = evidence

    def continued_tokens(self, segments: list[str]) -> list[tuple[int, int, str]]:
        """Parts of a linked path that stand where this page had a token, under
        the same path, with the token's length: a generator's next token even
        when this one happens to look like a word (``kqxvzmtb``)."""
        out = []
        for i, j, token in self.tokens:
            if i < len(segments) and segments[:i] == self.segments[:i] and segments[i] != self.segments[i]:
                parts = _parts(segments[i])
                if j < len(parts) and len(parts[j]) == len(token) and not parts[j].isdigit():
                    out.append((i, j, parts[j]))
        return out


class _Places:
    """Per host, how many followed links brought a fresh token to each place.

    Bounded: ``hosts`` hosts (least recently used forgotten first), each with
    at most ``PLACES_PER_HOST`` places, keyed by the hash of the place (an int,
    whatever the length of the path)."""

    def __init__(self, hosts: int) -> None:
        self.hosts = hosts
        self._hosts: OrderedDict[str, OrderedDict[int, int]] = OrderedDict()

    def count(self, host: str, place: str) -> int:
        places = self._hosts.get(host)
        if places is None:
            return 0
        self._hosts.move_to_end(host)
        return places.get(hash(place), 0)

    def add(self, host: str, place: str) -> None:
        places = self._hosts.get(host)
        if places is None:
            places = self._hosts[host] = OrderedDict()
            if len(self._hosts) > self.hosts:
                self._hosts.popitem(last=False)
        self._hosts.move_to_end(host)
        key = hash(place)
        places[key] = places.get(key, 0) + 1
        places.move_to_end(key)
        if len(places) > PLACES_PER_HOST:
            places.popitem(last=False)

    def __len__(self) -> int:
        return len(self._hosts)


def _place(segments: list[str], tokens: list[tuple[int, int, str]], index: int) -> str:
    """The path up to a token's segment, tokens and numbers masked (hashed,
    never shown, so parts are joined as they come): ``/s/AbC9xY2kQ/docs/`` ->
    ``/s/*``, ``/u/12/s/AbC9xY2kQ/`` -> ``/u/0/s/*``."""
    masked = {(i, j) for i, j, _ in tokens}
    return _mask_digits("/" + "/".join(
        "|".join("*" if (i, j) in masked else part for j, part in enumerate(_parts(segment)))
        for i, segment in enumerate(segments[:index + 1])))


class PathTrapGuard:
    """Judges followed links by their chain evidence (see the module doc).

    ``page(url, meta)`` parses a page once; ``judge(page, url, host)`` then
    tells, for each link found on it, whether to drop it and why, or the
    evidence the link carries on."""

    def __init__(self, limits: TrapLimits | None = None) -> None:
        self.limits = limits or TrapLimits()
        self._places = _Places(self.limits.hosts_tracked)

    @staticmethod
    def page(url: str, meta: Mapping[str, object]) -> LinkParent:
        return LinkParent(url, PathEvidence.from_meta(meta))

    def judge(self, page: LinkParent, url: str, host: str) -> Verdict:
        limits = self.limits
        path = urlsplit(url).path or "/"
        segments = path.split("/")[1:]
        tokens = path_tokens(path)
        if page.tokens:
            known = {(i, j) for i, j, _ in tokens}
            tokens += [t for t in page.continued_tokens(segments) if t[:2] not in known]
        fresh = [t for t in tokens if _mask_digits(t[2]) not in page.masked]
        evidence = self._evidence(page, segments, tokens, fresh)
        # Only tokens naming a directory count at their place: a session id
        # stands before the path it opens (/s/<id>/), while the ids of a
        # site's own pages (dir_<md5>.html, /commit/<sha>) are leaves.
        folders = [t[0] for t in fresh if t[0] < len(segments) - 1]
        place = _place(segments, tokens, min(folders)) if folders else None
        reason = None
        if (place is not None and limits.max_token_variants and evidence.token_run >= 2
                and self._places.count(host, place) >= limits.max_token_variants):
            reason = "token_variants"
        elif limits.max_token_run and evidence.token_run > limits.max_token_run:
            reason = "token_run"
        elif limits.max_numbered_run and evidence.numbered_run > limits.max_numbered_run:
            reason = "numbered_run"
        elif limits.max_descent_run and evidence.descent_run > limits.max_descent_run:
            reason = "descent_run"
        elif place is not None and limits.max_token_variants:
            self._places.add(host, place)
        return Verdict(evidence, reason)

    @staticmethod
    def _evidence(page: LinkParent, segments: list[str], tokens: list[tuple[int, int, str]],
                  fresh: list[tuple[int, int, str]]) -> PathEvidence:
        parent = page.evidence
        token_run = parent.token_run + 1 if fresh else 0
        depth, parent_depth = len(segments), len(page.segments)
        if depth < parent_depth:
            return PathEvidence(0, 0, token_run)
        if depth == parent_depth:
            return PathEvidence(parent.descent_run, parent.numbered_run, token_run)
        common = 0
        for a, b in zip(segments, page.segments):
            if a != b:
                break
            common += 1
        token_levels = {i for i, _, _ in tokens}
        numbered = any(i in token_levels or any(c.isdigit() for c in _ESCAPE.sub("", segments[i]))
                       for i in range(common, depth))
        return PathEvidence(parent.descent_run + 1, parent.numbered_run + 1 if numbered else 0, token_run)
