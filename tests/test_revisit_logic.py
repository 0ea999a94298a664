"""crawler/revisit.py: change detection, change-rate estimates, intervals."""

from __future__ import annotations

import bisect
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.revisit import (
    Policy,
    Visit,
    append,
    compare,
    estimate_rate,
    interval_for,
    multiplier_for_budget,
    nutch_interval,
)

POLICY = Policy(min_interval=3600, max_interval=30 * 86400, default_interval=86400)


def poisson_history(rate: float, visits: list[float], seed: int) -> list[Visit]:
    """Visits at the given times of a page whose changes are Poisson(rate):
    each visit sees only whether at least one change happened since the last."""
    rng = random.Random(seed)
    changes, t = [], 0.0
    while t < visits[-1]:
        t += rng.expovariate(rate)
        changes.append(t)
    history = [Visit(visits[0], "new")]
    for before, at in zip(visits, visits[1:]):
        n = bisect.bisect(changes, at) - bisect.bisect(changes, before)
        history.append(Visit(at, "changed" if n else "unchanged"))
    return history


@pytest.mark.parametrize("period", [1800.0, 3600.0, 86400.0])
def test_the_estimate_recovers_a_poisson_rate_from_regular_visits(period):
    visits = [i * 3600.0 for i in range(20001)]  # hourly, 20,000 intervals
    rate = estimate_rate(poisson_history(1 / period, visits, seed=7))
    assert rate is not None
    # 20,000 observations (833 changes at the slowest): within 10 % of the truth.
    assert rate * period == pytest.approx(1.0, rel=0.10)


def test_the_estimate_recovers_a_rate_from_irregular_visits():
    rng = random.Random(3)
    visits = [0.0]
    for _ in range(3000):
        visits.append(visits[-1] + rng.uniform(600, 12 * 3600))
    rate = estimate_rate(poisson_history(1 / 7200, visits, seed=11))
    assert rate is not None and rate * 7200 == pytest.approx(1.0, rel=0.10)


def test_the_bias_reduced_estimator_where_every_visit_saw_a_change():
    history = [Visit(0, "new"), Visit(100, "changed"), Visit(200, "changed"), Visit(300, "changed")]
    # n = X = 3, mean interval 100 s: -log(0.5 / 3.5) / 100
    assert estimate_rate(history) == pytest.approx(-math.log(0.5 / 3.5) / 100)


def test_no_interval_no_estimate_and_no_change_half_a_change_in_the_time_watched():
    assert estimate_rate([]) is None
    assert estimate_rate([Visit(5, "new")]) is None
    assert estimate_rate([Visit(0, "new"), Visit(10, "error"), Visit(20, "gone")]) is None
    # 300 s watched, no change: Jeffreys' posterior mean 0.5 / 300.
    assert estimate_rate([Visit(0, "new"), Visit(100, "unchanged"), Visit(300, "trivial")]) == pytest.approx(0.5 / 300)
    # The longer the watch, the lower the estimate, the longer the interval.
    year = [Visit(0, "new"), *(Visit(30 * 86400 * k, "unchanged") for k in range(1, 13))]
    assert estimate_rate(year) == pytest.approx(0.5 / (360 * 86400))
    assert interval_for(estimate_rate(year), POLICY) == POLICY.max_interval


def test_errors_are_not_evidence_and_the_interval_spans_them():
    # new at 0, an error at 50, a change seen at 100 and none at 200: the
    # changed interval is 100 s (0 -> 100), not 50.
    with_error = [Visit(0, "new"), Visit(50, "error"), Visit(100, "changed"), Visit(200, "unchanged")]
    without = [Visit(0, "new"), Visit(100, "changed"), Visit(200, "unchanged")]
    assert estimate_rate(with_error) == estimate_rate(without)
    # MLE: 100 / (exp(100 r) - 1) = 100  ->  r = ln 2 / 100
    assert estimate_rate(without) == pytest.approx(math.log(2) / 100, rel=1e-6)


def test_compare_outcomes():
    assert compare(0b1011, 0b1011, "h", "h") == ("unchanged", 0)
    assert compare(0, 0b111, "h", "g", max_distance=3) == ("trivial", 3)
    assert compare(0, 0b1111, "h", "g", max_distance=3) == ("changed", 4)
    assert compare(None, 5, "h", "g") == ("changed", None)
    assert compare(None, None, "h", "h") == ("unchanged", None)
    assert compare(-1 & 0xFFFF_FFFF_FFFF_FFFF, 0xFFFF_FFFF_FFFF_FFFE, "a", "b") == ("trivial", 1)


def test_history_is_bounded_newest_last():
    h: list[Visit] = []
    for i in range(40):
        h = append(h, Visit(float(i), "unchanged"), Policy(history=32))
    assert len(h) == 32 and h[0].at == 8.0 and h[-1].at == 39.0


@pytest.mark.parametrize("raw", ["x", [1.0, "new"], [1.0, "new", None, 1], [float("nan"), "new", None],
                                 [float("inf"), "changed", 1], [-1, "new", None], [1.0, "rm -rf", None],
                                 [1.0, "changed", 65], [1.0, "changed", "3"], [True, "new", None], None])
def test_malformed_history_entries_are_refused(raw):
    assert Visit.from_json(raw) is None


def test_history_entries_round_trip():
    v = Visit(1795000000.123, "trivial", 2)
    assert Visit.from_json(v.to_json()) == v
    assert Visit.from_json([5, "moved", None]) == Visit(5.0, "moved", None)


@given(st.one_of(st.none(), st.floats(min_value=0, max_value=1e6), st.just(float("inf"))),
       st.one_of(st.none(), st.floats(min_value=0, max_value=1e6)))
def test_intervals_stay_within_the_bounds(rate, mu):
    got = interval_for(rate, POLICY, mu)
    assert POLICY.min_interval <= got <= POLICY.max_interval


def test_intervals_follow_the_rate():
    assert interval_for(None, POLICY) == 86400
    assert interval_for(0.0, POLICY) == POLICY.max_interval
    assert interval_for(1 / 86400, POLICY) == pytest.approx(math.log(2) * 86400)
    assert interval_for(1.0, POLICY) == POLICY.min_interval  # changes every second: as often as allowed
    # With a budget: a page that changes too fast for it is left at the longest interval.
    assert interval_for(1 / 60, POLICY, mu=100.0) == POLICY.max_interval


def test_the_multiplier_meets_the_budget():
    rng = random.Random(5)
    rates = [10 ** rng.uniform(-7, -3) for _ in range(2000)] + [None] * 100 + [0.0] * 50
    budget = 2150 / 86400  # about one fetch a page a day
    mu = multiplier_for_budget(rates, budget, POLICY)
    spent = sum(1 / interval_for(r, POLICY, mu) for r in rates)
    assert spent == pytest.approx(budget, rel=0.01)


def test_nutch_adaptive_schedule():
    assert nutch_interval(1000 * 3600, changed=False, policy=Policy(max_interval=1e9)) == pytest.approx(1400 * 3600)
    assert nutch_interval(100 * 3600, changed=True, policy=POLICY) == pytest.approx(80 * 3600)
    assert nutch_interval(3600, changed=True, policy=POLICY) == POLICY.min_interval
