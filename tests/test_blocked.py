"""Bot walls (crawler/reading/blocked.py, the chain's ``blocked`` step):
told from content, never stored as a page, retried, recorded when they
never give way."""

from __future__ import annotations

import collections
import sys

import pytest

from crawler.reading.blocked import WALL_LINKS, WALL_TEXT, block_reason
from crawler.store.sqlite import SQLiteStore
from tests.support.crawl import run_crawl
from tests.support.servers import launch

CLOUDFLARE = ('<html><head><title>Just a moment...</title></head><body><div id="cf-wrapper">'
              '<noscript>Enable JavaScript and cookies to continue</noscript>'
              '<script>window._cf_chl_opt={cvId: "3"};</script></div></body></html>')
RECAPTCHA_WALL = ('<html><head><title>Verification</title></head><body><form action="/verify">'
                  '<div class="g-recaptcha" data-sitekey="x"></div><button>Continue</button></form></body></html>')
AKAMAI = ("<html><head><title>Access Denied</title></head><body><h1>Access Denied</h1>You don't have permission "
          'to access "http://www.example.com/" on this server.<p>Reference #18.2d351ab8.1557333295</p></body></html>')
ARTICLE_WITH_CAPTCHA = ('<html><head><title>How captchas work</title></head><body><article>'
                        + "<p>A captcha asks a visitor to prove they are human. " * 60
                        + '</article><form><div class="g-recaptcha"></div></form></body></html>')


@pytest.mark.parametrize(("title", "text", "html", "headers", "kind"), [
    ("Just a moment...", 60, CLOUDFLARE, None, "challenge"),
    ("Verification", 30, RECAPTCHA_WALL, None, "captcha"),
    ("Access Denied", 150, AKAMAI, None, "denied"),
    ("Attention Required! | Cloudflare", 150, "<p>Sorry, you have been blocked</p>", None, "denied"),
    ("", 0, "<html><body>x</body></html>", {b"cf-mitigated": b"challenge"}, "challenge"),
    ("Pardon Our Interruption", 200, "<p>Pardon Our Interruption</p>", None, "challenge"),
    ("Request unsuccessful", 80, "<p>Request unsuccessful. Incapsula incident ID: 1-2</p>", None, "challenge"),
    ("Blocked", 40, '<script src="https://geo.captcha-delivery.com/captcha/"></script>', None, "challenge"),
])
def test_walls_are_told(title, text, html, headers, kind):
    assert block_reason(title, text, 1, html, headers) == kind


@pytest.mark.parametrize(("title", "text", "links", "html"), [
    ("How captchas work", 3000, 3, ARTICLE_WITH_CAPTCHA),  # a captcha on a page of content is no wall
    ("Contact us", 300, WALL_LINKS + 1, RECAPTCHA_WALL),  # a site's page with a captcha form: its navigation
    ("Shop", 20, 40, '<script src="/cdn-cgi/challenge-platform/scripts/jsd/main.js"></script>'),  # on every page
    ("Shop", 20, 2, '<script src="/_Incapsula_Resource?SWJIYLWA=719d"></script>'),
    ("Access denied: a history of the 403 status", WALL_TEXT + 1, 0, "<p>...</p>"),
    ("Home", 40, 0, "<p>Welcome</p>"),
    ("Just a moment in time", 50, 0, "<p>a photo essay</p>"),
    ("", 0, 0, ""),
])
def test_content_is_not_a_wall(title, text, links, html):
    assert block_reason(title, text, links, html, {}) is None


def wall_server(tmp_path, *args: str):
    log = tmp_path / "requests.jsonl"
    return launch([sys.executable, "-m", "tests.support.limited_server", "--hosts", "127.0.0.2", "--log", str(log),
                   "--limit", "1000", "--latency", "0", "--per-request", "0", *args], log)


@pytest.mark.slow
def test_walls_are_retried_never_stored_and_recorded_when_they_stay(tmp_path, frontier_settings):
    """Pages 3, 6, 9 ... answer their first request with a challenge page;
    page 7 answers one every time. The walls' link (/trap) is never
    followed; every other page is stored once, with its own text."""
    server = wall_server(tmp_path, "--pages", "20", "--wall-every", "3", "--wall-forever", "7")
    try:
        result = run_crawl(server, tmp_path / "crawl", [f"seeds={server.url('/', host='127.0.0.2')}", "follow=all"],
                           {**frontier_settings, "DOWNLOAD_DELAY": 0, "RETRY_TIMES": 2, "FRONTIER_RETRY_BACKOFF": 0.1,
                            "ADAPTIVE_RATE_PAUSE": 0.2, "SITEMAP_ENABLED": False})
        log = server.requests(0)
    finally:
        server.stop()
    assert result.returncode == 0, result.log[-3000:]
    asked = collections.Counter(r["path"] for r in log if r["path"] != "/robots.txt")
    walled_once = [f"/p/{n}" for n in range(3, 21, 3)]
    expected = {"/": 1, "/p/7": 3, **{f"/p/{n}": 1 for n in range(1, 21) if n != 7}, **{p: 2 for p in walled_once}}
    assert dict(asked) == expected  # /trap never
    with SQLiteStore(result.store_path) as store:
        rows = {r["url"].rsplit(":", 1)[1].split("/", 1)[1]: r for r in store.iter_pages()}
    page7 = rows.pop("p/7")
    assert (page7["state"], page7["error"], page7["text"]) == ("E", "blocked: challenge", "")
    assert all(r["state"] == "C" and "Checking your browser" not in (r["text"] or "") for r in rows.values())
    assert sorted(rows) == sorted(["", *(f"p/{n}" for n in range(1, 21) if n != 7)])
    assert "'blocked/challenge': 9" in result.log  # six walls given way, page 7 three times
    assert "'blocked/gave_up': 1" in result.log
