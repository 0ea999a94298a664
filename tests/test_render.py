"""``-a render``: pages whose content scripts build, rendered by Debian's
Chromium through Playwright, end to end (``scrapy crawl`` in a subprocess,
the application site of ``tests/support/app_server.py`` on 127.0.0.2, its
"outside" address 127.0.0.5 not in the allowed networks). Every request a
rendered page makes is checked against the server's own log: what was
fetched, how often; and against the store: what was kept."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.app_server import FRAMES, REF_CLASSES, REF_MENU, prose
from tests.support.crawl import crawl_cmd, run_crawl, stop_embedded_redis
from tests.support.servers import Server, launch
from tests.support.system import CHROMIUM, ensure_commands

pytestmark = pytest.mark.slow

DOCS = 8
ALLOW = "127.0.0.1/32,127.0.0.2/32,127.0.0.3/32"


def start_app(tmp: Path, docs: int = DOCS, hosts: str = "127.0.0.2,127.0.0.5", root: Path | None = None) -> Server:
    log = (tmp / "app-requests.jsonl").resolve()
    cmd = [sys.executable, "-m", "tests.support.app_server", "--hosts", hosts, "--log", str(log), "--docs", str(docs)]
    if root is not None:
        cmd += ["--root", str(root)]
    return launch(cmd, log)


@pytest.fixture(scope="module", autouse=True)
def _chromium() -> None:
    problem = ensure_commands(CHROMIUM)  # installed when absent
    if problem is not None:
        pytest.fail(f"Debian's Chromium {problem}")


@pytest.fixture
def app(tmp_path):
    server = start_app(tmp_path)
    yield server
    server.stop()


def stats_of(log: str) -> dict[str, object]:
    found = re.findall(r"Dumping Scrapy stats:\n(\{.*?\})\n", log, re.S)
    assert found, log[-3000:]
    return ast.literal_eval(re.sub(r"datetime\.datetime\([^)]*\)", "None", found[-1]))


def render_stats(stats: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in stats.items() if k.startswith("render/") and k not in (
        "render/browser_own_refused", "render/proxy_idle_connections")}


def pages(result, server: Server) -> dict[str, dict]:
    base = server.url("/", host="127.0.0.2")[:-1]
    with SQLiteStore(result.store_path) as store:
        return {p["url"][len(base):]: p for p in store.iter_pages()}


def crawl(server: Server, crawl_dir: Path, seeds: list[str], *args: str, **settings: object):
    base = {"NETWORK_ALLOWLIST": ALLOW, **settings}
    urls = ",".join(server.url(s, host="127.0.0.2") for s in seeds)
    result = run_crawl(server, crawl_dir, [f"seeds={urls}", *args], base, timeout=240)
    return result


def api(path: str) -> str:
    return "/api/route?path=" + path.replace("/", "%2F")


def test_an_app_shell_is_empty_without_rendering_and_whole_with_it(app, tmp_path):
    # render=never (the default): the shell's script never runs; the page
    # has no text of its own and no link, so the crawl ends there.
    never = crawl(app, tmp_path / "never", ["/"], "follow=all")
    assert never.returncode == 0, never.log[-3000:]
    assert Counter(never.fetched) == Counter(["/robots.txt", "/"])
    home = pages(never, app)["/"]
    assert home["rendered"] is None and home["title"] == "App"
    assert "render/pages" not in stats_of(never.log)
    stop_embedded_redis(tmp_path / "never")

    # render=always: the shell's script builds the home page's links and
    # each document's text, through requests the crawler made for it.
    # Two pages rendered at once (4 requests at a time to the site), and a
    # browser retired every 4 pages: the pages in flight in it finish there.
    always = crawl(app, tmp_path / "always", ["/"], "follow=all", "render=always", RENDER_PAGES_PER_BROWSER=4,
                   CONCURRENT_REQUESTS_PER_DOMAIN=4)
    assert always.returncode == 0, always.log[-3000:]
    docs = [f"/docs/{i}" for i in range(DOCS)]
    assert Counter(always.fetched) == Counter(
        ["/robots.txt", "/", "/static/app.js", api("/"), *docs, *(api(d) for d in docs)])
    stored = pages(always, app)
    assert set(stored) == {"/", *docs}
    assert {u: (p["rendered"], p["title"]) for u, p in stored.items()} == {
        "/": (True, "Home"), **{d: (True, f"Document {d[6:]}") for d in docs}}
    assert all("doc" + str(int(d[6:]) * 3) in stored[d]["text"] for d in docs)
    assert stored["/"]["page_type"] == "index" and {stored[d]["page_type"] for d in docs} == {"info"}
    assert stored["/"]["content_type"] == "text/html"
    stats = stats_of(always.log)
    assert render_stats(stats) == {
        "render/pages": 9, "render/paid_off": 9, "render/requests": 10, "render/cache_hits": 8,
        "render/browser_launches": 3}

    # The re-crawl renders as the crawl did (its meta): every page comes
    # back the same, none taken for changed by its empty shell.
    again = run_crawl(app, tmp_path / "always", ["all=1"], {"NETWORK_ALLOWLIST": ALLOW, "RENDER_SETTLE": 0.2},
                      timeout=240, spider="recrawl")
    assert again.returncode == 0, again.log[-3000:]
    assert Counter(again.fetched) == Counter(["/", "/static/app.js", api("/"), *docs, *(api(d) for d in docs)])
    stats = stats_of(again.log)
    assert (stats["render/pages"], stats.get("recrawl/changed", 0), stats["recrawl/unchanged"]) == (9, 0, 9)
    assert {u: p["rendered"] for u, p in pages(again, app).items()} == {u: True for u in stored}

    # The crawl's choice, shown by status; a worker asking another is refused.
    status = json.loads(subprocess.run([sys.executable, "-m", "scrapy", "status", "--json", "-s",
                                        f"CRAWL_DIR={tmp_path / 'always'}"], cwd=ROOT, capture_output=True,
                                       text=True, timeout=60).stdout)
    assert status["control"]["render"] == "always"
    refused = run_crawl(app, tmp_path / "always", ["render=never"], {"NETWORK_ALLOWLIST": ALLOW})
    assert refused.returncode == 1 and refused.fetched == []
    assert refused.log.strip().splitlines()[-1] == (
        "Error: crawl 'site' has -a render=always (recorded when it started); this worker asks -a render=never: "
        "join it with -a render=always (or without -a render), or start another crawl (-s CRAWL_NAME=...)")
    stop_embedded_redis(tmp_path / "always")


def test_auto_renders_the_shells_and_not_the_static_page(app, tmp_path):
    warc_dir = tmp_path / "warc"
    result = crawl(app, tmp_path / "auto", ["/static.html", "/"], "follow=all", "render=auto", WARC_DIR=warc_dir)
    assert result.returncode == 0, result.log[-3000:]
    docs = [f"/docs/{i}" for i in range(DOCS)]
    assert Counter(result.fetched) == Counter(
        ["/robots.txt", "/static.html", "/", "/static/app.js", api("/"), *docs, *(api(d) for d in docs)])
    stored = pages(result, app)
    assert {u: p["rendered"] for u, p in stored.items()} == {"/static.html": False, "/": True,
                                                             **{d: True for d in docs}}
    stats = stats_of(result.log)
    assert (stats["render/candidates"], stats["render/candidate/empty_app_root"], stats["render/pages"]) == (9, 9, 9)
    # What the rendered pages fetched is archived like the pages: a record
    # for each fetch the server saw (the shells, all the same bytes, as
    # revisits of the first).
    archived = Counter()
    for path in sorted(warc_dir.glob("*.warc.gz")):
        with path.open("rb") as f:
            for record in ArchiveIterator(f):
                if record.rec_type in ("response", "revisit"):
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    archived[uri[uri.index("/", 8):]] += 1
    assert archived == Counter(result.fetched)


def test_auto_stops_rendering_a_static_site_whose_script_only_writes_its_menu(app, tmp_path):
    # Thin class pages whose script writes the same menu on each (Doxygen's
    # menu.js): candidates all. The first rendering finds the menu's pages,
    # linked from nowhere else (it paid off); the next three find nothing
    # new, and the site is taken as static: fewer than one in three paid.
    result = crawl(app, tmp_path / "ref", ["/ref/index.html"], "follow=all", "render=auto", RENDER_CONCURRENCY=1)
    assert result.returncode == 0, result.log[-3000:]
    classes = [f"/ref/class{i}.html" for i in range(REF_CLASSES)]
    assert Counter(result.fetched) == Counter(["/robots.txt", "/ref/index.html", *classes, "/ref/menu.js", *REF_MENU])
    stored = pages(result, app)
    assert sorted(stored) == sorted(["/ref/index.html", *classes, *REF_MENU])
    assert sum(1 for p in stored.values() if p["rendered"]) == 4
    stats = stats_of(result.log)
    assert {k: stats.get(f"render/{k}") for k in ("candidates", "pages", "paid_off", "site_static",
                                                   "skipped_static_site")} == {
        "candidates": REF_CLASSES, "pages": 4, "paid_off": 1, "site_static": 1, "skipped_static_site": REF_CLASSES - 4}
    assert "Rendering paid off on 1 of 4 pages of 127.0.0.2: its pages are no longer rendered" in result.log


@pytest.fixture
def metadata_address():
    """169.254.169.254 on the loopback interface, for a server to listen on,
    where this machine lets the test add it (root): then a request that got
    through would be in that server's log. Removed after."""
    added = subprocess.run(["ip", "addr", "add", "169.254.169.254/32", "dev", "lo"], capture_output=True).returncode == 0
    yield added
    if added:
        subprocess.run(["ip", "addr", "del", "169.254.169.254/32", "dev", "lo"], capture_output=True)


