"""bench/bench_content.py on pages made here, in a directory shaped like
WCXB's (``dev/html/ID.html.gz``, ``dev/ground-truth/ID.json``): its scores
are WCXB's evaluate.py's, its crawler side runs the chain's own steps, and
its report counts what it says. No network, no baselines' Python."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from bench.bench_content import CrawlerReader, main, report, run_baseline, run_set
from bench.contentscore import (Sample, author_right, date_right, news_pages, snippet_rate, title_right, wcxb_pages,
                                word_f1)

RIVERS = "Rivers carve valleys over many thousands of years through rock and soil."
PAGES = {
    "0001": ("article", f"<html><head><title>Rivers</title></head><body><p>{RIVERS}</p></body></html>",
             {"main_content": RIVERS, "with": ["Thousands of years"], "without": ["Subscribe now"],
              "title": "Rivers", "author": "Ann Lee", "publish_date": "2024-05-01"}),
    "0002": ("category", "<html><body><p>One two three four five six seven eight.</p></body></html>",
             {"main_content": "one two three four five six seven eight nine ten", "with": ["nine ten", "five six"],
              "without": ["seven eight"], "title": "Numbers", "author": "", "publish_date": ""}),
}


@pytest.fixture
def wcxb(tmp_path: Path) -> Path:
    for name in ("html", "ground-truth"):
        (tmp_path / "dev" / name).mkdir(parents=True)
    for key, (kind, html, gt) in PAGES.items():
        (tmp_path / "dev" / "html" / f"{key}.html.gz").write_bytes(gzip.compress(html.encode()))
        (tmp_path / "dev" / "ground-truth" / f"{key}.json").write_text(json.dumps(
            {"url": f"https://site{key}.test/page", "_internal": {"page_type": {"primary": kind}},
             "ground_truth": gt}))
    # A ground truth that is not an object: left out, as evaluate.py leaves it out.
    (tmp_path / "dev" / "html" / "0003.html.gz").write_bytes(gzip.compress(b"<p>x</p>"))
    (tmp_path / "dev" / "ground-truth" / "0003.json").write_text(json.dumps({"ground_truth": "n/a"}))
    return tmp_path


def test_word_f1_and_snippets_are_evaluate_pys():
    assert word_f1("One two, three!", "one two three four") == (1.0, 0.75, 2 * 0.75 / 1.75)
    assert word_f1("a a a b", "a b b") == (0.5, 2 / 3, 2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))  # multisets
    assert word_f1("", "") == (1.0, 1.0, 1.0) and word_f1("x", "") == (0.0, 0.0, 0.0)
    assert word_f1("", "x") == (0.0, 0.0, 0.0) and word_f1("x", "y") == (0.0, 0.0, 0.0)
    assert snippet_rate("Hello World", ["world", "mars"]) == 0.5 and snippet_rate("", []) == 1.0


def test_metadata_rules():
    assert title_right("Rivers: a life", "rivers a LIFE") and not title_right("Rivers | Site", "Rivers")
    assert author_right("By Ann Lee", "Ann Lee") and author_right("Lee", "Ann Lee")
    assert author_right(["Ann Lee", "Bo Li"], "Ann Lee, Bo Li") and not author_right([1], "1")
    assert not author_right("", "Ann") and not author_right("Bo", "Ann Lee") and not author_right(None, "Ann")
    assert date_right("2024-05-01T10:00:00Z", "2024-05-01") and not date_right("2024-05-02", "2024-05-01")
    assert not date_right("May 1, 2024", "2024-05-01") and not date_right(7, "2024-05-01")


def test_pages_read_like_wcxb(wcxb):
    samples = wcxb_pages(wcxb, "dev")
    assert [(s.id, s.kind, s.url) for s in samples] == [
        ("0001", "article", "https://site0001.test/page"), ("0002", "collection", "https://site0002.test/page")]
    assert samples[0].body().startswith(b"<html><head><title>Rivers") and samples[0].with_ == ["Thousands of years"]
    assert (samples[0].title, samples[0].author, samples[0].published) == ("Rivers", "Ann Lee", "2024-05-01")


def test_the_crawlers_steps_scored_exactly(wcxb, tmp_path):
    reader = CrawlerReader()
    assert reader.names[:3] == ["Decode", "Parse", "Read"] and "Check" not in reader.names
    samples = wcxb_pages(wcxb, "dev")
    systems, versions = run_set(samples, [], "unused", reader, log=lambda m: None)
    assert set(systems) == {"crawler", "crawler text"} and systems["crawler"]["0001"]["text"] == RIVERS
    assert systems["crawler"]["0002"]["error"] is None and 0 < systems["crawler"]["0002"]["ms"] < 5000
    dump = io.StringIO()
    figures = report("t", samples, systems, versions, by_kind=True, meta=False, dump=dump, set_name="x")
    ours = figures["systems"]["crawler"]
    # 0001 all its words (F1 1), 0002 8 of 10 (P 1, R 0.8, F1 8/9); with 1 and 1/2, without 0 and 1.
    assert ours["f1"] == pytest.approx((1 + 8 / 9) / 2) and ours["precision"] == 1.0
    assert ours["recall"] == pytest.approx(0.9) and ours["with"] == 0.75 and ours["without"] == 0.5
    assert ours["errors"] == 0 and figures["systems"]["crawler text"]["f1"] == pytest.approx((1 + 8 / 9) / 2)
    assert figures["kinds"] == {"article": {"crawler": 1.0, "crawler text": 1.0},
                                "collection": {"crawler": pytest.approx(8 / 9), "crawler text": pytest.approx(8 / 9)}}
    rows = [json.loads(line) for line in dump.getvalue().splitlines()]
    assert [(r["id"], r["kind"], r["system"]) for r in rows] == [
        ("0001", "article", "crawler"), ("0001", "article", "crawler text"),
        ("0002", "collection", "crawler"), ("0002", "collection", "crawler text")]
    assert rows[2]["r"] == pytest.approx(0.8) and rows[2]["set"] == "x"
    assert rows[2]["chars"] == len(systems["crawler"]["0002"]["text"]) > 30


def test_metadata_shares_over_the_pages_that_have_the_field(wcxb):
    samples = wcxb_pages(wcxb, "dev")
    meta = {"0001": {"title": "Rivers", "author": "Lee", "published": "2024-05-02"},
            "0002": {"title": "Numbers | Site", "author": "Someone", "published": "2024-05-01"}}
    systems = {"crawler": {k: {"text": "", "ms": 1.0, "meta": m, "error": None} for k, m in meta.items()},
               "trafilatura": {"0001": {"text": RIVERS, "ms": 3.0, "meta": {"title": None}, "error": "boom"}}}
    figures = report("t", samples, systems, {"crawler": "c", "trafilatura": "2.3.1"}, by_kind=False, meta=True)
    assert figures["metadata"] == {"title": {"crawler": 0.5, "trafilatura": 0.0},
                                   "author": {"crawler": 1.0, "trafilatura": 0.0},
                                   "published": {"crawler": 0.0, "trafilatura": 0.0}}
    # A page a system has no result for scores 0; its CPU is the mean of those it has.
    assert figures["systems"]["trafilatura"] == {"f1": 0.5, "precision": 0.5, "recall": 0.5, "with": 0.5,
                                                 "without": 0.0, "ms": 3.0, "errors": 1}


def test_a_baseline_without_its_python_is_reported_not_run(tmp_path):
    results, why = run_baseline("trafilatura", str(tmp_path / "no-python"), tmp_path / "pages.jsonl", tmp_path)
    assert results == {} and why.startswith("not runnable: ")


def test_the_command_on_a_split_and_a_news_set(wcxb, tmp_path, capsys):
    news = tmp_path / "news"
    (news / "html").mkdir(parents=True)
    (news / "html" / "n1.html.gz").write_bytes(gzip.compress(f"<body><p>{RIVERS}</p></body>".encode()))
    (news / "ground-truth.json").write_text(json.dumps({"n1": {"articleBody": RIVERS + " Extra words.",
                                                               "url": "https://n.test/1"}}))
    assert [s.main for s in news_pages(news)] == [RIVERS + " Extra words."]
    out = main(["--data", str(wcxb), "--baselines", "", "--news", str(news), "--dump", str(tmp_path / "d.jsonl")])
    assert out["wcxb"]["pages"] == 2 and out["news"]["pages"] == 1
    assert out["news"]["systems"]["crawler"]["recall"] == pytest.approx(12 / 14)
    assert len((tmp_path / "d.jsonl").read_text().splitlines()) == 6
    printed = capsys.readouterr().out
    assert "| collection | 1 | 0.889 (1.00 / 0.80) | 0.889 (1.00 / 0.80) |" in printed


def test_unknown_baselines_are_refused(wcxb):
    with pytest.raises(SystemExit):
        main(["--data", str(wcxb), "--baselines", "readability"])


def test_sample_holds_no_bytes_until_asked(tmp_path):
    path = tmp_path / "a.html.gz"
    path.write_bytes(gzip.compress(b"<p>hi</p>"))
    assert Sample(id="a", url="", kind="article", path=path, main="hi").body() == b"<p>hi</p>"
