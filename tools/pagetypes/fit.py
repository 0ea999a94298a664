"""Gradient-boosted regression trees for the page classifier, in numpy.

``fit(xs, ys, rounds, depth, learning_rate, monotone, weights)`` returns
the model's parameters as ``crawler.pagetypes.classify.Model`` reads them (and
``crawler/data/classifier*.json`` store them): the trees, each a leaf value
or ``[column, threshold, left, right]``, with the feature names of the
columns (the first ``len(xs[0])`` of ``crawler.pagetypes.features.FEATURES``).
``grow_tree`` and ``tree_values`` are one tree's fit and evaluation.
Deterministic: the same rows give the same trees, to the bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from crawler.pagetypes.features import FEATURES


def grow_tree(x, g, h, idx, depth, min_leaf=5, lam=1.0, orders=None, monotone=None, bounds=(-np.inf, np.inf)):
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
    return [j, t, grow_tree(x, g, h, idx[mask], depth - 1, min_leaf, lam, orders, monotone, left_bounds),
            grow_tree(x, g, h, idx[~mask], depth - 1, min_leaf, lam, orders, monotone, right_bounds)]


def tree_values(tree, x):
    """A tree's leaf values for every row of ``x``."""
    if not isinstance(tree, list):
        return np.full(len(x), tree)
    j, t, left, right = tree
    out = np.empty(len(x))
    mask = x[:, j] <= t
    out[mask] = tree_values(left, x[mask])
    out[~mask] = tree_values(right, x[~mask])
    return out


def fit(xs: Sequence[Sequence[float]], ys: Sequence[int], rounds: int = 150, depth: int = 2,
        learning_rate: float = 0.1, monotone: dict[int, int] | None = None,
        weights: Sequence[float] | None = None) -> dict[str, Any]:
    """The model's parameters, threshold 0.5 (callers choose their own).
    ``monotone``: {column: +1 or -1} (``grow_tree``); ``weights``: each
    row's weight (None: all 1), scaled to a mean of 1 (only their ratios
    count), before the classes are balanced."""
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
    params: dict[str, Any] = {"features": list(FEATURES[:x.shape[1]]), "trees": [], "learning_rate": learning_rate,
                              "threshold": 0.5, "rounds": rounds, "depth": depth}
    if monotone:
        params["monotone"] = {FEATURES[j]: sign for j, sign in sorted(monotone.items())}
    idx = np.arange(n)
    orders = [np.argsort(x[:, j], kind="stable") for j in range(x.shape[1])]
    for _ in range(rounds):
        p = 1.0 / (1.0 + np.exp(-margin))
        g = (p - y) * w
        h = np.maximum(p * (1 - p), 1e-6) * w
        tree = grow_tree(x, g, h, idx, depth, orders=orders, monotone=monotone)
        params["trees"].append(tree)
        margin += learning_rate * tree_values(tree, x)
    return params
