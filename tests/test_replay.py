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


def test_a_mix_of_the_two_models_decides_on_both_margins():
    from replay_pagetypes import mixed

    # Template model 0.05 under its threshold (0.57), the page-only model
    # 0.30 over its own (0.25): the mix at w 0.2 is 0.57 + 0.8 (-0.05) + 0.2 (0.30) = 0.59.
    assert mixed(0.2)(0.52, 0.57, 0.55, 0.25) == pytest.approx(0.59)
    assert mixed(0.0)(0.52, 0.57, 0.55, 0.25) == pytest.approx(0.52)
    assert mixed(0.0, log_odds=True)(0.57, 0.57, 0.9, 0.25) == pytest.approx(0.57)
    assert mixed(1.0, log_odds=True)(0.1, 0.57, 0.25, 0.25) == pytest.approx(0.57)
    d = source([row(1, 0.52, 0.10, page_score=0.55), row(0, 0.60, 0.10, page_score=0.01)])
    assert replay(d, None) == [0, 1]
    assert replay(d, None, mixed(0.2)) == [1, 0]  # 0.59 and 0.60 - 0.048 - 0.048 = 0.504
    assert replay(d, None, mixed(0.0)) == replay(d, None)


def test_the_rule_trusted_by_a_bound_on_its_agreement():
    from replay_pagetypes import BoundTrust

    def counted(agreed: int, n: int, trust):
        for k in range(n):
            trust.record("s", k < agreed)
        return trust.trusted("s")

    # Wilson's bound at z 1.0 for 18 of 19 is 0.870; for 9 of 9, 0.9.
    assert counted(18, 19, BoundTrust(1.0, 0.87)) and not counted(18, 19, BoundTrust(1.0, 0.871))
    assert not counted(9, 9, BoundTrust(1.0, 0.5))  # fewer than 10 counted
    assert counted(9, 9, BoundTrust(1.0, 0.899, min_pages=5))
    assert not counted(9, 9, BoundTrust(1.0, 0.901, min_pages=5))
    assert counted(0, 0, BoundTrust(0.0, 0.0, min_pages=0)) is False  # nothing counted: not trusted
    # In a replay: a close call (0.60 over 0.57) the rule types info once trusted.
    sure = [[vector(0.9), 0.95]] * 18 + [[vector(0.1), 0.95]]  # 18 of 19 agree
    d = source([row(0, 0.60, 0.10, before=sure)])
    assert replay(d) == [1]  # the shipped trust: 18 of 19 is under 95 %
    assert replay(d, trust=BoundTrust(1.0, 0.85)) == [0]