def test_a_rendered_page_reaches_no_address_the_guard_refuses_and_nothing_robots_forbids(metadata_address, tmp_path):
    hosts = "127.0.0.2,127.0.0.5" + (",169.254.169.254" if metadata_address else "")
    app = start_app(tmp_path, hosts=hosts)
    try:
        result = crawl(app, tmp_path / "guard", ["/leak", "/robots-test"], "render=always")
    finally:
        app.stop()
    assert result.returncode == 0, result.log[-3000:]
    # The scripts asked for http://127.0.0.5:P/secret (loopback, outside the
    # allowed networks), http://169.254.169.254:P/latest/meta-data/ (cloud
    # metadata; the same server listens there when the machine lets the test
    # add the address) and /private/data.json (robots.txt: Disallow
    # /private/): none reached a server; the browser's proxy saw nothing of theirs.
    assert Counter(zip(result.hosts, result.fetched)) == Counter(
        [("127.0.0.2", "/robots.txt"), ("127.0.0.2", "/leak"), ("127.0.0.2", "/robots-test")])
    stored = pages(result, app)
    assert {u: (p["rendered"], p["title"]) for u, p in stored.items()} == {
        "/leak": (True, "Leak"), "/robots-test": (True, "Robots")}
    assert "river" in stored["/leak"]["text"] or "stone" in stored["/leak"]["text"]
    stats = stats_of(result.log)
    assert render_stats(stats) == {
        "render/pages": 2, "render/paid_off": 2, "render/requests": 3, "render/refused/address": 2,
        "render/refused/robots": 1, "render/browser_launches": 1}
    assert "refused 127.0.0.5 (loopback" in result.log and "169.254.169.254" in result.log


