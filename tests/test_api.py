"""The HTTP API (``scrapy serve``) with the unmodified ``firecrawl-py`` SDK
as its client, against a generated site of 221 pages on 127.0.0.2 (and the
same site on 127.0.0.3, a network the server's policy refuses)."""

from __future__ import annotations

import collections
import json
import time
import urllib.request
from pathlib import Path

import pytest
from firecrawl import Firecrawl
from firecrawl.v2.utils.error_handler import (
    BadRequestError,
    FirecrawlError,
    UnauthorizedError,
    WebsiteNotSupportedError,
)

from tests.support.api import KEY, OTHER_KEY, api_site, serve, write_sitemap
from tests.support.crawl import until
from tests.support.servers import start_server



@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api-site")
    root = tmp / "www"
    paths = api_site(root)
    server = start_server(tmp, hosts="127.0.0.2,127.0.0.3", root=root, validators=True)
    write_sitemap(root, server.url("", host="127.0.0.2"), paths)
    server.paths = paths
    yield server
    server.stop()


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api")
    server = serve(tmp / "crawl", {"API_PAGE_RESULTS": 20, "API_KEY_CRAWLS": 2})
    yield server
    assert server.stop() == 0, server.output()[-3000:]


def client(api, key=KEY) -> Firecrawl:
    return Firecrawl(api_key=key, api_url=api.url)


def fetched(site, since, host="127.0.0.2"):
    return [r["path"] for r in site.requests(since) if r["host"] == host and r["path"] != "/robots.txt"]


def test_scrape_gives_markdown_metadata_links_and_html(site, api):
    mark = site.mark()
    url = site.url("/s1/a2.html", host="127.0.0.2")
    doc = client(api).scrape(url, formats=["markdown", "html", "rawHtml", "links", "summary"])
    assert doc.markdown.startswith("# Article 2 of section 1\n\n")
    assert "Home" not in doc.markdown and "Section 1" not in doc.markdown  # the nav is not main content
    meta = doc.metadata
    assert (meta.title, meta.description, meta.og_title) == ("Article 2 of section 1", "About article 2 of section 1.",
                                                             "OG article 1/2")
    assert (meta.url, meta.source_url, meta.status_code, meta.content_type) == (url, url, 200, "text/html")
    assert doc.metadata_dict["pageType"] == "info"
    assert doc.links == [site.url(p, host="127.0.0.2") for p in ("/", "/s1/", "/s1/a3.html")]
    assert "<script>" in doc.raw_html and "tracking" not in doc.html and "<h1>Article 2 of section 1</h1>" in doc.html
    assert doc.summary.startswith("information page: Article 2 of section 1")
    assert fetched(site, mark) == ["/s1/a2.html"]  # the page once, no link followed, no sitemap read


def test_scrape_follows_a_redirect_and_asks_nothing_else(site, api):
    mark = site.mark()
    doc = client(api).scrape(site.url("/old/section-3", host="127.0.0.2"))  # a 301 to /s3/
    assert doc.metadata.url == site.url("/s3/", host="127.0.0.2")
    assert doc.metadata.source_url == site.url("/old/section-3", host="127.0.0.2")
    assert doc.markdown.startswith("- [Article 0 of section 3](")  # its main content: the list
    assert fetched(site, mark) == ["/old/section-3", "/s3/"]


def test_crawl_with_a_limit_pages_through_every_result_once(site, api):
    mark = site.mark()
    job = client(api).crawl(site.url("/", host="127.0.0.2"), limit=50, poll_interval=1, sitemap="skip")
    assert job.status == "completed"
    urls = [d.metadata.url for d in job.data]
    assert len(urls) == 50 == len(set(urls)) == job.completed == job.total  # three pages of 20 results
    paths = fetched(site, mark)
    assert sorted(site.url(p, host="127.0.0.2") for p in paths) == sorted(urls)  # each fetched once, all returned
    assert all(d.markdown for d in job.data)
    # Breadth-first from the home page: the home page and its 20 sections first.
    assert set(paths[:21]) == {"/"} | {f"/s{s}/" for s in range(20)}


def test_crawl_status_pages_by_hand(site, api):
    app = client(api)
    started = app.start_crawl(site.url("/s5/", host="127.0.0.2"), limit=8, sitemap="skip")
    assert started.url.endswith(f"/v2/crawl/{started.id}")
    until(lambda: app.get_crawl_status(started.id).status == "completed", 60, "the crawl to end")
    from firecrawl.v2.types import PaginationConfig

    first = app.get_crawl_status(started.id, pagination_config=PaginationConfig(auto_paginate=False))
    assert first.next is None and len(first.data) == 8  # 1 section page and its 10 articles, limited to 8
    assert {d.metadata.url.rsplit("/", 2)[-2] for d in first.data} == {"s5"}  # under the seed's directory only


