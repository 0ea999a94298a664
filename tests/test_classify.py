"""The classifier must not slide back: accuracy on real pages it was never
fitted on, and the clear cases of the generated test site."""

import pytest

from crawler.pagetypes.classify import classify, classify_stats, model, page_model, page_type
from crawler.pagetypes.features import assemble, doc_url_features, page_features
from crawler.pagetypes.rules import (
    INDEX, INFO, RULE_BAND, RULE_DENSITY, RULE_MIN_PAGES, RULE_SURE, RuleTrust, THIN_TEXT, bare_navigation, decide,
    thin_navigation, tspider_rule)
from crawler.pagetypes.template import rule_density
from crawler.pagetypes.template import block_keys
from crawler.pagetypes.template import stat_features
from crawler.pagetypes.template import block_stats
from crawler.reading.extract import analyze
from tests.data.pagetypes import body, labels
from tools.pagetypes.measure import held_out, metrics


@pytest.fixture(scope="module")
def held_out_pages():
    rows = labels()
    for r in rows:
        r["page"] = analyze(body(r), r["url"])  # as the crawler analyses a page: with its URL
    return rows


def test_held_out_accuracy_does_not_slide_back(held_out_pages):
    rows = held_out_pages
    # The in-repo sample holds only pages of the held-out part of the full
    # set (the split is fixed by file name): the page-only model never saw them.
    assert (len(rows), sum(r["label"] == INDEX for r in rows)) == (112, 56)
    assert all(held_out(r["file"]) for r in rows)
    ys = [1 if r["label"] == INDEX else 0 for r in rows]
    pred = [1 if classify(r["url"], r["page"]) == INDEX else 0 for r in rows]
    balanced, index_recall, _ = metrics(ys, pred)
    # Measured on this sample with the page-only model alone: 0.902
    # balanced, 0.929 index recall (52 of 56), 0.875 info recall (49 of 56);
    # on all 427 held-out pages of labels-all.jsonl, 0.916 and 0.929
    # (bench/RESULTS.md). A page typed alone is now typed with its kind,
    # whose model was fitted on all of WCXB's dev split, these pages
    # among them: 0.964 and 1.000 here, not a held-out figure (WCXB's test
    # split is: docs/pagetypes.md, "The page's kind"). The floors stay.
    assert balanced >= 0.88
    assert index_recall >= 0.91


def test_model_beats_the_tspider_rule(held_out_pages):
    rows = held_out_pages
    ys = [1 if r["label"] == INDEX else 0 for r in rows]
    rule = metrics(ys, [1 if tspider_rule(r["url"], r["page"]) == INDEX else 0 for r in rows])[0]
    model = metrics(ys, [1 if classify(r["url"], r["page"]) == INDEX else 0 for r in rows])[0]
    assert rule < 0.6 < 0.90 <= model


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


def nav_page(links: int, words: str = "") -> str:
    items = "".join(f'<li><a href="/docs/{i}.html">Part {i}</a></li>' for i in range(links - 1))
    return (f'<html><head><title>Docs</title></head><body><nav><a href="/">Home</a></nav>'
            f'<h1>Docs</h1><ul>{items}</ul><p>{words}</p></body></html>')


@pytest.mark.parametrize(("links", "words", "thin"), [
    (4, "", True),  # a contents page of three parts and the home link
    (12, "", True),
    (4, "x" * 190, True),  # under 200 characters outside links
    (4, "x" * 210, False),
    (3, "", False),  # too few links to be navigation by this rule
    (0, "", False),  # a page a script fills: no links, no text
])
def test_a_thin_page_of_links_typed_alone_is_an_index_page(links, words, thin):
    url = "http://example.com/docs/"
    html = nav_page(links, words) if links else "<html><head><title>App</title></head><body></body></html>"
    page = analyze(html, url)
    assert thin_navigation(page) is thin
    if thin:
        assert classify(url, page) == INDEX
        stats = block_stats(page.blocks)
        assert classify_stats(page_features(url, page), stats, None, thin=True) == INDEX
        # With its site's template known, thin_navigation no longer holds: the
        # template model's (and bare_navigation's) answer, as classify gives it.
        assert classify_stats(page_features(url, page), stats, frozenset(), thin=True) == classify(
            url, page, template=frozenset())


