"""crawler/recrawl/change.py: change detection, change-rate estimates, intervals."""

from __future__ import annotations

import bisect
import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

import numpy as np

from crawler.recrawl.change import ChangeEvidence, Policy, Visit, append, compare, observe
from crawler.recrawl.plan import (
    RATES, Plan, Posterior, RateModel, interval_for, loglik, multiplier_for_budget, multiplier_for_rates,
    nutch_interval)

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


ev = ChangeEvidence.of


def median_rate(history: list[Visit], model: RateModel | None = None) -> float:
    posterior = (model or RateModel()).posterior(ev(history))
    assert posterior is not None
    return posterior.rate


@pytest.mark.parametrize("period", [1800.0, 3600.0, 86400.0])
def test_the_posterior_recovers_a_poisson_rate_from_regular_visits(period):
    visits = [i * 3600.0 for i in range(20001)]  # hourly, 20,000 intervals
    rate = median_rate(poisson_history(1 / period, visits, seed=7))
    # 20,000 observations (833 changes at the slowest): within 10 % of the truth.
    assert rate * period == pytest.approx(1.0, rel=0.10)


def test_the_posterior_recovers_a_rate_from_irregular_visits():
    rng = random.Random(3)
    visits = [0.0]
    for _ in range(3000):
        visits.append(visits[-1] + rng.uniform(600, 12 * 3600))
    assert median_rate(poisson_history(1 / 7200, visits, seed=11)) * 7200 == pytest.approx(1.0, rel=0.10)


def test_the_posterior_is_the_prior_times_the_likelihood():
    history = [Visit(0, "new"), Visit(100, "changed"), Visit(300, "unchanged"), Visit(350, "trivial")]
    prior = np.linspace(1, 2, len(RATES))
    model = RateModel(prior)
    # The changed interval counts by its length class: 100 s is class
    # round(16 log2 100) = 106, 2^(106/16) = 98.7 s.
    changed = 2 ** (106 / 16)
    likelihood = (1 - np.exp(-RATES * changed)) * np.exp(-RATES * 200) * np.exp(-RATES * 50)
    expected = model.prior * likelihood
    posterior = model.posterior(ev(history))
    assert posterior is not None
    assert posterior.weights == pytest.approx(expected / expected.sum(), rel=1e-9)
    assert loglik(ev(history)) == pytest.approx(np.log(likelihood), rel=1e-9)
    # Every rate keeps a share of an even spread: no page is ever ruled out.
    assert model.prior.min() >= 1e-3 / len(RATES)


def test_no_interval_no_posterior_and_the_default_interval():
    assert loglik(ev([])) is None
    assert loglik(ev([Visit(5, "new")])) is None
    assert loglik(ev([Visit(0, "new"), Visit(10, "error"), Visit(20, "gone")])) is None
    assert Plan(RateModel()).schedule(ev([Visit(5, "new")]), POLICY) == (None, POLICY.default_interval)


def test_errors_are_not_evidence_and_the_interval_spans_them():
    # new at 0, an error at 50, a change seen at 100 and none at 200: the
    # changed interval is 100 s (0 -> 100), not 50.
    with_error = [Visit(0, "new"), Visit(50, "error"), Visit(100, "changed"), Visit(200, "unchanged")]
    without = [Visit(0, "new"), Visit(100, "changed"), Visit(200, "unchanged")]
    assert ev(with_error) == ev(without)
    assert np.array_equal(loglik(ev(with_error)), loglik(ev(without)))


def crawl_histories(rates: list[float], visits: int, every: float, seed: int) -> list[list[Visit]]:
    times = [i * every for i in range(visits + 1)]
    return [poisson_history(r, times, seed=seed + i) if r > 0 else
            [Visit(times[0], "new"), *(Visit(t, "unchanged") for t in times[1:])] for i, r in enumerate(rates)]


