"""When to fetch a page again: change detection, change-rate estimates and
revisit intervals. Pure logic, no Scrapy, no Redis.

A page's visits form its history (``Visit``: when, what was found, how far
the SimHash moved). A visit only tells whether the page changed at least
once since the visit before (incomplete observation), so the rate of a page
whose changes are a Poisson process is estimated as Cho and Garcia-Molina
do ("Estimating frequency of change", ACM TOIT 3(3), 2003): from the
intervals ``t`` between successive visits that saw the content, the
maximum-likelihood rate ``r`` solves

    sum over changed intervals of t / (exp(r t) - 1) = sum over unchanged intervals of t

(irregular intervals), with their bias-reduced estimator
``-log((n - X + 0.5) / (n + 0.5)) / mean(t)`` where every interval saw a
change (the likelihood has no finite maximum there) and, where none did,
``0.5 / T`` for ``T`` seconds watched (the mean under Jeffreys' prior: a
page not seen to change in a day is not yet known never to change; one not
seen to change in a year almost is).

The interval follows from the rate. With a fetch budget, the multiplier
``mu`` of Cho and Garcia-Molina's freshness-optimal allocation ("Effective
page refresh policies for web crawlers", ACM TODS 28(4), 2003): a page of
rate ``l`` visited every ``I`` seconds is fresh ``F = (1 - exp(-l I)) /
(l I)`` of the time; maximising the summed freshness under a budget of
fetches gives each page the frequency ``f`` where ``dF/df = mu``, that is
``g(l / f) = mu l`` with ``g(x) = 1 - (1 + x) exp(-x)``; a page that
changes so often that ``mu l >= 1`` is not worth a visit (it gets the
longest interval). Without a budget, a page is visited when it has changed
with even odds: ``I = ln 2 / l``. Every interval is clamped to
``[min_interval, max_interval]``; a page whose rate is not known yet gets
``default_interval``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["OUTCOMES", "Policy", "Visit", "append", "compare", "estimate_rate", "interval_for",
           "multiplier_for_budget", "nutch_interval"]

# What a visit found. "new": the first fetch (no evidence of change either
# way); "unchanged", "trivial" (reformatted: SimHash within max_distance)
# and "changed" observe the content; "gone" (404/410), "moved" (301/308)
# and "error" (timeouts, 5xx) do not.
OUTCOMES = ("new", "unchanged", "trivial", "changed", "gone", "moved", "error")
_OBSERVED = frozenset({"new", "unchanged", "trivial", "changed"})


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
        if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at) or at < 0:
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
    max_distance: int = 3  # SimHash bits up to which a change is "trivial"

    def clamp(self, seconds: float) -> float:
        return min(self.max_interval, max(self.min_interval, seconds))


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


def estimate_rate(history: Sequence[Visit]) -> float | None:
    """Changes a second (Poisson), or None with no interval observed yet."""
    changed, unchanged = _intervals(history)
    n = len(changed) + len(unchanged)
    if n == 0:
        return None
    if not changed:
        # Never seen to change in ``T`` seconds of watching: the likelihood
        # is ``exp(-r T)`` as under continuous observation, whose maximum
        # (0) would leave the page at the longest interval however short
        # the watch. The mean under Jeffreys' prior, ``0.5 / T``, instead
        # falls as the watch grows.
        return 0.5 / sum(unchanged)
    if not unchanged:
        mean = sum(changed) / n
        return -math.log(0.5 / (n + 0.5)) / mean
    target = sum(unchanged)

    def excess(r: float) -> float:  # decreasing in r
        return sum(t / math.expm1(min(r * t, 700.0)) for t in changed) - target

    lo, hi = 1e-12, 1.0
    while excess(hi) > 0 and hi < 1e6:
        hi *= 10
    while excess(lo) < 0 and lo > 1e-300:
        lo /= 10
    return _bisect(lambda r: excess(r) > 0, lo, hi)


def _bisect(below: Callable[[float], bool], lo: float, hi: float) -> float:
    """The point between ``lo`` and ``hi`` (positive) where ``below`` turns
    from true to false, halving the ratio (a geometric bisection)."""
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if below(mid):
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    return math.sqrt(lo * hi)


def _g(x: float) -> float:
    return -math.expm1(-x) - x * math.exp(-x)


def _g_inverse(y: float) -> float:
    """x with g(x) = y, for 0 < y < 1."""
    lo, hi = 0.0, 1.0
    while _g(hi) < y:
        hi *= 2
        if hi > 1e4:
            return hi
    for _ in range(100):
        mid = (lo + hi) / 2
        if _g(mid) < y:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def interval_for(rate: float | None, policy: Policy, mu: float | None = None) -> float:
    """Seconds until the next visit (module docstring)."""
    if rate is None or not math.isfinite(rate):
        return policy.default_interval
    if rate <= 0:
        return policy.max_interval
    if mu is None:
        return policy.clamp(math.log(2) / rate)
    if mu <= 0:
        return policy.min_interval
    y = mu * rate
    if y >= 1:
        return policy.max_interval  # changes too fast for the budget
    return policy.clamp(_g_inverse(y) / rate)


def multiplier_for_budget(rates: Sequence[float | None], budget_per_second: float, policy: Policy) -> float:
    """The ``mu`` at which the pages' visits (``1 / interval_for``) add up
    to ``budget_per_second``; pages of unknown rate count at the default
    interval. Outside what the bounds allow, the nearest feasible ``mu``."""
    unknown = 0
    # Rates alike to 1 % share one term: a million pages cost a few hundred.
    groups: dict[float, int] = {}
    for r in rates:
        if r is None or not math.isfinite(r):
            unknown += 1
        else:
            key = 0.0 if r <= 0 else float(f"{r:.2e}")
            groups[key] = groups.get(key, 0) + 1

    def fetches(mu: float) -> float:
        return unknown / policy.default_interval + sum(n / interval_for(r, policy, mu) for r, n in groups.items())

    lo, hi = 1e-15, 1e15
    if fetches(lo) <= budget_per_second:
        return lo
    if fetches(hi) >= budget_per_second:
        return hi
    return _bisect(lambda mu: fetches(mu) > budget_per_second, lo, hi)


# Nutch's AdaptiveFetchSchedule (db.fetch.schedule.adaptive.inc_rate and
# dec_rate), the baseline bench/bench_revisit.py compares with.
NUTCH_INC_RATE = 0.4
NUTCH_DEC_RATE = 0.2


def nutch_interval(previous: float, changed: bool, policy: Policy) -> float:
    """Nutch's rule: the interval shrinks 20 % after a change, grows 40 % otherwise."""
    factor = 1 - NUTCH_DEC_RATE if changed else 1 + NUTCH_INC_RATE
    return policy.clamp(previous * factor)
