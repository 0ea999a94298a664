"""The page's kind (crawler/pagetypes/kind.py) and the kind step (crawler/chain/kind.py):
crafted pages of each kind, the model's guards, and how a page typed alone uses its kind."""

from __future__ import annotations

import json
import time

import pytest

from crawler.chain import HTML
from crawler.pagetypes.classify import alone_score, classify, classify_stats, page_model
from crawler.pagetypes.features import page_features
from crawler.pagetypes.kind import (KIND_FEATURES, KINDS, OTHER, SHORT_BLOCKS, KindModel, index_score, kind_model,
                                    kind_of, kind_scores, kind_vector, page_kind)
from crawler.pagetypes.rules import INDEX, INFO
from crawler.pagetypes.template import block_stats
from crawler.reading.extract import Page as Analysis
from crawler.reading.extract import analyze
from tests.support.chainpages import build, response, run, spider, stat  # noqa: F401  (fixtures)


def doc(title, body, head=""):
    return f"<html><head><title>{title}</title>{head}</head><body>{body}</body></html>"

def ld(obj):
    return f'<script type="application/ld+json">{json.dumps(obj)}</script>'

NAV = "<nav><ul>" + "".join(f'<li><a href="/s{i}">Section {i}</a></li>' for i in range(8)) + "</ul></nav>"
FOOT = "<footer><p>Copyright 2024 Example Ltd. All rights reserved.</p><a href='/privacy'>Privacy</a></footer>"
SENT = ("The committee met on Tuesday to discuss the proposal, and after a long debate the members agreed "
        "that the budget for the coming year would be raised by a modest amount to cover the repairs. ")

ARTICLE = ("https://news.example.com/2024/05/14/council-raises-budget-for-repairs", doc(
    "Council raises budget for repairs | Example News",
    NAV + "<article><h1>Council raises budget for repairs</h1><p class=byline>By Jane Doe, <time>May 14, 2024</time></p>"
    + "".join(f"<p>{SENT * 3}</p>" for _ in range(8)) + "</article>" + FOOT,
    ld({"@context": "https://schema.org", "@type": "NewsArticle", "headline": "Council raises budget"})
    + '<meta property="og:type" content="article">'))

POST = ('<div class="post"><div class="author">member{i}</div><div>Joined: 2019</div><div>Posts: 1{i}3</div>'
        '<p>{text}</p><a href="/reply">Reply</a> <a href="/quote">Quote</a> <a href="/report">Report</a></div>')
FORUM = ("https://forum.example.org/threads/my-boiler-keeps-losing-pressure.12345/", doc(
    "My boiler keeps losing pressure - any ideas? | Example Forum",
    NAV + "<h1>My boiler keeps losing pressure - any ideas?</h1>"
    + "".join(POST.format(i=i, text="I had the same problem last winter, and it turned out to be the expansion "
              "vessel. Check the pressure gauge after the heating has been off for a few hours. " * 2)
              for i in range(6)) + FOOT,
    ld({"@context": "https://schema.org", "@type": "DiscussionForumPosting", "headline": "boiler"})))

PRODUCT = ("https://shop.example.com/products/oak-dining-table-180cm", doc(
    "Oak Dining Table 180cm - Buy Online | Example Shop",
    NAV + "<h1>Oak Dining Table 180cm</h1><p class=price>$899.00</p><div>In stock</div>"
    "<label>Quantity</label><input name=qty value=1><button>Add to cart</button><div>Add to wishlist</div>"
    "<h2>Description</h2><p>A solid oak table with a natural oil finish that seats six people in comfort, made "
    "by hand in our workshop from sustainably sourced timber.</p><h2>Specifications</h2><ul><li>Width: 180 cm</li>"
    "<li>Depth: 90 cm</li><li>Height: 75 cm</li></ul><h2>Reviews</h2><p>Write a review</p><div>Free shipping</div>"
    "<div>Returns</div>" + FOOT,
    ld({"@context": "https://schema.org", "@type": "Product", "name": "Oak Dining Table",
        "offers": {"@type": "Offer", "price": "899.00", "priceCurrency": "USD"}})
    + '<meta property="og:type" content="product">'))

CARD = ('<li class="product-card"><a href="/products/chair-{i}"><img src="/c{i}.jpg" alt=""></a>'
        '<h3><a href="/products/chair-{i}">Oak Chair Model {i}</a></h3><span class=price>${i}9.00</span>'
        '<button>Add to cart</button></li>')
COLLECTION = ("https://shop.example.com/collections/dining-chairs", doc(
    "Dining Chairs | Example Shop",
    NAV + "<h1>Dining Chairs</h1><div>Showing 1-24 of 60 results</div><div>Sort by</div><div>Filter</div>"
    + "<ul class=grid>" + "".join(CARD.format(i=i) for i in range(24)) + "</ul>"
    + '<a href="?page=2">Next page</a>' + FOOT,
    ld({"@context": "https://schema.org", "@type": "CollectionPage", "name": "Dining Chairs"})))

