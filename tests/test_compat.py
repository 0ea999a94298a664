"""crawler/compat.py against a real Scrapy engine: each private hook it
uses must still be where it looks, or this fails (and so would the crawl,
loudly, with ScrapyInternalsChanged)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.support import ROOT

SCRIPT = textwrap.dedent('''
    import json
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from crawler import compat

    seen = {}

    class Probe(scrapy.Spider):
        name = "probe"

        async def start(self):
            return
            yield

        @classmethod
        def from_crawler(cls, crawler, *args, **kwargs):
            spider = super().from_crawler(crawler, *args, **kwargs)
            crawler.signals.connect(spider.opened, signal=signals.spider_opened)
            crawler.signals.connect(spider.idle, signal=signals.spider_idle)
            crawler.signals.connect(spider.closed_, signal=signals.spider_closed)
            return spider

        def opened(self, spider):
            downloader = self.crawler.engine.downloader
            seen["delay_before"] = downloader._delay
            compat.disable_downloader_delay(self.crawler)
            seen["delay_after"] = downloader._delay
            seen["closing_when_open"] = compat.spider_closing(self.crawler)
            compat.wake_engine(self.crawler)
            seen["woke"] = True

        def idle(self, spider):
            seen["closing_when_idle"] = compat.spider_closing(self.crawler)

        def closed_(self, spider):
            seen["closing_when_closed"] = compat.spider_closing(self.crawler)
            compat.wake_engine(self.crawler)  # no slot any more: a no-op

    process = CrawlerProcess({"DOWNLOAD_DELAY": 2.5, "LOG_LEVEL": "ERROR", "TELNETCONSOLE_ENABLED": False})
    process.crawl(Probe)
    process.start()
    print(json.dumps(seen))
''')


def test_every_private_hook_is_where_compat_looks():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd="/", env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {
        "delay_before": 2.5, "delay_after": 0.0, "closing_when_open": False, "woke": True,
        "closing_when_idle": False, "closing_when_closed": True}


def test_a_missing_hook_fails_loudly():
    from types import SimpleNamespace

    import pytest

    from crawler import compat

    class Engine:
        running = True
        downloader = SimpleNamespace()  # no _delay

    fake = SimpleNamespace(engine=Engine())
    with pytest.raises(compat.ScrapyInternalsChanged, match=r"has no Downloader\._delay"):
        compat.disable_downloader_delay(fake)  # type: ignore[arg-type]
    with pytest.raises(compat.ScrapyInternalsChanged, match=r"has no ExecutionEngine\._slot"):
        compat.wake_engine(fake)  # type: ignore[arg-type]
    with pytest.raises(compat.ScrapyInternalsChanged, match=r"has no ExecutionEngine\._slot"):
        compat.spider_closing(fake)  # type: ignore[arg-type]


def test_the_crawler_process_is_chosen_as_scrapys_execute_chooses_it():
    """crawler_process reads scrapy.utils.reactor._asyncio_reactor_path: the
    asyncio reactor (the project's) makes an AsyncCrawlerProcess, another
    choice a CrawlerProcess; a Scrapy without the name fails loudly. Each
    in a process of its own: making one installs a reactor."""
    code = textwrap.dedent('''
        import sys
        import scrapy.crawler  # imports the name itself: before it goes
        from scrapy.settings import Settings
        from scrapy.utils import reactor as scrapy_reactor
        from crawler import compat
        settings = Settings({"TWISTED_REACTOR": scrapy_reactor._asyncio_reactor_path,
                             "TWISTED_REACTOR_ENABLED": True, "FORCE_CRAWLER_PROCESS": sys.argv[1] == "force"})
        if sys.argv[1] == "gone":
            del scrapy_reactor._asyncio_reactor_path
        try:
            print(type(compat.crawler_process(settings)).__name__)
        except compat.ScrapyInternalsChanged as exc:
            print(exc)
    ''')
    out = {case: subprocess.run([sys.executable, "-c", code, case], cwd=ROOT, capture_output=True, text=True,
                                timeout=120).stdout.strip().splitlines()[-1] for case in ("asyncio", "force", "gone")}
    assert out["asyncio"] == "AsyncCrawlerProcess"
    assert out["force"] == "CrawlerProcess"
    assert "has no scrapy.utils.reactor._asyncio_reactor_path" in out["gone"]
