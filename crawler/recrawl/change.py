"""What a page's visits show of how often it changes: change detection, the
visit history and the evidence of its change rate. Pure logic, no Scrapy,
no Redis. When to fetch it again follows in ``crawler.recrawl.plan``.

A page's visits form its history (``Visit``: when, what was found, how far
the SimHash moved). A visit only tells whether the page changed at least
once since the visit before (incomplete observation). Taking a page's
changes as a Poisson process of unknown rate ``r``, an interval ``t`` that
saw a change has likelihood ``1 - exp(-r t)``, one that saw none
``exp(-r t)`` (Cho and Garcia-Molina, "Estimating frequency of change", ACM
TOIT 3(3), 2003). So all the visits have shown fits in a small record,
``ChangeEvidence``: the seconds watched without a change and the intervals that
saw one, by length; older intervals fade past a cap, so the record keeps
far more than the bounded history without growing (measured: 32 visits of
history alone cost 3 points of fetch savings in bench/bench_revisit.py,
where pages near the budget's limit need many visits to tell apart).

Settings (read by ``crawler/pipelines.py``, which builds the ``Policy``):
``REVISIT_MIN_INTERVAL``, ``REVISIT_MAX_INTERVAL``,
``REVISIT_DEFAULT_INTERVAL`` (the interval's bounds and default),
``REVISIT_HISTORY`` (visits kept), ``REVISIT_EVIDENCE`` (intervals the
evidence holds before older ones fade), ``SIMHASH_MAX_DISTANCE`` (bits up
to which a change is "trivial"). No stats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["BINS_PER_OCTAVE", "CHANGEFREQ_SECONDS", "OUTCOMES", "ChangeEvidence", "Policy", "Visit", "append", "compare",
           "observe", "sitemap_interval"]

# What a visit found. "new": the first fetch (no evidence of change either
# way); "unchanged", "trivial" (reformatted: SimHash within max_distance)
# and "changed" observe the content; "gone" (404/410), "moved" (301/308)
# and "error" (timeouts, 5xx) do not.
OUTCOMES = ("new", "unchanged", "trivial", "changed", "gone", "moved", "error")
_OBSERVED = frozenset({"new", "unchanged", "trivial", "changed"})


def _number(x: object) -> bool:
    """A finite number from 0 to 1e12 (an integer of 400 digits, which
    math.isfinite cannot take, is not one)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    return 0 <= x < 1e12 and (isinstance(x, int) or math.isfinite(x))


@dataclass(frozen=True)
class Visit:
    at: float  # unix seconds of the fetch
    outcome: str  # one of OUTCOMES
    distance: int | None = None  # SimHash Hamming distance to the version before

    def to_json(self) -> list[Any]:
        return [round(self.at, 3), self.outcome, self.distance]

    @staticmethod
    def from_json(value: object) -> Visit | None:
        """A stored history entry, or None when it is not one (stores can be
        edited by anyone: a bad entry is skipped, never trusted)."""
        if not isinstance(value, (list, tuple)) or len(value) != 3:
            return None
        at, outcome, distance = value
        if not _number(at):
            return None
        if outcome not in OUTCOMES:
            return None
        if distance is not None and (isinstance(distance, bool) or not isinstance(distance, int)
                                     or not 0 <= distance <= 64):
            return None
        return Visit(float(at), str(outcome), distance)


@dataclass(frozen=True)
class Policy:
    min_interval: float = 3600.0
    max_interval: float = 30 * 86400.0
    default_interval: float = 86400.0
    history: int = 32  # visits kept
    evidence: float = 256.0  # intervals the evidence holds; older ones fade
    max_distance: int = 3  # SimHash bits up to which a change is "trivial"

    def clamp(self, seconds: float) -> float:
        return min(self.max_interval, max(self.min_interval, seconds))


# How often a page of each sitemap <changefreq> changes, in seconds ("always":
# as often as the re-crawl may visit; "never": archived, as seldom as it may).
CHANGEFREQ_SECONDS = {"always": 0.0, "hourly": 3600.0, "daily": 86400.0, "weekly": 7 * 86400.0,
                      "monthly": 30 * 86400.0, "yearly": 365 * 86400.0, "never": math.inf}


def sitemap_interval(changefreq: str | None, lastmod: float | None, fetched_at: float | None,
                     policy: Policy = Policy()) -> float | None:
    """The first revisit interval of a page a sitemap lists, before any
    visit has shown how often it changes (``crawler/sitemaps/crawl.py``): its
    ``changefreq``'s period; else a tenth of the time since its ``lastmod``
    at the fetch (the heuristic HTTP caches use, RFC 9111 4.2.2); clamped to
    the policy's bounds. None when the sitemap says neither."""
    if changefreq in CHANGEFREQ_SECONDS:
        return policy.clamp(CHANGEFREQ_SECONDS[changefreq])
    if lastmod is not None and fetched_at is not None and lastmod <= fetched_at:
        return policy.clamp(0.1 * (fetched_at - lastmod))
    return None


