"""The steps of a page's chain (crawler/chain/) that read it, one at a
time, on the real parts (tests/support/chainpages.py: a site spider built
with the project's settings, its frontier in the real Redis): visit,
redirect, decode, parse, render (its paths that render nothing), read,
focus, check and type. Each test asserts what the step writes on the page
and its item, what it emits, the stats it counts and whether the chain
stops there. What a page's chain yields (variants, store, follow) and its
records: tests/test_chain_output.py."""

from __future__ import annotations

import math

import pytest
from scrapy.http import Response

from crawler.chain import HTML, OTHER, PDF
from crawler.duplicates.fingerprint import content_hash
from crawler.duplicates.check import Checked
from crawler.pagetypes.rules import INDEX, INFO
from tests.support.chainpages import (
    HTML_TYPE,
    INDEX_BODY,
    PROSE,
    SITE,
    build,  # noqa: F401  (a fixture)
    html,
    requests,
    response,
    run,
    spider,  # noqa: F401  (a fixture)
    stat,
    step,
    url,
)

# -- visit -----------------------------------------------------------------------------------------


def test_a_recrawls_304_is_the_not_modified_record_and_ends_the_chain(spider):
    resp = response(spider, "/a.html", status=304, meta={"revisit": 1_700_000_000},
                    headers={"ETag": '"v2"', "Last-Modified": "Mon, 01 Jan 2024 00:00:00 GMT"})
    out, page = run(spider, resp)
    assert len(out) == 1 and out[0] is not page.item and page.stopped
    item = out[0]
    assert (item.url, item.state, item.status, item.etag, item.last_modified, item.revisit, item.depth) == (
        url("/a.html"), "E", 304, '"v2"', "Mon, 01 Jan 2024 00:00:00 GMT", 1_700_000_000, 2)
    assert url("/a.html") not in spider.follower.seen
    assert page.kind == HTML and page.analysis is None  # decode and parse never ran


@pytest.mark.parametrize("status", [200, 304])  # a 304 no re-crawl asked for: a response like any other
def test_any_other_response_marks_its_url_fetched(spider, status):
    out, page = run(spider, response(spider, "/b.html", status=status), until="Visit")
    assert out == [] and not page.stopped
    assert url("/b.html") in spider.follower.seen


# -- redirect --------------------------------------------------------------------------------------


def test_a_301_stores_its_source_with_the_target_as_its_link_and_queues_the_target(spider):
    out, page = run(spider, response(spider, "/old.html", status=301, headers={"Location": "/new.html"},
                                     cls=Response))
    assert page.stopped and out[0] is page.item and len(out) == 2
    item = page.item
    assert (item.state, item.status, item.error, item.page_type) == ("C", 301, None, None)
    assert item.links == [{"url": url("/new.html"), "anchor": "[redirect 301]"}]
    assert requests(out[1:]) == [(url("/new.html"), {"referer_url": url("/old.html"), "depth": 2,
                                                     "redirect_times": 1, "redirect_urls": [url("/old.html")]})]
    assert out[1].priority == 1 and out[1].callback == spider.parse
    assert stat(spider, "redirect/followed") == 1


def test_a_redirect_without_location_is_an_error_record(spider):
    out, page = run(spider, response(spider, "/old.html", status=302, headers={}, cls=Response))
    assert out == [page.item] and page.stopped
    assert (page.item.state, page.item.error, page.item.links) == (
        "E", "HTTP 302 redirect without a valid Location (None)", [])
    assert stat(spider, "redirect/bad_location") == 1
    assert stat(spider, "redirect/followed") is None


@pytest.mark.parametrize("meta, error, name", [
    ({"redirect_times": 1, "redirect_urls": [url("/new.html")]},
     f"redirect loop: {url('/new.html')} -> {url('/old.html')} -> {url('/new.html')}", "redirect/loop"),
    ({"redirect_times": 10, "redirect_urls": [url("/x.html")]},
     "too many redirects: 11 hops (REDIRECT_MAX_TIMES = 10)", "redirect/limit"),
])
def test_a_redirect_loop_or_one_hop_too_many_is_an_error_record_with_its_target_as_link(spider, meta, error, name):
    out, page = run(spider, response(spider, "/old.html", status=307, headers={"Location": url("/new.html")},
                                     meta=meta, cls=Response))
    assert out == [page.item] and page.stopped
    assert (page.item.state, page.item.error) == ("E", error)
    assert page.item.links == [{"url": url("/new.html"), "anchor": "[redirect 307]"}]
    assert stat(spider, name) == 1


