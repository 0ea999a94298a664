"""End-to-end: the link-density rule in the model's close calls, as the
spider wires it (``PageTyper.trust``, crawler/pagetypes/typer.py; stats ``classifier/rule/*``).

A site of one template (header, sidebar, footer on every page): chapter
pages of links and long topic pages, on which the rule agrees with the
model, so the rule is trusted on the site; then, a level deeper, three
overview pages (a paragraph and a list of described links) whose scores
lie within ``RULE_BAND`` of the threshold. Two of them the model alone
types as index pages and the rule as information pages, one of these
far enough from the threshold (``RULE_SURE`` or more) to be counted too;
the third both type as an information page. (The chapter pages, typed
alone at first and typed again once the template is known, score within
the band too, but are typed again before ten pages are counted: the
model's, and index pages by ``bare_navigation`` as well: their own text
is their titles.)"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from crawler.pagetypes.rules import INDEX, INFO
from crawler.store import SQLiteStore
from tests.support.crawl import run_crawl
from tests.support.servers import start_server

WORDS = ("crawler frontier queue politeness robots delay server worker index article text page site "
         "link depth fingerprint shingle template cluster shard lease retry backoff").split()
NAV = "".join(f'<li><a href="/ch{i}.html">Section {i} of the manual</a></li>' for i in range(4))
TOPICS = [f"/t{i}_{k}.html" for i in range(4) for k in range(4)]
# name -> (links, words of the opening paragraph, words describing each
# link, seed of the text): the first and the third the model's index pages
# (the third scored 0.32 over the threshold: between RULE_SURE and
# RULE_BAND) and the rule's information pages, the second both's
# information page (0.15 over, 0.13 under and 0.32 over the threshold of
# 0.57 as this file was written).
OVERVIEWS = {"/oa.html": (3, 45, 6, 2), "/ob.html": (4, 80, 3, 3), "/oc.html": (4, 30, 10, 1)}


def prose(seed: int, words: int) -> str:
    r = random.Random(seed)
    return " ".join(r.choice(WORDS) for _ in range(words)).capitalize() + "."


def page(title: str, body: str) -> str:
    return (f"<html><head><title>{title}</title></head><body>"
            f'<div class="header"><a href="/">Home</a> <a href="/ch0.html">Manual</a></div>'
            f'<div class="sphinxsidebar"><h3>Navigation</h3><ul>{NAV}</ul></div>'
            f'<div class="body"><h1>{title}</h1>{body}</div>'
            f'<div class="footer">Copyright the crawler authors. Built with a generator.</div></body></html>')


def links(hrefs: list[str], words: int = 3, described: int = 0) -> str:
    return "<ul>" + "".join(
        f'<li><a href="{h}">Part {k} {prose(k, words)}</a> {prose(k * 7 + described, described) if described else ""}</li>'
        for k, h in enumerate(hrefs)) + "</ul>"


def build(root: Path) -> None:
    root.mkdir()
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    (root / "index.html").write_text(page("The manual", links([f"/ch{i}.html" for i in range(4)])))
    for i in range(4):
        hrefs = [f"/t{i}_{k}.html" for k in range(4)] + (["/more.html"] if i == 3 else [])
        (root / f"ch{i}.html").write_text(page(f"Chapter {i}", links(hrefs)))
    for n, path in enumerate(TOPICS):
        (root / path.lstrip("/")).write_text(
            page(f"Topic {n}", "".join(f"<p>{prose(n * 10 + k, 80)}</p>" for k in range(6))))
    (root / "more.html").write_text(page("More", links(list(OVERVIEWS))))
    for path, (n, words, described, seed) in OVERVIEWS.items():
        body = f"<p>{prose(seed, words)}</p>" + links(TOPICS[:n], 4, described)
        (root / path.lstrip("/")).write_text(page(f"Overview {seed}", body))


@pytest.mark.slow
def test_the_rule_types_the_models_close_calls_once_it_held_on_the_site(tmp_path, frontier_settings):
    root = tmp_path / "www"
    build(root)
    server = start_server(tmp_path, hosts="127.0.0.1", root=root)
    try:
        result = run_crawl(server, tmp_path / "crawl", [f"seeds={server.url('/')}"], {**frontier_settings, "CONCURRENT_REQUESTS": 1})
    finally:
        server.stop()
    assert result.returncode == 0, result.log[-3000:]
    with SQLiteStore(result.store_path) as store:
        types = {p["url"].replace(server.url(""), ""): p["page_type"] for p in store.iter_pages()}
    expected = {"/": INDEX, **{f"/ch{i}.html": INDEX for i in range(4)}, **{t: INFO for t in TOPICS},
                "/more.html": INDEX, **{o: INFO for o in OVERVIEWS}}
    assert types == expected
    counts = {k: int(v) for k, v in re.findall(r"'classifier/rule/(\w+)': (\d+)", result.log)}
    # The three overviews, and nothing else, were the rule's to type; two of
    # them against the model.
    assert counts == {"decided": 3, "overruled": 2}


ARTICLES = [f"/a{k}.html" for k in range(6)]


def boxed(title: str, body: str) -> str:
    """A page of a site whose every page carries the same box of links in
    markup that does not say it is navigation (the site's template)."""
    box = "".join(f'<li><a href="{h}">Article {k} of the collection</a></li>'
                  for k, h in enumerate([*ARTICLES, "/contents.html"]))
    return (f"<html><head><title>{title}</title></head><body><div class='toc'><ul>{box}</ul></div>"
            f"<div class='body'><h1>{title}</h1>{body}</div></body></html>")


@pytest.mark.slow
def test_a_page_with_nothing_of_its_own_is_an_index_page_whatever_the_model_says(tmp_path, frontier_settings):
    """``CLASSIFIER_THRESHOLD`` 1.0: the model types every page an
    information page. The home page (typed alone first: a thin page of
    links, an index page) and the contents page (its title and the site's
    box, nothing of its own once the box is template) are index pages
    still, each counted in ``classifier/bare_index`` (the home page when it
    is typed again with the template); the articles, prose of their own
    under the box, are information pages."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    (root / "index.html").write_text(boxed("The collection", ""))
    for k, path in enumerate(ARTICLES):
        (root / path.lstrip("/")).write_text(boxed(f"Article {k}", "".join(
            f"<p>{prose(k * 10 + j, 60)}</p>" for j in range(3))))
    (root / "contents.html").write_text(boxed("Contents", ""))
    server = start_server(tmp_path, hosts="127.0.0.1", root=root)
    try:
        result = run_crawl(server, tmp_path / "crawl", [f"seeds={server.url('/')}"],
                           {**frontier_settings, "CONCURRENT_REQUESTS": 1, "CLASSIFIER_THRESHOLD": 1.0})
    finally:
        server.stop()
    assert result.returncode == 0, result.log[-3000:]
    assert [p for p in result.fetched if p.endswith(".html") or p == "/"] == ["/", *ARTICLES, "/contents.html"]
    with SQLiteStore(result.store_path) as store:
        types = {p["url"].replace(server.url(""), ""): p["page_type"] for p in store.iter_pages()}
    assert types == {"/": INDEX, **{a: INFO for a in ARTICLES}, "/contents.html": INDEX}
    counts = dict(re.findall(r"'classifier/(bare_index|retype/checked)': (\d+)", result.log))
    assert counts == {"bare_index": "2", "retype/checked": "4"}