def test_the_prior_is_learned_from_the_crawl():
    # Half the pages change about hourly, half about monthly, each visited
    # every 2 hours 40 times: the fitted prior puts its weight near both.
    rates = [1 / 3600.0] * 500 + [1 / (30 * 86400.0)] * 500
    model = RateModel().fit(loglik(ev(h)) for h in crawl_histories(rates, 40, 2 * 3600.0, seed=1))

    def mass(lo: float, hi: float) -> float:
        return float(model.prior[(RATES >= lo) & (RATES <= hi)].sum())

    assert mass(1 / 3600.0 / 3, 1 / 3600.0 * 3) > 0.45
    # Watched for 80 hours, the monthly half is known only to be slow.
    assert mass(0, 1 / (2 * 86400.0)) > 0.45
    assert mass(1 / 86400.0, 1 / 14400.0) < 0.05  # nothing in between


def test_a_page_never_seen_to_change_is_judged_by_the_crawl_it_is_in():
    # Watched for two days without a change. In a crawl where pages that
    # quiet turn out never to change, it is left long; in one where every
    # page changes about weekly, it is checked again much sooner.
    page = [Visit(0, "new"), Visit(86400, "unchanged"), Visit(2 * 86400, "unchanged")]
    static = RateModel().fit(loglik(ev(h)) for h in crawl_histories([0.0] * 300, 30, 86400.0, seed=2))
    weekly = RateModel().fit(loglik(ev(h)) for h in crawl_histories([1 / (7 * 86400.0)] * 300, 30, 86400.0, seed=3))
    quiet = Plan(static).schedule(ev(page), POLICY)[1]
    busy = Plan(weekly).schedule(ev(page), POLICY)[1]
    assert quiet > 5 * busy
    assert busy == pytest.approx(math.log(2) * 7 * 86400, rel=0.25)  # even odds of a change at the weekly rate


def test_a_page_changed_at_every_visit_has_only_a_lower_bound():
    page = [Visit(0, "new"), *(Visit(3600.0 * k, "changed") for k in range(1, 9))]
    posterior = RateModel().posterior(ev(page))
    assert posterior is not None
    # The bias-reduced estimate (Cho and Garcia-Molina) is a lower bound:
    # the posterior puts almost nothing well below it.
    bound = -math.log(0.5 / 8.5) / 3600.0
    assert posterior.weights[RATES < bound / 4].sum() < 0.01
    assert posterior.rate > bound


@pytest.mark.parametrize("rate", [1 / 7200.0, 1 / 86400.0, 1 / (9 * 86400.0)])
@pytest.mark.parametrize("mu", [None, 100.0, 10_000.0, 1e6])
def test_a_certain_posterior_schedules_as_the_rate_known_exactly(rate, mu):
    k = int(np.argmin(abs(np.log(RATES / rate))))
    weights = np.zeros(len(RATES))
    weights[k] = 1.0
    got = Posterior(weights).interval(POLICY, mu)
    assert got == pytest.approx(interval_for(float(RATES[k]), POLICY, mu), rel=0.01)


@given(st.lists(st.tuples(st.floats(min_value=1, max_value=1e7), st.booleans()), min_size=1, max_size=40),
       st.one_of(st.none(), st.floats(min_value=0, max_value=1e9)))
def test_posterior_intervals_stay_within_the_bounds(steps, mu):
    history, t = [Visit(0, "new")], 0.0
    for gap, changed in steps:
        t += gap
        history.append(Visit(t, "changed" if changed else "unchanged"))
    rate, got = Plan(RateModel(), mu).schedule(ev(history), POLICY)
    assert POLICY.min_interval <= got <= POLICY.max_interval
    assert rate is not None and RATES[0] <= rate <= RATES[-1]


