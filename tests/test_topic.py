"""crawler.following.topic: the topic file, page scores, link priorities, tunnelling."""

from __future__ import annotations

import json
import math

import pytest

from crawler.following.topic import Siblings, Topic, TopicError, follow_links, load_topic, parse_topic, passage


def topic(**kw):
    return parse_topic({"keywords": {"postgres": 1, "vacuum": 2}, "threshold": 0.3, **kw})


# -- the file
def test_json_and_yaml_give_the_same_topic(tmp_path):
    j = tmp_path / "t.json"
    j.write_text(json.dumps({"keywords": {"Write-Ahead Log": 2, "vacuum": 1}, "threshold": 0.4}))
    y = tmp_path / "t.yaml"
    y.write_text("keywords:\n  Write-Ahead Log: 2\n  vacuum: 1\nthreshold: 0.4\n")
    a, b = load_topic(j), load_topic(y)
    assert a.keywords == b.keywords == {"write-ahead log": 2.0, "vacuum": 1.0}
    assert a.threshold == b.threshold == 0.4


@pytest.mark.parametrize("data, message", [
    ([1, 2], "a topic is a mapping"),
    ({"keywords": {"a": 1}, "treshold": 0.3}, "unknown field treshold"),
    ({"keywords": ["a", "b"]}, "'keywords' must be a mapping"),
    ({"keywords": {"a": "high"}}, "keywords['a'] = 'high'"),
    ({"keywords": {"a": 0}}, "not 0"),
    ({"keywords": {"a": 1000}}, "between -100 and 100"),
    ({"keywords": {"a": float("nan")}}, "a weight must be a number"),
    ({"keywords": {"a": True}}, "a weight must be a number"),
    ({"keywords": {" ": 1}}, "empty or non-text entry"),
    ({"patterns": {"(unclosed": 1}}, "is not a regular expression"),
    ({"patterns": {"x*": 1}}, "matches the empty string"),
    ({"keywords": {"a": 1}, "threshold": 0}, "threshold = 0"),
    ({"keywords": {"a": 1}, "threshold": 1.5}, "threshold = 1.5"),
    ({"keywords": {"a": 1}, "threshold": "0.3"}, "threshold = '0.3'"),
    ({"languages": ["xx-unknown"]}, "not known to the language identifier"),
    ({"languages": [3]}, "'languages' must be a list"),
    ({"threshold": 0.3}, "nothing to tell on-topic pages by"),
    ({"keywords": {}, "name": 5}, "nothing to tell"),
])
def test_a_bad_topic_is_refused_with_the_field_named(data, message):
    with pytest.raises(TopicError) as exc:
        parse_topic(data, "t.json")
    assert message in str(exc.value)
    assert str(exc.value).startswith("t.json: ")


@pytest.mark.parametrize("content, suffix, message", [
    ("{not json", ".json", "not valid JSON"),
    ("keywords: [a\n", ".yaml", "not valid YAML"),
])
def test_a_file_that_does_not_parse(tmp_path, content, suffix, message):
    p = tmp_path / f"t{suffix}"
    p.write_text(content)
    with pytest.raises(TopicError, match=message):
        load_topic(p)


