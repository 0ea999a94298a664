"""How the page-type models are judged: the held-out split of the labelled
set, balanced accuracy and recalls, the link-density rule they must beat,
and the issue's target.

``held_out(name)``: whether a labelled file is in the 30 % no fit ever sees
(by a hash of its name; ``tests/data/pagetypes`` holds pages of it).
``metrics(y, pred, weights)``: balanced accuracy, index recall, info recall.
``meets_target(got, dens)``: balanced accuracy and index recall >= 0.92,
and never below the link-density rule (``LINK_DENSITY`` over the feature
at ``LD_AT``). ``bare(x)``: ``crawler.pagetypes.rules.bare_navigation`` of a page
by its feature vector.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from crawler.pagetypes.features import FEATURES
from crawler.pagetypes.rules import RULE_DENSITY, bare_navigation
from crawler.pagetypes.template import OWN_FEATURES

HELD_OUT_SHARE = 30  # percent
LINK_DENSITY = RULE_DENSITY
# Where a feature vector holds the link-density rule's figure (the
# crawler's ``rule_density``, the same with a template known or not).
LD_AT = FEATURES.index("content_link_density")
_OWN = slice(FEATURES.index(OWN_FEATURES[0]), FEATURES.index(OWN_FEATURES[0]) + len(OWN_FEATURES))


def held_out(name: str) -> bool:
    return int(hashlib.sha1(name.encode()).hexdigest(), 16) % 100 < HELD_OUT_SHARE


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


def meets_target(got: Sequence[float], dens: Sequence[float]) -> bool:
    """The issue's target on a source, from (balanced accuracy, index
    recall, info recall) of the typing and of the link-density rule:
    balanced accuracy and index recall >= 0.92, and never below the rule."""
    return got[0] >= 0.92 and got[1] >= 0.92 and got[0] >= dens[0] - 1e-9


def bare(x: Sequence[float]) -> bool:
    """``bare_navigation`` of a page by its feature vector."""
    return bare_navigation(x[_OWN])
