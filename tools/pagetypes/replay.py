"""Type the pages of dumped folds again: decision variants in seconds.

    python -m bench.bench_pagetypes --trees DIR ... --jobs 2 --dump /tmp/folds   # once (14 minutes here)
    python -m tools.pagetypes.replay /tmp/folds [--only NAME,...] [--no-rule | --no-bare] [--no-contents]
    python -m tools.pagetypes.replay /tmp/folds --mix W [--log-odds] | --trust-bound Z,P[,MIN]

Each held-out source's pages, as its one-source-left-out fold scored them
(``bench.bench_pagetypes --dump``: the fold's model and threshold, fitted
without the source), are typed again in crawl order as the crawler types
them (``crawler.pagetypes.classify``): a page typed alone by the page-only model's
score or ``thin_navigation``; a page with its site's template by
``decide``, with a ``RuleTrust`` kept over the source's pages (the
unlabelled ones too), ``bare_navigation`` and ``contents_list`` (dumped
as each page's ``contents``). They are scored as
``bench.bench_pagetypes`` scores them, so the replay of the shipped decision
gives that bench's ``loso`` column exactly. A variant of the decision is
a function with ``decide``'s signature given to ``replay`` (the sessions'
variants in ``bench/RESULTS.md`` were replayed so); the models are not
refitted, so a change to the features or the fit needs the bench itself.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from crawler.pagetypes.features import FEATURES
from crawler.pagetypes.rules import INDEX, RuleTrust, decide
from tools.pagetypes.measure import LD_AT, LINK_DENSITY, bare, meets_target, metrics

Decide = Callable[..., str]  # decide's signature: (score, threshold, density, trust, site, bare)


def load(folds: Path, only: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The dumped sources (``--dump``'s files), by name."""
    wanted = set(only)
    out = []
    for path in sorted(folds.glob("*.json")):
        d = json.loads(path.read_text())
        if d.get("features") != list(FEATURES):
            raise SystemExit(f"{path}: dumped with other features; dump again (python -m bench.bench_pagetypes --dump)")
        if not wanted or d["source"] in wanted:
            out.append(d)
    if not out:
        raise SystemExit(f"no dumped source in {folds}")
    return out


Mix = Callable[[float, float, float, float], float]  # (score, threshold, page score, page threshold) -> score


def replay(d: dict[str, Any], decision: Decide | None = decide, mix: Mix | None = None,
           trust: RuleTrust | None = None, contents: bool = True) -> list[int]:
    """1 (index) or 0 for each labelled page of a dumped source, typed in
    crawl order by ``decision`` (None: the model alone, ``--no-rule``).
    ``mix``: the score a page typed with its template is decided on, from
    both models' scores (``mixed``; the pages typed before it, dumped
    without their page-only score, count in ``trust`` by their own).
    ``trust``: a fresh ``RuleTrust`` of another kind (``BoundTrust``).
    ``contents``: a page dumped as a contents list (``contents_list``) is
    an index page whatever ``decision`` says, as ``decide`` types it
    (``--no-contents``: not; dumps from before it have no such pages)."""
    t = d["threshold"]
    trust = RuleTrust() if trust is None else trust
    out = []
    for r in d["rows"]:
        if decision is not None:
            for x, score in r["before"]:
                decision(score, t, x[LD_AT], trust, d["source"], bare(x))  # typed by the crawler, not scored
        if not r["tpl"]:
            out.append(1 if r["thin"] or r["page_score"] >= d["page_threshold"] else 0)
            continue
        s = r["score"] if mix is None else mix(r["score"], t, r["page_score"], d["page_threshold"])
        if decision is None:
            out.append(1 if s >= t else 0)
        else:
            x = r["x"]
            kind = decision(s, t, x[LD_AT], trust, d["source"], bare(x))
            out.append(1 if kind == INDEX or contents and r.get("contents", False) else 0)
    return out