def test_a_redirect_off_scope_is_stored_as_an_edge_and_not_queued(spider):
    out, page = run(spider, response(spider, "/old.html", status=308, headers={"Location": "http://else.test/"},
                                     cls=Response))
    assert out == [page.item] and page.item.state == "C"
    assert page.item.links == [{"url": "http://else.test/", "anchor": "[redirect 308]"}]
    assert stat(spider, "redirect/off_scope") == 1


# -- decode ----------------------------------------------------------------------------------------


def test_a_pdf_is_told_by_its_magic_bytes(spider):
    resp = response(spider, "/doc", body=b"\n%PDF-1.4\n...", headers={"Content-Type": "application/octet-stream",
                                                                     "X-Robots-Tag": "noindex"}, cls=Response)
    out, page = run(spider, resp, until="Decode")
    assert out == [] and not page.stopped
    assert (page.kind, page.item.page_type, page.robots, page.text) == (PDF, INFO, frozenset({"noindex"}), "")
    assert stat(spider, "classifier/page_type/info") == 1


def test_another_document_is_stored_as_it_came_and_goes_no_further(spider):
    body = bytes(range(256)) * 4
    out, page = run(spider, response(spider, "/logo.png", body=body, headers={"Content-Type": "image/png"},
                                     cls=Response))
    assert out == [page.item] and page.kind == OTHER
    item = page.item
    assert (item.page_type, item.content_type, item.encoding, item.text, item.links) == (
        INFO, "image/png", None, "", [])
    assert item.content_hash == content_hash(body.decode("latin-1"))
    assert page.analysis is None and page.tree is None
    assert stat(spider, "response/skipped_type/image/png") == 1
    assert stat(spider, "classifier/page_type/info") == 1


def test_html_is_decoded_by_its_charset_and_the_sites_legacy_encoding_remembered(spider):
    body = html("<p>Привет, мир</p>", title="Здравствуйте").decode().encode("windows-1251")
    _, page = run(spider, response(spider, "/ru.html", body=body,
                                   headers={"Content-Type": "text/html; charset=windows-1251"}), until="Decode")
    assert page.kind == HTML and "<p>Привет, мир</p>" in page.text
    assert page.item.encoding == "windows-1251"
    assert spider.parts.encodings.get(SITE) == "windows-1251"


# -- parse -----------------------------------------------------------------------------------------


def test_parse_gives_the_tree_without_scripts_and_its_analysis(spider):
    body = html('<script>var a = "<a href=/s.html>s</a>";</script><h1>Head</h1><p>Body text.</p>'
                '<a href="/x.html">X</a>', head='<style>p {}</style><link rel="canonical" href="/c.html">')
    _, page = run(spider, response(spider, "/a.html", body=body), until="Parse")
    assert page.tree.tag == "html" and page.tree.xpath("//script | //style") == []
    a = page.analysis
    assert (a.title, a.h1, a.links, a.canonical) == ("T", "Head", [("/x.html", "X")], "/c.html")
    assert "Body text." in a.text and "var a" not in a.text
    assert page.item.title == ""  # read writes the record, not parse


# -- render (its paths that render nothing; the browser's: tests/test_render.py) --------------------


def test_a_crawl_that_does_not_render_keeps_the_static_page(spider):
    _, page = run(spider, response(spider, "/a.html", body=html(INDEX_BODY)), until="Parse")
    tree, analysis, text = page.tree, page.analysis, page.text
    step(spider, "Render", page)
    assert spider.parts.renderer.mode == "never"
    assert (page.tree, page.analysis, page.text, page.navigations) == (tree, analysis, text, [])
    assert page.out == [] and not page.stopped and page.item.rendered is None


