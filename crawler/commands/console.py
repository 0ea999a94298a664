"""``scrapy console [--bind ADDRESS] [--port N] [--allow-actions]``: a web
console of the crawl.

Serves one page (``crawler/operations/console.py``) on ``http://ADDRESS:N/``
(127.0.0.1:8410 unless told; ``--port 0`` takes a free port) and prints
``Console on URL``: what ``scrapy status`` shows, redrawn every
``--interval`` seconds (2), a chart of pages/min per node over the last
hour, the largest site queues and the errors. It keeps serving while Redis
is unreachable (the page says so) and stops cleanly on Ctrl-C.

``--allow-actions`` lets the page seed URLs, remove URLs or sites, stop the
workers (``--now`` too) and clear the stop flag, for whoever holds the
random token it prints. Reads ``REDIS_URL``, ``CRAWL_NAME``, ``CRAWL_DIR``,
``FRONTIER_LEASE_TIMEOUT`` and ``FRONTIER_QUEUE_BY`` as the spiders do;
``--json`` prints ``{"url", "token"}`` on one line instead of the text.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError

from crawler.operations import ops
from crawler.operations.console import Console, ConsoleServer, is_loopback
from crawler.operations.cli import FrontierCommand

if TYPE_CHECKING:
    import argparse


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # SIGTERM (a service manager) stops it as Ctrl-C does


class Command(FrontierCommand):
    def syntax(self) -> str:
        return "[--bind ADDRESS] [--port N] [--allow-actions] [--interval SECONDS] [--top N]"

    def short_desc(self) -> str:
        return "Serve a live web console of the crawl (status, pages/min chart; actions with --allow-actions)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (127.0.0.1)")
        parser.add_argument("--port", type=int, default=8410, help="port to listen on (8410; 0: a free one)")
        parser.add_argument("--allow-actions", action="store_true",
                            help="let the page seed, remove and stop, with the token printed at start")
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between status samples (2)")
        parser.add_argument("--top", type=int, default=10, help="how many of the largest site queues (10)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        import secrets

        assert self.settings is not None
        if args:
            raise UsageError(f"scrapy console takes no arguments, not {args}", print_help=False)
        if not 0 <= opts.port <= 65535:
            raise UsageError(f"--port {opts.port} is not 0-65535", print_help=False)
        if not 0.1 <= opts.interval <= 3600:
            raise UsageError(f"--interval {opts.interval:g} is not 0.1 to 3600 seconds", print_help=False)
        token = secrets.token_urlsafe(24) if opts.allow_actions else None
        console = Console(self.open_frontier, self.settings.getfloat("FRONTIER_LEASE_TIMEOUT"),
                          queue_by=self.settings.get("FRONTIER_QUEUE_BY"), interval=opts.interval,
                          top=opts.top, token=token, audit=lambda line: print(line, flush=True))
        error = console.sample()
        if error is not None and console.error_status() == 404:
            # A console may be opened before its crawl starts: it says so,
            # creates nothing, and shows the crawl once a worker starts it.
            print(f"scrapy console: {error}; serving anyway, showing it once it starts", file=sys.stderr, flush=True)
        elif error is not None:
            print(f"scrapy console: {error.rstrip('.')}; serving anyway, trying again every "
                  f"{opts.interval:g} s", file=sys.stderr, flush=True)
        try:
            server = ConsoleServer((opts.bind, opts.port), console)
        except (OSError, OverflowError) as exc:
            print(f"scrapy console: cannot listen on {opts.bind} port {opts.port}: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        if opts.json:
            print(ops.dumps({"url": server.url, "token": token}), flush=True)
        else:
            print(f"Console on {server.url}", flush=True)
            if token:
                print(f"Actions are on for the holder of the token {token}\n"
                      f"Open {server.url}#token={token} (a URL fragment never leaves the browser)", flush=True)
            else:
                print("Actions are off (--allow-actions turns them on)", flush=True)
        if not is_loopback(opts.bind):
            print(f"scrapy console: listening on {opts.bind}, not a loopback address: whoever reaches it reads "
                  "the crawl's status, over plain HTTP", file=sys.stderr, flush=True)
        previous = signal.signal(signal.SIGTERM, _interrupt)
        console.start()
        try:
            server.serve_forever(poll_interval=0.5)
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
            server.server_close()
            console.stop()
        if not opts.json:
            print("Console stopped", flush=True)
