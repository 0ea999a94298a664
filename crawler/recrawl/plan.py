"""When to fetch a page again: change-rate estimates and revisit intervals
under a fetch budget. Pure logic, no Scrapy, no Redis. A page's evidence is
``crawler.recrawl.change.ChangeEvidence``.

What a page's evidence leaves open, the crawl's other pages tell: the rate
is believed to be one of ``RATES`` (log-spaced from one change in five
years to one in five minutes), a priori with the shares the crawl's own
pages show (``RateModel.fit``: the maximum-likelihood mixture over a sample
of stored pages' evidence, by EM; "empirical Bayes"), a posteriori with each
page's own likelihood (``RateModel.posterior``). This settles the two cases
a point estimate cannot: a page never seen to change (its maximum-likelihood
rate, 0, would leave it at the longest interval after a day of watching; on
a web where most pages never change, that is where it belongs, on one where
few do, it is not) and a page that changed at every visit (its likelihood
has no maximum, only a lower bound: whether it is worth following depends on
how fast pages that outrun their visits usually are).

The interval follows from the posterior. With a fetch budget, Cho and
Garcia-Molina's freshness-optimal allocation ("Effective page refresh
policies for web crawlers", ACM TODS 28(4), 2003): a page of rate ``l``
visited every ``I`` seconds is fresh ``F = (1 - exp(-l I)) / (l I)`` of the
time; maximising the summed expected freshness under a budget of fetches
gives each page the interval where the gain of one more visit a second,
``E[g(l I) / l]`` with ``g(x) = 1 - (1 + x) exp(-x)``, equals the
multiplier ``mu`` (``multiplier_for_budget``); a page whose gain stays below
``mu`` at every interval is not worth visiting (it gets the longest
interval). Expected freshness is concave in the visit rate, so there is one
such interval. Without a budget, a page is visited when it has changed with
even odds. Every interval is clamped to ``[min_interval, max_interval]``; a
page of which no interval has been seen gets ``default_interval``.
``interval_for`` is the same rule for a rate known exactly.

Settings (read by ``crawler/pipelines.py``): ``REVISIT_BUDGET`` (fetches a
second spread over the crawl; 0: none), ``REVISIT_SAMPLE`` and
``REVISIT_PLAN_INTERVAL`` (the stored pages ``Plan.make`` fits the prior
to, and how often), with the ``Policy`` bounds of ``crawler.recrawl.change``. No
stats.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from crawler.recrawl.change import BINS_PER_OCTAVE, ChangeEvidence, Policy

__all__ = ["NUTCH_DEC_RATE", "NUTCH_INC_RATE", "RATES", "Plan", "Posterior", "RateModel", "importance_weight",
           "interval_for", "loglik",
           "multiplier_for_budget", "multiplier_for_rates", "nutch_interval"]

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


def _spend(fetches: Callable[[float], float], budget_per_second: float) -> float:
    """The multiplier at which ``fetches`` (falling as it grows) meets the
    budget; outside what the bounds allow, the nearest feasible one."""
    lo, hi = 1e-15, 1e15
    if fetches(lo) <= budget_per_second:
        return lo
    if fetches(hi) >= budget_per_second:
        return hi
    return _bisect(lambda mu: fetches(mu) > budget_per_second, lo, hi)


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


def multiplier_for_rates(rates: Sequence[float | None], budget_per_second: float, policy: Policy) -> float:
    """``multiplier_for_budget`` for rates known exactly (``interval_for``):
    the ``mu`` at which the pages' visits add up to ``budget_per_second``;
    pages of unknown rate count at the default interval. Outside what the
    bounds allow, the nearest feasible ``mu``."""
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

    return _spend(fetches, budget_per_second)


# The rates a page's change rate is believed to be among: log-spaced from
# one change in five years (slower is "never" within any interval allowed)
# to one in five minutes (faster is "always"), 14.7 % apart.
RATES = np.exp(np.linspace(math.log(1 / (5 * 365 * 86400.0)), math.log(1 / 300.0), 96))
# Intervals the decision is read off, between a policy's bounds (2.6 % apart):
# the interval is interpolated between two of them.
_STEPS = 256
# A prior never rules a rate out: each keeps this share of an even spread.
_FLOOR = 1e-3


def loglik(evidence: ChangeEvidence) -> np.ndarray | None:
    """The log-likelihood of each of ``RATES`` given the evidence (module
    docstring), or None when no interval between two visits that saw the
    content has been observed."""
    if evidence.count <= 0:
        return None
    ll = -RATES * evidence.unchanged
    if evidence.changed:
        lengths = np.array([2.0 ** (b / BINS_PER_OCTAVE) for b, _ in evidence.changed])
        weights = np.array([w for _, w in evidence.changed])
        ll = ll + weights @ np.log(-np.expm1(-np.outer(lengths, RATES)))
    return np.asarray(ll, dtype=float)



@lru_cache(maxsize=8)
def _tables(min_interval: float, max_interval: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the intervals between the bounds (log-spaced) and each of RATES:
    the gain of one more visit a second, ``g(l I) / l``, and the chance of
    at least one change, ``1 - exp(-l I)``."""
    steps = _STEPS if max_interval > min_interval else 1
    intervals = np.exp(np.linspace(math.log(min_interval), math.log(max_interval), steps))
    intervals[0], intervals[-1] = min_interval, max_interval  # the bounds exactly, not exp(log(...))
    x = np.outer(intervals, RATES)
    small = x < 1e-4  # g(x) = x^2/2 - x^3/3 + ..., where the closed form cancels out
    g = np.where(small, x * x / 2 - x ** 3 / 3, -np.expm1(-x) - x * np.exp(-np.minimum(x, 700.0)))
    gains, changed = g / RATES[None, :], -np.expm1(-x)
    for table in (intervals, gains, changed):
        table.setflags(write=False)  # shared by every caller (cached)
    return intervals, gains, changed


