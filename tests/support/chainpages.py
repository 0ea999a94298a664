"""Pages for the chain's step tests (tests/test_chain_steps.py,
tests/test_chain_output.py): site spiders built as ``scrapy crawl`` builds
them, on the real Redis, and responses as the downloader hands them over,
driven through the spider's chain or some of its steps."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from scrapy.http import HtmlResponse, Request, Response
from scrapy.utils.project import get_project_settings
from scrapy.utils.test import get_crawler

from crawler.chain import Chain, Page, record
from crawler.frontier import Frontier
from crawler.frontier.service import FrontierService
from crawler.spiders.site import SiteSpider

SITE = "site.test"
HTML_TYPE = {"Content-Type": "text/html; charset=utf-8"}
INDEX_BODY = "<h1>Contents</h1><ul>" + "".join(f'<li><a href="/p{i}.html">Part {i}</a></li>' for i in range(30)) \
    + "</ul>"
PROSE = "<h1>On rivers</h1>" + "".join(
    f"<p>Paragraph {i} tells at length how rivers carve their valleys over many thousands of years, slowly "
    f"and patiently, through rock and soil alike, until the plain they leave behind is wide.</p>" for i in range(8))


def url(path: str) -> str:
    return f"http://{SITE}/{path.lstrip('/')}"


def html(body: str, head: str = "", title: str = "T") -> bytes:
    return f"<html><head><title>{title}</title>{head}</head><body>{body}</body></html>".encode()


@pytest.fixture
def build(redis_url: str, crawl_name: str) -> Iterator[Callable[..., SiteSpider]]:
    """Site spiders of one crawl (each a worker of its own: its own URL
    cache), built as ``scrapy crawl`` builds them, their frontier opened
    as the scheduler opens it (``FrontierService.open`` without an engine).
    A test module that uses it imports it (and ``spider``)."""
    project = {k: v for k, v in get_project_settings().copy_to_dict().items() if "REACTOR" not in k}
    client = redis.Redis.from_url(redis_url)
    workers: list[SiteSpider] = []

    def make(settings: dict[str, Any] | None = None, **args: Any) -> SiteSpider:
        crawler = get_crawler(SiteSpider, {**project, "REDIS_URL": redis_url, "CRAWL_NAME": crawl_name,
                                           **(settings or {})})
        spider = SiteSpider.from_crawler(crawler, seeds=url("/"), **args)
        FrontierService.of(crawler)._frontier = Frontier(client, crawl_name, node=f"n{len(workers)}", shards=4)
        workers.append(spider)
        return spider

    yield make
    client.close()


@pytest.fixture
def spider(build: Callable[..., SiteSpider]) -> SiteSpider:
    return build()


def response(spider: SiteSpider, path: str, body: bytes = b"", status: int = 200,
             headers: dict[str, str] | None = None, meta: dict[str, Any] | None = None,
             cls: type[Response] = HtmlResponse) -> Response:
    """A response as the downloader hands it over: its request the spider's, with the meta a link's has."""
    request = Request(url(path), callback=spider.parse, errback=spider.errback,
                      meta={"depth": 2, "referer_url": url("/"), **(meta or {})})
    return cls(url(path), status=status, body=body, headers=HTML_TYPE if headers is None else headers,
               request=request)


def stat(spider: SiteSpider, name: str) -> Any:
    return spider.crawler.stats.get_value(name)


def run(spider: SiteSpider, resp: Response, until: str | None = None) -> tuple[list[Any], Page]:
    """What the chain emits for ``resp`` (only its steps up to ``until``, by class name), and the page."""
    steps = spider.chain.steps
    if until is not None:
        steps = steps[: [type(s).__name__ for s in steps].index(until) + 1]
    page = Page(resp, record.fetched(spider.crawler, resp))

    async def collect() -> list[Any]:
        return [out async for out in Chain(steps).run(resp, page)]

    return asyncio.run(collect()), page


def step(spider: SiteSpider, name: str, page: Page) -> None:
    """One step of the spider's chain on ``page``."""
    done = next(s for s in spider.chain.steps if type(s).__name__ == name).process_page(page)
    if inspect.isawaitable(done):
        asyncio.run(done)  # type: ignore[arg-type]


def requests(out: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    assert all(isinstance(o, Request) for o in out), out
    return [(r.url, r.meta) for r in out]