TEASER = ('<article class="teaser"><h2><a href="/blog/post-{i}">How we rebuilt our garden shed, part {i}</a></h2>'
          '<div>By Sam</div><time>March {i}, 2024</time><p>A short summary of what we did this week and why it '
          'mattered.</p><a href="/blog/post-{i}">Read more</a></article>')
LISTING = ("https://www.example.com/blog/page/2/", doc(
    "Blog - Page 2 of 14 | Example",
    NAV + "<h1>Blog</h1>" + "".join(TEASER.format(i=i) for i in range(12))
    + '<a href="/blog/page/1/">Newer posts</a> <a href="/blog/page/3/">Older posts</a>' + FOOT,
    '<meta property="og:type" content="website">'))

SIDEBAR = ('<nav class="sidebar"><ul>' + "".join(f'<li><a href="/docs/api/{n}.html">{n}</a></li>'
           for n in ("client", "config", "errors", "session", "transport", "retry")) + "</ul></nav>")
DOCS = ("https://docs.example.dev/en/latest/api/session.html", doc(
    "Session — example-lib 2.3 documentation",
    SIDEBAR + "<div role=main><h1>Session</h1><p>A session holds the connection pool and the settings shared by "
    "every request made through it; create one per application and close it when you are done.</p>"
    "<h2>Parameters</h2><dl><dt>timeout</dt><dd>Seconds to wait for the server before giving up.</dd>"
    "<dt>retries</dt><dd>How many times a failed request is sent again.</dd></dl><h2>Returns</h2>"
    "<p>A new session object.</p><h2>Example</h2><pre><code>s = Session(timeout=5)</code></pre>"
    "<div>Note</div><p>Sessions are not thread safe.</p><div>Copy</div></div>"
    '<a href="/docs/api/retry.html" rel="prev">Previous</a> <a href="/docs/api/transport.html" rel="next">Next</a>'
    "<div>Edit this page on GitHub</div>" + FOOT,
    '<link rel="next" href="transport.html"><link rel="prev" href="retry.html">'))

SERVICE = ("https://www.example-plumbing.com/services/emergency-plumbing/", doc(
    "Emergency Plumbing Services in Leeds | Example Plumbing",
    NAV + "<h1>Emergency Plumbing Services</h1><p>Burst pipe or blocked drain? Our engineers are on call day and "
    "night across Leeds, and most jobs are finished within an hour of arrival.</p><div>Get a free quote</div>"
    "<div>Call us now</div><h2>Why choose us</h2><ul><li>Fixed prices</li><li>Fully insured</li>"
    "<li>Local team</li></ul><h2>Testimonials</h2><p>Fast, friendly and tidy.</p><div>Book an appointment</div>"
    "<div>Contact us</div><div>Our services</div>" + FOOT,
    ld({"@context": "https://schema.org", "@type": "Plumber"}) + ld({"@type": "Service", "name": "Emergency"})))

PAGES = {"article": ARTICLE, "forum": FORUM, "product": PRODUCT, "collection": COLLECTION, "listing": LISTING,
         "documentation": DOCS, "service": SERVICE}


@pytest.mark.parametrize("kind", KINDS)
def test_a_crafted_page_of_each_kind_is_named_that_kind(kind):
    url, html = PAGES[kind]
    page = analyze(html, url)
    scores = kind_scores(page, url)
    assert page_kind(page, url) == kind
    assert max(scores, key=scores.__getitem__) == kind and scores[kind] >= kind_model().sure
    assert set(scores) == set(KINDS) and abs(sum(scores.values()) - 1.0) < 1e-9


@pytest.mark.parametrize("kind, page_type", [("article", INFO), ("forum", INFO), ("product", INFO),
                                             ("collection", INDEX), ("listing", INDEX)])
def test_a_page_typed_alone_is_typed_with_its_kind(kind, page_type):
    url, html = PAGES[kind]
    page = analyze(html, url)
    assert classify(url, page) == page_type
    # classify_stats without the kind: the page-only model alone, as before the kind.
    base = page_features(url, page)
    x = [*base[:39]]
    kind_probs = kind_scores(page, url)
    blended = alone_score(x, kind_probs)
    w = kind_model().index_weight
    assert blended == pytest.approx(w * page_model().score(x) + (1 - w) * index_score(kind_probs))
    stats = block_stats(page.blocks)
    for t, expected in ((blended - 0.01, INDEX), (blended + 0.01, INFO)):
        assert classify_stats(base, stats, None, threshold=t, kind=kind_probs) == expected


def test_the_kind_is_other_where_the_model_is_unsure_or_nothing_was_read():
    assert kind_of({"article": 0.39, "forum": 0.31, "listing": 0.30}, sure=0.4) == OTHER
    assert kind_of({"article": 0.41, "forum": 0.29, "listing": 0.30}, sure=0.4) == "article"
    assert kind_of({}) == OTHER
    assert page_kind(Analysis(), "https://example.com/") == OTHER  # nothing read of the page