def trusting(site: str = "s", agreed: int = RULE_MIN_PAGES, disagreed: int = 0) -> RuleTrust:
    trust = RuleTrust()
    for k in range(agreed + disagreed):
        trust.record(site, k < agreed)
    return trust


@pytest.mark.parametrize(("score", "density", "expected"), [
    (0.57, 0.36, INDEX), (0.57, 0.35, INFO),  # on the threshold: the rule, strictly over 0.35
    (0.56, 0.36, INDEX), (0.58, 0.35, INFO),  # just under / over it: still the rule's
    (0.80, 0.10, INFO), (0.35, 0.90, INDEX),  # unsure either way: the rule overrules the model
    (0.57 + RULE_BAND, 0.10, INDEX),  # at the band's edge and beyond: the model
    (0.57 - RULE_BAND - 0.01, 0.90, INFO),
    (0.99, 0.0, INDEX), (0.01, 1.0, INFO),
])
def test_the_rule_decides_where_the_model_is_unsure_on_a_site_where_it_held(score, density, expected):
    assert RULE_DENSITY == 0.35
    assert decide(score, 0.57, density, trusting(), "s") == expected
    model_says = INDEX if score >= 0.57 else INFO
    # No count kept, another site, too few pages, too many disagreements: the model.
    assert decide(score, 0.57, density) == model_says
    assert decide(score, 0.57, density, trusting("s"), "t") == model_says
    assert decide(score, 0.57, density, trusting(agreed=RULE_MIN_PAGES - 1), "s") == model_says
    assert decide(score, 0.57, density, trusting(agreed=19, disagreed=2), "s") == model_says
    assert decide(score, 0.57, density, trusting(agreed=19, disagreed=1), "s") == expected  # 0.95 agreed


def test_the_band_is_open_at_both_edges():
    # abs((0.5 +- 0.35) - 0.5) == 0.35 in floating point: the edges are the edges.
    assert (RULE_BAND, RULE_SURE) == (0.35, 0.25)
    assert decide(0.875, 0.5, 0.0, trusting(), "s") == INDEX  # beyond the edge: the model's
    assert decide(0.125, 0.5, 1.0, trusting(), "s") == INFO
    assert decide(0.5 + RULE_BAND, 0.5, 0.0, trusting(), "s") == INDEX  # at the edge: the model's
    assert decide(0.5 - RULE_BAND, 0.5, 1.0, trusting(), "s") == INFO
    assert decide(0.8499, 0.5, 0.0, trusting(), "s") == INFO  # inside: the rule's
    assert decide(0.1501, 0.5, 1.0, trusting(), "s") == INDEX


def test_pages_between_sure_and_the_bands_edge_are_counted_and_decided_by_the_rule():
    trust = trusting()
    # 0.25 from the threshold: sure enough to judge the rule by, close
    # enough for the rule to type, on a site where it held.
    assert decide(0.75, 0.5, 0.0, trust, "s") == INFO
    assert (trust.decided, trust.overruled) == (1, 1)
    assert not trust.trusted("s")  # and counted, as a disagreement: 10 agreed of 11
    assert decide(0.7499, 0.5, 0.0, trust, "s") == INDEX  # the model's now, and not counted:
    for _ in range(9):
        trust.record("s", True)
    assert trust.trusted("s")  # 19 agreed of 20 (of 21, had it been counted: not trusted)
    # The lower edge the same way: 0.25 under is counted, 0.2499 under is not.
    trust = trusting()
    assert decide(0.25, 0.5, 1.0, trust, "s") == INDEX  # the rule's, and counted as a disagreement
    assert not trust.trusted("s")
    trust = trusting()
    assert decide(0.2501, 0.5, 1.0, trust, "s") == INDEX  # the rule's, not counted
    assert trust.trusted("s")
    trust = trusting(agreed=19, disagreed=1)
    # A page is typed by the count as it stood before it: 19 of 20, then 19 of 21.
    assert decide(0.80, 0.5, 0.0, trust, "s") == INFO
    assert not trust.trusted("s")
    assert decide(0.80, 0.5, 0.0, trust, "s") == INDEX


