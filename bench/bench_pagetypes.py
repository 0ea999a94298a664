"""Page types on sources the model never saw: leave one source out.

    python -m tools.pagetypes.sources [--freshN] --out DIR   # label Debian trees first (each set into its DIR)
    python -m bench.bench_pagetypes [--trees DIR ...] [--wcxb ../shared/data/pagetypes]
                                    [--only NAME,...] [--jobs N] [--no-loso]
                                    [--by-set] [--monotone] [--no-rule] [--no-contents] [--dump DIR]

Sources: WCXB's development split (``--wcxb``, ``labels-all.jsonl``: 1,326
pages of many sites, labelled by people), split by a hash of the file name
into a training part (70 %) and a test part (30 %, ``wcxb-test``); and each
documentation tree that ``tools.pagetypes.sources`` labelled by its
generator's structure, in every directory given to ``--trees`` (each tree
is one source). The PostgreSQL and Python documentation are not among
them: the crawler is judged there.

For each held-out source, the model is fitted on everything else (WCXB's
training part and every other tree; for ``wcxb-test``, WCXB's training part
and every tree), its threshold chosen on that training set alone by
cross-validation grouped by source (the sources split in three by a hash
of their names, each part scored by a model fitted on the other two: the
best balanced accuracy keeping index recall >= 0.93), and scored on the
held-out source, by the features the shipped
classifier reads (``crawler.pagetypes.features.FEATURES``), as the crawler computes
them: pages of a tree are typed in the order a crawl meets them
(breadth-first from the start page), each with its site's template as
learned from the pages before it and itself (``crawler.pagetypes.template``: blocks on
at least 30 % of the site's first 50 pages, once 5 are seen; the crawler
keeps the same counts in Redis). A tree's first 4 pages are typed alone,
then typed again with the template once it is known (at the tree's fifth
page), as the crawler does; ``--no-retype`` leaves them as typed alone. A
page typed alone (no template known: WCXB's pages, each alone on its site,
and with ``--no-retype`` a tree's first 4 pages) is typed by the page-only
model, ``crawler/data/classifier_page.json``, fitted on
WCXB's training part alone (``tools.pagetypes.page_model``) and never refitted
here; the model fitted and measured here types the pages with a template,
and where its score is within ``crawler.pagetypes.rules.RULE_BAND`` of its
threshold the link-density rule types them on a tree where the rule has
typed the pages the model was sure of (``RULE_SURE`` from it) as the model did
(``crawler.pagetypes.rules.decide``, ``RuleTrust``, kept over the tree's pages in
crawl order), as the crawler does (the threshold is still chosen on the
model's scores alone); a close call with next to nothing of its own
once the template is set aside is an index page (``bare_navigation``).
``--jobs N`` leaves N sources (with ``--by-set``, directories) out at once
(each fold is four fits).
``--by-set`` leaves out one ``--trees`` directory at a time instead (its
sources scored by the model fitted on the other directories and WCXB's
training part): a cheaper stand-in, to compare variants of the fit.

Reported per held-out source: balanced accuracy, index recall and info
recall of

- ``shipped``: the model in ``crawler/data/classifier.json`` as it is;
- ``link density``: the plain rule of one line, anchor text / text > 0.35
  in the page's blocks outside header, footer, nav and sidebars;
- ``loso``: the model fitted without the source;

and whether the issue's target holds there (balanced accuracy and index
recall >= 0.92, and never below the link-density rule: judged on ``loso``,
or with ``--no-loso`` on ``shipped``).

The fit is ``tools.pagetypes.template_model``'s; that command fits on
every source (WCXB's training part and every tree) and stores the model
in ``crawler/data/classifier.json`` (``--write``).

``--dump DIR`` writes each left-out source's pages as its fold scored
them (vectors, scores, thresholds, in crawl order) into DIR, one file a
source: ``python -m tools.pagetypes.replay DIR`` types them again with the
crawler's decision, or a variant of it, in seconds.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from multiprocessing import get_context
from pathlib import Path

from crawler.pagetypes.classify import Model, model, page_model
from crawler.pagetypes.features import FEATURES
from crawler.pagetypes.rules import INDEX, RuleTrust, decide
from tools.pagetypes.measure import LD_AT, LINK_DENSITY, bare, meets_target, metrics
from tools.pagetypes.template_model import FitOptions, add_fit_arguments, fitted, options_of, read_rows

_OPTIONS = [FitOptions()]  # the fit's variant (read by the forked fold workers)


def prefix_model(path: Path) -> Model:
    """A model file fitted on the first of today's features (an earlier
    release's): its trees read only those."""
    data = json.loads(path.read_text())
    n = len(data["features"])
    if list(data["features"]) != list(FEATURES[:n]):
        raise SystemExit(f"{path}: its features are not a prefix of today's")
    m = Model.__new__(Model)
    m.trees, m.learning_rate, m.threshold = data["trees"], float(data["learning_rate"]), float(data["threshold"])
    return m