def _crossing(curve: np.ndarray, level: float, intervals: np.ndarray) -> float:
    """The interval where ``curve`` (rising with the interval) reaches
    ``level``, interpolated on a log scale, within the table's bounds."""
    if curve[-1] < level:
        return float(intervals[-1])
    j = int(np.searchsorted(curve, level))
    if j == 0:
        return float(intervals[0])
    lo, hi = curve[j - 1], curve[j]
    f = (level - lo) / (hi - lo) if hi > lo else 0.0
    return float(math.exp(math.log(intervals[j - 1]) + f * math.log(intervals[j] / intervals[j - 1])))


class Posterior:
    """What is believed of one page's change rate: a weight for each of RATES."""

    __slots__ = ("weights",)

    def __init__(self, weights: np.ndarray) -> None:
        self.weights = weights

    @property
    def rate(self) -> float:
        """The median rate (changes a second), interpolated on a log scale:
        what ``change_rate`` stores."""
        return _crossing(np.cumsum(self.weights), 0.5, RATES)

    def interval(self, policy: Policy, mu: float | None = None) -> float:
        """Seconds until the next visit (module docstring)."""
        intervals, g, changed = _tables(policy.min_interval, policy.max_interval)
        if mu is None:
            return _crossing(changed @ self.weights, 0.5, intervals)
        if mu <= 0:
            return policy.min_interval
        return _crossing(g @ self.weights, mu, intervals)


class RateModel:
    """The prior over RATES: how the crawl's pages' change rates are spread."""

    __slots__ = ("log_prior", "prior")

    def __init__(self, prior: Sequence[float] | np.ndarray | None = None) -> None:
        p = np.full(len(RATES), 1.0) if prior is None else np.asarray(prior, dtype=float)
        if p.shape != RATES.shape or not np.all(np.isfinite(p)) or np.any(p < 0) or p.sum() <= 0:
            raise ValueError(f"a prior needs {len(RATES)} finite weights >= 0, not all 0")
        p = p / p.sum()
        self.prior = (1 - _FLOOR) * p + _FLOOR / len(RATES)
        self.log_prior = np.log(self.prior)

    def posterior(self, evidence: ChangeEvidence) -> Posterior | None:
        """The page's posterior, None when its evidence holds no interval yet."""
        ll = loglik(evidence)
        return None if ll is None else self._posterior(ll)

    def _posterior(self, ll: np.ndarray) -> Posterior:
        a = ll + self.log_prior
        w = np.exp(a - a.max())
        return Posterior(w / w.sum())

    def fit(self, logliks: Iterable[np.ndarray | None], iterations: int = 20) -> RateModel:
        """The prior that best explains these pages' evidence (their
        log-likelihoods, ``loglik``): EM for the mixture weights, starting
        from this one. With no evidence, this one."""
        rows = [ll for ll in logliks if ll is not None]
        if not rows:
            return self
        ll = np.vstack(rows)
        ll = ll - ll.max(axis=1, keepdims=True)
        lik = np.exp(ll)  # n x K, each row's best rate at 1
        prior = self.prior
        for _ in range(iterations):
            joint = lik * prior[None, :]
            joint /= joint.sum(axis=1, keepdims=True)
            prior = joint.mean(axis=0)
        return RateModel(prior)


