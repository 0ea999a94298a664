"""API jobs that outlive their processes: a crawl's worker killed, and the
server stopped and started again, with the Firecrawl SDK as the client."""

from __future__ import annotations

import collections
import signal

import psutil
import pytest
from firecrawl import Firecrawl

from tests.support.api import KEY, api_site, serve
from tests.support.crawl import until
from tests.support.servers import start_server


@pytest.fixture()
def site(tmp_path):
    root = tmp_path / "www"
    api_site(root, sections=6, per_section=10)
    server = start_server(tmp_path, hosts="127.0.0.2", root=root, validators=True)
    yield server
    server.stop()


def workers_of(api, job_id):
    found = []
    for proc in psutil.process_iter():  # children of the server, or of nobody once it is gone
        try:
            if f"CRAWL_NAME=api-{job_id}" in " ".join(proc.cmdline()) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            pass
    return found


def pages(site):
    return [r["path"] for r in site.requests(0) if r["path"] != "/robots.txt"]


SETTINGS = {"DOWNLOAD_DELAY": 0.1, "CONCURRENT_REQUESTS_PER_DOMAIN": 1, "FRONTIER_LEASE_TIMEOUT": 5,
            "FRONTIER_HEARTBEAT_INTERVAL": 1, "STORE_BATCH_SIZE": 5, "STORE_FLUSH_INTERVAL": 0.2}


def test_a_killed_worker_is_started_again_and_the_crawl_completes(tmp_path, site):
    api = serve(tmp_path / "crawl", SETTINGS)
    try:
        app = Firecrawl(api_key=KEY, api_url=api.url)
        started = app.start_crawl(site.url("/", host="127.0.0.2"), limit=40, sitemap="skip")
        until(lambda: len(pages(site)) >= 10, 60, "ten pages")
        (worker,) = workers_of(api, started.id)
        worker.send_signal(signal.SIGKILL)
        # One look a poll: two could see the dead worker, then no worker at all.
        until(lambda: (now := workers_of(api, started.id)) and now[0].pid != worker.pid, 60,
              "a new worker")
        until(lambda: app.get_crawl_status(started.id).status != "scraping", 120, "the crawl to end")
        job = app.get_crawl_status(started.id)
        urls = [d.metadata.url for d in job.data]
        assert job.status == "completed"
        assert len(urls) == len(set(urls)) == 40
        fetched = collections.Counter(pages(site))
        again = [p for p, n in fetched.items() if n > 1]
        # Fetched twice: at most what the killed worker had fetched and not yet
        # stored (a batch of STORE_BATCH_SIZE, or what waited the flush interval).
        assert len(again) <= 6 and max(fetched.values()) <= 2
        assert {u.split("/", 3)[3] for u in urls} <= {p.lstrip("/") for p in fetched}
    finally:
        assert api.stop() == 0


def test_a_stopped_server_resumes_its_crawls(tmp_path, site):
    api = serve(tmp_path / "crawl", SETTINGS)
    app = Firecrawl(api_key=KEY, api_url=api.url)
    started = app.start_crawl(site.url("/", host="127.0.0.2"), limit=50, sitemap="skip")
    until(lambda: len(pages(site)) >= 10, 60, "ten pages")
    assert api.stop() == 0  # SIGTERM: its worker stops after what it holds
    assert workers_of(api, started.id) == []
    stopped_at = len(pages(site))
    assert stopped_at < 45
    api = serve(tmp_path / "crawl", SETTINGS)
    try:
        app = Firecrawl(api_key=KEY, api_url=api.url)
        assert f"resumed 1 jobs: {started.id}" in api.output()
        job = app.get_crawl_status(started.id)
        until(lambda: app.get_crawl_status(started.id).status == "completed", 120, "the crawl to end")
        job = app.get_crawl_status(started.id)
        urls = [d.metadata.url for d in job.data]
        assert len(urls) == len(set(urls)) == 50
        fetched = collections.Counter(pages(site))
        assert max(fetched.values()) == 1  # a graceful stop: nothing fetched twice
    finally:
        assert api.stop() == 0


def test_a_job_record_altered_in_redis_starts_nothing(tmp_path, site):
    """A job is read back from Redis when a server resumes it: a record that
    names code to load, a faster pace or another argument is refused, and
    the job fails saying so; nothing is fetched."""
    import json as _json

    from scrapy.settings import Settings

    from crawler.redis.client import get_redis

    api = serve(tmp_path / "crawl", SETTINGS)
    app = Firecrawl(api_key=KEY, api_url=api.url)
    started = app.start_crawl(site.url("/", host="127.0.0.2"), limit=60, delay=1, sitemap="skip")
    until(lambda: len(pages(site)) >= 2, 60, "the crawl to start")
    assert api.stop() == 0
    client = get_redis(Settings({"CRAWL_DIR": str(tmp_path / "crawl")}), tmp_path / "crawl")
    key = f"{{api}}:job:{started.id}"
    record = _json.loads(client.get(key))
    record["settings"]["PAGE_STEPS"] = '{"os.system": 1}'
    client.set(key, _json.dumps(record))
    client.close()
    mark = len(pages(site))
    api = serve(tmp_path / "crawl", SETTINGS)
    try:
        status = Firecrawl(api_key=KEY, api_url=api.url).get_crawl_status(started.id)
        assert status.status == "failed"
        assert workers_of(api, started.id) == []
        assert len(pages(site)) == mark
        assert (f"API job {started.id}: not started: its record holds what the API does not make "
                f"(setting PAGE_STEPS=") in api.output()
        assert "resumed" not in api.output()
    finally:
        assert api.stop() == 0
