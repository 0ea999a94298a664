"""The classifier must not slide back: held-out accuracy on real pages, and the
clear cases of the generated test site."""

import gzip
import json
import sys

import pytest

from crawler.classify import INDEX, INFO, classify, page_type, tspider_rule
from crawler.extract import analyze
from tests.conftest import ROOT, SHARED

sys.path.insert(0, str(ROOT / "bench"))
from train_classifier import held_out, metrics  # noqa: E402

DATA = SHARED / "data/pagetypes"


@pytest.fixture(scope="module")
def held_out_pages():
    rows = [json.loads(line) for line in (DATA / "labels.jsonl").read_text().splitlines()]
    rows = [r for r in rows if held_out(r["file"])]
    for r in rows:
        r["page"] = analyze(gzip.decompress((DATA / r["file"]).read_bytes()))
    return rows


def test_held_out_accuracy_does_not_slide_back(held_out_pages):
    rows = held_out_pages
    assert len(rows) == 150  # the split is fixed by file name
    ys = [1 if r["label"] == INDEX else 0 for r in rows]
    pred = [1 if classify(r["url"], r["page"]) == INDEX else 0 for r in rows]
    balanced, index_recall, _ = metrics(ys, pred)
    # Recorded in bench/RESULTS.md: 0.924 balanced, 0.964 index recall.
    assert balanced >= 0.91
    assert index_recall >= 0.95


def test_model_beats_the_tspider_rule(held_out_pages):
    rows = held_out_pages
    ys = [1 if r["label"] == INDEX else 0 for r in rows]
    rule = metrics(ys, [1 if tspider_rule(r["url"], r["page"]) == INDEX else 0 for r in rows])[0]
    model = metrics(ys, [1 if classify(r["url"], r["page"]) == INDEX else 0 for r in rows])[0]
    assert rule < 0.6 < 0.91 <= model


LINKS = "".join(f'<li><a href="/section/{i}/">Section {i}</a></li>' for i in range(40))
PROSE = "<p>" + "A sentence of an article that goes on for a while without any links. " * 8 + "</p>"


@pytest.mark.parametrize(("url", "html", "expected"), [
    ("http://example.com/", f"<html><body><h1>Home</h1><ul>{LINKS}</ul></body></html>", INDEX),
    ("http://example.com/news/", f"<html><body><ul>{LINKS}</ul></body></html>", INDEX),
    ("http://example.com/2024/05/a-long-article-about-crawling.html",
     f"<html><body><h1>Title</h1>{PROSE * 6}</body></html>", INFO),
])
def test_clear_cases(url, html, expected):
    assert page_type(url, html) == expected
    assert page_type(url, html.encode()) == expected


def test_tspider_rule_as_published():
    page = analyze(f"<html><body>{PROSE}</body></html>")
    assert tspider_rule("http://e.com/", page) == INDEX  # no file name
    assert tspider_rule("http://e.com/a/12345.html", analyze("<p>x</p>")) == INFO  # sequence number
    assert tspider_rule("http://e.com/a/story.html", page) == INFO  # long paragraph
    assert tspider_rule("http://e.com/a/list.html", analyze(f"<ul>{LINKS}</ul>")) == INDEX


def test_count_words_reads_cjk_without_spaces():
    from crawler.classify import count_words

    assert count_words("How the crawler works") == 4
    assert count_words("网络爬虫") == 2
    assert count_words("ウェブクローラーの仕組み") == 6
    assert count_words("Scrapy 网络爬虫 guide") == 4
    assert count_words("") == 0