def test_a_document_is_never_rendered(spider):
    spider.parts.renderer.mode = "always"  # no browser: rendering anything would fail the test
    _, page = run(spider, response(spider, "/d.pdf", body=b"%PDF-1.4\n", headers={"Content-Type": "application/pdf"},
                                   cls=Response), until="Render")
    assert (page.kind, page.tree, page.analysis, page.out, page.stopped) == (PDF, None, None, [], False)
    assert page.item.rendered is None


# -- read ------------------------------------------------------------------------------------------


def test_read_makes_links_absolute_once_each_with_the_meta_refresh_target_and_counts_them(spider):
    body = html('<h1>Head</h1><p>Own words.</p><a href="b.html">B</a> <a href="/c/d.html#part">D</a> '
                '<a href="b.html">B again</a> <a href="http://Other.test/x">X</a> <a href="mailto:a@b.c">M</a>',
                head='<meta http-equiv="refresh" content="5; url=/moved.html">')
    out, page = run(spider, response(spider, "/dir/a.html", body=body), until="Read")
    assert out == []
    assert page.refresh == url("/moved.html")
    assert page.links == {url("/dir/b.html"): "B", url("/c/d.html"): "D", "http://other.test/x": "X",
                          url("/moved.html"): "[meta refresh]"}
    assert page.item.links == [{"url": u, "anchor": a} for u, a in page.links.items()]
    assert (page.item.title, page.item.text, page.item.abstract) == ("T", page.analysis.text, page.analysis.abstract)
    assert "Own words." in page.item.text
    assert (stat(spider, "frontier/hrefs_found"), stat(spider, "frontier/links_found")) == (5, 4)


# -- metadata --------------------------------------------------------------------------------------


def test_metadata_puts_the_pages_metadata_on_its_record_and_none_when_it_has_none(spider):
    body = html("<h1>Head</h1><p>Own words.</p>", title="Head | Site",
                head='<meta property="og:site_name" content="Site"><meta name="author" content="Ann Lee">'
                     '<script type="application/ld+json">{"@type": "Article", "datePublished": "2024-05-06"}</script>')
    out, page = run(spider, response(spider, "/m.html", body=body), until="Metadata")
    assert out == []
    assert page.item.metadata == {"title": "Head", "author": "Ann Lee", "published": "2024-05-06",
                                  "site_name": "Site", "type": "article",
                                  "jsonld": [{"@type": "Article", "datePublished": "2024-05-06"}],
                                  "opengraph": {"og:site_name": "Site"}}
    _, page = run(spider, response(spider, "/n.html", body=b"<html><body><p>x</p></body></html>"), until="Metadata")
    assert page.item.metadata is None
    _, page = run(spider, response(spider, "/d.pdf", body=b"%PDF-1.4\n", headers={"Content-Type": "application/pdf"},
                                   cls=Response), until="Metadata")
    assert page.item.metadata is None


def test_the_pages_robots_are_its_headers_and_its_meta_tags_together(spider):
    body = html(INDEX_BODY, head='<meta name="robots" content="nofollow">')
    resp = response(spider, "/a.html", body=body, headers={**HTML_TYPE, "X-Robots-Tag": "googlebot: none, noarchive"})
    _, page = run(spider, resp, until="Decode")
    assert page.robots == frozenset({"noarchive"})  # addressed to another crawler: not ours
    resp.headers.appendlist("X-Robots-Tag", "noindex")
    _, page = run(spider, resp, until="Read")
    assert page.robots == frozenset({"noarchive", "noindex", "nofollow"})
    assert (page.stored, page.followed) == (False, False)


# -- focus -----------------------------------------------------------------------------------------

ON_TOPIC = ("<h1>Vacuum</h1><p>PostgreSQL vacuum reclaims the storage of dead rows. Run vacuum often; autovacuum "
            "does it for you in PostgreSQL.</p>")
OFF_TOPIC = "<h1>Tomatoes</h1><p>Tomatoes need sun, water and patience. Prune the side shoots in summer.</p>"


