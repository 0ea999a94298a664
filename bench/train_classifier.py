"""Fit the page classifier and report its accuracy on held-out pages.

    python bench/train_classifier.py [--data DIR] [--write]

``--data`` is a directory of gzipped pages with a ``labels.jsonl`` (one
``{"file", "url", "label", "wcxb_type"}`` a line). The default is the small
sample kept in the repository, ``tests/data/pagetypes``: it holds held-out
pages only, so with it this script evaluates the shipped model and fits
nothing. To refit, pass the full labelled set (WCXB's development split:
``--labels labels-all.jsonl``, 1,326 pages), which is kept outside the
repository: see ``tests/data/pagetypes/README.md`` for where it comes from.
The page-only model reads the first 39 features of
``crawler.classify.FEATURES`` (``PAGE_ONLY``): the page's own, without the
template features and the URL's documentation names, which the template
model adds.

The labelled set is split by a hash of each file name: 30 % is held out and
never seen by the fit (weights, scaling and threshold all come from the other
70 %). Prints balanced accuracy and index recall on the held-out part for the
T-spider rule, a link-density rule and the model; ``--write`` stores the model
in ``crawler/data/classifier_page.json``: the crawler's model for a page
typed alone, without its site's template (``bench/bench_pagetypes.py``
fits the other one).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawler.classify import (FEATURES, INDEX, Model, classify, feature_vector, thin_navigation,  # noqa: E402
                              tspider_rule)
from crawler.template import OWN_FEATURES  # noqa: E402
from crawler.extract import analyze  # noqa: E402

HELD_OUT_SHARE = 30  # percent
PAGE_ONLY = FEATURES.index(OWN_FEATURES[0])  # the features the page-only model reads
SAMPLE = ROOT / "tests/data/pagetypes"  # held-out pages only (its README.md)


def held_out(name: str) -> bool:
    return int(hashlib.sha1(name.encode()).hexdigest(), 16) % 100 < HELD_OUT_SHARE


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


def metrics(y: Sequence[int], pred: Sequence[int],
            weights: Sequence[float] | None = None) -> tuple[float, float, float]:
    """Balanced accuracy, index recall, info recall; ``weights``: what each
    page counts for (None: 1)."""
    w: Sequence[float] = [1] * len(y) if weights is None else weights
    tp = sum(wi for wi, a, b in zip(w, y, pred) if a == 1 and b == 1)
    tn = sum(wi for wi, a, b in zip(w, y, pred) if a == 0 and b == 0)
    pos = sum(wi for wi, a in zip(w, y) if a == 1)
    neg = sum(wi for wi, a in zip(w, y) if a == 0)
    recall_index = tp / pos if pos else 0.0
    recall_info = tn / neg if neg else 0.0
    return (recall_index + recall_info) / 2, recall_index, recall_info


def _tree(x, g, h, idx, depth, min_leaf=5, lam=1.0, orders=None, monotone=None, bounds=(-np.inf, np.inf)):
    """One regression tree on gradients g and hessians h (XGBoost's gain);
    ``x`` a 2-D numpy array, ``g``, ``h`` and ``idx`` numpy arrays (``idx``
    ascending). ``orders``: each column's stable argsort over all of ``x``,
    made once a fit: a node's rows in a column's order are then taken from
    it rather than sorted again (the same order, ties by row).
    ``monotone``: {column: +1 or -1}, columns the score may only rise
    (+1) or fall (-1) with: a split on one is taken only if its children's
    values are in that order, and every leaf below it stays on its side of
    their midpoint (``bounds``: XGBoost's monotone constraints)."""
    if orders is None:
        orders = [np.argsort(x[:, j], kind="stable") for j in range(x.shape[1])]
    G = float(g[idx].sum())
    H = float(h[idx].sum())
    lo, hi = bounds
    leaf = min(max(-G / (H + lam), lo), hi)
    if depth == 0 or len(idx) < 2 * min_leaf:
        return leaf
    base = G * G / (H + lam)
    best_gain, best_split = 0.0, None
    n = len(idx)
    ks = np.arange(n - 1)
    member = np.zeros(len(x), dtype=bool)
    member[idx] = True
    for j in range(x.shape[1]):
        order = orders[j][member[orders[j]]]
        vals = x[order, j]
        gl = np.cumsum(g[order])[:-1]
        hl = np.cumsum(h[order])[:-1]
        ok = (ks + 1 >= min_leaf) & (n - ks - 1 >= min_leaf) & (vals[1:] != vals[:-1])
        sign = monotone.get(j, 0) if monotone else 0
        if sign:
            ok &= sign * (-(G - gl) / (H - hl + lam) + gl / (hl + lam)) >= 0
        if not ok.any():
            continue
        gain = gl * gl / (hl + lam) + (G - gl) ** 2 / (H - hl + lam) - base
        gain = np.where(ok, gain, -np.inf)
        k = int(np.argmax(gain))
        if gain[k] > best_gain:
            best_gain, best_split = float(gain[k]), (j, float((vals[k] + vals[k + 1]) / 2))
    if best_split is None:
        return leaf
    j, t = best_split
    mask = x[idx, j] <= t
    left_bounds = right_bounds = bounds
    if monotone and monotone.get(j):
        gl_, hl_ = float(g[idx[mask]].sum()), float(h[idx[mask]].sum())
        mid = (min(max(-gl_ / (hl_ + lam), lo), hi) + min(max(-(G - gl_) / (H - hl_ + lam), lo), hi)) / 2
        below, above = (lo, mid), (mid, hi)
        left_bounds, right_bounds = (below, above) if monotone[j] > 0 else (above, below)
    return [j, t, _tree(x, g, h, idx[mask], depth - 1, min_leaf, lam, orders, monotone, left_bounds),
            _tree(x, g, h, idx[~mask], depth - 1, min_leaf, lam, orders, monotone, right_bounds)]


def _apply(tree, x):
    """A tree's leaf values for every row of ``x``."""
    if not isinstance(tree, list):
        return np.full(len(x), tree)
    j, t, left, right = tree
    out = np.empty(len(x))
    mask = x[:, j] <= t
    out[mask] = _apply(left, x[mask])
    out[~mask] = _apply(right, x[~mask])
    return out


def fit(xs, ys, rounds=150, depth=2, learning_rate=0.1, monotone=None, weights=None) -> dict:
    """``weights``: each row's weight (None: all 1), scaled to a mean of 1
    (only their ratios count), before the classes are balanced."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    n = len(y)
    sw = np.ones(n) if weights is None else np.asarray(weights, dtype=float)
    sw = sw * (n / sw.sum())
    total = sw.sum()
    pos = sw[y == 1].sum()
    # Balance the classes so that the threshold means the same on any sample.
    w = sw * np.where(y == 1, total / (2 * pos), total / (2 * (total - pos)))
    margin = np.zeros(n)
    # The first len(xs[0]) of FEATURES: the page-only model reads a prefix.
    params = {"features": list(FEATURES[:x.shape[1]]), "trees": [], "learning_rate": learning_rate,
              "threshold": 0.5, "rounds": rounds, "depth": depth}
    if monotone:
        params["monotone"] = {FEATURES[j]: sign for j, sign in sorted(monotone.items())}
    idx = np.arange(n)
    orders = [np.argsort(x[:, j], kind="stable") for j in range(x.shape[1])]
    for _ in range(rounds):
        p = 1.0 / (1.0 + np.exp(-margin))
        g = (p - y) * w
        h = np.maximum(p * (1 - p), 1e-6) * w
        tree = _tree(x, g, h, idx, depth, orders=orders, monotone=monotone)
        params["trees"].append(tree)
        margin += learning_rate * _apply(tree, x)
    return params


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
    ap.add_argument("--write", action="store_true", help="store the fitted model in crawler/data/classifier_page.json")
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
    # page whatever the model says (crawler.classify.thin_navigation).
    pred = [1 if thin_navigation(r["page"]) or m.score(r["x"]) >= threshold else 0 for r in test]
    print(f"model (t={threshold:.2f})     balanced %.3f  index recall %.3f  info recall %.3f" % metrics(ys, pred))
    for r, p in zip(test, pred):
        if p != r["y"]:
            print(f"  wrong: {r['file']} label={r['label']} ({r['wcxb_type']}) {r['url'][:90]}")
    if args.write:
        out = ROOT / "crawler/data/classifier_page.json"
        out.parent.mkdir(exist_ok=True)
        params["trained_on"] = (f"{len(train)} pages of {args.data.name}/{args.labels} "
                                f"(held-out share {HELD_OUT_SHARE}%)")
        out.write_text(json.dumps(params, indent=1) + "\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
