"""``scrapy serve [--bind ADDRESS] [--port N] [--json]``: the crawl cluster
as an HTTP API in Firecrawl's v2 shapes (``crawler/api/``, docs/api.md).

Listens on ``http://ADDRESS:N/`` (127.0.0.1:3002, Firecrawl's own port,
unless told; ``--port 0`` takes a free one) and prints ``API on URL`` (with
``--json``: ``{"url": ...}``). Needs at least one API key
(``API_KEYS_FILE`` or ``CRAWLER_API_KEYS``). Each job it is given runs as a
crawl of the cluster in ``REDIS_URL`` (the embedded Redis of ``CRAWL_DIR``
without one), with the settings the server was given with ``-s``. Before it
listens, bad settings, a missing or unreadable key file, Redis out of reach
and a port taken are one line and exit status 1. SIGTERM or Ctrl-C stops
it: its running jobs' workers are asked to stop after what they hold, and
the next ``scrapy serve`` resumes them.
"""

from __future__ import annotations

import signal
import sys
import threading
from typing import TYPE_CHECKING

import redis
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.commands.console import _interrupt  # SIGTERM stops it as Ctrl-C does
from crawler.config import ConfigError, check_settings
from crawler.redis.client import RedisUnavailable

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False
    default_settings = {"LOG_LEVEL": "INFO"}

    def syntax(self) -> str:
        return "[--bind ADDRESS] [--port N] [--json]"

    def short_desc(self) -> str:
        return "Serve the crawl cluster as an HTTP API in Firecrawl's shapes (scrape, crawl, map, batch)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (127.0.0.1)")
        parser.add_argument("--port", type=int, default=3002, help="port to listen on (3002; 0: a free one)")
        parser.add_argument("--json", action="store_true", help='print {"url": ...} on one line once listening')

    def fail(self, line: str) -> None:
        print(f"scrapy serve: {line}", file=sys.stderr, flush=True)
        self.exitcode = 1

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from crawler.api.keys import ApiKeys, RateLimit
        from crawler.api.server import ApiServer
        from crawler.api.service import Api
        from crawler.crawldir import crawl_dir
        from crawler.operations.consolehttp import is_loopback
        from crawler.redis.client import get_redis

        assert self.settings is not None
        if args:
            raise UsageError(f"scrapy serve takes no arguments, not {args}", print_help=False)
        if not 0 <= opts.port <= 65535:
            raise UsageError(f"--port {opts.port} is not 0-65535", print_help=False)
        try:
            check_settings(self.settings)
            keys = ApiKeys.from_settings(self.settings)
            client = get_redis(self.settings, crawl_dir(self.settings))
            client.ping()
        except (ConfigError, RedisUnavailable, redis.RedisError, OSError) as exc:
            self.fail(str(exc))
            return
        api = Api(self.settings, client)
        try:
            server = ApiServer((opts.bind, opts.port), api, keys, RateLimit(client, self.settings.getint(
                "API_KEY_REQUESTS_PER_MINUTE")))
        except (OSError, OverflowError) as exc:
            self.fail(f"cannot listen on {opts.bind} port {opts.port}: {exc}")
            return
        resumed = api.runner.resume_all()
        if resumed:
            print(f"scrapy serve: resumed {len(resumed)} jobs: {', '.join(resumed)}", file=sys.stderr, flush=True)
        print(f'{{"url": "{server.url}"}}' if opts.json else f"API on {server.url} ({len(keys)} keys)", flush=True)
        if not is_loopback(opts.bind):
            print(f"scrapy serve: listening on {opts.bind}, not a loopback address: put it behind TLS (keys travel "
                  "in each request)", file=sys.stderr, flush=True)
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(0.2):
                try:
                    api.runner.tick()
                except Exception as exc:  # never the end of the watcher: the next tick tries again
                    print(f"scrapy serve: jobs not watched this tick: {exc}", file=sys.stderr, flush=True)

        watcher = threading.Thread(target=watch, name="api-jobs", daemon=True)
        watcher.start()
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            server.serve_forever(poll_interval=0.5)
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            stop.set()
            watcher.join(5)
            server.server_close()
            api.runner.shutdown()
        if not opts.json:
            print("API stopped", flush=True)