@pytest.fixture
def focused(build, tmp_path):
    topic = tmp_path / "topic.yaml"
    topic.write_text("name: PostgreSQL maintenance\nkeywords:\n  vacuum: 1\n  postgresql: 1\nthreshold: 0.3\n")
    return build(topic=str(topic))


def test_a_focused_crawl_scores_the_page_and_counts_it(focused):
    _, page = run(focused, response(focused, "/db/vacuum.html", body=html(ON_TOPIC, title="VACUUM")), until="Focus")
    # The title's hit counts twice, the text's five (h1, two PostgreSQL, two vacuum) once; under 50 words
    # the density is of 50: 100 * 7 / 50 = 14, and the score 1 - e^(-14/2).
    assert (page.item.topic_score, page.item.on_topic) == (round(1 - math.exp(-7), 4), True)
    assert focused.follower.siblings.rate(url("/db/other.html"), 0.0) == 1 / 3  # one on-topic page of two pseudo
    _, page = run(focused, response(focused, "/garden/t.html", body=html(OFF_TOPIC), meta={"topic_hops": 1}),
                  until="Focus")
    assert (page.item.topic_score, page.item.on_topic) == (0.0, False)
    assert focused.follower.siblings.rate(url("/garden/x.html"), 0.0) == 0.0
    assert {k: stat(focused, f"topic/{k}") for k in ("pages_scored", "on_topic", "off_topic", "tunnel_pages",
                                                     "tunnel_on_topic")} == {
        "pages_scored": 2, "on_topic": 1, "off_topic": 1, "tunnel_pages": 1, "tunnel_on_topic": None}


def test_without_a_topic_focus_does_nothing(spider):
    _, page = run(spider, response(spider, "/db/vacuum.html", body=html(ON_TOPIC)), until="Focus")
    assert (page.item.topic_score, page.item.on_topic, stat(spider, "topic/pages_scored")) == (None, None, None)


# -- check -----------------------------------------------------------------------------------------


def test_check_finds_the_second_identical_page_a_duplicate_and_counts_the_template(spider):
    _, first = run(spider, response(spider, "/a.html", body=html(INDEX_BODY)), until="Check")
    assert first.checked == Checked(duplicate=False, template=None, young=True)  # the site's first page
    assert first.keys and len(first.blocks) == len(first.keys)
    assert first.item.content_hash is not None and first.item.dup_of is None
    _, second = run(spider, response(spider, "/b.html", body=html(INDEX_BODY)), until="Check")
    assert second.checked == Checked(duplicate=True, template=None, young=True)
    assert (second.item.dup_of, second.item.content_hash) == (url("/a.html"), first.item.content_hash)
    assert (stat(spider, "simhash/exact_duplicate"), stat(spider, "classifier/template/page_only")) == (1, 2)


def test_a_pdf_is_checked_by_its_text_alone_and_another_document_not_at_all(spider):
    pdf = response(spider, "/d.pdf", body=b"%PDF-1.4\n", headers={"Content-Type": "application/pdf"}, cls=Response)
    _, page = run(spider, pdf, until="Decode")
    page.item.text = "A manual of rivers. " * 5  # what read takes from the PDF (crawler/reading/documents.py)
    step(spider, "Check", page)
    assert page.checked == Checked(duplicate=False, template=None, young=False) and page.keys is None
    assert page.item.content_hash == content_hash(page.item.text)
    assert stat(spider, "classifier/template/page_only") is None  # a PDF counts toward no template
    _, page = run(spider, response(spider, "/a.png", body=b"\x89PNG", headers={"Content-Type": "image/png"},
                                   cls=Response), until="Check")
    assert page.checked is None and page.keys is None


# -- classify --------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, kind", [(INDEX_BODY, INDEX), (PROSE, INFO)])
def test_classify_types_a_clear_index_and_a_clear_information_page(spider, body, kind):
    _, page = run(spider, response(spider, "/a.html", body=html(body)), until="Classify")
    assert page.item.page_type == page.typed.page_type == kind
    assert page.typed.keys == page.keys and not page.typed.terms
    assert stat(spider, f"classifier/page_type/{kind}") == 1
    assert stat(spider, f"classifier/page_type/{({INDEX, INFO} - {kind}).pop()}") is None

