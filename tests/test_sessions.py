"""Per-site sessions (-a sites=sites.yaml): headers, cookies, a login kept
and re-established, a logout never followed, secrets kept out of the log,
the store and Redis; a sites file that cannot work refused at start."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest
import redis

from crawler.sessions.config import SitesError, parse_sites
from crawler.store.sqlite import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import crawl_cmd
from tests.support.servers import launch

PASSWORD = "pw-7f3a9c1e"
API_KEY = "key-51d2e8"


def sites_file(tmp_path, origin: str, password_file) -> str:
    f = tmp_path / "sites.yaml"
    f.write_text(f"""sites:
  - site: {origin}
    headers:
      X-Team: crawl
      X-Api-Key: {{env: SITE_API_KEY}}
    login:
      url: {origin}/login
      fields:
        username: {{env: SITE_USER}}
        password: {{file: {password_file}}}
""")
    return str(f)


def secret_file(tmp_path, mode: int = 0o600):
    f = tmp_path / "password"
    f.write_text(PASSWORD + "\n")
    f.chmod(mode)
    return f


# -- the file -----------------------------------------------------------------------------------------


def test_a_file_is_read_with_its_secrets(tmp_path):
    sessions = parse_sites(open(sites_file(tmp_path, "HTTP://Intranet.Example:80", secret_file(tmp_path))).read(),
                           "sites.yaml", env={"SITE_USER": "crawler", "SITE_API_KEY": API_KEY})
    [s] = sessions.values()
    assert (s.origin, s.headers, s.login_fields, s.logged_out) == (
        "http://intranet.example", {"X-Team": "crawl", "X-Api-Key": API_KEY},
        {"username": "crawler", "password": PASSWORD}, "/login")
    assert s.never_fetched("/account/logout") and s.never_fetched("/sign-out") and not s.never_fetched("/p/1")


@pytest.mark.parametrize(("text", "problem"), [
    ("sites:\n  - site: http://a.example\n    login:\n      url: http://a.example/login\n      fields:\n"
     "        password: hunter2\n",
     "sites.yaml line 6: login field password is a secret: give it as {env: NAME} or {file: PATH}, not in the file"),
    ("sites:\n  - site: http://a.example\n    headers:\n      Authorization: Bearer x\n",
     "sites.yaml line 4: header Authorization is a secret: give it as {env: NAME} or {file: PATH}, not in the file"),
    ("sites:\n  - site: http://a.example\n    headers:\n      X-Key: {env: NOT_SET_ANYWHERE}\n",
     "sites.yaml line 4: header X-Key: the environment variable NOT_SET_ANYWHERE is not set"),
    ("sites:\n  - site: ftp://a.example\n", "sites.yaml line 2: site 'ftp://a.example' is not an http(s) origin "
                                            "(scheme://host[:port])"),
    ("sites:\n  - site: http://a.example\n    logn: {}\n",
     "sites.yaml line 2: unknown key 'logn' (expected cookies, headers, login, never, site)"),
    ("sites:\n  - site: http://a.example\n    login:\n      url: http://b.example/login\n      fields: {u: x}\n",
     "sites.yaml line 4: login url 'http://b.example/login' is not on http://a.example"),
    ("sites: [\n", "sites.yaml line 2: not YAML (expected the node content, but found '<stream end>')"),
    ("site: http://a.example\n", "sites.yaml: expected a mapping with a list under 'sites:'"),
])
def test_a_bad_file_names_its_line(text, problem):
    with pytest.raises(SitesError) as caught:
        parse_sites(text, "sites.yaml", env={})
    assert str(caught.value) == problem


def test_a_secret_file_others_may_read_is_refused(tmp_path):
    f = secret_file(tmp_path, 0o644)
    with pytest.raises(SitesError) as caught:
        parse_sites(f"sites:\n  - site: http://a.example\n    cookies:\n      sid: {{file: {f}}}\n", "s.yaml", env={})
    assert str(caught.value) == f"s.yaml line 4: cookie sid: {f} is readable by others (chmod 600 {f})"


# -- a crawl behind a login --------------------------------------------------------------------------------


def login_server(tmp_path, *args: str):
    log = tmp_path / "requests.jsonl"
    return launch([sys.executable, "-m", "tests.support.login_server", "--hosts", "127.0.0.2", "--log", str(log),
                   "--user", "crawler", "--password", PASSWORD, *args], log)


@pytest.mark.slow
def test_a_site_behind_a_login_is_crawled_whole_and_its_secrets_kept(tmp_path, frontier_settings, redis_url):
    """30 member pages behind a login whose session ends every 12 pages;
    every page links to /logout. Every page is stored once with its own
    text, the session is re-established when it ends, /logout is never
    asked, every request carries the API key, and neither secret reaches
    the log, the store or Redis."""
    server = login_server(tmp_path, "--pages", "30", "--expire-after", "12")
    origin = server.url("/", host="127.0.0.2").rstrip("/")
    try:
        cmd = crawl_cmd([f"seeds={origin}/", "follow=all", f"sites={sites_file(tmp_path, origin, secret_file(tmp_path))}"],
                        {**frontier_settings, "DOWNLOAD_DELAY": 0, "SITEMAP_ENABLED": False, "RETRY_TIMES": 3,
                         "FRONTIER_RETRY_BACKOFF": 0.1, "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
                         "WARC_DIR": str(tmp_path / "warc")},
                        tmp_path / "crawl")
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "SITE_USER": "crawler", "SITE_API_KEY": API_KEY})
        log = server.requests(0)
    finally:
        server.stop()
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    with SQLiteStore(tmp_path / "crawl" / f"{frontier_settings['CRAWL_NAME']}.sqlite3") as store:
        rows = {r["url"][len(origin):]: r for r in store.iter_pages()}
    pages = ["/", *(f"/p/{n}" for n in range(1, 31))]
    assert sorted(u for u, r in rows.items() if r["state"] == "C") == sorted(pages)
    assert all("Log in" not in (rows[p]["title"] or "") for p in pages)
    asked = collections.Counter(r["path"] for r in log)
    assert asked["/logout"] == 0
    posts = [r for r in log if r["path"] == "/login" and r["method"] == "POST"]
    assert len(posts) >= 3 and all(r["status"] == 302 for r in posts)  # 31 pages, a session each 12
    assert {r["key"] for r in log if r["path"] != "/robots.txt"} == {API_KEY}
    served = [r for r in log if r["path"] in pages and r["status"] == 200]
    # Each page served once to the crawl; "/" once more for each login, whose answer lands there.
    assert collections.Counter(r["path"] for r in served) == {**{p: 1 for p in pages}, "/": 1 + len(posts)}
    assert "'session/logins': " in out and "'session/expired': " in out
    for secret in (PASSWORD, API_KEY):
        assert secret not in out
        assert not any(secret in str(v) for r in rows.values() for v in r.values())
    from warcio.archiveiterator import ArchiveIterator

    kept = []
    for path in sorted((tmp_path / "warc").rglob("*.warc.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type in ("request", "response") and record.http_headers is not None:
                    kept += [(record.rec_type, k, v) for k, v in record.http_headers.headers
                             if k.lower() in ("cookie", "set-cookie", "x-api-key")]
                body = record.content_stream().read()
                assert PASSWORD.encode() not in body and API_KEY.encode() not in body
    assert kept and {v for _, _, v in kept} == {"[redacted]"}
    assert {k.lower() for _, k, _ in kept} == {"cookie", "set-cookie", "x-api-key"}
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(f"{frontier_settings['CRAWL_NAME']}*"):
        kind = client.type(key)
        dump = client.dump(key) or b""
        assert PASSWORD.encode() not in dump and API_KEY.encode() not in dump, (key, kind)


@pytest.mark.slow
def test_a_bad_sites_file_is_one_line_and_exit_1(tmp_path):
    f = tmp_path / "sites.yaml"
    f.write_text("sites:\n  - site: http://a.example\n    login:\n      url: http://a.example/login\n"
                 "      fields:\n        password: hunter2\n")
    proc = subprocess.run([sys.executable, "-m", "scrapy", "crawl", "site", "-a", "seeds=http://a.example/",
                           "-a", f"sites={f}", "-s", f"CRAWL_DIR={tmp_path}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"Error: {f} line 6: login field password is a secret: give it as {{env: NAME}} or {{file: PATH}}, "
        "not in the file"]


@pytest.mark.slow
def test_a_worker_that_joins_takes_the_crawls_sites_file(tmp_path, frontier_settings):
    """The first worker stops after 5 pages; a second joins without -a sites
    and finishes the crawl logged in, from the recorded file and its own
    environment. A third, without the secrets in its environment, stops
    with the reason."""
    server = login_server(tmp_path, "--pages", "20")
    origin = server.url("/", host="127.0.0.2").rstrip("/")
    env = {**os.environ, "SITE_USER": "crawler", "SITE_API_KEY": API_KEY}
    settings = {**frontier_settings, "DOWNLOAD_DELAY": 0, "SITEMAP_ENABLED": False}
    sites = sites_file(tmp_path, origin, secret_file(tmp_path))
    try:
        first = subprocess.run(crawl_cmd([f"seeds={origin}/", "follow=all", f"sites={sites}"],
                                         {**settings, "CLOSESPIDER_PAGECOUNT": 5}, tmp_path / "crawl"),
                               cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
        without = {k: v for k, v in env.items() if k != "SITE_API_KEY"}
        third = subprocess.run(crawl_cmd([], settings, tmp_path / "crawl"), cwd=ROOT, capture_output=True,
                               text=True, timeout=300, env=without)
        second = subprocess.run(crawl_cmd([], settings, tmp_path / "crawl"), cwd=ROOT, capture_output=True,
                                text=True, timeout=300, env=env)
        log = server.requests(0)
    finally:
        server.stop()
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    out3 = third.stdout + third.stderr
    assert "header X-Api-Key: the environment variable SITE_API_KEY is not set: this worker cannot crawl those " \
           "sites as the crawl does; it stops" in out3
    assert "'finish_reason': 'sites_file_unusable'" in out3
    # Not the crawl's end: a failure, exit 1 (a supervisor or service manager starts it again).
    assert third.returncode == 1
    assert third.stderr.strip().splitlines()[-1] == "Error: the crawl stopped: sites_file_unusable (see the log above)"
    out2 = second.stdout + second.stderr
    assert second.returncode == 0, out2[-3000:]
    assert "Sessions for 1 sites from the crawl's recorded sites file" in out2
    with SQLiteStore(tmp_path / "crawl" / f"{frontier_settings['CRAWL_NAME']}.sqlite3") as store:
        stored = sorted(r["url"][len(origin):] for r in store.iter_pages() if r["state"] == "C")
    assert stored == sorted(["/", *(f"/p/{n}" for n in range(1, 21))])
    assert all(r["status"] == 200 for r in log if r["path"].startswith("/p/"))  # never sent without a session
