"""Sites' templates: the rule (crawler/pagetypes/template.py), the cluster's evidence
in a real Redis (crawler/frontier/templates.py), and the page types they
give on a generated site whose sidebar is a big link list."""

from __future__ import annotations

import pytest
import redis
from redis.crc import key_slot

from crawler.pagetypes.classify import classify, classify_stats
from crawler.pagetypes.features import assemble, doc_url_features, page_features
from crawler.pagetypes.rules import INDEX, INFO
from crawler.reading.extract import analyze
from crawler.frontier import Frontier
from crawler.redis.keys import template_key
from crawler.frontier.templates import parse_evidence
from crawler.pagetypes.template import (
    MAX_PAGE_KEYS,
    TemplateEvidence,
    FirstPages,
    LocalTemplates,
    TemplatePolicy,
    block_keys,
    block_stats,
    own_features,
    own_stats,
    stat_features,
    stat_keys,
    template_of,
)

SITE = "docs.example"
SIDEBAR = "".join(f'<li><a href="/topic/{i}.html">Topic number {i} of the manual</a></li>' for i in range(80))


def article(i: int, paragraphs: int = 1, sentences: int = 4) -> str:
    """An article of the site: its own prose, and the site's sidebar (a big
    link list in markup that does not say it is navigation). With one
    paragraph of four sentences, the page-only model types it an index
    page."""
    prose = " ".join(f"Paragraph {j} of article {i} explains one more detail of the subject at length."
                     for j in range(sentences))
    return (f"<html><head><title>Article {i}</title></head><body><div class='toc'><ul>{SIDEBAR}</ul></div>"
            f"<div class='body'><h1>Article {i}</h1>{f'<p>{prose}</p>' * paragraphs}</div></body></html>")


def listing(i: int) -> str:
    """An index page of the site: its own list of links to other pages."""
    own = "".join(f'<li><a href="/section/{i}/{j}.html">Entry {j} of section {i}</a></li>' for j in range(40))
    return (f"<html><head><title>Section {i}</title></head><body><div class='toc'><ul>{SIDEBAR}</ul></div>"
            f"<div class='body'><h1>Section {i}</h1><ul>{own}</ul></div></body></html>")


def url(i: int, kind: str = "article") -> str:
    return f"http://{SITE}/{kind}/{i}.html"


# -- the rule ------------------------------------------------------------------------------


def test_a_block_is_template_once_on_enough_of_the_sites_pages():
    p = TemplatePolicy()
    assert not p.is_template(4, 4)  # fewer than min_pages pages: nothing is template
    assert p.is_template(3, 5) and not p.is_template(2, 5)  # at least min_count pages
    assert p.is_template(15, 50) and not p.is_template(14, 50)  # and 30 % of them
    assert TemplateEvidence(4, (4,)).template(["k"], p) is None  # too early: the page-only view
    assert TemplateEvidence(5, (5, 1)).template(["k", "j"], p) == frozenset({"k"})


def test_local_evidence_freezes_to_the_template_after_the_sites_first_pages():
    p = TemplatePolicy(pages=10, min_pages=3, share=0.5, min_count=2, max_keys=20)
    t = LocalTemplates(p)
    for i in range(10):
        t.observe("s", ["nav", "footer" if i % 3 == 0 else "x", f"own{i}"])
    # "x" on 6 of 10 pages is template; "footer" on 4 of 10 is under half.
    assert t.sites["s"].counts == {"nav": 10, "x": 6}
    assert t.observe("s", ["nav", "new"]) == TemplateEvidence(10, (10, 0))  # frozen: nothing counted
    assert t.sites["s"].pages == 10