def test_map_lists_the_sitemap_and_the_links(site, api):
    mark = site.mark()
    found = client(api).map(site.url("/", host="127.0.0.2"))
    urls = [link.url for link in found.links]
    assert sorted(urls) == sorted(site.url(p, host="127.0.0.2") for p in site.paths)
    assert len(fetched(site, mark)) <= 20 + 1  # API_MAP_PAGES pages and the sitemap
    narrowed = client(api).map(site.url("/", host="127.0.0.2"), search="s1/a")
    assert sorted(link.url for link in narrowed.links) == sorted(
        site.url(f"/s1/a{a}.html", host="127.0.0.2") for a in range(10))


def test_batch_scrape(site, api):
    urls = [site.url(f"/s7/a{a}.html", host="127.0.0.2") for a in (1, 4, 9)]
    mark = site.mark()
    job = client(api).batch_scrape(urls, formats=["markdown"], poll_interval=1)
    assert job.status == "completed"
    assert sorted(d.metadata.url for d in job.data) == sorted(urls)
    assert sorted(fetched(site, mark)) == sorted(f"/s7/a{a}.html" for a in (1, 4, 9))


def test_cancel_a_crawl(site, api):
    app = client(api)
    mark = site.mark()
    started = app.start_crawl(site.url("/", host="127.0.0.2"), limit=200, delay=1, sitemap="skip")
    until(lambda: len(fetched(site, mark)) >= 3, 60, "the crawl to start")
    assert app.cancel_crawl(started.id) is True
    until(lambda: app.get_crawl_status(started.id).status == "cancelled", 60, "the crawl to be cancelled")
    time.sleep(1.0)
    done = len(fetched(site, mark))
    time.sleep(1.5)
    assert len(fetched(site, mark)) == done < 30  # nothing fetched once cancelled
    assert app.cancel_crawl(started.id) is False  # 409: it has ended


def test_a_wrong_key_is_refused(site, api):
    mark = site.mark()
    with pytest.raises(UnauthorizedError):
        client(api, "not-a-key-of-this-server-0000").scrape(site.url("/s1/a1.html", host="127.0.0.2"))
    with pytest.raises(UnauthorizedError):
        client(api, "").start_crawl(site.url("/", host="127.0.0.2"))
    assert fetched(site, mark) == []


def test_another_keys_job_is_not_found(site, api):
    started = client(api).start_crawl(site.url("/s9/", host="127.0.0.2"), limit=2, sitemap="skip")
    with pytest.raises(FirecrawlError) as caught:
        client(api, OTHER_KEY).get_crawl_status(started.id)
    assert caught.value.status_code == 404


def test_a_refused_network_is_refused_before_any_fetch(site, api):
    mark = site.mark()
    forbidden = site.url("/s1/a1.html", host="127.0.0.3")
    with pytest.raises(WebsiteNotSupportedError, match="refused by the network policy"):
        client(api).scrape(forbidden)
    with pytest.raises(WebsiteNotSupportedError):
        client(api).start_crawl(site.url("/", host="127.0.0.3"))
    with pytest.raises(WebsiteNotSupportedError):
        client(api).batch_scrape([site.url("/s1/a1.html", host="127.0.0.2"), forbidden])
    with pytest.raises(WebsiteNotSupportedError):
        client(api).map(site.url("/", host="127.0.0.3"))
    assert [r for r in site.requests(mark) if r["host"] == "127.0.0.3"] == []


def test_what_this_crawler_does_not_make_is_refused(site, api):
    with pytest.raises(BadRequestError, match="screenshot"):
        client(api).scrape(site.url("/s1/a1.html", host="127.0.0.2"), formats=["screenshot"])
    with pytest.raises(BadRequestError, match="robots"):
        client(api).start_crawl(site.url("/", host="127.0.0.2"), ignore_robots_txt=True)


def test_health_needs_no_key_and_says_nothing_else(api):
    with urllib.request.urlopen(api.url + "/health", timeout=10) as answer:
        assert (answer.status, json.loads(answer.read())) == (200, {"status": "ok"})


