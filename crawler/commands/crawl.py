"""``scrapy crawl``: Scrapy's command, with start-up errors as one line.

With ``CRAWL_PROCESSES`` above 1 (or ``auto``) it starts that many worker
processes of the crawl and looks after them (``crawler/operations/supervisor.py``).
Run as its own process's command on Linux, it then makes no crawler process
(no reactor, no thread) of its own, so that its workers can be forked from
it once everything is checked.

Before anything starts, the settings (``crawler.config``), the spider's
arguments (its ``check_arguments``, when it has one) and what the crawl
needs of this machine (``crawler.operations.startchecks``: directories it writes, the
metrics port, a browser, seeds the network policy allows) are checked, all
before the crawl is recorded in Redis; a bad value prints one line naming
it and exits with status 1, and leaves no crawl behind. Seeds the network
policy refuses, when others are left, are named one line each and the
rest crawled. An error while the
crawl starts (Redis or MongoDB unreachable, say) is reported the same way
instead of as an asyncio traceback; an unexpected one keeps its traceback.

Run as its own process's command (``scrapy crawl``, ``python -m scrapy
crawl``, ``site-crawler crawl``), it ends the process as soon as the crawl is
over and its exit handlers have run, without the interpreter's teardown of
every module. Under scrapyd's runner, which cleans up after the crawl, it
returns as before.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.exceptions import UsageError

from crawler.compat import crawler_process, create_crawler
from crawler.config import ConfigError, check_settings
from crawler.redis.client import RedisUnavailable
from crawler.redis.memory import RedisMemoryError
from crawler.operations.startchecks import check_file, check_start
from crawler.frontier.meta import FrontierLayoutError
from crawler.store import StoreUnavailable
from crawler.operations.supervisor import Supervisor, process_count

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

# Errors whose message says everything an operator needs.
START_ERRORS = (ConfigError, RedisUnavailable, RedisMemoryError, FrontierLayoutError, StoreUnavailable, OSError)

# A worker's ends that are failures, not the crawl's end: its exit status is 1.
FAILED = frozenset({"warc_write_failed", "sites_file_unusable", "render_unavailable"})


def preflight(settings: BaseSettings, spider_name: str, spargs: dict[str, Any] | None = None) -> None:
    """Reach Redis and the store before the engine starts: an unreachable
    one is then one line, not a failed start that Scrapy unwinds with
    tracebacks; so is a Redis whose ``maxmemory-policy`` would evict keys,
    or one that is full. (The embedded Redis started here is the one the
    crawl uses.)"""
    from crawler.crawldir import crawl_dir, crawl_name
    import redis

    from crawler.redis.client import get_redis
    from crawler.redis.memory import full_at_start, is_oom, refuse_evicting
    from crawler.store import open_store

    from crawler.frontier.frontier import Frontier

    name = crawl_name(settings, spider_name)
    if spider_name == "recrawl":
        # A re-crawl revisits a store: none is one line, and none is made.
        from crawler.store import StoreNotFound

        try:
            open_store(settings, name, create=False).close()
        except StoreNotFound as exc:
            raise ConfigError(f"nothing to revisit: {exc}. `scrapy crawl site -a seeds=...` makes the crawl "
                              "first (the same CRAWL_NAME, CRAWL_DIR or MONGO_URI)") from None
    elif settings.get("MONGO_URI"):
        open_store(settings, name).close()
    client = get_redis(settings, crawl_dir(settings))
    try:
        refuse_evicting(client)
        # A worker whose FRONTIER_SHARDS differs from the crawl's (or a crawl
        # an earlier version started) is refused here, in one line.
        frontier = Frontier(client, name, node="preflight", shards=settings.getint("FRONTIER_SHARDS"))
        frontier.check_layout()
        if spider_name == "site":
            from crawler.following.follow import policy_conflict
            from crawler.spiders.site import SiteSpider

            args = spargs or {}
            rules = SiteSpider.url_rules(args.get("allow"), args.get("deny"), args.get("rules"))
            conflict = policy_conflict(frontier.meta, name, args.get("follow"), args.get("scope"), rules,
                                       {"sitemaps": args.get("sitemaps"),
                                        "languages": SiteSpider.crawl_languages(args.get("languages")),
                                        "render": args.get("render")})
            if conflict is not None:
                raise ConfigError(conflict)
        stop = frontier.control.stop_requested()
        if stop is not None:
            if not settings.getbool("STOP_CLEAR"):
                raise CrawlStopped(
                    f"crawl {name!r} was stopped by `scrapy stop` ({stop['by'] or 'unknown'}): this worker "
                    "does not start. `scrapy stop --clear` (or -s STOP_CLEAR=1) lets workers run it again")
            frontier.control.clear_stop()
            logger.warning("Cleared the stop flag of crawl %(crawl)s (STOP_CLEAR)", {"crawl": name})
    except redis.RedisError as exc:
        if is_oom(exc):
            raise full_at_start(client, exc) from None
        raise
    finally:
        client.close()


def _end_process(code: int) -> None:
    """End the process now with ``code``, as the interpreter would at exit,
    but without its teardown of every module and object, which took 0.2 s
    after each crawl (each worker's, and the supervisor's after them): the
    remaining threads are waited for, the exit handlers run (the embedded
    Redis's shutdown, logging's flush), the standard streams are flushed.
    Not inside a test runner or an interactive session, where the caller
    expects SystemExit."""
    if "pytest" in sys.modules or hasattr(sys, "ps1") or _embedded():
        return
    import atexit
    import threading

    for t in threading.enumerate():
        if t is not threading.current_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()  # CPython's own call at exit; private, unchanged since Python 3.0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone (a pipe whose reader left)
            pass
    os._exit(code)


def _embedded() -> bool:
    """Whether ``scrapy crawl`` runs inside another program (``execute()``
    called by it) rather than as the process's own command."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = getattr(spec, "name", None) if spec is not None else None
    if name == "scrapy.__main__":
        return False
    # scrapyd's runner is not ours to end: it removes the job's copy of the
    # egg after execute() returns.
    return not sys.argv or os.path.basename(sys.argv[0]) not in ("scrapy", "site-crawler")