def test_own_blocks_without_template_are_those_outside_navigation_markup():
    page = analyze("<html><body><nav><a href='/a'>Menu</a></nav><p>Own text</p></body></html>")
    stats = block_stats(page.blocks)
    assert [len(page.blocks), len(stats)] == [2, 2]
    assert own_stats(stats, None) == [stats[1]] and stats[1][1] == len("Own text")
    keys = block_keys(page.blocks)
    assert stats[0][1:4] == (4, 4, 0)
    # With the template known, what is not template is the page's own, but
    # for links in navigation markup: the section of a sidebar expanded on
    # this page alone is not template, and not the page's either.
    assert own_stats(stats, frozenset()) == [stats[1]]
    assert own_stats(stats, frozenset(keys[1:])) == []
    prose = analyze("<html><body><nav><a href='/a'>Menu</a> and a line of text about it</nav>"
                    "<p>Own text</p></body></html>")
    prose_stats = block_stats(prose.blocks)
    assert prose_stats[0][5] and own_stats(prose_stats, frozenset()) == prose_stats
    # Links to places on the page lead nowhere else: a page's own contents
    # box in navigation markup stays the page's.
    box = analyze("<html><body><nav><a href='#intro'>Introduction</a></nav><p>Own text</p></body></html>",
                  "http://e.org/p.html")
    box_stats = block_stats(box.blocks)
    assert box_stats[0][5] and box_stats[0][2] == box_stats[0][3] == len("Introduction")
    assert own_stats(box_stats, frozenset()) == box_stats
    # Typed without templates, the blocks are not hashed: the same figures, no keys.
    assert block_stats(page.blocks, keyed=False) == [("", *st[1:]) for st in stats]


def test_a_block_in_navigation_markup_and_the_same_text_outside_it_are_two_keys():
    """A contents page lists the pages its site's sidebar lists, with the
    same words: its own list is not the sidebar, which is template."""
    sidebar = "".join(f"<li><a href='/{i}.html'>Chapter {i}</a></li>" for i in range(8))
    contents = (f"<html><body><nav><ul>{sidebar}</ul></nav><h1>Contents</h1>"
                f"<div class='body'><ul>{sidebar}</ul></div></body></html>")
    page = analyze(contents, "http://e.org/index.html")
    stats = block_stats(page.blocks)
    nav = [st for st in stats if st[5]]
    body = [st for st in stats if not st[5] and st[4]]
    assert len(nav) == len(body) == 8
    assert {st[0] for st in nav}.isdisjoint(st[0] for st in body)
    template = frozenset(st[0] for st in nav)  # the sidebar, on every page of the site
    own = own_stats(stats, template)
    assert [st for st in own if st[4]] == body
    # The page's own part: its title and its list, 72 of whose 80 characters are links.
    assert stat_features(stats, template)[0] == 72 / 80


def test_block_keys_are_distinct_and_bounded():
    page = analyze("<html><body>" + "<p>same</p>" * 3 + "".join(f"<p>b{i}</p>" for i in range(2000))
                   + "</body></html>")
    keys = block_keys(page.blocks)
    assert len(keys) == MAX_PAGE_KEYS == len(set(keys))


def test_in_page_links_are_not_links_to_other_pages():
    html = ("<html><body><ul>" + "".join(f'<li><a href="#m{i}">method{i}()</a></li>' for i in range(30))
            + "</ul><p>" + "Prose of the class. " * 10 + "</p></body></html>")
    page = analyze(html, "http://e.org/api/Klass.html")
    own_link_density = own_features(page, None)[0]
    assert own_link_density == 0.0
    # The same list linking to other pages is navigation.
    other = analyze(html.replace('href="#m', 'href="Other.html#m'), "http://e.org/api/Klass.html")
    assert own_features(other, None)[0] > 0.5