def test_the_budget_is_spent_and_a_sample_stands_for_the_crawl():
    rng = random.Random(5)
    rates = [10 ** rng.uniform(-8, -3) for _ in range(600)] + [0.0] * 100
    histories = crawl_histories(rates, 12, 86400.0, seed=9) + [[Visit(0, "new")]] * 50
    model = RateModel().fit(loglik(ev(h)) for h in histories)
    posteriors = [model.posterior(ev(h)) for h in histories]
    budget = 750 / 86400  # about one fetch a page a day
    mu = multiplier_for_budget(posteriors, budget, POLICY)
    spent = sum(1 / (p.interval(POLICY, mu) if p else POLICY.default_interval) for p in posteriors)
    assert spent == pytest.approx(budget, rel=0.01)
    # The same pages as a sample of a crawl ten times as large, with ten times the budget.
    assert multiplier_for_budget(posteriors, 10 * budget, POLICY, weight=10) == pytest.approx(mu, rel=1e-6)
    plan = Plan.make([ev(h) for h in histories], POLICY, 10 * budget, total=10 * len(histories), previous=model)
    assert plan.mu == pytest.approx(multiplier_for_budget([plan.model.posterior(ev(h)) for h in histories],
                                                          budget, POLICY), rel=1e-6)
    assert Plan.make([ev(h) for h in histories], POLICY).mu is None
    # No rate known yet (every page fetched once): no multiplier is made up.
    assert Plan.make([ChangeEvidence()] * 50, POLICY, 1e-9, total=50).mu is None
    assert Plan.make([], POLICY, budget, total=0).mu is None


def test_a_tight_budget_leaves_pages_that_outrun_it_at_the_longest_interval():
    fast = [Visit(0, "new"), *(Visit(3600.0 * k, "changed") for k in range(1, 9))]
    slow = [Visit(0, "new"), *(Visit(86400.0 * k, "changed" if k % 4 == 0 else "unchanged") for k in range(1, 30))]
    plan = Plan(RateModel(), mu=1e4)  # a visit a second must gain 10,000 s of freshness
    assert plan.schedule(ev(fast), POLICY)[1] == POLICY.max_interval
    assert plan.schedule(ev(slow), POLICY)[1] < POLICY.max_interval
    assert Plan(RateModel(), mu=None).schedule(ev(fast), POLICY)[1] == POLICY.min_interval


def test_a_prior_must_be_a_spread():
    for bad in ([1.0], [0.0] * len(RATES), [-1.0] + [1.0] * (len(RATES) - 1), [math.nan] * len(RATES)):
        with pytest.raises(ValueError, match="a prior needs"):
            RateModel(bad)


def test_evidence_keeps_every_interval_in_bounded_space():
    e = ChangeEvidence()
    history: list[Visit] = []
    for k in range(1000):  # a visit an hour, every third one seeing a change
        visit = Visit(3600.0 * k, "new" if k == 0 else ("changed" if k % 3 == 0 else "unchanged"))
        e = observe(e, history, visit, cap=1e9)
        history = append(history, visit, POLICY)
    assert len(history) == 32
    assert e.count == 999 and e.unchanged == 666 * 3600.0
    assert e.changed == ((round(16 * math.log2(3600.0)), 333.0),)
    # Past the cap, the older intervals fade: the total stays at the cap.
    capped = ChangeEvidence()
    for k in range(1, 1000):
        capped = capped.add(3600.0, k % 3 == 0, cap=100)
    assert capped.count == 100 and capped.unchanged == pytest.approx(66.7 * 3600, rel=0.02)
    assert ChangeEvidence.from_json(capped.to_json()) == ChangeEvidence(*[
        round(capped.unchanged, 3), tuple((b, round(w, 6)) for b, w in capped.changed), capped.count])