def typed(m: Model, r: dict, page_only: bool = True, trust: RuleTrust | None = None) -> int:
    """1 (index) or 0 as the crawler types the page: by ``m`` with its
    site's template, by the page-only model without (``page_only``), a
    thin page of links an index page (``thin_navigation``), an index of
    terms too (``term_index``; not with --no-terms)."""
    if _TERMS[0] and r.get("terms", False):
        return 1
    if page_only and not r["tpl"]:
        if r["thin"]:
            return 1
        m = page_model()
    if r["tpl"] and trust is not None:  # the rule where the model is unsure, as the crawler does
        x = r["x"]
        return 1 if decide(m.score(x), m.threshold, x[LD_AT], trust, r["source"], bare(x),
                           _CONTENTS[0] and r.get("contents", False)) == INDEX else 0
    return 1 if m.score(r["x"]) >= m.threshold else 0


def typed_all(m: Model, test: Sequence[dict], page_only: bool = True) -> list[int]:
    """``typed`` for one source's rows in crawl order, with the crawler's
    count of where the rule holds (``RuleTrust``) kept over them and the
    unlabelled pages between them (``--no-rule``: the model alone)."""
    if not _RULE[0]:
        return [typed(m, r, page_only) for r in test]
    trust = RuleTrust()
    out = []
    for r in test:
        for x in r.get("before", ()):
            decide(m.score(x), m.threshold, x[LD_AT], trust, r["source"], bare(x))  # typed by the crawler, not scored here
        out.append(typed(m, r, page_only, trust))
    return out


_RULE = [True]  # False with --no-rule (read by the forked fold workers)
_CONTENTS = [True]  # False with --no-contents (read by the forked fold workers)
_TERMS = [True]  # False with --no-terms


_ROWS: list[dict] = []  # every source's rows, shared with the fold workers (fork)


def loso(source: str) -> tuple[float, float, float]:
    """The model fitted without ``source`` (its threshold too), scored on it."""
    train = [r for r in _ROWS if r["source"] not in (source, "wcxb-test")]
    m = Model(fitted(train, _OPTIONS[0]))
    test = [r for r in _ROWS if r["source"] == source]
    if _DUMP:
        dump(_DUMP[0] / f"{source}.json", m, test)
    return metrics([r["y"] for r in test], typed_all(m, test))


_DUMP: list[Path] = []  # --dump's directory (read by the forked fold workers)


def dump(path: Path, m: Model, test: Sequence[dict]) -> None:
    """A held-out source's pages in crawl order as the fold's model saw
    them (``--dump``): for each labelled page its label, feature vector,
    the model's score and the page-only model's, and the unlabelled pages
    typed with a template before it (vector and score), with the fold's
    threshold; ``python -m tools.pagetypes.replay`` types them again with
    ``crawler.pagetypes.classify``'s decision (or a variant of it) in seconds."""
    pm = page_model()
    rows = [{"url": r["url"], "y": r["y"], "tpl": r["tpl"], "thin": r["thin"], "x": r["x"],
             "contents": r.get("contents", False),
             "score": m.score(r["x"]), "page_score": pm.score(r["x"]),
             "before": [[x, m.score(x)] for x in r.get("before", ())]} for r in test]
    path.write_text(json.dumps({"source": test[0]["source"], "threshold": m.threshold,
                                "page_threshold": pm.threshold, "features": list(FEATURES), "rows": rows}))