def test_the_pages_the_model_is_sure_of_are_what_the_rule_is_judged_on():
    trust = RuleTrust()
    for _ in range(RULE_MIN_PAGES - 1):
        assert decide(0.99, 0.57, 0.9, trust, "s") == INDEX  # sure, and the rule agrees: counted
        assert decide(0.60, 0.57, 0.1, trust, "s") == INDEX  # unsure: not counted, the model while untrusted
    assert not trust.trusted("s")
    assert decide(0.02, 0.57, 0.2, trust, "s") == INFO
    assert trust.trusted("s")
    assert decide(0.60, 0.57, 0.1, trust, "s") == INFO  # now the rule's
    assert (trust.decided, trust.overruled) == (1, 1)
    assert decide(0.60, 0.57, 0.9, trust, "s") == INDEX  # the rule's, as the model says
    assert (trust.decided, trust.overruled) == (2, 1)
    assert decide(0.01, 0.57, 0.9, trust, "s") == INFO  # sure: the model's, and the rule disagreed
    assert not trust.trusted("s")  # 10 of 11 agreed: under 0.95
    assert decide(0.60, 0.57, 0.1, trust, "s") == INDEX


def test_the_rules_count_is_bounded_by_sites():
    trust = RuleTrust(max_sites=3)
    for site in "abc":
        for _ in range(RULE_MIN_PAGES):
            trust.record(site, True)
    trust.record("a", True)  # a typed again: b is now the least recent
    trust.record("d", True)
    assert len(trust) == 3
    assert (trust.trusted("a"), trust.trusted("b"), trust.trusted("c")) == (True, False, True)


def test_the_rules_figure_leaves_navigation_markup_out():
    # (key, chars, link chars, in-page link chars, led by a link, in navigation markup)
    nav = ("n", 400, 400, 0, True, True)
    prose = ("p", 300, 30, 0, False, False)
    links = ("l", 100, 90, 0, True, False)
    assert rule_density([nav, prose, links]) == pytest.approx(120 / 400)
    assert rule_density([nav]) == 1.0  # all navigation markup: the whole page
    assert rule_density([("n", 400, 100, 0, True, True)]) == 0.25
    assert rule_density([]) == 1.0  # no text
    assert rule_density([("e", 0, 0, 0, False, False)]) == 1.0


def test_a_page_with_its_template_known_is_typed_by_the_rule_near_the_threshold():
    """The real model on a real page: with the threshold put where the
    page's score is, the rule types it on a site where the rule held; a
    band's width away, the model."""
    url = "http://example.com/docs/guide/part.html"
    # The contents page has words of its own: not bare_navigation, which
    # types a page with nothing of its own whatever the threshold.
    words = "A few words on the parts listed below and how to read them. " * 5
    for html, density_over in ((nav_page(40, words), True), (f"<html><body><h1>T</h1>{PROSE * 3}"
                                                     '<p><a href="/a">a</a></p></body></html>', False)):
        page = analyze(html, url)
        stats = block_stats(page.blocks)
        base = page_features(url, page)
        template: frozenset[str] = frozenset()
        score = model().score(assemble(base, stat_features(stats, template)))
        assert (rule_density(stats) > RULE_DENSITY) is density_over
        rule = INDEX if density_over else INFO
        model_says = INDEX if score >= model().threshold else INFO
        site = "example.com"
        # A threshold that puts the page's score just on the other side of the rule's answer.
        close = score + 0.1 if density_over else score - 0.1
        assert classify_stats(base, stats, template, threshold=close, trust=trusting(site), site=site) == rule
        not_rule = INFO if density_over else INDEX
        assert classify_stats(base, stats, template, threshold=close, trust=RuleTrust(), site=site) == not_rule
        assert classify_stats(base, stats, template, threshold=close) == not_rule  # no count: the model alone
        assert classify_stats(base, stats, template) == model_says
        for t, expected in ((score + RULE_BAND + 0.01, INFO), (score - RULE_BAND - 0.01, INDEX)):
            trust = trusting(site)
            assert classify_stats(base, stats, template, threshold=t, trust=trust, site=site) == expected
            assert trust.trusted(site) is (expected == rule)  # a page the model is sure of is counted
        # A page typed alone (no template) is the page-only model's, never the rule's.
        alone = page_model().score(assemble(base, stat_features(stats, None)))
        for t in (alone - 0.01, alone + 0.01):  # one of them the rule's answer, the other not
            assert classify_stats(base, stats, None, threshold=t, trust=trusting(site), site=site) == (
                INDEX if alone >= t else INFO)


