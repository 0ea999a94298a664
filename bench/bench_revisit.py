"""Revisit schedules on a simulated web with a virtual clock.

    python -m bench.bench_revisit [--pages 10000] [--seeds 2,3,4] [--days 120] [--warmup 60]
                                  [--budget-days 4] [--static 0.15] [--plot bench/revisit.png] [--quick]

Pages whose changes follow known schedules: 70 % Poisson with periods
log-uniform from one hour to a year (four orders of magnitude), 10 %
periodic (every P, P log-uniform from 6 hours to 60 days), 15 % never
changing, 5 % vanishing at a random time (a visit after that finds them
gone and they leave the schedule). ``--static S`` makes a share S of the
pages never change, the others keeping those proportions (the default web
draws the same pages at S = 0.15). A visit sees only whether the page
changed at least once since the visit before.

Four schedules, compared at the same number of fetches in the measured
window (after ``--warmup`` days):

- ours: ``crawler.recrawl.change`` as the re-crawl runs it (each page's evidence
  updated at every visit, a plan made every simulated day from all pages'
  evidence: the prior over change rates and the budget's multiplier; each
  visit's interval from the page's posterior), with a budget of one fetch
  a page every ``--budget-days``;
- Nutch's adaptive schedule (``nutch_interval``: +40 % unchanged, -20 %
  changed, from the default interval), its intervals scaled by one factor
  until it spends what ours spent;
- a fixed interval, the one that spends what ours spent; and the fixed
  interval it takes to be as fresh as ours (bisection), with its fetches;
- the oracle: the same allocation with every page's true rate (1 / P for
  periodic pages), budget set to what ours spent.

Reported per schedule: fetches, mean freshness (share of time the stored
copy equals the live page, averaged over pages), mean age (hours since the
live page first differed from the copy, time-averaged) and the share of
changes missed (changes minus visits that saw one). Policy bounds: 1 hour
to 30 days, 1 day for pages of unknown rate. Reported on seeds 2-4; the
one choice made (the budget) was looked at on seed 1 only.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from crawler.recrawl.change import ChangeEvidence, Policy, Visit, append, observe
from crawler.recrawl.plan import Plan, RateModel, importance_weight, interval_for, multiplier_for_rates, nutch_interval

HOUR, DAY = 3600.0, 86400.0
POLICY = Policy(min_interval=HOUR, max_interval=30 * DAY, default_interval=DAY)


@dataclass
class Page:
    kind: str  # poisson, periodic, static, vanishing
    rate: float  # true rate (1 / period for periodic; the vanishing page's underlying Poisson rate)
    changes: list[float]  # change times
    vanish: float | None = None
    learned: float | None = None  # ours: last interval
    visits: dict[str, list[float]] = field(default_factory=dict)


def make_web(n: int, horizon: float, seed: int, static: float = 0.15) -> list[Page]:
    rng = random.Random(seed)
    pages = []
    # Kinds by share: the changing ones keep their proportions (70:10:5)
    # whatever the static share; at the default these are 0.70, 0.80, 0.95.
    rest = (1.0 - static) / 0.85
    poisson, periodic = 0.70 * rest, 0.80 * rest
    stays = periodic + static
    for _ in range(n):
        u = rng.random()
        if u < poisson or u >= stays:
            period = math.exp(rng.uniform(math.log(HOUR), math.log(365 * DAY)))
            t, changes = 0.0, []
            while True:
                t += rng.expovariate(1 / period)
                if t > horizon:
                    break
                changes.append(t)
            if u >= stays:
                vanish = rng.uniform(0.1 * horizon, horizon)
                changes = [c for c in changes if c < vanish] + [vanish]
                pages.append(Page("vanishing", 1 / period, changes, vanish))
            else:
                pages.append(Page("poisson", 1 / period, changes))
        elif u < periodic:
            period = math.exp(rng.uniform(math.log(6 * HOUR), math.log(60 * DAY)))
            phase = rng.uniform(0, period)
            pages.append(Page("periodic", 1 / period, [phase + k * period
                                                      for k in range(int((horizon - phase) / period) + 1)]))
        else:
            pages.append(Page("static", 0.0, []))
    return pages


def changed_between(page: Page, a: float, b: float) -> bool:
    return bisect.bisect_right(page.changes, b) > bisect.bisect_right(page.changes, a)


def gone(page: Page, t: float) -> bool:
    return page.vanish is not None and t >= page.vanish


def run_static(pages: list[Page], name: str, intervals: list[float], horizon: float) -> None:
    """A schedule that gives each page one interval (fixed, oracle)."""
    rng = random.Random(99)
    for page, interval in zip(pages, intervals):
        t = rng.uniform(0, interval)  # first fetches spread
        visits = [t]
        while t < horizon and not gone(page, t):
            t += interval
            visits.append(t)
        page.visits[name] = [v for v in visits if v <= horizon]


def run_nutch(pages: list[Page], name: str, scale: float, horizon: float) -> None:
    rng = random.Random(98)
    lo, hi = POLICY.min_interval * scale, POLICY.max_interval * scale
    scaled = Policy(min_interval=lo, max_interval=hi, default_interval=POLICY.default_interval * scale)
    for page in pages:
        t = rng.uniform(0, DAY)
        visits, interval = [t], scaled.default_interval
        while not gone(page, t):
            nxt = t + interval
            if nxt > horizon:
                break
            interval = nutch_interval(interval, changed_between(page, t, nxt), scaled)
            t = nxt
            visits.append(t)
        page.visits[name] = visits


def run_ours(pages: list[Page], name: str, budget: float, horizon: float,
             importance: list[float] | None = None) -> None:
    """crawler.recrawl.change as the re-crawl uses it, one event queue for all pages:
    a plan (the prior fitted to the pages' evidence, the budget's
    multiplier) made every simulated day, each visit scheduled by it; with
    ``importance`` (a weight a page), the budget weighs pages by it."""
    rng = random.Random(97)
    histories: list[list[Visit]] = [[] for _ in pages]
    evidence = [ChangeEvidence() for _ in pages]
    live = [True] * len(pages)
    heap = [(rng.uniform(0, DAY), i) for i in range(len(pages))]
    heapq.heapify(heap)
    for page in pages:
        page.visits[name] = []
    plan, plan_at = Plan(RateModel()), -math.inf
    while heap:
        t, i = heapq.heappop(heap)
        if t > horizon:
            break
        page = pages[i]
        page.visits[name].append(t)
        h = histories[i]
        if gone(page, t):
            live[i] = False
            continue  # found gone: out of the schedule (RECRAWL_GONE_AFTER = 1 here)
        if not h:
            outcome = "new"
        else:
            outcome = "changed" if changed_between(page, h[-1].at, t) else "unchanged"
        visit = Visit(t, outcome)
        evidence[i] = observe(evidence[i], h, visit, POLICY.evidence)
        histories[i] = append(h, visit, POLICY)
        if t - plan_at >= DAY:  # the re-crawl makes one every 10 minutes; daily is enough here
            plan = Plan.make((e for e, ok in zip(evidence, live) if ok), POLICY, budget, previous=plan.model,
                             importance=None if importance is None else
                             [w for w, ok in zip(importance, live) if ok])
            plan_at = t
        _, interval = plan.schedule(evidence[i], POLICY, 1.0 if importance is None else importance[i])
        page.learned = interval
        heapq.heappush(heap, (t + interval, i))


@dataclass
class Score:
    fetches: int
    freshness: float
    age_hours: float
    missed: float


def score(pages: list[Page], name: str, start: float, end: float, weights: list[float] | None = None) -> Score:
    """Freshness, age and missed changes of a schedule over [start, end];
    with ``weights``, freshness is the weighted mean (by importance)."""
    fresh_total = age_total = 0.0
    weight_total = 0.0
    fetches = changes = seen = 0
    for index, page in enumerate(pages):
        visits = page.visits[name]
        inside = [v for v in visits if start < v < end]
        fetches += len(inside)
        last_visit = max((v for v in visits if v <= start), default=None)
        fresh = age = 0.0
        bounds = [start, *inside, end]
        for a, b in zip(bounds, bounds[1:]):
            if last_visit is None:  # no copy yet: stale
                age += ((b - start) ** 2 - (a - start) ** 2) / 2
            elif gone(page, last_visit):  # found gone: the index knows
                fresh += b - a
            else:
                k = bisect.bisect_right(page.changes, last_visit)
                c = page.changes[k] if k < len(page.changes) else math.inf
                stale_from = min(max(c, a), b)
                fresh += stale_from - a
                if c < b:
                    age += ((b - c) ** 2 - (stale_from - c) ** 2) / 2
            last_visit = b
        w = 1.0 if weights is None else weights[index]
        fresh_total += fresh / (end - start) * w
        weight_total += w
        age_total += age / (end - start)
        changes += sum(1 for c in page.changes if start < c <= end)
        prev = None
        for v in visits:
            if prev is not None and start < v < end and changed_between(page, prev, v):
                seen += 1
            prev = v
    n = len(pages)
    return Score(fetches, fresh_total / weight_total, age_total / n / HOUR, 1 - seen / changes if changes else 0.0)


def calibrate(run, score_of, target: float, lo: float, hi: float, steps: int = 18) -> float:
    """The parameter in [lo, hi] (fetches falling as it grows) at which
    fetches come to ``target`` (geometric bisection)."""
    for _ in range(steps):
        mid = math.sqrt(lo * hi)
        run(mid)
        if score_of().fetches > target:
            lo = mid
        else:
            hi = mid
    best = math.sqrt(lo * hi)
    run(best)
    return best


def one_seed(args: argparse.Namespace, seed: int) -> dict[str, object]:
    warm, days = args.warmup * DAY, args.days * DAY
    horizon = warm + days
    pages = make_web(args.pages, horizon, seed, args.static)
    budget = len(pages) / (args.budget_days * DAY)
    t0 = time.monotonic()
    run_ours(pages, "ours", budget, horizon)
    ours = score(pages, "ours", warm, horizon)
    took = time.monotonic() - t0
    target = ours.fetches

    def fixed(interval: float, name: str = "fixed") -> None:
        run_static(pages, name, [interval] * len(pages), horizon)

    fixed_i = calibrate(fixed, lambda: score(pages, "fixed", warm, horizon), target, HOUR, 60 * DAY)
    fixed_s = score(pages, "fixed", warm, horizon)
    nutch_k = calibrate(lambda k: run_nutch(pages, "nutch", k, horizon),
                        lambda: score(pages, "nutch", warm, horizon), target, 0.05, 20.0)
    nutch_s = score(pages, "nutch", warm, horizon)
    spent = target / days  # fetches a second in the window
    true = [p.rate if p.kind != "vanishing" else p.rate for p in pages]
    mu = multiplier_for_rates(true, spent, POLICY)
    oracle_k = calibrate(lambda k: run_static(pages, "oracle", [interval_for(r, POLICY, mu * k) for r in true],
                                              horizon),
                         lambda: score(pages, "oracle", warm, horizon), target, 0.01, 100.0)
    oracle_s = score(pages, "oracle", warm, horizon)
    def as_fresh_as(freshness: float, name: str) -> tuple[Score, float]:
        """The fixed interval as fresh as ``freshness``, and its score."""
        lo, hi = HOUR / 4, 60 * DAY
        for _ in range(18):
            mid = math.sqrt(lo * hi)
            fixed(mid, name)
            if score(pages, name, warm, horizon).freshness < freshness:
                hi = mid
            else:
                lo = mid
        fixed(lo, name)
        return score(pages, name, warm, horizon), lo

    fixed_eq, eq_interval = as_fresh_as(ours.freshness, "fixed_eq")
    fixed_oracle, oracle_interval = as_fresh_as(oracle_s.freshness, "fixed_oracle")
    return {"seed": seed, "ours": ours, "fixed": fixed_s, "nutch": nutch_s, "oracle": oracle_s,
            "fixed_eq": fixed_eq, "fixed_interval": fixed_i, "fixed_eq_interval": eq_interval,
            "fixed_oracle": fixed_oracle, "fixed_oracle_interval": oracle_interval, "nutch_scale": nutch_k,
            "oracle_scale": oracle_k, "took": took, "pages": pages}


def plot(results: list[dict[str, object]], path: Path, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = results[0]
    pages = r["pages"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5))
    for kind, color in (("poisson", "tab:blue"), ("periodic", "tab:orange"), ("static", "tab:gray")):
        xs = [1 / p.rate / HOUR if p.rate else 365 * 24 * 2 for p in pages if p.kind == kind and p.learned]
        ys = [p.learned / HOUR for p in pages if p.kind == kind and p.learned]
        ax1.scatter(xs, ys, s=3, alpha=0.4, color=color, label=kind + (" (plotted at 2 years)" if kind == "static"
                                                                       else ""))
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("true change period (hours)")
    ax1.set_ylabel("learned revisit interval (hours)")
    ax1.set_title(f"ours, seed {r['seed']}: learned interval against true period")
    ax1.legend(markerscale=4)
    warm, days = args.warmup * DAY, args.days * DAY
    xs, ys = [], []
    for interval in [HOUR * 2 ** k for k in range(0, 11)]:
        run_static(pages, "curve", [interval] * len(pages), warm + days)
        s = score(pages, "curve", warm, warm + days)
        xs.append(s.fetches)
        ys.append(s.freshness)
    ax2.plot(xs, ys, "-o", color="tab:gray", label="fixed interval (1 h ... 43 d)")
    for name, marker in (("ours", "*"), ("nutch", "s"), ("oracle", "D")):
        s = r[name]
        ax2.scatter([s.fetches], [s.freshness], marker=marker, s=120, label=name, zorder=3)
    ax2.set_xscale("log")
    ax2.set_xlabel(f"fetches in {args.days} days ({len(pages):,} pages)")
    ax2.set_ylabel("mean freshness")
    ax2.set_title("freshness against fetches")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def importance_seed(args: argparse.Namespace, seed: int) -> None:
    """``--importance``: each page gets an in-degree (Pareto, shape 1.2,
    independent of its change rate, as on the web) and the weight the
    re-crawl gives it (``importance_weight``); ours with the budget weighed
    by importance against ours without, at equal fetches (the weighted
    schedule's budget scaled until it spends the same): plain freshness
    and freshness weighted by importance (the targets: weighted at least
    10 % above, plain within 5 %)."""
    warm, days = args.warmup * DAY, args.days * DAY
    horizon = warm + days
    pages = make_web(args.pages, horizon, seed, args.static)
    rng = random.Random(seed * 7919)
    indegree = [min(100_000, int(rng.paretovariate(1.2)) - 1) for _ in pages]
    # What is measured: freshness weighted by importance, 1 + in-degree (the
    # textbook's in-degree; no mirrors here), whatever weights the schedule uses.
    measure = [1.0 + d for d in indegree]
    if args.weight_exponent is not None:
        weights = [(1.0 + d) ** args.weight_exponent for d in indegree]
    elif args.weight_mix is not None:
        weights = [1.0 + args.weight_mix * d for d in indegree]
    else:
        weights = [importance_weight(d, 0) for d in indegree]
    budget = len(pages) / (args.budget_days * DAY)
    run_ours(pages, "plain", budget, horizon)
    # At equal fetches: the weighted schedule's budget scaled until it spends what the plain one spent.
    calibrate(lambda k: run_ours(pages, "weighted", budget / k, horizon, weights),
              lambda: score(pages, "weighted", warm, horizon), score(pages, "plain", warm, horizon).fetches,
              0.5, 2.0, steps=8)
    rows = {name: (score(pages, name, warm, horizon), score(pages, name, warm, horizon, measure))
            for name in ("plain", "weighted")}
    print(f"\nseed {seed}, importance (in-degree: Pareto 1.2; weights {min(weights):.2f} to {max(weights):.2f}):")
    print(f"{'schedule':<28}{'fetches':>10}{'freshness':>11}{'weighted':>10}")
    for name, (plain, weighted) in rows.items():
        print(f"{'ours, ' + name:<28}{plain.fetches:>10,}{plain.freshness:>11.4f}{weighted.freshness:>10.4f}")
    (p0, w0), (p1, w1) = rows["plain"], rows["weighted"]
    print(f"  weighted freshness {w1.freshness / w0.freshness:.3f}x the unweighted schedule's (target >= 1.10), "
          f"plain freshness {p1.freshness / p0.freshness:.3f}x (target >= 0.95), fetches "
          f"{p1.fetches / p0.fetches:.3f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pages", type=int, default=10_000)
    ap.add_argument("--seeds", default="2,3,4")
    ap.add_argument("--days", type=float, default=120)
    ap.add_argument("--warmup", type=float, default=60)
    ap.add_argument("--budget-days", type=float, default=4.0, help="ours: one fetch a page every this many days")
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--static", type=float, default=0.15,
                    help="share of pages that never change (the others keep their proportions)")
    ap.add_argument("--quick", action="store_true", help="1,000 pages, 60 + 30 days, seed 2")
    ap.add_argument("--importance", action="store_true",
                    help="the re-crawl's budget weighed by importance against unweighted (importance_seed)")
    ap.add_argument("--weight-exponent", type=float, default=None,
                    help="--importance: weights (1 + in-degree) ** this instead of importance_weight's")
    ap.add_argument("--weight-mix", type=float, default=None,
                    help="--importance: weights 1 + this * in-degree instead of importance_weight's")
    args = ap.parse_args()
    if args.quick:
        args.pages, args.days, args.warmup, args.seeds = 1000, 30, 30, "2"
    if args.importance:
        for seed in [int(s) for s in args.seeds.split(",")]:
            importance_seed(args, seed)
        return
    print(f"{args.pages:,} pages, warm-up {args.warmup:g} days, measured {args.days:g} days, "
          f"ours with a budget of one fetch a page every {args.budget_days:g} days", flush=True)
    results = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        r = one_seed(args, seed)
        results.append(r)
        print(f"\nseed {seed} (ours simulated in {r['took']:.1f}s):")
        print(f"{'schedule':<28}{'fetches':>10}{'freshness':>11}{'age (h)':>10}{'missed':>9}")
        rows = [("ours", r["ours"]), (f"fixed {r['fixed_interval'] / HOUR:.1f} h", r["fixed"]),
                (f"nutch (x{r['nutch_scale']:.2f})", r["nutch"]), ("oracle", r["oracle"]),
                (f"fixed as fresh: {r['fixed_eq_interval'] / HOUR:.2f} h", r["fixed_eq"]),
                (f"fixed as the oracle: {r['fixed_oracle_interval'] / HOUR:.2f} h", r["fixed_oracle"])]
        for label, s in rows:
            print(f"{label:<28}{s.fetches:>10,}{s.freshness:>11.4f}{s.age_hours:>10.1f}{s.missed:>9.1%}")
        ours, fx, nu, orc, eq = (r[k] for k in ("ours", "fixed", "nutch", "oracle", "fixed_eq"))
        print(f"  fetches saved against the fixed interval at ours' freshness: {1 - ours.fetches / eq.fetches:.1%}"
              f" (target >= 50 %): {'PASS' if ours.fetches <= 0.5 * eq.fetches else 'FAIL'}")
        print(f"  freshness against Nutch at equal fetches: {ours.freshness:.4f} vs {nu.freshness:.4f} "
              f"({ours.freshness / nu.freshness:.3f}x): {'PASS' if ours.freshness > nu.freshness else 'FAIL'}")
        print(f"  freshness against the oracle: {ours.freshness / orc.freshness:.3f}x (target >= 0.90): "
              f"{'PASS' if ours.freshness >= 0.9 * orc.freshness else 'FAIL'}")
        print(f"  (fixed at equal fetches: freshness {fx.freshness:.4f}; the oracle saves "
              f"{1 - orc.fetches / r['fixed_oracle'].fetches:.1%} of the fixed interval's fetches at its freshness)")
    if args.plot:
        plot(results, args.plot, args)
        print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
