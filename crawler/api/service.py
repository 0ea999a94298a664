"""What each endpoint of the API does, as ``(status, body)`` pairs
(``crawler/api/server.py`` speaks HTTP around them). Bodies are Firecrawl
v2's: ``{"success": true, ...}``, or ``{"success": false, "error": "..."}``
with a 4xx or 5xx status.
"""

from __future__ import annotations

import datetime
import json
import time
from typing import Any

from crawler.api import asks
from crawler.api.documents import document
from crawler.api.jobs import ACTIVE, Job, JobBook, tracked_name
from crawler.api.runner import Runner
from crawler.api.tracking import change_tracking, changes_by_url
from crawler.network.policy import parse_networks
from crawler.operations.startchecks import refused_seeds
from crawler.scope.urls import url_site

__all__ = ["Api", "Reply"]

Reply = tuple[int, dict[str, Any]]
MAX_HOPS = 10  # redirects followed from a scrape's URL to its page
CAP_MARGIN = 50  # URLs a site may admit past a crawl's limit: its sitemap files, redirects


def fail(status: int, error: str, **more: Any) -> Reply:
    return status, {"success": False, "error": error, **more}


def _iso(t: float | None) -> str | None:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).isoformat() if t else None


class Api:
    def __init__(self, settings: Any, client: Any) -> None:
        self.settings = settings
        self.book = JobBook(client)
        self.runner = Runner(settings, client, self.book)
        self.allow = parse_networks(settings.get("NETWORK_ALLOWLIST"))
        self.crawl_limit = settings.getint("API_CRAWL_LIMIT")
        self.key_crawls = settings.getint("API_KEY_CRAWLS")
        self.page_size = settings.getint("API_PAGE_RESULTS")
        self.scrape_timeout = settings.getfloat("API_SCRAPE_TIMEOUT")
        self.map_pages = settings.getint("API_MAP_PAGES")
        self.delay = settings.getfloat("DOWNLOAD_DELAY")
        self.concurrency = settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
        self.processes = settings.getint("API_CRAWL_PROCESSES")

    # -- checks ----------------------------------------------------------------------------
    def refused(self, urls: list[str]) -> Reply | None:
        """403 naming the first URL the network policy refuses, before anything is fetched."""
        found = refused_seeds(urls, self.allow)
        if not found:
            return None
        url, why = found[0]
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        return fail(403, f"{url}{more}: refused by the network policy ({why}): nothing was fetched")

    def new_job(self, kind: str, key: str, urls: list[str], formats: list[str], **fields: Any) -> Job:
        return Job(id=self.book.new_id(), kind=kind, key=key, created=time.time(), urls=urls, formats=formats,
                   **fields)

    def track(self, job: Job, ask: asks.ScrapeAsk) -> Reply | None:
        """Make ``job`` a tracked one when its formats ask changeTracking:
        its crawl kept, re-crawled when it has pages (``tracking.py``);
        409 while another job of that crawl runs."""
        if ask.track is None:
            return None
        job.tracked = tracked_name(job.key, job.kind, job.urls[0], ask.track)
        job.track_diff = ask.track_diff
        job.settings["RECRAWL_GONE_AFTER"] = 1
        if any(j.tracked == job.tracked for j in self.book.running(job.key, ("crawl", "scrape"))):
            return fail(409, "a job tracking the changes of this URL (and tag) is running: wait for it to end")
        store = self.runner.store(job)
        if store is not None:
            try:
                if store.count_pages():
                    job.spider = "recrawl"
            finally:
                store.close()
        return None

    # -- scrape and map: one synchronous job -------------------------------------------
    def _run_sync(self, job: Job, timeout: float) -> bool:
        """Start ``job`` and wait for it; False when it ran out of time (it is stopped)."""
        self.launch(job)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            current = self.book.get(job.id)
            if current is None or current.status != ACTIVE:
                return True
            time.sleep(0.05)
        self.runner.stop_now(job)
        return False

    def scrape(self, key: str, body: Any) -> Reply:
        ask = asks.read_scrape(body)
        url = asks.read_url(body.get("url"))
        refused = self.refused([url])
        if refused:
            return refused
        job = self.new_job("scrape", key, [url], ask.formats, args={"sitemaps": "0"}, links=False,
                           warnings=ask.warnings)
        busy = self.track(job, ask)
        if busy:
            return busy
        try:
            if not self._run_sync(job, ask.timeout or self.scrape_timeout):
                return fail(408, f"the scrape of {url} took longer than {ask.timeout or self.scrape_timeout:g} s",
                            code="SCRAPE_TIMEOUT")
            store = self.runner.store(job)
            page: dict[str, Any] | None = None
            links: list[str] = []
            found: dict[str, dict[str, Any]] = {}
            if store is not None:
                try:
                    page, links = self._final_page(store, url, "links" in ask.formats)
                    found = changes_by_url(store, job.created) if job.tracked else {}
                finally:
                    store.close()
            if page is None:
                return fail(500, f"{url} could not be fetched: {self.runner.last_line(job) or 'no answer'}",
                            code="SCRAPE_FAILED")
            doc = document(page, ask.formats, job.id, links, source=url)
            if job.tracked:
                doc["changeTracking"] = change_tracking(page, found.get(page["url"]), job.track_diff)
            if ask.warnings:
                doc["warning"] = "; ".join(ask.warnings)
            return 200, {"success": True, "data": doc}
        finally:
            self.runner.purge(job)

    @staticmethod
    def _final_page(store: Any, url: str, links: bool) -> tuple[dict[str, Any] | None, list[str]]:
        page = store.get_page(url)
        for _ in range(MAX_HOPS):
            if page is None or not 300 <= int(page.get("status") or 0) < 400:
                break
            targets = store.outlinks(page["url"])
            if len(targets) != 1:
                break
            page = store.get_page(targets[0]["url"]) or page
        if page is None:
            return None, []
        return page, [link["url"] for link in store.outlinks(page["url"])] if links else []

    def map(self, key: str, body: Any, v1: bool = False) -> Reply:
        ask = asks.read_map(body, 100_000)
        refused = self.refused([ask.url])
        if refused:
            return refused
        timeout = body.get("timeout") if isinstance(body.get("timeout"), int) and body["timeout"] > 0 else None
        settings = {"FRONTIER_MAX_PAGES_PER_SITE": self.map_pages, "CLOSESPIDER_PAGECOUNT": self.map_pages}
        job = self.new_job("map", key, [ask.url], [], args={"follow": "all", "scope": ask.scope,
                                                          "sitemaps": "1" if ask.sitemaps else "0"},
                           settings=settings, links=ask.links)
        try:
            finished = self._run_sync(job, timeout / 1000 if timeout else self.scrape_timeout)
            store = self.runner.store(job)
            found: dict[str, str | None] = {}
            if store is not None:
                try:
                    found = self._mapped(store, ask)
                finally:
                    store.close()
            links: list[Any] = [u if v1 else {"url": u, **({"title": t} if t else {})}
                                for u, t in found.items()][:ask.limit]
            reply: dict[str, Any] = {"success": True, "links": links}
            if not finished:
                reply["warning"] = "the map ran out of time: the URLs found until then"
            return 200, reply
        finally:
            self.runner.purge(job)

    @staticmethod
    def _mapped(store: Any, ask: asks.MapAsk) -> dict[str, str | None]:
        seed_host = ask.url.split("/", 3)[2].lower()
        seed_site = url_site(ask.url)
        found: dict[str, str | None] = {}
        pages = {p["url"]: p for p in store.iter_pages()}
        for url in store.stored_urls():
            found[url] = pages.get(url, {}).get("title") or None
        if ask.links:
            for link in store.iter_links():
                found.setdefault(link["dst"], None)
        for url in store.listed_urls():
            found.setdefault(url, None)

        def inside(url: str) -> bool:
            host = url.split("/", 3)[2].lower() if url.count("/") >= 2 else ""
            return host == seed_host if ask.scope == "host" else url_site(url) == seed_site

        search = (ask.search or "").lower()
        return {u: t for u, t in found.items()
                if inside(u) and (not search or search in u.lower() or search in (t or "").lower())}

    # -- crawls and batch scrapes --------------------------------------------------------
    def crawl(self, key: str, body: Any, base: str) -> Reply:
        ask = asks.read_crawl(body, self.crawl_limit)
        refused = self.refused([ask.url])
        if refused:
            return refused
        busy = self.busy(key) or self.hook_refused(ask.webhook)
        if busy:
            return busy
        args = {"follow": "all", "scope": ask.scope, "sitemaps": "1" if ask.sitemaps else "0"}
        # The worker stops at the limit's page (CLOSESPIDER_PAGECOUNT counts the
        # pages it stored); the frontier's cap, which counts every URL a site
        # admits (its sitemap files too), bounds what is queued beyond that.
        settings: dict[str, Any] = {"FRONTIER_MAX_PAGES_PER_SITE": ask.limit + CAP_MARGIN,
                                    "CLOSESPIDER_PAGECOUNT": ask.limit}
        if ask.depth:
            settings["DEPTH_LIMIT"] = ask.depth
        if ask.delay is not None:
            settings["DOWNLOAD_DELAY"] = max(ask.delay, self.delay)
        if ask.concurrency is not None:
            settings["CONCURRENT_REQUESTS_PER_DOMAIN"] = min(ask.concurrency, self.concurrency)
        if self.processes > 1:
            settings["CRAWL_PROCESSES"] = self.processes
            # Each worker's count is its own: the frontier's cap holds the limit.
            settings.update(FRONTIER_MAX_PAGES_PER_SITE=ask.limit, CLOSESPIDER_PAGECOUNT=ask.limit)
        job = self.new_job("crawl", key, [ask.url], ask.scrape.formats, args=args, settings=settings,
                           links=ask.links and ask.depth != 0, warnings=ask.warnings, webhook=ask.webhook,
                           limit=ask.limit)
        busy = self.track(job, ask.scrape)
        if busy:
            return busy
        if ask.webhook:
            job.settings["WEBHOOK_EVENTS"] = "pages"
        if ask.allow or ask.deny:
            directory = self.runner.directory(job)
            directory.mkdir(parents=True, exist_ok=True)
            rules = directory / "rules.json"
            rules.write_text(json.dumps({"allow": ask.allow, "deny": ask.deny}), encoding="utf-8")
            job.args["rules"] = str(rules)
        self.launch(job)
        return 200, {"success": True, "id": job.id, "url": f"{base}/v2/crawl/{job.id}"}

    def batch(self, key: str, body: Any, base: str) -> Reply:
        urls, invalid, ask, webhook = asks.read_batch(body, self.crawl_limit)
        refused = self.refused(urls)
        if refused:
            return refused
        busy = self.busy(key) or self.hook_refused(webhook)
        if busy:
            return busy
        job = self.new_job("batch", key, urls, ask.formats, args={"sitemaps": "0", "scope": "any"}, links=False,
                           warnings=ask.warnings, invalid=invalid, webhook=webhook)
        if webhook:
            job.settings["WEBHOOK_EVENTS"] = "batch"
        self.launch(job)
        reply: dict[str, Any] = {"success": True, "id": job.id, "url": f"{base}/v2/batch/scrape/{job.id}"}
        if invalid:
            reply["invalidURLs"] = invalid
        return 200, reply

    def hook_refused(self, webhook: dict[str, Any] | None) -> Reply | None:
        """400 for a webhook this server cannot post to (no secret, a bad
        URL); 403 for one the network policy refuses."""
        if not webhook:
            return None
        from crawler.config import ConfigError
        from crawler.webhooks.extension import make_deliverer

        try:
            make_deliverer(self.book.client, "check", webhook["url"], self.settings)
        except ConfigError as exc:
            return fail(403 if "network policy" in str(exc) else 400, f"webhook: {exc}")
        return None

    def launch(self, job: Job) -> None:
        """Save ``job`` and start its worker; a start that fails ends it failed."""
        self.book.save(job)
        try:
            self.runner.start(job)
        except Exception as exc:
            self.book.update(job.id, status="failed", error=f"its worker did not start: {exc}",
                             finished=time.time(), expires=time.time() + self.runner.ttl)
            raise

    def busy(self, key: str) -> Reply | None:
        running = self.book.running(key)
        if len(running) >= self.key_crawls:
            return fail(429, f"this key has {len(running)} crawls running, its most (API_KEY_CRAWLS); "
                             "wait for one to end or cancel one")
        return None

    def job_of(self, key: str, job_id: str, kind: tuple[str, ...]) -> Job | None:
        job = self.book.get(job_id)
        return job if job is not None and job.key == key and job.kind in kind else None

    def status(self, key: str, job_id: str, skip: int, base: str, path: str) -> Reply:
        job = self.job_of(key, job_id, ("crawl",) if path == "crawl" else ("batch",))
        if job is None:
            return fail(404, f"no job {job_id}")
        if job.status == ACTIVE:
            self.runner.sync(job)
        count = self.book.result_count(job.id)
        urls = self.book.results(job.id, skip, self.page_size)
        docs = []
        store = self.runner.store(job) if urls else None
        try:
            found = changes_by_url(store, job.created) if job.tracked and store is not None else {}
            for url in urls:
                page = store.get_page(url) if store is not None else None
                if page is not None and store is not None:
                    links = [link["url"] for link in store.outlinks(url)] if "links" in job.formats else None
                    doc = document(page, job.formats, job.id, links)
                    if job.tracked:
                        doc["changeTracking"] = change_tracking(page, found.get(url), job.track_diff)
                        if doc["changeTracking"]["changeStatus"] == "removed" and "markdown" in doc:
                            doc["markdown"] = ""
                    docs.append(doc)
        finally:
            if store is not None:
                store.close()
        status = "cancelled" if job.cancelled else job.status
        pending = self.runner.pending(job) if job.status == ACTIVE else 0
        more = skip + len(urls) < count or job.status == ACTIVE
        route = "crawl" if path == "crawl" else "batch/scrape"
        reply: dict[str, Any] = {
            "success": True, "status": status, "completed": count, "total": count + pending,
            "creditsUsed": count, "expiresAt": _iso(job.expires or job.created + self.runner.ttl),
            "next": f"{base}/v2/{route}/{job.id}?skip={skip + len(urls)}" if more else None, "data": docs}
        if job.warnings:
            reply["warning"] = "; ".join(job.warnings)
        if job.error:
            reply["error"] = job.error
        return 200, reply

    def cancel(self, key: str, job_id: str, path: str) -> Reply:
        job = self.job_of(key, job_id, ("crawl",) if path == "crawl" else ("batch",))
        if job is None:
            return fail(404, f"no job {job_id}")
        if not self.runner.cancel(job):
            return fail(409, f"job {job_id} has ended ({job.status})")
        return 200, {"success": True, "status": "cancelled"}

    def errors(self, key: str, job_id: str) -> Reply:
        job = self.job_of(key, job_id, ("crawl", "batch"))
        if job is None:
            return fail(404, f"no job {job_id}")
        store = self.runner.store(job)
        errors = []
        if store is not None:
            try:
                for page in store.iter_pages():
                    if page.get("state") == "E":
                        errors.append({"id": job.id, "url": page["url"], "error": page.get("error") or "",
                                       "timestamp": _iso(page.get("fetched_at")), "code": str(page.get("status") or "")})
            finally:
                store.close()
        return 200, {"success": True, "errors": errors, "robotsBlocked": []}

    def active(self, key: str) -> Reply:
        crawls = [{"id": j.id, "teamId": key, "url": j.urls[0] if j.urls else "", "options": {"formats": j.formats}}
                  for j in self.book.running(key, ("crawl",))]
        return 200, {"success": True, "crawls": crawls}