def test_evidence_comes_only_from_visits_that_saw_the_content():
    history = [Visit(0, "new"), Visit(50, "error")]
    e = observe(ChangeEvidence(), history, Visit(100, "changed"), cap=256)
    assert e == ChangeEvidence(0.0, ((round(16 * math.log2(100)), 1.0),), 1.0)  # 0 -> 100, over the error
    for outcome in ("error", "gone", "moved", "new"):
        assert observe(e, history, Visit(200, outcome), cap=256) is e
    assert observe(ChangeEvidence(), [Visit(0, "error")], Visit(10, "unchanged"), cap=256) == ChangeEvidence()
    assert observe(e, [*history, Visit(100, "changed")], Visit(400, "trivial"), cap=256).unchanged == 300.0
    # A fetch older than the newest visit (replayed late) adds nothing: its time is counted already.
    assert observe(e, [*history, Visit(100, "changed")], Visit(75, "unchanged"), cap=256) is e


@pytest.mark.parametrize("raw", [None, [], "x", {"u": 1, "c": []}, {"u": -1, "c": [], "n": 1},
                                 {"u": 1, "c": [], "n": float("inf")}, {"u": 1, "c": [[1.5, 1]], "n": 1},
                                 {"u": 1, "c": [[True, 1]], "n": 1}, {"u": 1, "c": [[1, -1]], "n": 1},
                                 {"u": 1, "c": [[5000, 1]], "n": 1}, {"u": 1, "c": [[1, 1]] * 300, "n": 1},
                                 {"u": 1, "c": "[]", "n": 1}, {"u": 1, "c": [], "n": 1, "x": 2},
                                 {"u": 10 ** 400, "c": [], "n": 1}, {"u": 1, "c": [[1, 10 ** 400]], "n": 1}])
def test_malformed_evidence_is_refused(raw):
    assert ChangeEvidence.from_json(raw) is None


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
                                 [1.0, "changed", 65], [1.0, "changed", "3"], [True, "new", None], None,
                                 [10 ** 400, "new", None]])
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


def test_the_multiplier_for_known_rates_meets_the_budget():
    rng = random.Random(5)
    rates = [10 ** rng.uniform(-7, -3) for _ in range(2000)] + [None] * 100 + [0.0] * 50
    budget = 2150 / 86400  # about one fetch a page a day
    mu = multiplier_for_rates(rates, budget, POLICY)
    spent = sum(1 / interval_for(r, POLICY, mu) for r in rates)
    assert spent == pytest.approx(budget, rel=0.01)


def test_nutch_adaptive_schedule():
    assert nutch_interval(1000 * 3600, changed=False, policy=Policy(max_interval=1e9)) == pytest.approx(1400 * 3600)
    assert nutch_interval(100 * 3600, changed=True, policy=POLICY) == pytest.approx(80 * 3600)
    assert nutch_interval(3600, changed=True, policy=POLICY) == POLICY.min_interval

def test_an_important_page_is_visited_more_often_under_a_budget():
    """REVISIT_IMPORTANCE: a page's gain counts importance_weight times,
    so of two pages alike, the one with many in-links gets the shorter
    interval, and the budget is still spent."""
    from crawler.recrawl.plan import importance_weight

    assert importance_weight(0, 0) == 1.0 and importance_weight(None, "x") == 1.0
    assert importance_weight(99, 0) == pytest.approx(1 + 0.2 * 99)
    assert importance_weight(49, 50) == importance_weight(99, 0)
    policy = Policy(min_interval=3600, max_interval=30 * 86400, default_interval=86400)
    evidence = [ChangeEvidence.of([Visit(0, "new"), Visit(86400, "changed"), Visit(2 * 86400, "unchanged"),
                                   Visit(3 * 86400, "changed")])] * 10
    weights = [1.0] * 9 + [importance_weight(200, 0)]
    plain = Plan.make(evidence, policy, 10 / (2 * 86400))
    weighed = Plan.make(evidence, policy, 10 / (2 * 86400), importance=weights)
    _, i_plain = plain.schedule(evidence[0], policy)
    _, i_low = weighed.schedule(evidence[0], policy, 1.0)
    _, i_high = weighed.schedule(evidence[0], policy, weights[-1])
    assert i_high < i_plain < i_low
    assert 9 / i_low + 1 / i_high == pytest.approx(10 / i_plain, rel=0.05)  # the same budget
