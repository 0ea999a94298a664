"""Webhooks: a crawl's events posted to a real receiver on loopback, in
order and at least once across a worker SIGKILLed mid-crawl and a receiver
that fails its first posts; signed, so that a forged body is told apart;
and an API crawl's own webhook, through the Firecrawl SDK."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from firecrawl import Firecrawl

from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.api import KEY, api_site, serve
from tests.support.crawl import crawl_cmd, until
from tests.support.servers import launch, start_server
from tests.support.webhook_receiver import verify

SECRET = "webhook-secret-for-tests-0123456789"


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "www"
    api_site(root, sections=6, per_section=10)
    server = start_server(tmp_path, hosts="127.0.0.1", root=root, validators=True)
    yield server
    server.stop()


def receiver(tmp_path: Path, fail_first: int = 0):
    log = tmp_path / "posts.jsonl"
    return launch([sys.executable, "-m", "tests.support.webhook_receiver", "--host", "127.0.0.2", "--log", str(log),
                   "--fail-first", str(fail_first), "--secret", SECRET], log)


def delivered(posts):
    """The events the receiver took (2xx), each once, in the order first taken."""
    out, seen = [], set()
    for post in posts:
        if post["status"] == 200 and post["event_id"] not in seen:
            seen.add(post["event_id"])
            out.append(json.loads(post["body"]))
    return out


def stream_id(event_id: str) -> tuple[int, int]:
    ms, seq = event_id.split("-")
    return int(ms), int(seq)


def test_every_event_once_in_order_across_a_sigkill_and_a_failing_receiver(tmp_path, site):
    hook = receiver(tmp_path, fail_first=3)
    crawl_dir = tmp_path / "crawl"
    settings = {"WEBHOOK_URL": hook.url("/hooks/crawl", host="127.0.0.2"), "WEBHOOK_TIMEOUT": 2,
                "WEBHOOK_RETRY_MIN": 0.2, "WEBHOOK_RETRY_MAX": 1, "WEBHOOK_FLUSH_TIMEOUT": 60,
                "DOWNLOAD_DELAY": 0.05, "FRONTIER_LEASE_TIMEOUT": 5, "FRONTIER_HEARTBEAT_INTERVAL": 1,
                "STORE_BATCH_SIZE": 5}
    env = {**os.environ, "CRAWLER_WEBHOOK_SECRET": SECRET}
    first = subprocess.Popen(crawl_cmd([f"seeds={site.url('/')}", "follow=all"], settings, crawl_dir), cwd=ROOT,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until(lambda: len(site.requests(0)) >= 8, 60, "the first worker to crawl")
        second = subprocess.Popen(crawl_cmd([], settings, crawl_dir), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        until(lambda: len(site.requests(0)) >= 20, 60, "both workers to crawl")
        first.send_signal(signal.SIGKILL)
        out, _ = second.communicate(timeout=240)
        assert second.returncode == 0, out[-3000:]
    finally:
        first.kill()
        first.wait()
    posts = hook.requests(0)
    hook.stop()
    assert [p["status"] for p in posts[:3]] == [503, 503, 503]
    assert posts[0]["event_id"] == posts[1]["event_id"] == posts[2]["event_id"] == posts[3]["event_id"]
    assert all(p["valid"] for p in posts) and all(p["path"] == "/hooks/crawl" for p in posts)
    events = delivered(posts)
    ids = [e["eventId"] for e in events]
    assert ids == sorted(ids, key=stream_id)  # the crawl's order
    assert events[0]["type"] == "crawl.started" and events[-1]["type"] == "crawl.completed"
    assert {e["type"] for e in events[1:-1]} == {"crawl.page"}
    assert all(e["id"] == "site" and e["crawl"] == "site" for e in events)
    with SQLiteStore(crawl_dir / "site.sqlite3") as store:
        stored = set(store.stored_urls())
    assert len(stored) == 67
    announced = [e["data"][0]["metadata"]["url"] for e in events if e["type"] == "crawl.page"]
    assert set(announced) == stored  # every stored page announced, none that is not stored
    # A page the killed worker stored but had not acknowledged is fetched and
    # announced again (at least once): a few at most, the batch it held.
    assert len(announced) - len(set(announced)) <= 5
    assert sum(p["status"] == 200 for p in posts) - len(events) <= 1  # an event posted twice: the one in flight


def test_a_forged_body_or_a_wrong_secret_does_not_verify(tmp_path):
    from crawler.webhooks.delivery import sign

    body = b'{"type":"crawl.page"}'
    header = sign(SECRET.encode(), body)
    assert verify(SECRET.encode(), body, header)
    assert not verify(SECRET.encode(), body.replace(b"page", b"pages"), header)
    assert not verify(b"another secret", body, header)
    assert not verify(SECRET.encode(), body, header.replace("sha256=", "sha1="))


def test_a_webhook_that_cannot_work_stops_the_crawl_before_it_starts(tmp_path, site):
    base = {"WEBHOOK_URL": "http://127.0.0.2:9/hook"}
    cases = [
        ({}, "WEBHOOK_URL needs a secret to sign with"),
        ({"CRAWLER_WEBHOOK_SECRET": SECRET, "_NETWORK": "127.0.0.1/32"}, "refused by the network policy"),
    ]
    for env_more, words in cases:
        settings = dict(base)
        if "_NETWORK" in env_more:
            settings["NETWORK_ALLOWLIST"] = env_more.pop("_NETWORK")
        env = {k: v for k, v in os.environ.items() if k != "CRAWLER_WEBHOOK_SECRET"}
        env.update(env_more)
        done = subprocess.run(crawl_cmd([f"seeds={site.url('/')}"], settings, tmp_path / "c"), cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1 and words in done.stderr, done.stderr[-2000:]
        assert site.requests(0) == []


def test_an_api_crawls_own_webhook(tmp_path, site):
    hook = receiver(tmp_path, fail_first=1)
    api = serve(tmp_path / "crawl", {"NETWORK_ALLOWLIST": "127.0.0.0/8", "WEBHOOK_RETRY_MIN": 0.2},
                env={"CRAWLER_WEBHOOK_SECRET": SECRET})
    try:
        app = Firecrawl(api_key=KEY, api_url=api.url)
        job = app.crawl(site.url("/s2/"), limit=5, sitemap="skip", poll_interval=1,
                        webhook={"url": hook.url("/api-hook", host="127.0.0.2"), "metadata": {"run": "7"},
                                 "events": ["started", "page", "completed"]})
        assert job.status == "completed" and len(job.data) == 5
        until(lambda: any(json.loads(p["body"])["type"] == "crawl.completed" and p["status"] == 200
                          for p in hook.requests(0)), 60, "the completed event")
    finally:
        assert api.stop() == 0
    posts = hook.requests(0)
    hook.stop()
    events = delivered(posts)
    assert [e["type"] for e in events] == ["crawl.started"] + ["crawl.page"] * 5 + ["crawl.completed"]
    assert {e["id"] for e in events} == {job.id} and all(e["metadata"] == {"run": "7"} for e in events)
    assert sorted(e["data"][0]["metadata"]["url"] for e in events[1:-1]) == sorted(d.metadata.url for d in job.data)
    assert all(p["valid"] for p in posts)