# (key, chars, link chars, in-page link chars, led by a link, in navigation markup)
SIDEBAR = ("side", 2000, 1900, 0, True, False)  # the site's template, outside navigation markup
TOC = ("toc", 300, 300, 0, True, False)  # a list of links the template repeats
FOOTER = ("foot", 400, 0, 0, False, True)  # prose in navigation markup, template


def own(blocks, template=frozenset({"side", "toc", "foot"})):
    return stat_features(blocks, template)


@pytest.mark.parametrize(("title", "links", "expected"), [
    (THIN_TEXT - 1, 0, True), (THIN_TEXT, 0, False),  # text of its own under THIN_TEXT characters
    (THIN_TEXT - 1, 500, True),  # links of its own do not count as text
    (0, 0, True),
])
def test_a_page_with_nothing_of_its_own_outside_the_template_is_bare(title, links, expected):
    blocks = [SIDEBAR, TOC, ("title", title, 0, 0, False, False)]
    if links:
        blocks.append(("list", links, links, 0, True, False))
    assert bare_navigation(own(blocks)) is expected


def test_a_bare_page_is_mostly_links_outside_navigation_markup():
    # 150 characters of its own and no links: a short page, not a contents
    # page (the rule's figure 0.0 once the template's links are marked as
    # navigation, 0.89 when they are not: then it passes, which is why
    # decide types a bare page index only where the model is unsure).
    short = ("p", 150, 0, 0, False, False)
    nav_side = ("side", 2000, 1900, 0, True, True)
    assert not bare_navigation(own([nav_side, short]))
    assert rule_density([nav_side, short]) == 0.0
    assert bare_navigation(own([SIDEBAR, short]))
    # The rule's figure strictly over RULE_DENSITY: 35 of 100 characters is not.
    assert not bare_navigation(own([("a", 35, 35, 0, True, False), ("p", 65, 0, 0, False, False)], frozenset({"a"})))
    assert bare_navigation(own([("a", 36, 36, 0, True, False), ("p", 64, 0, 0, False, False)], frozenset({"a"})))
    # Without a template the page's own text is all its text outside navigation markup.
    assert not bare_navigation(own([SIDEBAR, TOC, ("p", 400, 0, 0, False, False)], frozenset()))
    assert bare_navigation(own([SIDEBAR, TOC, FOOTER, ("p", 20, 0, 0, False, False)]))


def test_a_bare_page_the_model_is_unsure_of_is_an_index_page_and_still_counted():
    trust = trusting()
    # The model says info, 0.27 under: index all the same, and counted as a
    # page the model was sure enough of (the rule, 0.9: index, disagreed).
    assert decide(0.30, 0.57, 0.9, trust, "s", bare=True) == INDEX
    assert (trust.bare, trust.decided, trust.overruled) == (1, 0, 0)
    assert not trust.trusted("s")  # 10 of 11 agreed
    # The model sure it is info (the band's width under, or more): the model's.
    assert decide(0.5 - RULE_BAND, 0.5, 0.9, trust, "s", bare=True) == INFO
    assert decide(0.05, 0.57, 0.9, trust, "s", bare=True) == INFO
    assert decide(0.1501, 0.5, 0.9, trust, "s", bare=True) == INDEX  # inside the band
    assert trust.bare == 2
    # The model says index: nothing to count as bare.
    assert decide(0.9, 0.57, 0.9, trust, "s", bare=True) == INDEX
    assert trust.bare == 2
    # In the band on a trusted site where the rule would say info: index, not the rule's.
    trust = trusting()
    assert decide(0.5, 0.57, 0.1, trust, "s", bare=True) == INDEX
    assert (trust.bare, trust.decided) == (1, 0)
    # No count kept: the same.
    assert decide(0.40, 0.57, 0.1, bare=True) == INDEX
    assert decide(0.05, 0.57, 0.1, bare=True) == INFO