def multiplier_for_budget(posteriors: Sequence[Posterior | None], budget_per_second: float, policy: Policy,
                          weight: float = 1.0, importance: Sequence[float] | None = None) -> float:
    """The ``mu`` at which the pages' visits (``1 / Posterior.interval``)
    add up to ``budget_per_second``, each of ``posteriors`` standing for
    ``weight`` pages (a sample of a larger crawl); a page of no posterior yet
    counts at the default interval. With ``importance`` (a weight a page,
    ``importance_weight``), a page's gain counts that many times: its
    interval is where its gain reaches ``mu / importance``, so that
    freshness weighted by importance is what the budget maximises. Outside
    what the bounds allow, the nearest feasible ``mu``."""
    intervals, g, _ = _tables(policy.min_interval, policy.max_interval)
    known = [p.weights for p in posteriors if p is not None]
    w = (np.array([x for x, p in zip(importance, posteriors) if p is not None], dtype=float)[:, None]
         if importance is not None and known else 1.0)
    unknown = (len(posteriors) - len(known)) / policy.default_interval
    gains = (np.vstack(known) @ g.T) * w if known else np.zeros((0, len(intervals)))  # n x steps
    log_i = np.log(intervals)

    def fetches(mu: float) -> float:
        if not known:
            return weight * unknown
        reach = gains >= mu
        j = np.clip(reach.argmax(axis=1), 1, len(intervals) - 1) if len(intervals) > 1 else np.zeros(len(gains), int)
        rows = np.arange(len(gains))
        lo, hi = gains[rows, j - 1], gains[rows, j]
        span = np.where(hi > lo, hi - lo, 1.0)
        f = np.clip(np.where(hi > lo, (mu - lo) / span, 0.0), 0.0, 1.0)
        li = log_i[j - 1] + f * (log_i[j] - log_i[j - 1]) if len(intervals) > 1 else log_i[j]
        li = np.where(reach[:, 0], log_i[0], li)
        li = np.where(reach[:, -1], li, log_i[-1])
        return float(weight * (np.exp(-li).sum() + unknown))

    return _spend(fetches, budget_per_second)


@dataclass(frozen=True)
class Plan:
    """How the re-crawl schedules pages for a while: the prior it believes
    and the budget's multiplier (None: no budget)."""

    model: RateModel
    mu: float | None = None

    def schedule(self, evidence: ChangeEvidence, policy: Policy,
                 importance: float = 1.0) -> tuple[float | None, float]:
        """(change_rate, interval) of a page with this evidence: the median
        rate (None: not known yet) and the seconds until its next visit;
        under a budget, a page of ``importance`` (``importance_weight``)
        counts that many times."""
        posterior = self.model.posterior(evidence)
        if posterior is None:
            return None, policy.default_interval
        mu = self.mu / max(importance, 1e-9) if self.mu is not None else None
        return posterior.rate, posterior.interval(policy, mu)

    @staticmethod
    def make(evidence: Iterable[ChangeEvidence], policy: Policy, budget_per_second: float | None = None,
             total: int | None = None, previous: RateModel | None = None,
             importance: Sequence[float] | None = None) -> Plan:
        """The plan for a crawl of ``total`` pages of which ``evidence`` is
        a sample (all of them when ``total`` is None): the prior fitted to
        the sample, and the multiplier that spends the budget on all
        (``importance``: the sample's pages' weights, in the same order)."""
        logliks = [loglik(e) for e in evidence]
        model = (previous or RateModel()).fit(logliks)
        if not budget_per_second or budget_per_second <= 0:
            return Plan(model)
        if all(ll is None for ll in logliks):
            # No rate known yet (a crawl's first re-crawl): no multiplier can
            # be told from the budget, so none is made up; the budget is
            # spread once the sample holds evidence.
            return Plan(model)
        weight = (total if total is not None else len(logliks)) / len(logliks)
        posteriors = [None if ll is None else model._posterior(ll) for ll in logliks]
        return Plan(model, multiplier_for_budget(posteriors, budget_per_second, policy, weight, importance))


IMPORTANCE_MIX = 0.2  # importance_weight: what an in-link (or a mirror's copy) adds to a page's weight of 1


def importance_weight(indegree: object, mirror_degree: object) -> float:
    """A page's weight in the re-crawl's budget: 1 + 0.2 (``IMPORTANCE_MIX``)
    times its in-links and its mirrors' copies of it (the textbook:
    in-degree and mirror degree, computed for every stored page before a
    re-collection, decide what is revisited first). The budget then
    maximises plain freshness plus 0.2 times freshness weighted by
    in-links: a mix of the two figures bench/bench_revisit.py --importance
    reports (freshness, and freshness weighted by 1 + in-degree), which,
    both being concave in the visit rates, traces the best trade between
    them. Values that are not counts read as 0."""
    def count(x: object) -> float:
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 else 0.0

    return 1.0 + IMPORTANCE_MIX * (count(indegree) + count(mirror_degree))


# Nutch's AdaptiveFetchSchedule (db.fetch.schedule.adaptive.inc_rate and
# dec_rate), the baseline bench/bench_revisit.py compares with.
NUTCH_INC_RATE = 0.4
NUTCH_DEC_RATE = 0.2


def nutch_interval(previous: float, changed: bool, policy: Policy) -> float:
    """Nutch's rule: the interval shrinks 20 % after a change, grows 40 % otherwise."""
    factor = 1 - NUTCH_DEC_RATE if changed else 1 + NUTCH_INC_RATE
    return policy.clamp(previous * factor)