def test_a_pages_block_figures_give_the_features_the_page_gave_before_they_were_kept():
    """What is kept of a site's first pages (their template-free features
    and their blocks' figures) gives the feature vectors the page itself
    gave before (``tests/data/template_features.json``: written by the
    code of 70ecfe2, which computed them from the page's blocks; one row
    written again when a link in navigation markup stopped being the
    page's own with its site's template known: the third page's with an
    empty template, its menu no longer counted), and the same type."""
    import json
    from pathlib import Path

    from crawler.pagetypes.kind import kind_scores

    golden = json.loads((Path(__file__).parent / "data" / "template_features.json").read_text())
    # The article as the golden file was written from: two paragraphs of six sentences.
    htmls = {url(1): article(1, paragraphs=2, sentences=6), url(2, "listing"): listing(2),
             url(3): "<html><body><nav><a href='/a'>Menu</a></nav><p>Own</p><p>Own</p></body></html>"}
    assert len(golden) == 12
    for row in golden:
        page = analyze(htmls[row["url"]], row["url"])
        stats = block_stats(page.blocks)
        keys = stat_keys(stats)
        assert keys == block_keys(page.blocks)
        template = {"none": None, "empty": frozenset(), "first": frozenset(keys[:1]), "all": frozenset(keys)}[
            row["template"]]
        x = assemble(page_features(row["url"], page), stat_features(stats, template))
        # The URL's documentation names came after (2026-11-27), at the end.
        assert x == [*row["x"], *doc_url_features(row["url"])]
        # A page alone (no template) is typed with its kind too (crawler.pagetypes.kind).
        base = page_features(row["url"], page)
        kind = kind_scores(page, row["url"], base) if template is None else None
        assert classify_stats(base, stats, template, kind=kind) == classify(row["url"], page, template=template)


def test_template_of_reads_counts_over_the_sites_pages():
    p = TemplatePolicy()
    assert template_of(["a", "b"], {"a": 5}, 4, p) is None  # too few pages to tell
    assert template_of(["a", "b", "c"], {"a": 5, "b": 2}, 5, p) == frozenset({"a"})  # b: under min_count
    assert template_of(["a", "b"], {"a": 15, "b": 14}, 50, p) == frozenset({"a"})  # b: under 30 %


def test_first_pages_are_kept_bounded():
    fp: FirstPages[str] = FirstPages(max_sites=2, per_site=2, max_cost=100)
    assert fp.add("a", "a1", 10) and fp.add("a", "a2", 10)
    assert not fp.add("a", "a3", 10)  # the site holds per_site already
    assert not fp.add("b", "huge", 101)  # costs more than everything may
    assert fp.add("b", "b1", 10) and "a" in fp and len(fp) == 3 and fp.cost == 30
    assert fp.add("c", "c1", 10)  # a third site: the one not added to for longest goes
    assert "a" not in fp and fp.evicted == 2 and fp.cost == 20
    assert fp.add("b", "b2", 85)  # over max_cost: "c" goes, "b" (just added to) stays
    assert "c" not in fp and fp.evicted == 3 and fp.cost == 95
    assert fp.take("b") == ["b1", "b2"] and fp.take("b") == [] and fp.cost == 0 and len(fp) == 0


# -- the cluster's evidence in Redis ------------------------------------------------------------


@pytest.fixture
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def frontier(client, crawl_name, node="n1") -> Frontier:
    return Frontier(client, crawl_name, node=node, shards=4)


def typed(f: Frontier, i: int, kind: str = "article") -> tuple[str, bool]:
    """Type page ``i`` of the generated site as the spider does: count it in
    the site's evidence, then classify it with the template it gives."""
    page = analyze(article(i) if kind == "article" else listing(i), url(i, kind))
    keys = block_keys(page.blocks)
    evidence = f.templates.observe(SITE, keys)
    assert evidence is not None
    template = evidence.template(keys, f.templates.policy)
    return classify(url(i, kind), page, template=template), template is not None


def test_sidebar_is_recognised_as_template_after_the_sites_first_pages(client, crawl_name):
    f = frontier(client, crawl_name)
    # Alone, an article is mostly its sidebar's links: typed index.
    assert [typed(f, i) for i in range(4)] == [(INDEX, False)] * 4
    # From the fifth page on the sidebar is template: articles are info,
    # and a page with a link list of its own is still an index page.
    assert [typed(f, i) for i in range(4, 12)] == [(INFO, True)] * 8
    assert typed(f, 0, "listing") == (INDEX, True)
    # Without the template (CLASSIFIER_TEMPLATE=False) the same article is index.
    page = analyze(article(20), url(20))
    assert classify(url(20), page) == INDEX


