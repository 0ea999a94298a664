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


ROBOTS_PROBE = textwrap.dedent('''
    import json, sys
    import scrapy
    from scrapy.crawler import CrawlerProcess
    from scrapy.robotstxt import ProtegoRobotParser
    from crawler.compat import RobotsTxtHooks

    base = sys.argv[1]
    seen = {"fetched": [], "parsers_made": 0, "got": []}

    class CountingParser(ProtegoRobotParser):
        def __init__(self, body, spider):
            seen["parsers_made"] += 1
            super().__init__(body, spider)

    class Hooks(RobotsTxtHooks):
        def __init__(self, crawler):
            super().__init__(crawler)
            self.match_on("probe")  # not the User-Agent header, which no group names
            self.use_parser(CountingParser)
            seen["parser_class"] = self.parser_class.__name__

        async def robots_fetched(self, response, netloc, request):
            seen["fetched"].append([response.url, netloc in self.parsers])
            await self.parse_fetched(response, netloc, request)
            seen["kept"] = type(self.parsers[netloc]).__name__

    class Probe(scrapy.Spider):
        name = "probe"

        async def start(self):
            for path in ("/private/a.html", "/public.html"):
                yield scrapy.Request(base + path)

        def parse(self, response):
            seen["got"].append(response.url[len(base):])

    process = CrawlerProcess({
        "LOG_LEVEL": "ERROR", "TELNETCONSOLE_ENABLED": False, "ROBOTSTXT_OBEY": True, "USER_AGENT": "other/1.0",
        "DOWNLOADER_MIDDLEWARES": {"scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
                                   "__main__.Hooks": 100}})
    crawler = process.create_crawler(Probe)
    process.crawl(crawler)
    process.start()
    seen["forbidden"] = crawler.stats.get_value("robotstxt/forbidden")
    print(json.dumps(seen))
''')


def test_the_robots_middlewares_private_parts_are_where_compat_looks(tmp_path):
    """RobotsTxtHooks against Scrapy's own middleware and engine: robots.txt
    fetched reaches ``robots_fetched``, Scrapy's handling keeps our parser
    class's parser in ``parsers``, and groups are matched on ``match_on``'s
    token (the request's User-Agent names no group: Scrapy's own matching
    would allow the page)."""
    from tests.support.servers import serve_pages

    server = serve_pages(tmp_path, {"/private/a.html": "<p>no</p>", "/public.html": "<p>yes</p>"},
                         robots="User-agent: probe\nDisallow: /private/\n")
    try:
        base = server.url("").rstrip("/")
        proc = subprocess.run([sys.executable, "-c", ROBOTS_PROBE, base], cwd="/",
                              env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                              capture_output=True, text=True, timeout=120)
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {
        "parser_class": "CountingParser", "fetched": [[base + "/robots.txt", True]], "parsers_made": 1,
        "kept": "CountingParser", "got": ["/public.html"], "forbidden": 1}


def test_protegos_private_parts_are_where_compat_looks():
    """GroupChoosingProtego: protego asks ``choose_group`` for the rules of
    a user agent, given every group by its lower-cased user-agent line."""
    from crawler.compat import GroupChoosingProtego

    asked = []

    class OnlyExact(GroupChoosingProtego):
        def choose_group(self, user_agent, groups):
            asked.append((user_agent, sorted(groups)))
            return groups.get(user_agent.lower())

    rp = OnlyExact.parse("User-agent: Probe\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n")
    GroupChoosingProtego.check()
    # Protego alone gives "probe-bot" the probe group (a prefix) and "other" the * group.
    assert (rp.can_fetch("http://x/a", "Probe"), rp.can_fetch("http://x/b", "Probe"),
            rp.can_fetch("http://x/b", "probe-bot"), rp.can_fetch("http://x/b", "other")) == (False, True, True, True)
    assert asked[0] == ("Probe", ["*", "probe"])


def test_a_missing_robots_or_protego_part_fails_loudly():
    """Each part compat's robots.txt hooks use, taken away, is named in the
    error (each in a process of its own: it deletes Scrapy's and protego's
    attributes)."""
    code = textwrap.dedent('''
        import sys
        from protego import Protego
        from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
        from scrapy.utils.test import get_crawler
        from crawler import compat

        case = sys.argv[1]
        try:
            if case == "rule_set":
                del Protego._get_matching_rule_set
                compat.GroupChoosingProtego.check()
            elif case == "user_agents":
                class Any_(compat.GroupChoosingProtego):
                    def choose_group(self, user_agent, groups):
                        return None
                rp = Any_.parse("User-agent: *\\nDisallow: /\\n")
                del rp._user_agents
                rp.can_fetch("http://x/", "a")
            elif case == "parse_robots":
                del RobotsTxtMiddleware._parse_robots
                compat.RobotsTxtHooks(get_crawler(settings_dict={"ROBOTSTXT_OBEY": True}))
            elif case == "parsers":
                init = RobotsTxtMiddleware.__init__
                def without(self, crawler):
                    init(self, crawler)
                    del self._parsers
                RobotsTxtMiddleware.__init__ = without
                compat.RobotsTxtHooks(get_crawler(settings_dict={"ROBOTSTXT_OBEY": True}))
            elif case == "create_crawler":
                from scrapy.commands import BaseRunSpiderCommand
                del BaseRunSpiderCommand._create_crawler
                from scrapy.commands.crawl import Command
                compat.create_crawler(Command(), "probe")
            print("no error")
        except compat.ScrapyInternalsChanged as exc:
            print(exc)
    ''')
    out = {case: subprocess.run([sys.executable, "-c", code, case], cwd=ROOT, capture_output=True, text=True,
                                timeout=120).stdout.strip().splitlines()[-1]
           for case in ("rule_set", "user_agents", "parse_robots", "parsers", "create_crawler")}
    assert out["rule_set"].startswith("protego 0.") and "has no Protego._get_matching_rule_set" in out["rule_set"]
    assert "has no Protego._user_agents" in out["user_agents"]
    assert "has no async RobotsTxtMiddleware._parse_robots(response, netloc, request)" in out["parse_robots"]
    assert out["parsers"].startswith("Scrapy 2.") and "has no RobotsTxtMiddleware._parsers" in out["parsers"]
    assert "has no BaseRunSpiderCommand._create_crawler" in out["create_crawler"]


def test_the_crawl_command_makes_its_crawler_as_scrapys_crawl_does():
    """create_crawler is Scrapy's crawl command's own: a Crawler of the
    spider class, made by the command's crawler process."""
    code = textwrap.dedent('''
        import scrapy
        from scrapy.commands.crawl import Command
        from scrapy.crawler import Crawler, CrawlerRunner
        from crawler import compat

        class Probe(scrapy.Spider):
            name = "probe"

        command = Command()
        command.crawler_process = CrawlerRunner({})
        crawler = compat.create_crawler(command, Probe)
        print(type(crawler) is Crawler, crawler.spidercls is Probe, crawler in command.crawler_process.crawlers
              or "made")
    ''')
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().splitlines()[-1] == "True True made", proc.stderr[-2000:]
