"""The page-only model (``crawler/data/classifier_page.json``): fit it and
report its accuracy on held-out pages.

    python -m tools.pagetypes.page_model [--data DIR] [--labels FILE] [--write [--out FILE]]

``--data`` is a directory of gzipped pages with a ``labels.jsonl`` (one
``{"file", "url", "label", "wcxb_type"}`` a line). The default is the small
sample kept in the repository, ``tests/data/pagetypes``: it holds held-out
pages only, so with it this script evaluates the shipped model and fits
nothing. To refit, pass the full labelled set (WCXB's development split:
``--labels labels-all.jsonl``, 1,326 pages), which is kept outside the
repository: see ``tests/data/pagetypes/README.md`` for where it comes from.
The page-only model reads the first 39 features of
``crawler.pagetypes.features.FEATURES`` (``PAGE_ONLY``): the page's own, without the
template features and the URL's documentation names, which the template
model adds.

The labelled set is split by a hash of each file name: 30 % is held out and
never seen by the fit (weights, scaling and threshold all come from the other
70 %). Prints balanced accuracy and index recall on the held-out part for the
T-spider rule, a link-density rule and the model; ``--write`` stores the model
in ``crawler/data/classifier_page.json``: the crawler's model for a page
typed alone, without its site's template (``tools.pagetypes.template_model``
fits the other one).

API: ``load(data, labels)`` reads the labelled pages into rows (feature
vector ``x``, label ``y``); ``choose(rows)`` picks the model's size and
threshold by cross-validation; ``tools.pagetypes.fit.fit`` fits it;
``write_model(params, out, trained_on)`` stores it as the crawler reads it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from pathlib import Path
from typing import Any

from crawler.pagetypes.classify import Model, classify
from crawler.pagetypes.features import FEATURES, feature_vector
from crawler.pagetypes.rules import INDEX, thin_navigation, tspider_rule
from crawler.reading.extract import analyze
from crawler.pagetypes.template import OWN_FEATURES
from tools.pagetypes.fit import fit
from tools.pagetypes.measure import HELD_OUT_SHARE, held_out, metrics

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "crawler/data/classifier_page.json"
PAGE_ONLY = FEATURES.index(OWN_FEATURES[0])  # the features the page-only model reads
SAMPLE = ROOT / "tests/data/pagetypes"  # held-out pages only (its README.md)


def load(data: Path, labels: str = "labels.jsonl") -> list[dict]:
    rows = []
    for line in (data / labels).read_text().splitlines():
        row = json.loads(line)
        if not isinstance(row.get("url"), str):
            continue  # one page of the source has no URL
        # With its URL, as the crawler analyses a page (links to the page
        # itself are told apart from links to other pages).
        page = analyze(gzip.decompress((data / row["file"]).read_bytes()), row["url"])
        row["page"] = page
        # The page-only model reads the features a lone page gives, before
        # those of what is left once its site's template is set aside
        # (chosen by cross-validation on the training part: 0.918 with
        # these 39, 0.904 with all 51).
        row["x"] = feature_vector(row["url"], page)[:PAGE_ONLY]
        row["y"] = 1 if row["label"] == INDEX else 0
        rows.append(row)
    return rows


def cv_scores(rows, folds=5, **kw) -> list[tuple[float, int]]:
    order = rows[:]
    random.Random(7).shuffle(order)
    scored = []
    for k in range(folds):
        test = order[k::folds]
        train = [r for i, r in enumerate(order) if i % folds != k]
        m = Model(fit([r["x"] for r in train], [r["y"] for r in train], **kw))
        scored += [(m.score(r["x"]), r["y"]) for r in test]
    return scored


def write_model(params: dict[str, Any], out: Path, trained_on: str) -> None:
    """Store a fitted model as the crawler reads it (``crawler.pagetypes.classify.page_model``)."""
    params["trained_on"] = trained_on
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(params, indent=1) + "\n")


def choose(rows) -> tuple[dict, float, float]:
    """Model size and threshold by cross-validation on the training part: the
    best balanced accuracy among thresholds keeping index recall >= 0.93."""
    best = (-1.0, {}, 0.5)
    for kw in ({"depth": 2, "rounds": 150}, {"depth": 3, "rounds": 150}, {"depth": 2, "rounds": 300}):
        scored = cv_scores(rows, **kw)
        ys = [y for _, y in scored]
        for t in [i / 100 for i in range(10, 91)]:
            bal, rec, _ = metrics(ys, [1 if s >= t else 0 for s, _ in scored])
            if rec >= 0.93 and bal > best[0]:
                best = (bal, kw, t)
    return best[1], best[2], best[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=SAMPLE,
                    help="directory with labels.jsonl and the gzipped pages (default: the in-repo sample)")
    ap.add_argument("--labels", default="labels.jsonl", help="the labels file in --data")
    ap.add_argument("--write", action="store_true", help="store the fitted model in --out")
    ap.add_argument("--out", type=Path, default=OUT, help="the model file --write stores (default: the shipped one)")
    args = ap.parse_args()
    rows = load(args.data, args.labels)
    train = [r for r in rows if not held_out(r["file"])]
    test = [r for r in rows if held_out(r["file"])]
    print(f"pages: {len(rows)} (train {len(train)}, held out {len(test)}: "
          f"{sum(r['y'] for r in test)} index, {len(test) - sum(r['y'] for r in test)} info)")

    ys = [r["y"] for r in test]
    base = [1 if tspider_rule(r["url"], r["page"]) == INDEX else 0 for r in test]
    print("T-spider rule      balanced %.3f  index recall %.3f  info recall %.3f" % metrics(ys, base))
    if not train:
        # Nothing to fit on (the in-repo sample): report the shipped model.
        shipped = [1 if classify(r["url"], r["page"]) == INDEX else 0 for r in test]
        print("shipped model      balanced %.3f  index recall %.3f  info recall %.3f" % metrics(ys, shipped))
        print(f"no training pages in {args.data}: pass --data with the full labelled set to refit")
        if args.write:
            sys.exit("--write needs training pages")
        return

    ld = FEATURES.index("link_density")
    best_t = max((metrics([r["y"] for r in train], [1 if r["x"][ld] >= t / 100 else 0 for r in train])[0], t / 100)
                 for t in range(1, 100))[1]
    dens = [1 if r["x"][ld] >= best_t else 0 for r in test]
    print(f"link density>={best_t:.2f} balanced %.3f  index recall %.3f  info recall %.3f" % metrics(ys, dens))

    kw, threshold, cv_bal = choose(train)
    print(f"chosen by 5-fold CV on the training part: {kw}, threshold {threshold:.2f} (CV balanced {cv_bal:.3f})")
    params = fit([r["x"] for r in train], [r["y"] for r in train], **kw)
    params["threshold"] = threshold
    m = Model(params)
    # As the crawler types a page alone: a thin page of links is an index
    # page whatever the model says (crawler.pagetypes.rules.thin_navigation).
    pred = [1 if thin_navigation(r["page"]) or m.score(r["x"]) >= threshold else 0 for r in test]
    print(f"model (t={threshold:.2f})     balanced %.3f  index recall %.3f  info recall %.3f" % metrics(ys, pred))
    for r, p in zip(test, pred):
        if p != r["y"]:
            print(f"  wrong: {r['file']} label={r['label']} ({r['wcxb_type']}) {r['url'][:90]}")
    if args.write:
        write_model(params, args.out, f"{len(train)} pages of {args.data.name}/{args.labels} "
                                      f"(held-out share {HELD_OUT_SHARE}%)")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