def test_evidence_is_bounded_and_frozen_after_the_sites_first_pages(client, crawl_name):
    f = frontier(client, crawl_name)
    f.templates.policy = TemplatePolicy(pages=8, min_pages=3, max_keys=50)
    key = f.templates.key(SITE)
    for i in range(8):
        f.templates.observe(SITE, ["nav", "footer"] + [f"own{i}.{j}" for j in range(20)])
        assert client.hlen(key) <= 51  # "#" and at most max_keys counts
    assert client.hgetall(key) == {b"#": b"8", b"nav": b"8", b"footer": b"8"}
    assert f.templates.observe(SITE, ["nav", "own0.0"]) == TemplateEvidence(8, (8, 0))
    assert client.hgetall(key) == {b"#": b"8", b"nav": b"8", b"footer": b"8"}  # frozen


def test_big_first_pages_do_not_use_up_the_evidence(client, crawl_name):
    """A site's first pages are often big link lists: their keys must not
    take the room the template's keys need (Redis and the local rule alike)."""
    f = frontier(client, crawl_name)
    policy = TemplatePolicy(pages=20, min_pages=3, max_keys=100)
    f.templates.policy = policy
    local = LocalTemplates(policy)
    sidebar = [f"side{j}" for j in range(5)]
    pages = [[f"big{i}.{j}" for j in range(90)] for i in range(2)]
    pages += [sidebar + [f"own{i}.{j}" for j in range(10)] for i in range(2, 20)]
    for keys in pages:
        remote, mine = f.templates.observe(SITE, keys), local.observe(SITE, keys)
        assert remote == mine
        assert client.hlen(f.templates.key(SITE)) <= 101
    assert mine.template(pages[-1], policy) == frozenset(sidebar)
    assert client.hgetall(f.templates.key(SITE)) == {b"#": b"20", **{k.encode(): b"18" for k in sidebar}}


def test_evidence_of_a_site_still_learned_expires_and_frozen_evidence_stays(client, crawl_name):
    f = frontier(client, crawl_name)
    f.templates.policy = TemplatePolicy(pages=3, min_pages=2, max_keys=50)
    key = f.templates.key(SITE)
    f.templates.observe(SITE, ["nav"])
    assert 604000 < client.ttl(key) <= 604800  # a week after the site's last page
    f.templates.observe(SITE, ["nav"])
    f.templates.observe(SITE, ["nav"])
    assert client.ttl(key) == -1  # frozen: kept


def test_two_workers_share_the_evidence(client, crawl_name):
    a, b = frontier(client, crawl_name, "a"), frontier(client, crawl_name, "b")
    assert typed(a, 0) == (INDEX, False)
    assert typed(b, 1) == (INDEX, False)
    assert typed(a, 2) == (INDEX, False)
    assert typed(b, 3) == (INDEX, False)
    # Worker b's second page is the site's fifth: b knows the template from a's pages too.
    assert typed(b, 4) == (INFO, True)
    assert typed(a, 5) == (INFO, True)
    assert b.templates.observe(SITE, []) == TemplateEvidence(7, ())


def test_the_key_lives_in_the_sites_shard():
    f = Frontier(redis.Redis(), "c", node="n", shards=16)  # no command is sent
    for site in ("python.org", "example.com", "a.github.io"):
        shard = f.keys.site(site)
        assert f.templates.key(site) == template_key(shard, site) == shard.prefix + "tpl2:" + site
        assert key_slot(f.templates.key(site).encode()) == key_slot(shard.stats.encode())


def test_reading_the_evidence_counts_nothing(client, crawl_name):
    f = frontier(client, crawl_name)
    assert f.templates.read(SITE, ["nav"]) is None  # no evidence yet
    for i in range(5):
        f.templates.observe(SITE, ["nav", f"own{i}"])
    before = client.hgetall(f.templates.key(SITE))
    assert f.templates.read(SITE, ["nav", "own0", "never"]) == TemplateEvidence(5, (5, 1, 0))
    assert client.hgetall(f.templates.key(SITE)) == before
    client.delete(f.templates.key(SITE))
    client.set(f.templates.key(SITE), "not a hash")
    assert f.templates.read(SITE, ["nav"]) is None
    client.delete(f.templates.key(SITE))
    client.hset(f.templates.key(SITE), mapping={"#": "lots", "nav": "3"})
    assert f.templates.read(SITE, ["nav"]) is None