def test_a_page_that_never_loads_a_download_a_popup_and_a_script_navigation(app, tmp_path):
    result = crawl(app, tmp_path / "odd", ["/stall", "/download", "/popup", "/nav"], "render=always",
                   "follow=all", RENDER_TIMEOUT=8)
    assert result.returncode == 0, result.log[-3000:]
    fetched = Counter(result.fetched)
    # /never.js was asked at most once and never answered: the page was taken
    # as it was at RENDER_TIMEOUT. (Once, as a rule; on a machine loaded with
    # other work, load 8, Chromium had not asked for it in 8 s. A longer
    # timeout is no cure: the script's request, given the time left to the
    # page, then sometimes timed out just before the page did, and the page
    # loaded with no load_timeout.) The frame's attachment was fetched (through the
    # crawler) and not handed to the browser; the clicked download link is
    # refused (and, a .zip, not followed as a link either); the pop-up's and
    # the script's destinations are links of their pages, crawled as such.
    assert fetched["/never.js"] in (0, 1)
    assert {p: fetched[p] for p in ("/files/attach", "/files/report.zip", "/docs/0", "/docs/1")} == {
        "/files/attach": 1, "/files/report.zip": 0, "/docs/0": 1, "/docs/1": 1}
    stored = pages(result, app)
    assert {u: (stored[u]["rendered"], stored[u]["title"]) for u in ("/stall", "/download", "/popup", "/nav")} == {
        "/stall": (True, "Stall"), "/download": (True, "Download"), "/popup": (True, "Popup"), "/nav": (True, "Nav")}
    stats = stats_of(result.log)
    # /stall's script never comes: taken at RENDER_TIMEOUT. /download's load
    # event waits on the download the browser was not allowed to make: taken
    # at the timeout too, unless Chromium's download manager gives up on the
    # refusal first (seen with the machine loaded): 1 or 2.
    assert stats["render/load_timeout"] in (1, 2), render_stats(stats)
    assert stats["render/refused/download"] == 1
    # location.href: a navigation not made; window.open: a window not opened;
    # both links of their pages (render/navigations).
    assert (stats["render/refused/navigation"], stats["render/navigations"]) == (1, 2)
    # The download link the script clicked: Chromium's download manager asks
    # around interception, and the proxy sink refused it (no server saw it:
    # report.zip fetched 0 times above). Once a run here; twice in one CI run
    # of many (the manager trying again, as far as can be told): the first is
    # the one said.
    assert stats["render/escaped"] in (1, 2), render_stats(stats)
    assert re.search(r"A request went around the renderer's interception \(a download\?\) and was refused at its "
                     r"proxy: GET http://127\.0\.0\.2:\d+/files/report\.zip HTTP/1\.1 ", result.log)