def _post(api, path, body, key=KEY, ctype="application/json"):
    request = urllib.request.Request(api.url + path, data=body if isinstance(body, bytes) else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": ctype}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_bad_bodies_get_one_line_each(api):
    assert _post(api, "/v2/scrape", b"{not json") == (400, {"success": False, "error": "the body is not valid JSON"})
    assert _post(api, "/v2/scrape", b"url=x", ctype="application/x-www-form-urlencoded")[0] == 415
    assert _post(api, "/v2/crawl", {"url": "http://127.0.0.2/", "limit": 0}) == (
        400, {"success": False, "error": "limit: an integer from 1 to 10000, not 0"})
    assert _post(api, "/v2/crawl", {"url": "ftp://127.0.0.2/"})[0] == 400
    assert _post(api, "/v2/crawl", {"url": "http://127.0.0.2/", "includePaths": "/blog"})[0] == 400


def test_a_key_runs_at_most_its_crawls_at_once(site, api):
    app = client(api, OTHER_KEY)
    first = app.start_crawl(site.url("/", host="127.0.0.2"), limit=100, delay=1, sitemap="skip")
    second = app.start_crawl(site.url("/", host="127.0.0.2"), limit=100, delay=1, sitemap="skip")
    with pytest.raises(FirecrawlError) as caught:
        app.start_crawl(site.url("/", host="127.0.0.2"), limit=100)
    assert caught.value.status_code == 429
    assert client(api).scrape(site.url("/s2/a2.html", host="127.0.0.2")).metadata.status_code == 200  # another key's
    assert {c.id for c in app.get_active_crawls().crawls} == {first.id, second.id}
    assert app.cancel_crawl(first.id) and app.cancel_crawl(second.id)
    until(lambda: not app.get_active_crawls().crawls, 60, "the crawls to end")


def test_serve_refuses_to_start_without_keys(tmp_path):
    with pytest.raises(AssertionError, match="no API key"):
        serve(tmp_path / "crawl", keys="")


def test_change_tracking_across_scrapes_and_crawls(tmp_path):
    """A page edited, one added and one deleted between two tracked crawls
    of the same URL: the second says exactly that (and a tracked scrape the same)."""
    root = tmp_path / "www"
    api_site(root, sections=2, per_section=3)
    site = start_server(tmp_path, hosts="127.0.0.2", root=root, validators=True)
    api = serve(tmp_path / "crawl")
    try:
        app = client(api)
        tracked = [{"type": "changeTracking", "modes": ["git-diff"], "tag": "daily"}]
        home = site.url("/", host="127.0.0.2")
        first = app.crawl(home, formats=["markdown", *tracked], sitemap="skip", poll_interval=1)
        assert first.status == "completed" and len(first.data) == 9  # home, 2 sections, 6 articles
        assert {d.change_tracking["changeStatus"] for d in first.data} == {"new"}
        scraped = app.scrape(site.url("/s0/a1.html", host="127.0.0.2"), formats=["markdown", *tracked])
        assert scraped.change_tracking["changeStatus"] == "new"

        page = root / "s0" / "a1.html"
        page.write_text(page.read_text().replace("</h1>", "</h1><p>A paragraph added after the first crawl of "
                                                          "this article, long enough to be one of its blocks.</p>"))
        section = root / "s1" / "index.html"
        section.write_text(section.read_text().replace("</ul>", '<li><a href="/s1/new.html">New</a></li></ul>'))
        (root / "s1" / "new.html").write_text("<html><head><title>New</title></head><body><h1>New</h1><p>An "
                                              "article added after the first crawl, with words of its own.</p>"
                                              "</body></html>")
        (root / "s0" / "a2.html").unlink()

        second = app.crawl(home, formats=["markdown", *tracked], sitemap="skip", poll_interval=1)
        status = {d.metadata.url.split("/", 3)[3]: d.change_tracking["changeStatus"] for d in second.data}
        assert status == {"": "same", "s0/": "same", "s1/": "changed", "s0/a0.html": "same", "s0/a1.html": "changed",
                          "s0/a2.html": "removed", "s1/a0.html": "same", "s1/a1.html": "same", "s1/a2.html": "same",
                          "s1/new.html": "new"}
        edited = next(d for d in second.data if d.metadata.url.endswith("/s0/a1.html"))
        assert "+A paragraph added after the first crawl" in edited.change_tracking["diff"]["text"]
        assert edited.change_tracking["previousScrapeAt"] < second.data[0].metadata_dict["fetchedAt"]
        again = app.scrape(site.url("/s0/a1.html", host="127.0.0.2"), formats=["markdown", *tracked])
        assert again.change_tracking["changeStatus"] == "changed"
        assert "+A paragraph added" in again.change_tracking["diff"]["text"]
        assert app.scrape(site.url("/s0/a1.html", host="127.0.0.2"),
                          formats=["markdown", *tracked]).change_tracking["changeStatus"] == "same"
        untagged = app.scrape(site.url("/s0/a1.html", host="127.0.0.2"), formats=["markdown", "changeTracking"])
        assert untagged.change_tracking["changeStatus"] == "new"  # another tag: another history
    finally:
        api.stop()
        site.stop()


# The v1 client calls pydantic's deprecated .dict(): its warning, not ours.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_v1_clients_scrape_crawl_and_map(site, api):
    """Firecrawl's v1 routes as v1's client (firecrawl-py's V1FirecrawlApp,
    what LangChain's FireCrawlLoader drives) sends and reads them."""
    from firecrawl import V1FirecrawlApp

    app = V1FirecrawlApp(api_key=KEY, api_url=api.url)
    scraped = app.scrape_url(site.url("/s4/a1.html", host="127.0.0.2"), formats=["markdown"])
    assert scraped.markdown.startswith("# Article 1 of section 4") and scraped.metadata["statusCode"] == 200
    crawled = app.crawl_url(site.url("/s4/", host="127.0.0.2"), limit=4, poll_interval=1, ignore_sitemap=True)
    assert crawled.status == "completed" and len({d.metadata["url"] for d in crawled.data}) == 4
    mapped = app.map_url(site.url("/", host="127.0.0.2"), search="s4/a")
    assert sorted(mapped.links) == sorted(site.url(f"/s4/a{a}.html", host="127.0.0.2") for a in range(10))
