"""bench/replay_pagetypes.py types dumped folds as the crawler types pages:
the same decision (``crawler.classify.decide``, ``RuleTrust``,
``bare_navigation``, ``thin_navigation``), in crawl order."""

import json
import math
import sys

import pytest

from crawler.classify import FEATURES, RULE_MIN_PAGES
from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
from replay_pagetypes import load, replay, score, without_bare  # noqa: E402

LD = FEATURES.index("content_link_density")
PROSE = FEATURES.index("own_prose_log")


def vector(ld: float, prose: int = 1000) -> list[float]:
    x = [0.0] * len(FEATURES)
    x[LD] = ld
    x[PROSE] = math.log1p(prose)
    return x


def row(y: int, score: float, ld: float, prose: int = 1000, tpl: bool = True, thin: bool = False,
        page_score: float = 0.0, before: list | None = None) -> dict:
    return {"url": "http://t.test/", "y": y, "tpl": tpl, "thin": thin, "x": vector(ld, prose), "score": score,
            "page_score": page_score, "before": before or []}


def source(rows: list[dict]) -> dict:
    return {"source": "t", "threshold": 0.57, "page_threshold": 0.25, "features": list(FEATURES), "rows": rows}


def test_the_replay_types_pages_as_the_crawler_does():
    sure = [[vector(0.9), 0.95]] * RULE_MIN_PAGES  # the model sure, the rule agreeing: the rule is trusted
    d = source([
        row(0, 0.60, 0.10, before=sure),  # a close call: the rule's info (the model alone: index)
        row(1, 0.00, 0.90, tpl=False, thin=True),  # typed alone, thin: index
        row(0, 0.00, 0.90, tpl=False, page_score=0.24),  # typed alone: the page-only model's info
        row(1, 0.30, 0.90, prose=50),  # nothing of its own, a close call: index
        row(0, 0.30, 0.90),  # the same with text of its own: the model's (the row above, 0.27 from the
                             # threshold, was counted against the rule: 10 of 11, not trusted)
        row(0, 0.05, 0.90, prose=50),  # nothing of its own, the model sure it is info: info
    ])
    assert replay(d) == [0, 1, 0, 1, 0, 0]
    assert replay(d, None) == [1, 1, 0, 0, 0, 0]
    assert replay(d, without_bare) == [0, 1, 0, 1, 0, 0]  # the trusted rule types the bare page index too
    # Where the rule is not trusted (nothing counted yet), only bare_navigation types it index.
    untrusted = source([row(1, 0.30, 0.90, prose=50), row(1, 0.30, 0.90, prose=1000)])
    assert (replay(untrusted), replay(untrusted, without_bare)) == ([1, 0], [0, 0])
    assert score(d, replay(d)) == ((1.0, 1.0, 1.0), True)
    # The model alone types an info page index and misses the bare index page:
    # index recall 1/2, info recall 3/4.
    got, ok = score(d, replay(d, None))
    assert got == pytest.approx((5 / 8, 1 / 2, 3 / 4)) and ok is False


def test_a_source_without_index_pages_has_no_verdict():
    d = source([row(0, 0.1, 0.1), row(0, 0.2, 0.1)])
    assert score(d, replay(d)) == ((0.5, 0.0, 1.0), None)  # no index recall to have: 0


def test_a_dump_of_other_features_is_refused(tmp_path):
    (tmp_path / "t.json").write_text(json.dumps({**source([]), "features": ["links_log"]}))
    with pytest.raises(SystemExit, match="other features"):
        load(tmp_path)
    with pytest.raises(SystemExit, match="no dumped source"):
        load(tmp_path / "missing")
