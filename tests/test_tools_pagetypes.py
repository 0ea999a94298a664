"""tools.pagetypes: the labelling of documentation trees (``sources``), the
boosted trees (``fit``), the template model's fit (``template_model``),
and the replay of dumped folds (``replay``), which types pages as the
crawler types them: the same decision (``crawler.pagetypes.rules.decide``,
``RuleTrust``, ``bare_navigation``, ``thin_navigation``), in crawl order."""

import json
import math
import random

import pytest

from crawler.pagetypes.classify import Model
from crawler.pagetypes.features import FEATURES
from crawler.pagetypes.rules import RULE_MIN_PAGES
from tools.pagetypes.fit import fit, grow_tree, tree_values
from tools.pagetypes.measure import metrics
from tools.pagetypes.replay import BoundTrust, load, mixed, replay, score, without_bare
from tools.pagetypes.sources import Source, build, crawl_order, label
from tools.pagetypes.template_model import FitOptions, fitted, source_weights, write_model

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


def _dipping(sign: int) -> tuple[list[list[float]], list[int]]:
    """Pages whose label follows the first column (rising with ``sign`` 1,
    falling with -1) but for a band in the middle where it turns over."""
    rng = random.Random(3)
    xs, ys = [], []
    for _ in range(400):
        a, b = rng.random(), rng.random()
        up = a > 0.5 and not 0.6 < a < 0.7
        xs.append([a if sign > 0 else 1 - a, b])
        ys.append(1 if up else 0)
    return xs, ys


def _turns(params: dict, sign: int) -> int:
    """Steps along the first column (the second held) where the score goes
    against ``sign``."""
    m = Model(params)
    scores = [m.score([i / 100, 0.5]) for i in range(101)]
    return sum(1 for a, b in zip(scores, scores[1:]) if sign * (b - a) < -1e-12)


@pytest.mark.parametrize("sign", [1, -1])
def test_a_monotone_feature_never_turns_the_score_back(sign):
    xs, ys = _dipping(sign)
    free = fit(xs, ys, rounds=60, depth=2)
    held = fit(xs, ys, rounds=60, depth=2, monotone={0: sign})
    # Unconstrained, the trees learn the band (so the check below can fail) ...
    assert _turns(free, sign) > 0
    # ... constrained, the score only ever moves one way along the column,
    assert _turns(held, sign) == 0
    assert held["monotone"] == {"links_log": sign}
    # and it still reads the column: it rises (or falls) across it.
    m = Model(held)
    assert sign * (m.score([1.0, 0.5]) - m.score([0.0, 0.5])) > 0.5


def test_no_constraint_fits_the_trees_it_always_did():
    xs, ys = _dipping(1)
    assert fit(xs, ys, rounds=20, depth=3) == fit(xs, ys, rounds=20, depth=3, monotone={})
    assert "monotone" not in fit(xs, ys, rounds=5, depth=2)


@pytest.mark.parametrize("sign", [1, -1])
def test_every_tree_under_a_constraint_is_monotone_on_its_own(sign):
    """Trees of depth 3 on gradients that turn over along the constrained
    column, one at a time: each must keep to the constraint everywhere (the
    leaves clamped, the bounds handed down through splits on the other
    column), whatever the other column holds."""
    import numpy as np

    rng = np.random.default_rng(0)
    grid = np.linspace(0, 1, 201)
    for _ in range(100):
        x = rng.random((60, 2))
        g = rng.normal(size=60) + 2 * np.sin(8 * x[:, 0])
        h = rng.uniform(0.05, 1.0, size=60)
        tree = grow_tree(x, g, h, np.arange(60), 3, monotone={0: sign})
        for other in (0.1, 0.5, 0.9):
            values = tree_values(tree, np.column_stack([grid, np.full(len(grid), other)]))
            assert np.all(sign * np.diff(values) >= -1e-12)


def test_weights_of_one_fit_the_trees_it_always_did():
    xs, ys = _dipping(1)
    assert fit(xs, ys, rounds=20, depth=2) == fit(xs, ys, rounds=20, depth=2, weights=[1.0] * len(ys))
    # A common factor changes nothing either: the classes are balanced after the weights.
    assert fit(xs, ys, rounds=20, depth=2) == fit(xs, ys, rounds=20, depth=2, weights=[3.0] * len(ys))


def test_a_row_weighed_more_pulls_the_fit_its_way():
    """Two copies of one feature vector with opposite labels: unweighed the
    score sits at 0.5; the index copy weighed three times the info copy's
    weight moves it up, balanced against the other rows' classes."""
    xs = [[0.0], [0.0], [1.0], [1.0]] * 10  # ten of each: a leaf holds at least 5 rows
    ys = [1, 0, 1, 0] * 10
    even = Model(fit(xs, ys, rounds=30, depth=1))
    leaning = Model(fit(xs, ys, rounds=30, depth=1, weights=[3.0, 1.0, 1.0, 3.0] * 10))
    assert even.score([0.0]) == pytest.approx(0.5)
    assert leaning.score([0.0]) > 0.6 and leaning.score([1.0]) < 0.4