def compare(old_simhash: int | None, new_simhash: int | None, old_hash: str | None, new_hash: str | None,
            max_distance: int = 3) -> tuple[str, int | None]:
    """(outcome, distance) of a version against the one stored: "unchanged"
    (same content hash), "trivial" (SimHashes, unsigned 64-bit, within
    ``max_distance`` bits) or "changed"."""
    distance = None
    if old_simhash is not None and new_simhash is not None:
        distance = bin((old_simhash ^ new_simhash) & 0xFFFF_FFFF_FFFF_FFFF).count("1")
    if old_hash is not None and old_hash == new_hash:
        return "unchanged", distance if distance is not None else None
    if distance is not None and distance <= max_distance:
        return "trivial", distance
    return "changed", distance


def append(history: Sequence[Visit], visit: Visit, policy: Policy) -> list[Visit]:
    """``history`` with ``visit`` last, the oldest dropped past ``policy.history``."""
    out = [*history, visit]
    return out[-max(2, policy.history):]


def _intervals(history: Sequence[Visit]) -> tuple[list[float], list[float]]:
    """Intervals between successive visits that saw the content, split by
    whether the later one found a change ("trivial" counts as none)."""
    changed: list[float] = []
    unchanged: list[float] = []
    last: float | None = None
    for v in sorted(history, key=lambda v: v.at):
        if v.outcome not in _OBSERVED:
            continue
        if last is not None and v.outcome != "new":
            t = v.at - last
            if t > 0:
                (changed if v.outcome == "changed" else unchanged).append(t)
        last = v.at
    return changed, unchanged


# Changed intervals are kept by length, 16 classes an octave (within 2.2 %).
BINS_PER_OCTAVE = 16
_MAX_BINS = 256  # distinct lengths kept per page (a stored record is untrusted)


@dataclass(frozen=True)
class ChangeEvidence:
    """All a page's visits have shown of its change rate, in bounded space:
    the seconds watched without a change seen (``unchanged``, the sum of the
    intervals that saw none: all the likelihood needs of them), the
    intervals that saw one by length class (``changed``: class -> weight,
    class ``b`` standing for ``2 ** (b / 16)`` seconds) and their number
    (``count``). Where the number passes a cap, every part is scaled down
    to it, so old visits fade (a window of about ``cap`` intervals) and the
    record stays small (typically under 200 bytes, at most 256 length
    classes), however long the page is watched; the visit
    history itself keeps only its last ``REVISIT_HISTORY`` entries."""

    unchanged: float = 0.0
    changed: tuple[tuple[int, float], ...] = ()
    count: float = 0.0

    def add(self, seconds: float, changed: bool, cap: float) -> ChangeEvidence:
        """With one more interval between two visits that saw the content."""
        if not (seconds > 0 and math.isfinite(seconds)):
            return self
        bins = dict(self.changed)
        unchanged = self.unchanged
        if changed:
            b = round(BINS_PER_OCTAVE * math.log2(seconds))
            bins[b] = bins.get(b, 0.0) + 1.0
        else:
            unchanged += seconds
        count = self.count + 1.0
        if count > cap:
            k = cap / count
            bins = {b: w * k for b, w in bins.items()}
            unchanged, count = unchanged * k, cap
        kept = tuple(sorted((b, w) for b, w in bins.items() if w > 1e-6))
        return ChangeEvidence(unchanged, kept[-_MAX_BINS:], count)

    @staticmethod
    def of(history: Sequence[Visit], cap: float = math.inf) -> ChangeEvidence:
        """The evidence of a visit history (for pages stored before evidence
        was kept)."""
        changed, unchanged = _intervals(history)
        e = ChangeEvidence()
        for t in changed:
            e = e.add(t, True, cap)
        for t in unchanged:
            e = e.add(t, False, cap)
        return e

    def to_json(self) -> dict[str, Any]:
        return {"u": round(self.unchanged, 3), "c": [[b, round(w, 6)] for b, w in self.changed],
                "n": round(self.count, 6)}

    @staticmethod
    def from_json(value: object) -> ChangeEvidence | None:
        """A stored record, or None when it is not one (stores can be edited
        by anyone: a bad record is refused whole, never trusted)."""
        if not isinstance(value, dict) or set(value) != {"u", "c", "n"}:
            return None
        u, c, n = value["u"], value["c"], value["n"]
        if not (_number(u) and _number(n)) or not isinstance(c, list) or len(c) > _MAX_BINS:
            return None
        bins = []
        for item in c:
            if (not isinstance(item, list) or len(item) != 2 or isinstance(item[0], bool)
                    or not isinstance(item[0], int) or not -1024 <= item[0] <= 1024 or not _number(item[1])):
                return None
            bins.append((item[0], float(item[1])))
        return ChangeEvidence(float(u), tuple(sorted(bins)), float(n))


def observe(evidence: ChangeEvidence, history: Sequence[Visit], visit: Visit, cap: float) -> ChangeEvidence:
    """The evidence after ``visit``, made after ``history`` (which does not
    hold it yet): one more interval when the visit saw the content and an
    earlier one in the history did."""
    if visit.outcome not in _OBSERVED or visit.outcome == "new":
        return evidence
    if any(v.at >= visit.at for v in history):
        return evidence  # a fetch older than one already counted (replayed late): its time is counted
    last = max((v.at for v in history if v.outcome in _OBSERVED), default=None)
    if last is None:
        return evidence
    return evidence.add(visit.at - last, visit.outcome == "changed", cap)