@pytest.mark.parametrize(("entry", "evidence"), [
    ("a string", None),  # another type: no evidence, nothing written
    ({"#": "many"}, None),
    ({"#": "-3"}, None),
    ({"#": "2.5"}, None),
    ({"#": "99"}, None),  # more pages than are ever counted
    ({"#": "5", "nav": "lots"}, TemplateEvidence(6, (0, 1))),  # a bad count is not template, and stays bad
    ({"#": "5", "nav": "7"}, TemplateEvidence(6, (0, 1))),  # more than the pages: not to be believed
    ({"#": "5", "nav": "4"}, TemplateEvidence(6, (5, 1))),
])
def test_malformed_entries_are_no_evidence_never_a_crash(client, crawl_name, entry, evidence):
    f = frontier(client, crawl_name)
    key = f.templates.key(SITE)
    if isinstance(entry, str):
        client.set(key, entry)
    else:
        client.hset(key, mapping=entry)
    assert f.templates.observe(SITE, ["nav", "own"]) == evidence
    if isinstance(entry, str):
        assert client.get(key) == b"a string"


@pytest.mark.parametrize("raw", [
    None, b"", 5, [], [b"x"], [b"3", b"1"], [-1, b"1", b"1"], [b"3" * 40, b"1", b"1"], [b"\xff", None, None],
    [True, None, None], [b"1e3", None, None], [[b"3"], None, None], [b"\xd9\xa3", None, None],
])
def test_parse_evidence_reads_anything_as_evidence_or_none(raw):
    got = parse_evidence(raw, 2, 50)
    assert got is None


def test_parse_evidence_reads_counts_defensively():
    assert parse_evidence([b"6", b"4", None], 2, 50) == TemplateEvidence(6, (4, 0))
    assert parse_evidence([6, b"x", b"9"], 2, 50) == TemplateEvidence(6, (0, 0))
    assert parse_evidence([b"6", b"-1", b"06"], 2, 50) == TemplateEvidence(6, (0, 6))


# -- end to end: a crawl of the generated site -------------------------------------------------


def crawl_one_site(tmp_path, root, settings: dict):
    """Crawl the site on disk at ``root`` from its home page, one request at
    a time; the server (stopped) and the crawl's result."""
    from tests.support.crawl import run_crawl
    from tests.support.servers import start_server

    srv = start_server(tmp_path, hosts="127.0.0.1", root=root)
    try:
        result = run_crawl(srv, tmp_path / "crawl", [f"seeds={srv.url('/index.html')}"],
                           {**settings, "CONCURRENT_REQUESTS": 1, "LOG_LEVEL": "INFO"})
    finally:
        srv.stop()
    assert result.returncode == 0, result.log[-3000:]
    return srv, result


def write_site(root, n: int = 80, paragraphs: int = 1, sentences: int = 4) -> None:
    """The generated site on disk: a home page and ``n`` articles, every
    page with the sidebar (which lists every article)."""
    sidebar = "".join(f'<li><a href="/article/{i}.html">Topic number {i} of the manual</a></li>' for i in range(n))
    (root / "article").mkdir(parents=True)
    (root / "index.html").write_text(
        f"<html><head><title>Manual</title></head><body><div class='toc'><ul>{sidebar}</ul></div>"
        "<div class='body'><h1>Manual</h1><p>Welcome.</p></div></body></html>")
    for i in range(n):
        page = article(i, paragraphs, sentences).replace(f"<ul>{SIDEBAR}</ul>", f"<ul>{sidebar}</ul>")
        (root / "article" / f"{i}.html").write_text(page)