def test_each_source_weighs_the_same_in_the_template_fit():
    rows = [{"source": "big"}] * 3 + [{"source": "small"}]
    assert source_weights(rows, 0.0) is None  # the shipped fit: every page 1
    assert source_weights(rows, 1.0) == pytest.approx([2 / 3] * 3 + [2.0])  # 2 pages a source on average
    assert source_weights(rows[:1], 1.0, among=rows) == pytest.approx([2 / 3])  # sizes counted in ``among``
    assert source_weights(rows, 0.5) == pytest.approx([(2 / 3) ** 0.5] * 3 + [2 ** 0.5])
    assert metrics([1, 0, 1, 0], [1, 0, 0, 0], None) == (0.75, 0.5, 1.0)
    assert metrics([1, 0, 1, 0], [1, 0, 0, 0], [3, 1, 1, 1]) == (0.875, 0.75, 1.0)
    assert metrics([1, 0, 1, 0], [1, 1, 0, 0], [1, 3, 1, 1]) == (0.375, 0.5, 0.25)


def _separable(width: int) -> list[dict]:
    return [{"source": f"s{k}", "x": [float(i % 2)] * width, "y": i % 2} for k in range(6) for i in range(20)]


def test_a_weighed_fit_says_so_in_the_model_it_writes():
    width = len(FEATURES)
    rows = _separable(width)
    assert "source_weight" not in fitted(rows)
    params = fitted(rows, FitOptions(source_power=1.0))
    assert (params["source_weight"], params["threshold_weighed"]) == (1.0, False)
    assert Model(params).score([1.0] * width) > params["threshold"] > Model(params).score([0.0] * width)


def test_the_template_model_is_written_as_the_crawler_reads_it(tmp_path):
    params = fitted(_separable(len(FEATURES)))
    out = tmp_path / "classifier.json"
    write_model(params, out, "120 pages of six sources")
    text = out.read_text()
    assert text == json.dumps(params, separators=(",", ":"))  # compact, as shipped
    stored = json.loads(text)
    assert stored["trained_on"] == "120 pages of six sources" and stored["features"] == list(FEATURES)
    assert Model(stored).score([1.0] * len(FEATURES)) == Model(params).score([1.0] * len(FEATURES))


def _sphinx(toc_links: int, prose_words: int) -> bytes:
    toc = "".join(f'<li><a href="p{i}.html">Part {i} of the guide</a></li>' for i in range(toc_links))
    prose = "<p>" + "words of the page's own text " * prose_words + "</p>"
    return (f'<html><body><div class="related"><a href="index.html">Home</a></div>'
            f'<div class="body"><h1>Title</h1><div class="toctree-wrapper"><ul>{toc}</ul></div>{prose}</div>'
            f'<div class="sphinxsidebar"><p>{"sidebar text " * 200}</p></div></body></html>').encode()


@pytest.mark.parametrize(("toc_links", "prose_words", "expected"), [
    (30, 5, "index"),  # the contents blocks hold most of the content region's text
    (0, 200, "info"),  # none, and long prose
    (0, 20, None),  # none, but too little prose to say
    (8, 40, None),  # a long contents box and some prose: in between
])
def test_a_page_is_labelled_by_its_generators_contents_blocks(toc_links, prose_words, expected):
    got, share, prose = label(_sphinx(toc_links, prose_words), "sphinx")
    assert got == expected
    assert 0.0 <= share <= 1.0 and prose >= 0


def test_a_tree_is_labelled_in_the_order_a_crawl_meets_it(tmp_path):
    (tmp_path / "index.html").write_bytes(_sphinx(0, 5).replace(b'href="p0.html"', b"")
                                          + b'<a href="b.html">b</a><a href="moved.html">m</a><a href="a.html">a</a>')
    (tmp_path / "a.html").write_bytes(_sphinx(0, 200) + b'<a href="c.html">c</a>')
    (tmp_path / "b.html").write_bytes(_sphinx(30, 5))
    (tmp_path / "c.html").write_bytes(_sphinx(0, 200))
    (tmp_path / "moved.html").write_bytes(b'<meta http-equiv="refresh" content="0; url=a.html">')
    src = Source("t", "t-doc", "sphinx", str(tmp_path), "index.html")
    assert [p.name for p in crawl_order(src, 10)] == ["index.html", "b.html", "a.html", "c.html"]
    assert [p.name for p in crawl_order(src, 2)] == ["index.html", "b.html"]
    rows = build(src, 10)
    assert [(r["url"], r["label"]) for r in rows] == [
        ("http://t.docs.test/index.html", None), ("http://t.docs.test/b.html", "index"),
        ("http://t.docs.test/a.html", "info"), ("http://t.docs.test/c.html", "info")]


def test_the_kind_models_softmax_fit_separates_what_its_features_separate():
    from crawler.pagetypes.kind import KIND_FEATURES, KINDS, KindModel
    from tools.pagetypes.kind_model import fit_softmax

    rng = random.Random(3)
    xs, ys = [], []
    for i in range(210):
        kind = KINDS[i % 3]
        x = [rng.random() for _ in KIND_FEATURES]
        x[5] = (i % 3) + rng.random() * 0.5  # the one feature that tells the three kinds apart
        xs.append(x)
        ys.append(kind)
    params = fit_softmax(xs, ys, rounds=20, depth=2, classes=KINDS[:3])
    assert params == fit_softmax(xs, ys, rounds=20, depth=2, classes=KINDS[:3])  # deterministic
    model = KindModel(json.loads(json.dumps(params)))  # as stored
    assert model.classes == KINDS[:3]
    for x, y in zip(xs, ys):
        scores = model.scores(x)
        assert max(scores, key=scores.__getitem__) == y
        assert math.isclose(sum(scores.values()), 1.0)
