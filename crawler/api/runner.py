"""The API's jobs run as crawls of the cluster.

Each job is a crawl named ``api-ID`` (``crawler/api/jobs.py``) in the
server's ``CRAWL_DIR`` and Redis: ``scrapy crawl site`` started by the server
as a child process (``CRAWL_PROCESSES=API_CRAWL_PROCESSES`` of them, under
the crawler's own supervisor), with the server's ``-s`` settings, the job's
arguments and settings, and its seeds in a file of the job's directory
``CRAWL_DIR/api/ID/`` (with the worker's log). So a job's crawl has the
frontier, its politeness, robots.txt, the network guard, scope and rules of
any crawl; ``scrapy status -s CRAWL_NAME=api-ID`` shows it, and more
workers anywhere join it with ``scrapy crawl site -s CRAWL_NAME=api-ID``.

What a job's crawl is given (``crawler/api/asks.py`` reads the request):

- crawl: ``-a follow=all``, the scope and URL rules asked, ``sitemaps``;
  ``FRONTIER_MAX_PAGES_PER_SITE`` and ``CLOSESPIDER_PAGECOUNT`` at the limit;
  ``DEPTH_LIMIT``, ``DOWNLOAD_DELAY`` (never below the server's),
  ``CONCURRENT_REQUESTS_PER_DOMAIN`` (never above the server's);
- scrape and batch scrape: the seeds only (the ``follow`` step taken out of
  ``PAGE_STEPS``: redirects are still followed), no sitemaps;
- map: ``API_MAP_PAGES`` pages a site with every link followed, and the sitemaps;
- ``html`` or ``rawHtml`` asked: the step ``crawler.api.steps.KeepHtml``;
- with ``MONGO_URI``: ``MONGO_DATABASE`` the crawl's name (each job its own).

A job ends when its worker exits: completed (exit 0, or nothing left in
its frontier), cancelled (``DELETE``), or, when the worker died with work
left, started again (``API_RESTARTS`` times) and then failed with the last
line of its log. When the server stops (SIGTERM, Ctrl-C) it asks its jobs'
workers to stop gracefully (``scrapy stop``); the next server on this host
starts them again with ``STOP_CLEAR`` (a worker still alive is watched, not
started twice). Finished jobs are purged ``API_RESULTS_TTL`` seconds after
they end (Redis keys, store, directory); a scrape's or map's at once.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from crawler.api.checks import FOLLOW_STEP, HTML_STEP, SERVER_SECRETS, JobRefused, alive, check_job, http_url, \
    passed_settings
from crawler.api.jobs import ACTIVE, Job, JobBook
from crawler.crawldir import crawl_dir
from crawler.operations import ops
from crawler.webhooks.events import stream_key

logger = logging.getLogger(__name__)

__all__ = ["JobRefused", "Runner", "passed_settings"]

class Runner:
    def __init__(self, settings: Any, client: Any, book: JobBook) -> None:
        self.settings = settings
        self.client = client
        self.book = book
        self.passed = passed_settings(settings)
        self.base = crawl_dir(settings) / "api"
        self.lease_timeout = settings.getfloat("FRONTIER_LEASE_TIMEOUT")
        self.ttl = settings.getfloat("API_RESULTS_TTL")
        self.max_restarts = settings.getint("API_RESTARTS")
        self.host = socket.gethostname()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.adopted: dict[str, list[int]] = {}
        self.lock = threading.RLock()
        self.stopping = False
        self._purged_at = 0.0
        from crawler.webhooks.delivery import DeliveryThread

        self.hooks = DeliveryThread()  # each job's events to its webhook (crawler/webhooks/)
        self.hooks.start()

    # -- a job's crawl --------------------------------------------------------------
    def job_settings(self, job: Job) -> Any:
        settings = self.settings.copy()
        settings.set("CRAWL_NAME", job.crawl, priority="cmdline")
        if settings.get("MONGO_URI"):
            settings.set("MONGO_DATABASE", job.crawl, priority="cmdline")
        return settings

    def frontier(self, job: Job) -> Any:
        """The job's frontier, or None before its crawl exists."""
        try:
            return ops.open_frontier(self.job_settings(job), client=self.client)
        except ops.NoSuchCrawl:
            return None

    def store(self, job: Job) -> Any:
        from crawler.store import StoreNotFound, open_store

        try:
            return open_store(self.job_settings(job), job.crawl, create=False)
        except StoreNotFound:
            return None

    def directory(self, job: Job) -> Path:
        return self.base / job.id

    def checked(self, job: Job) -> tuple[dict[str, str], dict[str, str]]:
        return check_job(job, self.settings, self.directory(job))

    def command(self, job: Job, resume: bool) -> list[str]:
        args, job_settings = self.checked(job)
        cmd = [sys.executable, "-m", "scrapy", "crawl", job.spider]
        if job.spider == "recrawl":  # a tracked crawl's next job: every stored page revisited
            args = {"all": "1"}
        elif not resume:
            seeds = self.directory(job) / "seeds.txt"
            seeds.write_text("".join(u + "\n" for u in job.urls if http_url(u)), encoding="utf-8")
            args["seeds_file"] = str(seeds)
        for name, value in args.items():
            cmd += ["-a", f"{name}={value}"]
        settings = {**self.passed, **job_settings, "CRAWL_NAME": job.crawl}
        steps = self.settings.getdict("PAGE_STEPS")
        if job.kind in ("scrape", "batch") or not job.links:
            steps[FOLLOW_STEP] = None
        if "html" in job.formats or "rawHtml" in job.formats:
            steps[HTML_STEP] = 590
        if steps:
            settings["PAGE_STEPS"] = json.dumps(steps)
        if self.settings.get("MONGO_URI"):
            settings["MONGO_DATABASE"] = job.crawl
        if resume or job.tracked:  # a tracked crawl's last job may have been cancelled
            settings["STOP_CLEAR"] = "True"
        if resume:
            if job.limit and "CLOSESPIDER_PAGECOUNT" in settings:
                # A count is a worker's own: the one started again takes what is left.
                self.sync(job)
                settings["CLOSESPIDER_PAGECOUNT"] = str(max(1, job.limit - self.book.result_count(job.id)))
        for name, value in settings.items():
            cmd += ["-s", f"{name}={value}"]
        return cmd

    # -- webhooks -----------------------------------------------------------------------
    def event(self, job: Job, what: str, error: str | None = None) -> None:
        """Record a job's own event (started, completed, failed, cancelled)
        and make sure its deliverer runs."""
        if not job.webhook:
            return
        from crawler.webhooks.events import EventLog

        prefix = "batch_scrape" if job.kind == "batch" else "crawl"
        EventLog(self.client, job.crawl).add([{"type": f"{prefix}.{what}", "error": error}])
        self.deliver(job)

    def deliver(self, job: Job) -> None:
        from crawler.config import ConfigError
        from crawler.webhooks.extension import make_deliverer

        assert job.webhook is not None
        events = job.webhook.get("events")
        try:
            deliverer = make_deliverer(self.client, job.crawl, job.webhook["url"], self.settings, job_id=job.id,
                                       metadata=job.webhook.get("metadata"),
                                       types=set(events) if events else None)
        except ConfigError as exc:
            logger.error("API job %s: its webhook cannot be posted to: %s", job.id, exc)
            return
        self.hooks.add(job.id, deliverer)

    def start(self, job: Job, resume: bool = False) -> bool:
        directory = self.directory(job)
        directory.mkdir(parents=True, exist_ok=True)
        try:
            cmd = self.command(job, resume)
        except JobRefused as exc:
            logger.error("API job %s: not started: its record holds what the API does not make (%s)", job.id, exc)
            self.end(job, "failed", f"its record was altered: {exc}")
            return False
        if not resume:
            self.event(job, "started")
        with open(directory / "worker.log", "ab") as log:
            env = {k: v for k, v in os.environ.items() if k not in SERVER_SECRETS}  # the workers need neither
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env)
        with self.lock:
            self.procs[job.id] = proc
        self.book.update(job.id, host=self.host, pids=[proc.pid])
        return True

    def resume_all(self) -> list[str]:
        """At start: this host's jobs that were running when a server
        stopped: watched while their worker lives, else started again."""
        resumed = []
        for job in self.book.all():
            if job.webhook and (job.status == ACTIVE or self.client.exists(stream_key(job.crawl))):
                self.deliver(job)  # what a server stopped before it went still goes
            if job.status != ACTIVE or job.host != self.host:
                continue
            living = [p for p in job.pids if alive(p)]
            if living:
                with self.lock:
                    self.adopted[job.id] = living
            elif job.kind in ("crawl", "batch"):
                if self.start(job, resume=True):
                    resumed.append(job.id)
            else:  # a scrape or map whose caller is gone
                self.end(job, "failed", "the server stopped during it")
        return resumed

    # -- watching -------------------------------------------------------------------------
    def tick(self) -> None:
        with self.lock:
            exited = [(i, p.returncode) for i, p in self.procs.items() if p.poll() is not None]
            for job_id, _ in exited:
                del self.procs[job_id]
            gone = [i for i, pids in self.adopted.items() if not any(alive(p) for p in pids)]
            for job_id in gone:
                del self.adopted[job_id]
        for job_id, rc in exited + [(i, None) for i in gone]:
            try:
                self.finished(job_id, rc)
            except Exception as exc:  # Redis or the store away: settled at a later tick
                logger.warning("API job %s: its end not settled yet (%s)", job_id, exc)
                with self.lock:
                    self.adopted.setdefault(job_id, [])
        try:
            for job_id, deliverer in list(self.hooks.deliverers.items()):
                if not self.running_here(job_id) and deliverer.pending() == 0:
                    job = self.book.get(job_id)
                    if job is None or job.status != ACTIVE:
                        self.hooks.remove(job_id)
            if time.monotonic() - self._purged_at > 30:
                self._purged_at = time.monotonic()
                self.purge_expired()
        except Exception as exc:  # Redis away: the next tick tries again
            logger.warning("API jobs: %s", exc)

    def running_here(self, job_id: str) -> bool:
        with self.lock:
            return job_id in self.procs or job_id in self.adopted

    def finished(self, job_id: str, rc: int | None) -> None:
        """A job's worker exited (``rc`` None: an adopted one, code unknown)."""
        job = self.book.get(job_id)
        if job is None or job.status != ACTIVE or self.stopping:
            return
        self.sync(job)
        if job.cancelled:
            self.end(job, "cancelled")
            return
        frontier = self.frontier(job)
        pending = 0
        if frontier is not None:
            status = ops.status(frontier, self.lease_timeout, top=1, error_sample=1)
            pending = sum(status["frontier"][k] for k in ("queued", "leased", "delayed"))
        reached = bool(job.limit) and self.book.result_count(job.id) >= job.limit
        if rc == 0 or reached or (frontier is not None and pending == 0 and self.book.result_count(job.id)):
            self.end(job, "completed")
        elif pending and job.restarts < self.max_restarts and job.kind in ("crawl", "batch") and not getattr(
                self.book.get(job.id), "cancelled", True):
            self.book.update(job.id, restarts=job.restarts + 1)
            logger.warning("API job %s: its worker ended (exit %s) with %d URLs left: started again", job.id, rc,
                           pending)
            self.start(job, resume=True)
        else:
            self.end(job, "failed", self.last_line(job) or f"its worker ended with exit status {rc}")

    def last_line(self, job: Job) -> str:
        path = self.directory(job) / "worker.log"
        try:
            lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return ""
        errors = [ln for ln in lines if "ERROR" in ln or ln.startswith("scrapy")]
        return (errors or lines or [""])[-1][:500]

    def end(self, job: Job, status: str, error: str | None = None) -> None:
        now = time.time()
        try:
            self.event(job, status, error)  # first: a job that has ended has said so
        finally:
            self.book.update(job.id, status=status, error=error, finished=now, expires=now + self.ttl, pids=[])

    # -- results --------------------------------------------------------------------------
    def sync(self, job: Job) -> int:
        """Add the job's newly stored pages to its results list (a tracked
        crawl's: those fetched by this job, and those it found gone)."""
        store = self.store(job)
        if store is None:
            return 0
        try:
            if job.tracked:
                urls = store.stored_urls(since=job.created) + [
                    c["url"] for c in store.changes(job.created) if c["kind"] in ("gone", "moved")]
            else:
                urls = store.stored_urls()
        finally:
            store.close()
        listed = self.book.listed(job.id)
        return self.book.append_results(job.id, [u for u in urls if u not in listed])

    def pending(self, job: Job) -> int:
        frontier = self.frontier(job)
        if frontier is None:
            return 0
        status = ops.status(frontier, self.lease_timeout, top=1, error_sample=1)
        return int(sum(status["frontier"][k] for k in ("queued", "leased", "delayed")))

    # -- cancel, stop, purge ----------------------------------------------------------
    def cancel(self, job: Job) -> bool:
        """Ask the job's workers to stop at once; False if it had ended."""
        if job.status != ACTIVE:
            return False
        self.book.update(job.id, cancelled=True)
        frontier = self.frontier(job)
        if frontier is not None:
            ops.request_stop(frontier, now=True)
        with self.lock:
            proc = self.procs.get(job.id)
        if proc is not None and proc.poll() is None:
            proc.terminate()  # before its frontier exists, the flag alone would not reach it
        return True

    def stop_now(self, job: Job, wait: float = 15.0) -> None:
        """Cancel ``job`` and wait for its worker to end (killed past ``wait``):
        before a scrape's or map's crawl is purged, nothing of it runs."""
        self.cancel(job)
        with self.lock:
            proc = self.procs.get(job.id)
        if proc is None:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def shutdown(self, wait: float = 30.0) -> None:
        """The server stops: its jobs' workers are asked to stop after what
        they hold; the next server resumes them (and posts the events left)."""
        self.stopping = True
        self.hooks.stop()
        with self.lock:
            ids = list(self.procs) + list(self.adopted)
        for job_id in ids:
            job = self.book.get(job_id)
            frontier = self.frontier(job) if job is not None else None
            if frontier is not None:
                ops.request_stop(frontier, now=False)
        deadline = time.monotonic() + wait
        with self.lock:
            procs = list(self.procs.values())
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.terminate()

    def purge(self, job: Job) -> None:
        """Everything of a job: its crawl's Redis keys, its store, its directory,
        its record; a tracked crawl (changeTracking) stays for the next job."""
        if job.tracked:
            shutil.rmtree(self.directory(job), ignore_errors=True)
            self.book.forget(job.id)
            return
        frontier = self.frontier(job)
        if frontier is not None:
            frontier.views.delete_all()
        settings = self.job_settings(job)
        if settings.get("MONGO_URI"):
            import pymongo

            mongo: Any = pymongo.MongoClient(settings.get("MONGO_URI"),
                                             serverSelectionTimeoutMS=int(settings.getfloat("MONGO_TIMEOUT") * 1000))
            try:
                mongo.drop_database(job.crawl)
            finally:
                mongo.close()
        else:
            path = crawl_dir(settings) / f"{job.crawl}.sqlite3"
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
        shutil.rmtree(self.directory(job), ignore_errors=True)
        self.book.forget(job.id)

    def purge_expired(self) -> None:
        now = time.time()
        for job in self.book.all():
            if job.status != ACTIVE and job.expires is not None and job.expires < now:
                try:
                    self.purge(job)
                except Exception:
                    logger.exception("API job %s: could not purge it", job.id)