@pytest.mark.slow
@pytest.mark.parametrize("template", [True, False])
def test_a_crawl_types_pages_with_the_template_its_workers_learn(tmp_path, frontier_settings, template):
    import sqlite3

    write_site(tmp_path / "site")
    srv, result = crawl_one_site(tmp_path, tmp_path / "site", {**frontier_settings, "CLASSIFIER_TEMPLATE": template})
    db = sqlite3.connect(result.store_path)
    types = dict(db.execute("SELECT url, page_type FROM pages"))
    order = [p for p in result.fetched if p.endswith(".html")]
    assert len(types) == len(order) == 81
    typed = [types[srv.url(p)] for p in order]
    stats = result.log  # Scrapy dumps its stats at the end, one per line
    if template:
        # The home page and the first three articles are typed alone (the
        # sidebar makes them index pages); from the site's fifth page on,
        # the sidebar is template and articles are information pages; and
        # the first three articles are typed again then, and stored again
        # as information pages. The home page, the sidebar and a line of
        # its own, stays an index page.
        assert typed == [INDEX] + [INFO] * 80
        assert "'classifier/template/page_only': 4" in stats
        assert "'classifier/template/used': 77" in stats
        assert "'classifier/retype/checked': 4" in stats
        assert "'classifier/retype/info': 3" in stats
        assert "'classifier/page_type/index': 1" in stats
        assert "'classifier/page_type/info': 80" in stats
        assert "classifier/retype/unchecked" not in stats
    else:
        assert typed == [INDEX] * 81
        assert "classifier/template" not in stats


NOTICE = " ".join(f"Sentence {j} of the society's standing notice about membership, meetings and the yearly "
                  "fees explained." for j in range(50))


def notice_page(title: str, own: str) -> str:
    """A page of a site whose every page carries a long notice in prose."""
    return (f"<html><head><title>{title}</title></head><body><div class='body'><h1>{title}</h1>{own}</div>"
            f"<div class='notice'><p>{NOTICE}</p></div></body></html>")


def rows(links: list[tuple[str, str]]) -> str:
    return "<table>" + "".join(f"<tr><td><a href='{u}'>{a}</a></td><td>{a}, its summary.</td></tr>"
                               for u, a in links) + "</table>"


@pytest.mark.slow
def test_a_first_page_typed_again_as_an_index_page_has_its_links_followed(tmp_path, frontier_settings):
    """The site's second page is a table of 40 reports under the site's
    long notice: alone, mostly prose, an information page, whose links a
    crawl of index pages does not follow. Once the site's fifth page makes
    the notice template, the page is typed again, stored as an index page,
    and its 40 reports are crawled."""
    import sqlite3

    reports = "/docs/reports-index.html"
    root = tmp_path / "site"
    (root / "docs").mkdir(parents=True)
    (root / "deep").mkdir()
    (root / "index.html").write_text(notice_page("Society", rows([(reports, "Part 1")] + [
        (f"/docs/{i}.html", f"Part {i}") for i in range(2, 41)])))
    (root / reports.lstrip("/")).write_text(notice_page("Reports", rows([(f"/deep/{j}.html", f"Report {j}")
                                                                         for j in range(40)])))

    def article(i: int) -> str:
        return notice_page(f"Article {i}", "<p>" + " ".join(f"Own line {k} of article {i} tells its story."
                                                            for k in range(12)) + "</p>")

    for i in range(2, 41):
        (root / "docs" / f"{i}.html").write_text(article(i))
    for j in range(40):
        (root / "deep" / f"{j}.html").write_text(article(100 + j))
    srv, result = crawl_one_site(tmp_path, root, frontier_settings)
    order = [p for p in result.fetched if p.endswith(".html")]
    assert order == (["/index.html", reports] + [f"/docs/{i}.html" for i in range(2, 41)]
                     + [f"/deep/{j}.html" for j in range(40)])
    types = dict(sqlite3.connect(result.store_path).execute("SELECT url, page_type FROM pages"))
    assert sorted(u for u, t in types.items() if t == INDEX) == sorted([srv.url("/index.html"), srv.url(reports)])
    assert len(types) == 81
    stats = result.log
    assert "'classifier/retype/checked': 4" in stats  # the site's first four pages
    assert "'classifier/retype/index': 1" in stats
    assert "'classifier/page_type/index': 2" in stats
    assert "'classifier/page_type/info': 79" in stats


@pytest.mark.slow
def test_a_site_too_small_for_a_template_keeps_its_first_types_and_says_so(tmp_path, frontier_settings):
    import sqlite3

    write_site(tmp_path / "site", n=2, paragraphs=2, sentences=6)
    srv, result = crawl_one_site(tmp_path, tmp_path / "site", frontier_settings)
    types = dict(sqlite3.connect(result.store_path).execute("SELECT url, page_type FROM pages"))
    # Three pages, each typed alone (the home page an index page, the two
    # articles, with a sidebar of two links, information pages), never again.
    assert types == {srv.url("/index.html"): INDEX, srv.url("/article/0.html"): INFO,
                     srv.url("/article/1.html"): INFO}
    assert "'classifier/template/page_only': 3" in result.log
    assert "'classifier/retype/unchecked': 3" in result.log
    assert "classifier/retype/checked" not in result.log