def test_index_score_leaves_service_pages_out():
    assert index_score({"listing": 0.2, "collection": 0.1, "service": 0.5, "article": 0.2}) == pytest.approx(0.6)
    assert index_score({"service": 1.0}) == 0.0
    assert index_score({"listing": 1.0}) == 1.0


def test_the_model_reads_only_numbers_and_its_own_features():
    data = json.loads(json.dumps({"features": list(KIND_FEATURES), "classes": list(KINDS), "learning_rate": 0.1,
                                  "trees": [[0.0] * len(KINDS)]}))
    assert KindModel(data).scores([0.0] * len(KIND_FEATURES)) == pytest.approx({k: 1 / len(KINDS) for k in KINDS})
    bad = dict(data, trees=[[["__import__('os')", 0.5, 1.0, 0.0]] + [0.0] * (len(KINDS) - 1)])
    with pytest.raises(ValueError, match="splits on feature"):
        KindModel(bad)
    with pytest.raises(ValueError, match="splits on feature"):
        KindModel(dict(data, trees=[[[len(KIND_FEATURES), 0.5, 1.0, 0.0]] + [0.0] * (len(KINDS) - 1)]))
    with pytest.raises((ValueError, TypeError)):
        KindModel(dict(data, trees=[[[0, "1; import os", 1.0, 0.0]] + [0.0] * (len(KINDS) - 1)]))
    with pytest.raises(ValueError, match="other features"):
        KindModel(dict(data, features=list(KIND_FEATURES)[:-1]))


@pytest.mark.parametrize("url, pager, slash, last", [
    ("https://example.com/blog/page/2/", 1.0, 1.0, 1.0),
    ("https://example.com/news?page=3", 1.0, 0.0, 4.0),
    ("https://example.com/shop/shoes?start=40&sort=new", 1.0, 0.0, 5.0),
    ("https://example.com/forum/p12", 1.0, 0.0, 3.0),
    ("https://example.com/2024/05/how-we-rebuilt-our-search-index", 0.0, 0.0, 31.0),
    ("https://example.com/category/garden/", 0.0, 1.0, 6.0),
    ("https://example.com/p/" + "x" * 200, 0.0, 0.0, 80.0),
    ("https://example.com/pages/page-two", 0.0, 0.0, 8.0),
    ("https://example.com/", 0.0, 1.0, 0.0),
])
def test_the_urls_listing_page_number_trailing_slash_and_last_parts_length(url, pager, slash, last):
    page = analyze(doc("A page", "<p>Some words of the page.</p>"), url)
    x = dict(zip(KIND_FEATURES, kind_vector(page, url)))
    assert (x["url_pager"], x["url_slash"], x["url_last_len"]) == (pager, slash, last)


def test_a_huge_page_is_read_in_bounded_time():
    url = "https://example.com/" + "a/" * 5000 + "x"
    html = "<title>" + "t" * 100000 + "</title>" + "<div><a href='/x'>Reply</a></div>" * 20000
    page = analyze(html, url)
    start = time.process_time()
    for _ in range(20):
        kind_vector(page, url)
    assert (time.process_time() - start) / 20 < 0.05  # the first SHORT_BLOCKS blocks, the title's first 300 chars
    assert len(page.blocks) > SHORT_BLOCKS
    assert page_kind(page, url) in (*KINDS, OTHER)


# -- the chain step ------------------------------------------------------------------------------------


def test_the_kind_step_names_an_html_pages_kind_and_counts_it(spider):  # noqa: F811
    url, html = PAGES["product"]
    _, page = run(spider, response(spider, "/products/oak-dining-table-180cm", body=html.encode()), until="Kind")
    assert page.kind == HTML
    assert page.item.kind == "product"
    assert page.kind_scores is not None and max(page.kind_scores, key=page.kind_scores.__getitem__) == "product"
    assert stat(spider, "kind/product") == 1
    _, page = run(spider, response(spider, "/doc.pdf", body=b"%PDF-1.4\n%%EOF",
                                   headers={"Content-Type": "application/pdf"}), until="Kind")
    assert page.item.kind is None and page.kind_scores is None


def test_the_type_step_types_a_page_alone_with_the_kind_steps_scores(spider):  # noqa: F811
    from tests.support.chainpages import PROSE, html, step

    _, page = run(spider, response(spider, "/a.html", body=html(PROSE)), until="Kind")
    assert page.checked is not None and page.checked.template is None  # the site's first page: typed alone
    assert page.kind_scores is not None
    prose_scores = dict(page.kind_scores)
    page.kind_scores = {"listing": 1.0, **{k: 0.0 for k in KINDS if k != "listing"}}
    step(spider, "Classify", page)
    assert page.item.page_type == INDEX  # 0.4 of a sure listing is over the threshold whatever the page-only model says
    page.kind_scores = prose_scores
    step(spider, "Classify", page)
    assert page.item.page_type == INFO
