"""A page's chain of steps (crawler/chain/): the order PAGE_STEPS gives, what
steps emit and when the chain stops, refusals at start, and the example of
docs/crawling.md ("Your own steps") run as a user would."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from scrapy.http import HtmlResponse, Request
from scrapy.statscollectors import StatsCollector
from scrapy.utils.project import get_project_settings
from scrapy.utils.test import get_crawler

from crawler.chain import Chain, Page
from crawler.config import ConfigError, check_settings
from crawler.items import PageItem
from crawler.spiders.site import SiteSpider
from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import crawl_cmd, run_crawl
from tests.support.servers import serve_pages

CALLS: list[str] = []


class First:
    def process_page(self, page: Page) -> None:
        CALLS.append("first")
        page.emit("a", "b")


class Second:
    async def process_page(self, page: Page) -> None:
        await asyncio.sleep(0)
        CALLS.append("second")
        page.fields["n"] = len(CALLS)
        page.emit("c")


class Stopper:
    def process_page(self, page: Page) -> None:
        CALLS.append("stopper")
        page.emit("d")
        page.stop()


class Never:
    def process_page(self, page: Page) -> None:
        CALLS.append("never")


class Built:
    def __init__(self, crawler: Any) -> None:
        self.name = crawler.settings.get("BOT_NAME")

    @classmethod
    def from_crawler(cls, crawler: Any) -> Built:
        return cls(crawler)

    def process_page(self, page: Page) -> None:
        page.fields["bot"] = self.name


class NoMethod:
    pass


HERE = __name__


def chain_of(steps: dict[str, Any], base: dict[str, Any] | None = None) -> Chain:
    crawler = get_crawler(SiteSpider, {"PAGE_STEPS_BASE": base or {}, "PAGE_STEPS": steps})
    return Chain.from_settings(crawler, None)  # type: ignore[arg-type]  # no step here needs the parts


def run(chain: Chain) -> tuple[list[Any], Page]:
    response = HtmlResponse("http://127.0.0.1/a.html", body=b"<p>x</p>", request=Request("http://127.0.0.1/a.html"))
    page = Page(response, PageItem(url=response.url, site="127.0.0.1"))

    async def collect() -> list[Any]:
        return [out async for out in chain.run(response, page)]

    CALLS.clear()
    return asyncio.run(collect()), page


def test_steps_run_in_their_order_and_what_they_emit_is_yielded_in_order():
    chain = chain_of({f"{HERE}.Second": 20, f"{HERE}.First": 10}, base={f"{HERE}.Never": 30})
    out, page = run(chain)
    assert CALLS == ["first", "second", "never"]
    assert out == ["a", "b", "c"]
    assert page.fields == {"n": 2}
    assert repr(chain) == "<Chain First -> Second -> Never>"


def test_a_step_that_stops_ends_the_chain_after_its_outputs():
    out, _ = run(chain_of({f"{HERE}.First": 10, f"{HERE}.Stopper": 20, f"{HERE}.Never": 30}))
    assert CALLS == ["first", "stopper"]
    assert out == ["a", "b", "d"]


class Burns:
    """20 ms of this thread's CPU."""

    def process_page(self, page: Page) -> None:
        end = time.thread_time() + 0.02
        while time.thread_time() < end:
            pass


class Waits:
    """Waits 0.1 s, in which another task burns 50 ms of the thread's CPU."""

    async def process_page(self, page: Page) -> None:
        async def other() -> None:
            end = time.thread_time() + 0.05
            while time.thread_time() < end:
                pass

        task = asyncio.get_running_loop().create_task(other())
        await asyncio.sleep(0.1)
        await task


def test_each_step_is_charged_its_own_cpu_and_an_async_step_not_what_ran_while_it_waited():
    chain = chain_of({f"{HERE}.Burns": 10, f"{HERE}.Waits": 20})
    assert chain.crawler is not None
    crawler_stats = chain.crawler.stats = StatsCollector(chain.crawler)
    run(chain)
    run(chain)
    assert chain.pages == 2
    assert 0.04 <= chain.cpu["burns"] < 0.06  # two pages' 20 ms
    assert chain.cpu["waits"] < 0.01  # the other task's 100 ms are not the step's
    chain.publish()
    assert 20.0 <= crawler_stats.get_value("page/step_ms/burns") < 30.0  # ms a page
    assert crawler_stats.get_value("page/step_ms/waits") < 5.0
    assert crawler_stats.get_value("page/step_pages") == 2


def test_a_base_step_set_to_none_is_taken_out_and_from_crawler_builds_a_step():
    chain = chain_of({f"{HERE}.Never": None, f"{HERE}.Built": 5}, base={f"{HERE}.Never": 30, f"{HERE}.First": 10})
    out, page = run(chain)
    assert CALLS == ["first"]
    assert out == ["a", "b"]
    assert page.fields == {"bot": "scrapybot"}