def test_the_count_rides_in_the_duplicate_checks_round_trip(client, crawl_name):
    from crawler.duplicates.fingerprint import content_hash, fingerprints

    f = frontier(client, crawl_name)
    for i in range(5):
        f.templates.observe(SITE, ["nav", f"own{i}"])
    text = "a page of words long enough to be checked for near copies " * 10
    _, sketch = fingerprints(text, 512)
    answer: list = []
    assert f.duplicates.levels  # the crawl's grown tables, read once a worker (crawler/frontier/buckets.py)
    before = f.round_trips
    verdict = f.duplicates.check(f"http://{SITE}/p", SITE, content_hash(text), sketch,
                               also=[f.templates.call(SITE, ["nav", "new"])], also_results=answer)
    assert verdict.kind == "new"
    assert f.round_trips - before == 1  # the check and the count: one round trip
    assert f.templates.evidence(answer[0], ["nav", "new"]) == TemplateEvidence(6, (6, 1))
    # A site entry of another type is no evidence, and the check stands.
    client.delete(f.templates.key(SITE))
    client.set(f.templates.key(SITE), "not a hash")
    answer = []
    verdict = f.duplicates.check(f"http://{SITE}/q", SITE, content_hash(text + "x"), sketch,
                               also=[f.templates.call(SITE, ["nav"])], also_results=answer)
    assert verdict.kind == "near" and f.templates.evidence(answer[0], ["nav"]) is None


def test_first_pages_stay_kept_when_the_evidence_is_gone_before_they_are_typed_again(client, crawl_name,
                                                                                      redis_url):
    """A site's first pages are typed again once its template is known;
    if its evidence has gone in between (it expired, or was cleared), they
    stay kept for the site's next page instead of being dropped uncounted."""
    from scrapy.utils.project import get_project_settings
    from scrapy.utils.test import get_crawler

    from crawler.frontier.service import FrontierService
    from crawler.items import PageItem
    from crawler.pagetypes.typer import Typed
    from crawler.spiders.site import SiteSpider

    settings = {k: v for k, v in get_project_settings().copy_to_dict().items() if "REACTOR" not in k}
    crawler = get_crawler(SiteSpider, {**settings, "REDIS_URL": redis_url, "CRAWL_NAME": crawl_name})
    spider = SiteSpider.from_crawler(crawler, seeds=f"http://{SITE}/")
    f = frontier(client, crawl_name)
    FrontierService.of(crawler)._frontier = f  # the service as the scheduler opens it, without an engine
    pages = {url(i): analyze(article(i), url(i)) for i in range(4)}
    typer = spider.parts.typer
    for u, page in pages.items():
        stats = block_stats(page.blocks)
        keys = stat_keys(stats)
        f.templates.observe(SITE, keys)
        item = PageItem(url=u, site=SITE, page_type=INDEX, text=page.text)
        typer.keep_first_page(item, Typed(INDEX, stats, keys, page_features(u, page), False), True, [], {})
    assert len(typer.first_pages) == 4
    assert list(typer.retype(SITE)) == []  # four pages counted: no template yet, nothing typed
    assert len(typer.first_pages) == 4
    assert crawler.stats.get_value("classifier/retype/checked") is None
    for i in range(4, 8):
        f.templates.observe(SITE, block_keys(analyze(article(i), url(i)).blocks))
    retyped = [again.item for again in typer.retype(SITE)]
    # The sidebar is template now: the four articles are information pages.
    assert sorted((it.url, it.page_type, it.typed_again) for it in retyped) == [
        (url(i), INFO, True) for i in range(4)]
    assert len(typer.first_pages) == 0
    assert crawler.stats.get_value("classifier/retype/checked") == 4
    assert crawler.stats.get_value("classifier/retype/info") == 4
