"""The frontier's faces (crawler/frontier/faces.py): each consumer is handed
the narrow face it needs, built where the crawler is assembled; nothing else
looks the frontier service up, the ``Frontier`` has one way into each of its
parts, and only the lease book writes the lease book's fields."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import redis
from scrapy.utils.project import get_project_settings
from scrapy.utils.test import get_crawler

from crawler.frontier.faces import FrontierFaces, OpsFace, PolitenessFace, SpiderFace, StoreFace
from crawler.frontier.frontier import Frontier
from crawler.frontier.leasebook import LeaseBook
from crawler.frontier.queues import LinkEntry
from crawler.frontier.service import FrontierService
from crawler.spiders.site import SiteSpider

CRAWLER = Path(__file__).resolve().parent.parent / "crawler"


def calls_in(pattern: str) -> dict[str, int]:
    """Files of crawler/ (relative) and how many times ``pattern`` occurs in each."""
    found: dict[str, int] = {}
    for path in sorted(CRAWLER.rglob("*.py")):
        n = len(re.findall(pattern, path.read_text(encoding="utf-8")))
        if n:
            found[path.relative_to(CRAWLER.parent).as_posix()] = n
    return found


def test_the_frontier_service_is_looked_up_only_where_the_crawler_is_assembled():
    """faces.py's door (every component's face, from its from_crawler) and
    the scheduler's from_crawler (it drives the service: opens it as its
    Worker, flushes the book, heartbeats) are the two places."""
    assert calls_in(r"FrontierService\.of\(") == {"crawler/frontier/faces.py": 1,
                                                  "crawler/frontier/scheduler.py": 1}


def test_the_frontier_has_one_way_into_each_part():
    """No forwarding methods beside the parts: what is left reads the
    settings and state the parts share, or combines them."""
    public = {name for name in vars(Frontier) if not name.startswith("_")}
    assert public == {"client", "crawl", "node", "node_tag", "started", "default_delay_ms", "margin_ms", "conc",
                      "buckets", "round_trips", "calls", "ordered", "live_nodes", "stop_mode", "check_layout"}
    assert all(isinstance(vars(Frontier)[name], property) for name in public - {"check_layout"})


def test_only_the_lease_book_writes_its_fields():
    """Assignments to (or in-place changes of) a lease book's fields outside leasebook.py."""
    fields = "|".join(sorted(vars(LeaseBook()).keys()))
    writes = calls_in(rf"\bbook\.(?:{fields})\b(?:\[[^]]*\])?\s*(?:=(?!=)|\+=|-=)"
                      rf"|\bbook\.(?:{fields})\.(?:append|extend|clear|pop|update|add|discard|remove)\(")
    assert writes == {}


def test_the_book_gives_back_downloads_it_handed_out_first():
    """What the scheduler took for a lease call that failed (Redis away) is
    told with the next one, before the downloads that ended since."""
    book = LeaseBook()
    book.downloaded.extend(["a", "b"])
    taken = book.take_downloaded()
    assert taken == ["a", "b"] and book.downloaded == []
    book.downloaded.append("c")
    book.restore(downloaded=taken)
    assert book.downloaded == ["a", "b", "c"]


@pytest.fixture
def crawler(redis_url, crawl_name):
    settings = {k: v for k, v in get_project_settings().copy_to_dict().items() if "REACTOR" not in k}
    crawler = get_crawler(SiteSpider, {**settings, "REDIS_URL": redis_url, "CRAWL_NAME": crawl_name,
                                       "FRONTIER_DELAY_MARGIN": 0.25})
    yield crawler
    service = FrontierService.of(crawler)
    if service.is_open:
        service.frontier.client.close()


def test_the_spiders_parts_share_one_face(crawler):
    spider = SiteSpider.from_crawler(crawler, seeds="http://a.test/")
    face = spider.parts.frontier
    assert isinstance(face, SpiderFace)
    follower = spider.parts.follower
    assert (follower.frontier, follower.importance.frontier, spider.parts.pagecheck.frontier,
            spider.parts.typer.frontier) == (face, face, face, face)


def test_faces_are_closed_until_the_scheduler_opens_the_service(crawler):
    """Built before the frontier opens (Scrapy builds the spider and the
    extensions first): each says it is closed, and the store is not idle."""
    faces = FrontierFaces(crawler)
    assert [f.is_open for f in (faces.spider, faces.politeness, faces.store, faces.ops)] == [False] * 4
    assert faces.store.worker_idle() is False
    assert (faces.ops.pages, faces.ops.done, faces.ops.acked("E"), faces.ops.sitemap_errors) == (0, 0, 0, 0)
    with pytest.raises(RuntimeError, match="not open yet"):
        _ = faces.spider.meta


def test_faces_show_the_service_the_scheduler_opened(crawler, crawl_name, redis_url):
    faces = FrontierFaces(crawler)
    spider = SiteSpider.from_crawler(crawler, seeds="http://a.test/")
    service = FrontierService.of(crawler)
    # The service as the scheduler opens it (service.open needs a running engine).
    frontier = Frontier(redis.Redis.from_url(redis_url), crawl_name, node="n1", delay_margin=0.25)
    frontier.check_layout(spider.frontier_order)
    service._frontier = frontier
    spider_face, ops = faces.spider, faces.ops
    assert isinstance(ops, OpsFace) and isinstance(faces.politeness, PolitenessFace)
    assert isinstance(faces.store, StoreFace)
    assert spider_face.is_open and ops.is_open and spider_face.crawl == crawl_name == ops.crawl
    assert (spider_face.meta, spider_face.scope, spider_face.duplicates, spider_face.templates,
            spider_face.sitemaps) == (frontier.meta, frontier.scope_store, frontier.duplicates,
                                      frontier.templates, frontier.sitemaps)
    assert (faces.politeness.politeness, faces.politeness.robots) == (frontier.politeness, frontier.robots)
    assert faces.politeness.margin == 0.25
    assert spider_face.order == ops.order == "fifo"
    assert ops.node == frontier.node
    fp = bytes(range(8))
    assert spider_face.slot(fp) == frontier.queues.slot(fp)
    # A link queued through the face goes with the worker's next commit.
    bucket, member = spider_face.slot(fp)
    link = LinkEntry(bucket, member, "a.test", '{"url": "http://a.test/"}')
    spider_face.enqueue(link)
    assert service.book.links == [link]
    # The crawl's counters, as Redis holds them: the link is not sent yet, then it is.
    assert ops.counters().get("queued", 0) == 0
    assert service.flush() is True
    assert ops.counters()["queued"] == 1 and service.book.links == []
    assert (ops.redis_full, ops.redis_down) == (False, False)
    assert spider_face.run_many([("HGET", [frontier.keys.meta], ["nothing"])]) == [None]