class CrawlStopped(Exception):
    """The crawl's stop flag is set: a worker says so and exits 0."""


class Command(ScrapyCrawlCommand):
    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        # Scrapy makes the crawler process (installs the reactor and logs its
        # 12-line version banner) after this and before run(): made in run()
        # instead, once the settings, arguments, Redis and the store are
        # checked, so that a start that fails says so in one line, last and
        # alone. A supervisor that forks its workers never makes one.
        self.requires_crawler_process = False

    def _forks_workers(self) -> bool:
        """Whether this command supervises workers forked from it: several
        processes, on Linux, as the process's own command (``os.fork`` of a
        test runner or of scrapyd's runner is not ours to do), with no
        reactor installed yet."""
        assert self.settings is not None
        try:
            processes = process_count(self.settings.get("CRAWL_PROCESSES"))
        except (TypeError, ValueError):
            return False  # check_settings says so in run()
        return (processes > 1 and sys.platform.startswith("linux") and "pytest" not in sys.modules
                and not hasattr(sys, "ps1") and not _embedded() and "twisted.internet.reactor" not in sys.modules)

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        try:  # before the log handler below opens it: a traceback otherwise
            check_file("LOG_FILE", self.settings.get("LOG_FILE"), make_directory=False)
        except ConfigError as exc:
            self._fail(exc)
            return
        if self.crawler_process is None and self.settings.getbool("LOG_INSTALL_ROOT_HANDLER"):
            # A supervisor of forked workers: its own lines (the checks'
            # warnings) in Scrapy's format and LOG_FILE, as a crawler process
            # would set them up; a worker's crawler process replaces the handler.
            from scrapy.utils.log import install_scrapy_root_handler

            install_scrapy_root_handler(self.settings)
        if len(args) != 1:
            super().run(args, opts)  # Scrapy's usage errors
            return
        try:
            check_settings(self.settings)
            if self.crawler_process is None:
                from scrapy.spiderloader import get_spider_loader

                spidercls = get_spider_loader(self.settings).load(args[0])
            else:
                spidercls = self.crawler_process.spider_loader.load(args[0])
        except ConfigError as exc:
            self._fail(exc)
            return
        except KeyError:
            raise UsageError(f"no spider named {args[0]!r}", print_help=False) from None
        check = getattr(spidercls, "check_arguments", None)
        try:
            checked = check(**opts.spargs) if check is not None else None
            seeds = list(checked[0]) if checked else []
            # Before preflight records the crawl: refused here, it leaves no crawl behind.
            refused = check_start(self.settings, spidercls.name, opts.spargs, seeds)
            preflight(self.settings, spidercls.name, opts.spargs)
        except CrawlStopped as exc:
            print(f"Not starting: {exc}", file=sys.stderr, flush=True)
            return
        except START_ERRORS as exc:
            self._fail(exc)
            return
        for line in refused:  # the others are crawled; these first, not buried after the log's banner
            print(line, file=sys.stderr, flush=True)
        processes = process_count(self.settings.get("CRAWL_PROCESSES"))
        if processes > 1:
            # This process only looks after the workers (crawler/operations/supervisor.py).
            settings = list(getattr(opts, "set", None) or [])
            settings.append(f"LOG_LEVEL={self.settings.get('LOG_LEVEL')}")
            fork = (lambda: self._forked_worker(spidercls, opts)) if self._forks_workers() else None
            self.exitcode = Supervisor(spidercls.name, opts.spargs, settings, processes, fork).run()
            _end_process(self.exitcode)
            return
        self._crawl(spidercls, opts)

    def _forked_worker(self, spidercls: Any, opts: argparse.Namespace) -> NoReturn:
        """A worker forked from this supervisor (``Supervisor._fork_all``):
        the crawl in one process, as ``worker_command`` would start it, with
        everything checked and imported already; then the process's end."""
        assert self.settings is not None
        code = 1
        try:
            # One process, and its log on the supervisor's output.
            self.settings.set("CRAWL_PROCESSES", 1, priority="cmdline")
            self.settings.set("LOG_FILE", None, priority="cmdline")
            self.crawler_process = crawler_process(self.settings)
            self._crawl(spidercls, opts)
            code = self.exitcode
        except BaseException:  # noqa: B036 - nothing may return into the supervisor's code
            import traceback

            traceback.print_exc()
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code)

    def _crawl(self, spidercls: Any, opts: argparse.Namespace) -> None:
        if self.crawler_process is None:
            assert self.settings is not None
            self.crawler_process = crawler_process(self.settings)
        crawler = create_crawler(self, spidercls)
        crawl: Any = self.crawler_process.crawl(crawler, **opts.spargs)
        if hasattr(crawl, "add_done_callback"):  # an asyncio task (AsyncCrawlerProcess)
            crawl.add_done_callback(self._task_done)
        else:  # a Deferred (CrawlerProcess)
            crawl.addErrback(self._start_failed)
        self.crawler_process.start()
        if self.crawler_process.bootstrap_failed:
            self.exitcode = 1
        reason = crawler.stats.get_value("finish_reason") if crawler.stats is not None else None
        if reason in FAILED and not self.exitcode:
            # Not done: a required part failed. A supervisor or service manager starts it again.
            self._fail(RuntimeError(f"the crawl stopped: {reason} (see the log above)"))
        _end_process(self.exitcode)

    def _fail(self, exc: BaseException) -> None:
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        self.exitcode = 1

    def _task_done(self, task: Any) -> None:
        if task.cancelled():
            return
        exc = task.exception()  # retrieved: asyncio no longer prints it
        if exc is not None:
            self._report(exc)

    def _start_failed(self, failure: Any) -> None:
        self._report(failure.value)

    def _report(self, exc: BaseException) -> None:
        if not isinstance(exc, START_ERRORS):
            logger.error("The crawl failed to start", exc_info=exc)
        self._fail(exc)