@pytest.mark.parametrize("steps, message", [
    ({"nowhere.Step": 10}, "PAGE_STEPS: cannot load 'nowhere.Step'"),
    ({f"{HERE}.Missing": 10}, f"PAGE_STEPS: cannot load '{HERE}.Missing'"),
    ({f"{HERE}.NoMethod": 10}, f"PAGE_STEPS: {HERE}.NoMethod has no process_page(page) method"),
])
def test_a_step_that_cannot_work_is_a_config_error(steps, message):
    with pytest.raises(ConfigError) as err:
        chain_of(steps)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("value, message", [
    ("[1]", "PAGE_STEPS='[1]' must be a dict of class paths to numbers"),
    ("{", "PAGE_STEPS='{' must be a JSON object of class paths to numbers"),
    ({"Price": 950}, "PAGE_STEPS={'Price': 950} holds 'Price', not a class path (module.Class)"),
    ({"my.Price": "late"}, "PAGE_STEPS={'my.Price': 'late'} places my.Price at 'late': give a number, or None to "
                           "take it out"),
    ({"my.Price": True}, "PAGE_STEPS={'my.Price': True} places my.Price at True: give a number, or None to take it "
                         "out"),
])
def test_page_steps_setting_is_checked(value, message):
    settings = get_project_settings()
    settings.set("PAGE_STEPS", value)
    with pytest.raises(ConfigError) as err:
        check_settings(settings)
    assert str(err.value) == "bad setting: " + message


def test_the_default_chain_is_the_documented_one():
    from crawler import settings

    assert [p.rsplit(".", 1)[1] for p in sorted(settings.PAGE_STEPS_BASE, key=settings.PAGE_STEPS_BASE.get)] == [
        "Visit", "Redirect", "Decode", "Parse", "Render", "Blocked", "Read", "Content", "Metadata", "Focus", "Check", "Kind",
        "Classify", "Variants",
        "Store", "Follow"]


# -- the example of docs/crawling.md, as a user runs it -----------------------------------------------
def doc_example() -> str:
    text = (ROOT / "docs" / "crawling.md").read_text()
    section = text.split("## Your own steps", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def shop_page(title: str, price: str | None, links: list[str]) -> str:
    offer = f'<p>Price: <span itemprop="price" content="{price}">{price} EUR</span></p>' if price else ""
    body = " ".join(f"{title.lower()} words about the thing number {i}" for i in range(40))
    items = "".join(f'<li><a href="{u}">{u}</a></li>' for u in links)
    return f"<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{body}</p>{offer}<ul>{items}</ul>" \
           "</body></html>"


@pytest.mark.slow
def test_the_documented_step_stores_its_field_with_each_page(tmp_path: Path, monkeypatch, frontier_settings):
    steps = tmp_path / "steps"
    steps.mkdir()
    (steps / "mysteps.py").write_text(doc_example())
    monkeypatch.setenv("PYTHONPATH", str(steps))
    server = serve_pages(tmp_path, {
        "/index.html": shop_page("Shop", None, ["/lamp.html", "/chair.html", "/manual.txt"]),
        "/lamp.html": shop_page("Lamp", "19.99", []),
        "/chair.html": shop_page("Chair", None, []),
        "/manual.txt": "plain text, no HTML",
    })
    try:
        result = run_crawl(server, tmp_path / "crawl", [f"seeds={server.url('/index.html')}", "follow=all"],
                           {**frontier_settings, "PAGE_STEPS": json.dumps({"mysteps.Price": 950})})
    finally:
        server.stop()
    assert result.returncode == 0, result.log[-3000:]
    assert sorted(p for p in result.fetched if p != "/robots.txt") == [
        "/chair.html", "/index.html", "/lamp.html", "/manual.txt"]
    with SQLiteStore(result.store_path) as store:
        extra = {p["url"].rsplit("/", 1)[1]: p["extra"] for p in store.iter_pages()}
    assert extra == {"index.html": None, "lamp.html": {"price": "19.99"}, "chair.html": None, "manual.txt": None}
    # Every step's CPU a page, the user's too, in the stats and in scrapy status.
    names = {"record", "visit", "redirect", "decode", "parse", "render", "blocked", "read", "content", "metadata", "focus",
             "check", "kind", "type", "variants", "price", "store", "follow"}
    shown = set(re.findall(r"'page/step_ms/(\w+)': \d+\.?\d*", result.log))
    assert "'page/step_pages': 4" in result.log, [x for x in result.log.splitlines() if "page/" in x]
    assert shown == names
    status = subprocess.run([sys.executable, "-m", "scrapy", "status", "--json", "-s",
                             f"REDIS_URL={frontier_settings['REDIS_URL']}", "-s",
                             f"CRAWL_NAME={frontier_settings['CRAWL_NAME']}"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    steps = json.loads(status.stdout)["steps"]
    assert {x["step"] for x in steps} == names
    costs = [x["ms_a_page"] for x in steps]
    assert costs == sorted(costs, reverse=True) and costs[0] > 0


@pytest.mark.slow
def test_a_step_that_does_not_load_stops_the_crawl_before_it_starts(tmp_path: Path, frontier_settings):
    cmd = crawl_cmd(["seeds=http://127.0.0.1:9/"], {**frontier_settings, "PAGE_STEPS": '{"mysteps.Nope": 950}'},
                    tmp_path / "crawl")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if "PAGE_STEPS" in line]
    assert errors == ["Error: PAGE_STEPS: cannot load 'mysteps.Nope': No module named 'mysteps'"], proc.stderr[-2000:]