def test_a_page_past_its_request_limit_is_taken_then(app, tmp_path):
    # 60 iframes, 10 requests allowed: the first 10 frames are fetched, the
    # rest answered 204 (an empty frame, not Chromium's error page: 918 of
    # those hung a renderer), and the page taken as it is at the first
    # refusal: its script-written text, no timeout.
    result = crawl(app, tmp_path / "frames", ["/frames"], "render=always", RENDER_MAX_REQUESTS=10)
    assert result.returncode == 0, result.log[-3000:]
    fetched = Counter(result.fetched)
    assert sum(n for p, n in fetched.items() if p.startswith("/frames/")) == 10
    assert all(n == 1 for n in fetched.values()) and fetched["/frames"] == 1
    stored = pages(result, app)
    assert (stored["/frames"]["rendered"], stored["/frames"]["title"]) == (True, "Frames")
    # The script-written paragraph is the page's main content (its heading,
    # the page's title, a line beside it).
    assert stored["/frames"]["text"] == prose(len("Frames") + 50, 60)
    stats = stats_of(result.log)
    # The frames past the limit refused before the page is taken and closed:
    # all 50 when Chromium asks for them at once, 11 seen on a loaded
    # machine (the page is taken at the first refusal, its later frames'
    # requests never made). Exact: the 10 fetched, one page over the limit.
    refused = stats.get("render/refused/limit", 0)
    assert 1 <= refused <= FRAMES - 10, render_stats(stats)
    assert {k: stats.get(f"render/{k}") for k in ("pages", "requests", "over_limit", "load_timeout",
                                                   "failed/hung")} == {
        "pages": 1, "requests": 10, "over_limit": 1, "load_timeout": None,
        "failed/hung": None}, render_stats(stats)