def loso_set(tree_set: str) -> dict[str, tuple[float, float, float]]:
    """The model fitted without every source of ``tree_set`` (one --trees
    directory), scored on each of them."""
    train = [r for r in _ROWS if r["set"] != tree_set and r["source"] != "wcxb-test"]
    m = Model(fitted(train, _OPTIONS[0]))
    out = {}
    for source in sorted({r["source"] for r in _ROWS if r["set"] == tree_set}):
        test = [r for r in _ROWS if r["source"] == source]
        out[source] = metrics([r["y"] for r in test], typed_all(m, test))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_fit_arguments(ap)  # --trees, --wcxb, --no-retype, --monotone, --source-weight, --weigh-threshold
    ap.add_argument("--only", default="", help="held-out sources to report (default: all)")
    ap.add_argument("--no-loso", action="store_true",
                    help="score the shipped models only (on trees they never saw: a --freshN set)")
    ap.add_argument("--shipped", type=Path, default=None,
                    help="a classifier.json to report as shipped (its features a prefix of today's)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="sources (with --by-set, directories) left out at once (processes)")
    ap.add_argument("--by-set", action="store_true",
                    help="leave out one --trees directory at a time, not one source (cheaper: to compare variants)")
    ap.add_argument("--no-terms", action="store_true",
                    help="type indexes of terms as the model says (before crawler.pagetypes.rules.term_index)")
    ap.add_argument("--no-contents", action="store_true",
                    help="type contents lists as the model and rule say (before crawler.pagetypes.template.contents_list)")
    ap.add_argument("--no-rule", action="store_true",
                    help="type with the model alone: no link-density rule in its close calls (before 2026-11-27), "
                         "nor bare_navigation")
    ap.add_argument("--dump", type=Path, default=None,
                    help="write each left-out source's scores and vectors into this directory "
                         "(one source left out at a time only), for python -m tools.pagetypes.replay")
    args = ap.parse_args()
    if args.dump is not None:
        if args.by_set or args.no_loso:
            raise SystemExit("--dump writes the one-source-left-out folds: not with --by-set or --no-loso")
        args.dump.mkdir(parents=True, exist_ok=True)
        _DUMP.append(args.dump)
    _RULE[0] = not args.no_rule
    _CONTENTS[0] = not args.no_contents
    _TERMS[0] = not args.no_terms
    _OPTIONS[0] = options_of(args)
    # WCXB's parts are sets of their own: --by-set scores its test part by
    # a fit on its training part and the trees.
    rows = read_rows(args.wcxb, args.trees, retype=not args.no_retype)
    _ROWS[:] = rows
    sources = sorted({r["source"] for r in rows} - {"wcxb-train"})
    only = {s for s in args.only.split(",") if s}
    reported = [s for s in sources if not only or s in only]
    shipped = model() if args.shipped is None else prefix_model(args.shipped)
    if args.no_loso:
        left_out = [(float("nan"),) * 3 for _ in reported]
    else:
        # Forked: the workers read the rows this process made (_ROWS).
        with get_context("fork").Pool(max(1, args.jobs)) as pool:
            if args.by_set:
                sets = sorted({r["set"] for r in rows if r["source"] in reported})
                folds = {k: v for found in pool.map(loso_set, sets, chunksize=1) for k, v in found.items()}
                left_out = [folds[s] for s in reported]
            else:
                left_out = pool.map(loso, reported, chunksize=1)
    print(f"{'held out':22}{'pages':>6}{'index':>6}   {'shipped':>17}   {'link density':>17}   {'loso':>17}   target")
    met = 0
    for source, fold in zip(reported, left_out):
        test = [r for r in rows if r["source"] == source]
        ys = [r["y"] for r in test]
        try:
            ship = metrics(ys, typed_all(shipped, test, args.shipped is None))
        except (IndexError, TypeError):
            ship = (float("nan"),) * 3
        dens = metrics(ys, [1 if r["x"][LD_AT] > LINK_DENSITY else 0 for r in test])
        judged = ship if args.no_loso else fold
        ok = meets_target(judged, dens)
        met += ok

        def cell(v: tuple[float, float, float]) -> str:
            if not sum(ys):  # no index page to find: only the info recall means anything
                return f"{'-':>5} {'-':>5} {v[2]:.3f}"
            return f"{v[0]:.3f} {v[1]:.3f} {v[2]:.3f}"

        verdict = "-" if not sum(ys) else "met" if ok else "missed"
        print(f"{source:22}{len(test):6}{sum(ys):6}   {cell(ship)}   {cell(dens)}   {cell(fold)}   {verdict}",
              flush=True)
    with_index = sum(1 for s in reported if any(r["y"] for r in rows if r["source"] == s))
    print("(each cell: balanced accuracy, index recall, info recall; target judged on "
          f"{'shipped' if args.no_loso else 'loso'}: met on {met} of {with_index} sources with index pages)")


if __name__ == "__main__":
    main()