def test_a_contents_page_whose_links_the_template_repeats_is_an_index_page():
    """A page whose list of links is also on many of its site's pages
    (a Sphinx toctree that is also the sidebar): with the template known,
    next to nothing is its own. Typed index, at any threshold; with a
    paragraph of its own, by the model."""
    url = "http://docs.example.com/install/index.html"
    toc = "".join(f'<li><a href="/install/{i}.html">Installing on system number {i}</a></li>' for i in range(12))
    bare_html = f"<html><head><title>Install</title></head><body><h1>Install</h1><ul>{toc}</ul></body></html>"
    page = analyze(bare_html, url)
    keys = block_keys(page.blocks)
    assert len(keys) == 13  # the title, then the list's twelve rows
    template = frozenset(keys[1:])  # the list, not the title
    stats = block_stats(page.blocks, keyed=True)
    base = page_features(url, page)
    assert bare_navigation(stat_features(stats, template))
    score = model().score(assemble(base, stat_features(stats, template)))
    assert 0.01 < score < 0.99
    for t in (score - 0.01, score + 0.01, score + RULE_BAND - 0.01):  # the model says index, info, info
        assert classify_stats(base, stats, template, threshold=t) == INDEX
        trust = RuleTrust()
        assert classify_stats(base, stats, template, threshold=t, trust=trust, site="s") == INDEX
        assert trust.bare == (t > score)
    # The model sure it is info (further than the band): the model's.
    assert classify_stats(base, stats, template, threshold=score + RULE_BAND + 0.01) == INFO
    # Typed alone (no template), not thin: the page-only model's, never bare.
    alone = page_model().score(assemble(base, stat_features(stats, None)))
    assert classify_stats(base, stats, None, threshold=alone + 0.01) == INFO
    words = "<p>" + "This part explains how to install the software on each system in turn. " * 4 + "</p>"
    page = analyze(bare_html.replace("</ul>", f"</ul>{words}"), url)
    stats = block_stats(page.blocks, keyed=True)
    assert not bare_navigation(stat_features(stats, template))
    base = page_features(url, page)
    score = model().score(assemble(base, stat_features(stats, template)))
    assert classify_stats(base, stats, template, threshold=score + 0.01) == INFO  # the model's


def test_tspider_rule_as_published():
    page = analyze(f"<html><body>{PROSE}</body></html>")
    assert tspider_rule("http://e.com/", page) == INDEX  # no file name
    assert tspider_rule("http://e.com/a/12345.html", analyze("<p>x</p>")) == INFO  # sequence number
    assert tspider_rule("http://e.com/a/story.html", page) == INFO  # long paragraph
    assert tspider_rule("http://e.com/a/list.html", analyze(f"<ul>{LINKS}</ul>")) == INDEX


def test_count_words_reads_cjk_without_spaces():
    from crawler.reading.textfeatures import count_words

    assert count_words("How the crawler works") == 4
    assert count_words("网络爬虫") == 2
    assert count_words("ウェブクローラーの仕組み") == 6
    assert count_words("Scrapy 网络爬虫 guide") == 4
    assert count_words("") == 0


@pytest.mark.parametrize(("url", "expected"), [
    ("http://d.test/api/org/x/package-summary.html", (1.0, 0.0)),
    ("http://d.test/api/overview-tree.html", (1.0, 0.0)),
    ("http://d.test/api/allclasses-index.html", (1.0, 0.0)),
    ("http://d.test/api/index-all.html", (1.0, 0.0)),
    ("http://d.test/py-modindex.html", (1.0, 0.0)),
    ("http://d.test/genindex.html", (1.0, 0.0)),
    ("http://d.test/annotated.html", (1.0, 0.0)),
    ("http://d.test/std/collections/index.html", (1.0, 0.0)),
    ("http://d.test/Concept-Index.html", (1.0, 0.0)),
    ("http://d.test/api/org/x/class-use/Foo.html", (0.0, 1.0)),
    # Not contents pages by their names: longer names, other words, other directories.
    ("http://d.test/", (0.0, 0.0)),
    ("http://d.test/blog/christmas-tree-ideas.html", (0.0, 0.0)),
    ("http://d.test/all-about-cats.html", (0.0, 0.0)),
    ("http://d.test/python-classes-explained", (0.0, 0.0)),
    ("http://d.test/use-cases/retail.html", (0.0, 0.0)),
    ("http://d.test/legal/terms-of-use/page.html", (0.0, 0.0)),
    ("http://d.test/api/org/x/Foo.html", (0.0, 0.0)),
])
def test_doc_url_names_are_contents_pages_names(url, expected):
    assert doc_url_features(url) == expected