def mixed(w: float, log_odds: bool = False) -> Mix:
    """The score ``t + (1 - w) (s - t) + w (p - pt)``: the two models'
    margins over their thresholds mixed (in log-odds with ``log_odds``, the
    result read as a margin over ``t`` all the same). bench/RESULTS.md,
    "The two models' scores combined"."""

    def logit(p: float) -> float:
        p = min(max(p, 1e-6), 1 - 1e-6)
        return math.log(p / (1 - p))

    def mix(s: float, t: float, p: float, pt: float) -> float:
        if log_odds:
            return t + (1 - w) * (logit(s) - logit(t)) + w * (logit(p) - logit(pt))
        return t + (1 - w) * (s - t) + w * (p - pt)

    return mix


class BoundTrust(RuleTrust):
    """The rule trusted on a site when a lower bound (Wilson's, ``z``) on
    its agreement with the model's sure pages is at least ``p``, once
    ``min_pages`` are counted (the shipped ``RuleTrust``: 95 % of 10).
    bench/RESULTS.md, "The rule's trust by a confidence bound"."""

    def __init__(self, z: float, p: float, min_pages: int = 10) -> None:
        super().__init__()
        self.z, self.p, self.min_pages = z, p, min_pages

    def trusted(self, site: str) -> bool:
        counts = self._sites.get(site)
        if counts is None or counts[0] < self.min_pages:
            return False
        n, share, z = counts[0], counts[1] / counts[0], self.z
        bound = (share + z * z / (2 * n) - z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n))) \
            / (1 + z * z / n)
        return bound >= self.p


def score(d: dict[str, Any], typed: list[int]) -> tuple[tuple[float, float, float], bool | None]:
    """Balanced accuracy, index recall and info recall of ``typed``, and
    whether the issue's target holds (None: no index page to find)."""
    ys = [r["y"] for r in d["rows"]]
    got = metrics(ys, typed)
    if not sum(ys):
        return got, None
    dens = metrics(ys, [1 if r["x"][LD_AT] > LINK_DENSITY else 0 for r in d["rows"]])
    return got, meets_target(got, dens)


def without_bare(score: float, threshold: float, density: float, trust: RuleTrust | None = None, site: str = "",
                 bare: bool = False) -> str:
    """``decide`` without ``bare_navigation`` (``--no-bare``)."""
    return decide(score, threshold, density, trust, site, False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folds", type=Path, help="python -m bench.bench_pagetypes --dump's directory")
    ap.add_argument("--only", default="", help="sources to report (default: all)")
    ap.add_argument("--no-rule", action="store_true", help="the model alone where the template is known")
    ap.add_argument("--no-bare", action="store_true", help="decide without bare_navigation (before 2026-11-27)")
    ap.add_argument("--no-contents", action="store_true",
                    help="decide without contents_list (before contents lists were typed index)")
    ap.add_argument("--mix", type=float, default=None, metavar="W",
                    help="decide on the two models' margins mixed, the page-only model's weighing W")
    ap.add_argument("--log-odds", action="store_true", help="--mix in log-odds")
    ap.add_argument("--trust-bound", default="", metavar="Z,P[,MIN]",
                    help="trust the rule where a Wilson bound (z Z) on its agreement is at least P")
    args = ap.parse_args()
    decision: Decide | None = None if args.no_rule else without_bare if args.no_bare else decide
    mix = None if args.mix is None else mixed(args.mix, args.log_odds)
    bound = [float(v) for v in args.trust_bound.split(",")] if args.trust_bound else []
    if bound and len(bound) not in (2, 3):
        ap.error("--trust-bound is Z,P or Z,P,MIN")
    met = with_index = 0
    for d in load(args.folds, [s for s in args.only.split(",") if s]):
        trust = BoundTrust(bound[0], bound[1], int(bound[2]) if len(bound) == 3 else 10) if bound else None
        (bal, rec, inf), ok = score(d, replay(d, decision, mix, trust, not args.no_contents))
        verdict = "-" if ok is None else "met" if ok else "missed"
        cell = f"{'-':>5} {'-':>5} {inf:.3f}" if ok is None else f"{bal:.3f} {rec:.3f} {inf:.3f}"
        print(f"{d['source']:22}{len(d['rows']):6}   {cell}   {verdict}")
        with_index += ok is not None
        met += bool(ok)
    print(f"met on {met} of {with_index} sources with index pages")


if __name__ == "__main__":
    main()