def test_a_page_that_hangs_or_exhausts_the_browser_costs_retries_not_the_page(app, tmp_path):
    result = crawl(app, tmp_path / "hang", ["/spin", "/hog"], "render=always", RENDER_TIMEOUT=6,
                   RETRY_TIMES=1, RENDER_MEMORY_MB=64,
                   # One page at a time: a browser restarted for one page's hang
                   # costs the pages rendered beside it a retry too (said in docs).
                   RENDER_CONCURRENCY=1)
    assert result.returncode == 0, result.log[-3000:]
    assert Counter(result.fetched) == Counter(["/robots.txt", "/spin", "/spin", "/hog", "/hog"])
    stored = pages(result, app)
    # Given up after RETRY_TIMES: kept from the static HTML, said so.
    assert {u: (p["state"], p["rendered"], p["title"]) for u, p in stored.items()} == {
        "/spin": ("C", False, "Spin"), "/hog": ("C", False, "Hog")}
    stats = stats_of(result.log)
    assert stats["render/gave_up"] == 2
    assert (stats["render/failed/hung"], stats["render/failed/crashed"]) == (2, 2), render_stats(stats)
    assert result.log.count("Gave up rendering") == 2
    assert "internal meta keys" not in result.log  # the spider's retries are retries (MetaCopyDetection)


def test_a_crawl_that_renders_without_a_browser_stops_at_start(app, tmp_path):
    result = crawl(app, tmp_path / "nobrowser", ["/"], "render=auto", RENDER_BROWSER="/nonexistent/chromium")
    assert result.returncode == 1
    assert "RENDER_BROWSER='/nonexistent/chromium' is not an executable" in result.log
    assert result.fetched == []


def test_two_workers_share_a_rendered_crawl(redis_url, crawl_name, tmp_path):
    docs = 10  # 22 rendered pages: both workers get some (24 took 42 s of the suite)
    server = start_app(tmp_path, docs=docs, hosts="127.0.0.2,127.0.0.3,127.0.0.5")
    try:
        seeds = ",".join(server.url("/", host=h) for h in ("127.0.0.2", "127.0.0.3"))
        settings = {"REDIS_URL": redis_url, "CRAWL_NAME": crawl_name, "NETWORK_ALLOWLIST": ALLOW,
                    "RENDER_SETTLE": 0.2, "DOWNLOAD_DELAY": 0.05,
                    # One lease at a time each: both workers get sites.
                    "FRONTIER_MAX_HELD": 1, "RENDER_CONCURRENCY": 1}
        mark = server.mark()
        procs = []
        for i, args in enumerate(([f"seeds={seeds}", "follow=all", "render=always"], [])):
            cmd = crawl_cmd(args, {**settings, "CRAWL_DIR": str(tmp_path / f"w{i}")}, tmp_path / f"w{i}")
            procs.append(subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                          text=True))
        logs = [p.communicate(timeout=300)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
        seen = Counter((str(r["host"]), str(r["path"])) for r in server.requests(mark))
        for host in ("127.0.0.2", "127.0.0.3"):
            for path in ["/", *(f"/docs/{i}" for i in range(docs))]:
                assert seen[(host, path)] == 1, (host, path)
                assert seen[(host, api(path))] == 1, (host, path)
        rendered = [stats_of(log).get("render/pages", 0) for log in logs]
        assert sum(rendered) == 2 * (docs + 1) and min(rendered) > 0, rendered
        assert "renders pages" not in logs[1]  # the joining worker took -a render=always from the crawl's meta
    finally:
        server.stop()