def test_a_yaml_syntax_error_names_its_line_and_column(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text("keywords:\n  postgres: 3\n  vacuum 2\n  wal: 1\nthreshold: [0.3\n")
    with pytest.raises(TopicError) as exc:
        load_topic(p)
    assert str(exc.value) == (f"topic file {str(p)!r}: not valid YAML (line 3, column 3: while scanning a "
                              "simple key; line 4, column 3: could not find expected ':')")


def test_a_missing_file(tmp_path):
    with pytest.raises(TopicError, match="cannot read it"):
        load_topic(tmp_path / "nope.json")


# -- page scores
def test_density_not_mentions_decides():
    t = topic()
    filler = " ".join(["word"] * 990)
    assert t.score("", "postgres " + filler) < 0.3  # one mention in 1,000 words
    dense = t.score("", "postgres vacuum " * 10 + filler)  # 30 weighted hits in ~1,010 words
    assert dense == round(1 - math.exp(-(100 * 30 / 1010) / 2), 4)
    assert t.on_topic(dense)
    short = t.score("", "postgres runs vacuum nightly on every table")
    assert short == round(1 - math.exp(-(100 * 3 / 50) / 2), 4)


def test_whole_words_case_and_width_folded():
    t = topic()
    assert t.hits("POSTGRES Ｐｏｓｔｇｒｅｓ postgresql vacuumed vacuum.") == 1 + 1 + 2


def test_phrases_match_across_spaces_and_line_breaks():
    t = parse_topic({"keywords": {"write ahead log": 3, "log": 1}})
    assert t.hits("the Write   Ahead\nLog and the log") == 3 + 1


def test_unspaced_scripts_match_as_substrings():
    t = parse_topic({"keywords": {"数据库": 1, "データベース": 2}})
    assert t.hits("这是一个关于数据库的页面，数据库很重要。データベースの話") == 1 + 1 + 2
    text = "数据库" * 20  # 60 characters = 30 words
    assert t.score("", text) == round(1 - math.exp(-(100 * 20 / 50) / 2), 4)


def test_negative_weights_pull_a_page_off_topic():
    t = parse_topic({"keywords": {"python": 1, "snake": -2}})
    assert t.score("", "python snake") == 0.0
    assert t.score("", "python code") > 0


def test_patterns_count_their_matches():
    t = parse_topic({"patterns": {r"pg_\w+": 1}})
    assert t.hits("pg_dump and pg_restore, not pgdump") == 2


def test_title_counts_twice():
    t = topic()
    assert t.score("postgres", "x " * 49) == round(1 - math.exp(-(100 * 2 / 50) / 2), 4)


def test_languages_gate_the_page():
    mn = "Монгол хэл нь Монгол улсын албан ёсны хэл юм. Энэ бол маш сайхан өдөр байна."
    ru = "Это русский текст о погоде в Москве сегодня, и завтра будет дождь весь день."
    only = parse_topic({"languages": ["mn"]})
    assert only.score("", mn) > 0.9
    assert only.score("", ru) == 0.0
    assert only.score("", "Монгол") == 0.0  # too short to tell
    both = parse_topic({"languages": ["mn"], "keywords": {"хэл": 1}})
    assert both.score("", mn) > 0.3
    assert both.score("", ru + " хэл") == 0.0


def test_a_hostile_page_is_scanned_only_so_far():
    t = topic()
    assert t.hits("postgres " * 100_000) == 200_000 // len("postgres ")


# -- links
def test_link_priority_weights_its_evidence():
    t = topic()
    hit = 1 - math.exp(-1)
    assert t.link_priority("http://a/x", "postgres", "", 0.0, None) == round(0.4 * hit, 4)
    assert t.link_priority("http://a/postgres/x.html", "", "", 0.0, None) == round(0.15 * hit, 4)
    assert t.link_priority("http://a/x", "", "", 1.0, None) == round(0.25 + 0.2, 4)  # siblings default to the parent
    assert t.link_priority("http://a/x", "", "", 1.0, 0.0) == 0.25
    assert t.link_priority("http://a/x", "next", "about vacuum", 0.0, None) == round(0.4 * (1 - math.exp(-2)), 4)


def test_url_tokens_and_language_codes():
    t = parse_topic({"languages": ["mn"], "keywords": {"guide": 1}})
    hit = round(1 - math.exp(-1), 4)
    assert round(t.url_score("http://a/doc/index.mn.html"), 4) == hit
    assert round(t.url_score("http://a/mn/intro.html"), 4) == hit
    assert round(t.url_score("http://a/install-guide/"), 4) == hit
    assert t.url_score("http://a/en/mnemonic.html") == 0.0
    assert round(t.url_score("http://a/%E6%95%B0/?q=guide"), 4) == hit


def test_tunnelling():
    # on-topic page: links followed, children start a fresh count
    assert follow_links(True, 5, 0) == (True, 0)
    # off-topic child of an on-topic page: 1 hop
    assert follow_links(False, 0, 2) == (True, 1)
    assert follow_links(False, 1, 2) == (True, 2)
    assert follow_links(False, 2, 2) == (False, 3)
    assert follow_links(False, 0, 0) == (False, 1)


def test_the_tunnel_passes_on_the_best_links_whatever_their_priority():
    links = {"http://a/x": 0.05, "http://a/y": 0.4, "http://a/z": 0.0, "http://a/w": 0.4}
    assert passage(links, 1) == {"http://a/y": 0.4}  # ties: the page's order
    assert list(passage(links, 3)) == ["http://a/y", "http://a/w", "http://a/x"]
    assert passage(links, 0) == {}
    assert passage({"http://a/only": 0.0}, 1) == {"http://a/only": 0.0}  # the way on, though it says nothing


def test_siblings_share_by_directory_bounded():
    s = Siblings(size=2, prior=2.0)
    assert s.rate("http://a/docs/x.html", 0.5) is None
    s.record("http://a/docs/1.html", True)
    s.record("http://a/docs/2.html", False)
    s.record("http://a/docs/3.html", True)
    assert s.rate("http://a/docs/new.html", 0.5) == pytest.approx((2 + 1.0) / (3 + 2))
    s.record("http://a/other/1.html", False)
    s.record("http://a/third/1.html", False)  # the oldest directory goes
    assert len(s) == 2
    assert s.rate("http://a/docs/new.html", 0.5) is None


def test_topic_is_pure():
    import sys
    import subprocess

    code = "import sys, crawler.following.topic; print(any(m.startswith('scrapy') for m in sys.modules))"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_topic_dataclass_defaults():
    t = Topic(keywords={"a": 1.0})
    assert t.threshold == 0.3 and t.has_terms


def test_a_links_anchor_counts_only_so_far():
    t = topic()
    far = "x " * 200 + "vacuum"  # past CONTEXT_CHARS
    assert t.link_priority("http://a/x", far, "", 0.0, None) == 0.0
    assert t.link_priority("http://a/x", "vacuum " + far, "", 0.0, None) > 0.0
