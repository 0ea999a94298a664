"""The re-crawl (``scrapy crawl recrawl``) against a real server whose pages
change between crawls (tests/support/mockserver.py ``serve_changing``): 304s from
the validators the store kept, changed, reformatted (trivially changed),
unchanged without validators, deleted, moved and new pages; and the merge
itself (crawler/recrawl/merge.py) against a real SQLite store."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from crawler.reading.extract import analyze
from crawler.duplicates.fingerprint import simhash
from crawler.reading.html import parse_html
from crawler.recrawl.merge import Revisits, evidence_of, visits
from crawler.recrawl.change import ChangeEvidence, Policy, Visit
from crawler.recrawl.plan import Plan, RateModel
from crawler.store import SQLiteStore
from tests.support import ROOT
from tests.support.crawl import crawl_cmd, run_crawl, stop_embedded_redis
from tests.support.servers import Server, start_server

WORDS = ("river mountain harbour lantern meadow orchard quarry tunnel valley window garden bridge "
         "castle forest island market station theatre village canyon desert glacier").split()


def article(title: str, seed: int, words: int = 160, extra: str = "", links: str = "") -> str:
    body = " ".join(WORDS[(seed * 7 + i * (seed + 3)) % len(WORDS)] for i in range(words))
    return (f"<html><head><title>{title}</title></head><body><h1>{title}</h1>"
            f"<p>{body}{extra}</p>{links}</body></html>")


def index(links: list[str]) -> str:
    items = "".join(f'<li><a href="{u}">{u.strip("/").replace("/", " ")}</a></li>' for u in links)
    return f"<html><head><title>Home</title></head><body><h1>Home</h1><ul>{items}</ul></body></html>"


def trivial_edit(text: str) -> str:
    """``text`` with one word appended to its paragraph such that its SimHash
    moves by 1 to 3 bits (searched, so the test does not hang on luck)."""
    def fp(html: str) -> int:
        return simhash(analyze(parse_html(html)).text)

    base = fp(text)
    for word in WORDS + [w + "s" for w in WORDS]:
        edited = text.replace("</p>", f" {word}</p>", 1)
        if 1 <= bin(fp(edited) ^ base).count("1") <= 3:
            return edited
    raise AssertionError("no trivial edit found")


PAGES = ["/a.html", "/b.html", "/c.html", "/d.html", "/e.html", "/novalid/f.html"]


@pytest.fixture
def changing_site(tmp_path: Path):
    root = tmp_path / "www"
    (root / "novalid").mkdir(parents=True)
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    (root / "index.html").write_text(index(PAGES))
    for i, path in enumerate(PAGES):
        (root / path.lstrip("/")).write_text(article(path, i))
    server = start_server(tmp_path, hosts="127.0.0.1", root=root, validators=True)
    try:
        yield server, root
    finally:
        server.stop()


SETTINGS = {"REVISIT_MIN_INTERVAL": 1, "REVISIT_DEFAULT_INTERVAL": 1, "REVISIT_MAX_INTERVAL": 100,
            "LOG_LEVEL": "INFO"}


def answers(server: Server, mark: int) -> dict[str, tuple[int, bool]]:
    """Path -> (status, whether the request carried a validator), pages only."""
    out: dict[str, tuple[int, bool]] = {}
    for r in server.requests(mark):
        path = str(r["path"])
        assert path not in out or path == "/robots.txt", f"{path} fetched twice"
        out[path] = (int(r["status"]), bool(r["inm"] or r["ims"]))
    out.pop("/robots.txt", None)
    return out


def stats(log: str) -> dict[str, int]:
    found = {}
    for line in log.splitlines():
        line = line.strip()
        if line.startswith("'recrawl/"):
            key, value = line.split(":", 1)
            found[key.strip("'")] = int(value.strip().rstrip(",}"))
    return found


@pytest.mark.slow
def test_recrawl_finds_unchanged_changed_trivial_gone_moved_and_new_pages(changing_site, tmp_path):
    server, root = changing_site
    crawl_dir = tmp_path / "crawl"
    url = server.url
    try:
        first = run_crawl(server, crawl_dir, [f"seeds={url('/')}"], SETTINGS)
        assert first.returncode == 0, first.log[-3000:]
        with SQLiteStore(first.store_path) as store:
            a = store.get_page(url("/a.html"))
            assert a["etag"] and a["last_modified"] and a["history"][0][1] == "new"
            assert a["next_fetch_at"] == pytest.approx(a["fetched_at"] + 1)
            assert store.get_page(url("/novalid/f.html"))["etag"] is None
            # Each page's first duplicate check, kept for its re-crawls (crawler/frontier/dupindex.py).
            orders = {p: store.get_page(url(p))["dup_order"] for p in ("/a.html", "/b.html", "/c.html", "/d.html")}
            assert all(isinstance(o, str) and len(o) == 14 for o in orders.values()), orders

        # The site changes.
        time.sleep(1.1)  # every page due (REVISIT_DEFAULT_INTERVAL = 1 s); mtimes move on
        (root / "b.html").write_text(article("/b.html", 40))  # rewritten
        (root / "c.html").write_text(trivial_edit((root / "c.html").read_text()))  # one word more
        (root / "d.html").unlink()  # deleted
        (root / "_moves.json").write_text(json.dumps({"/e.html": "/e2.html"}))
        (root / "e2.html").write_text(article("/e2.html", 4))
        (root / "index.html").write_text(index([*PAGES, "/new.html"]))
        (root / "new.html").write_text(article("/new.html", 9))
        mark = server.mark()
        second = run_crawl(server, crawl_dir, [], SETTINGS, spider="recrawl")
        assert second.returncode == 0, second.log[-3000:]
        assert "Revisiting crawl site: 7 of 7 stored pages due" in second.log, second.log[-3000:]
        assert answers(server, mark) == {
            "/": (200, True),  # index.html changed: a new ETag
            "/a.html": (304, True),
            "/b.html": (200, True),
            "/c.html": (200, True),
            "/d.html": (404, True),
            "/e.html": (301, True),
            "/e2.html": (200, False),  # where e moved: a new page
            "/new.html": (200, False),  # linked from the changed index page
            "/novalid/f.html": (200, False),  # no validators to send
        }
        assert stats(second.log) == {"recrawl/due": 7, "recrawl/fetched": 7, "recrawl/not_modified": 1,
                                     "recrawl/unchanged": 2, "recrawl/changed": 2, "recrawl/trivial": 1,
                                     "recrawl/gone": 1, "recrawl/moved": 1}
        # scrapy status shows the re-crawl's figures (the worker's last record).
        status = subprocess.run([sys.executable, "-m", "scrapy", "status", "--json", "-s", f"CRAWL_DIR={crawl_dir}"],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["recrawl"] == {
            "due": 7, "fetched": 7, "not_modified": 1, "new": 0, "unchanged": 2, "trivial": 1, "changed": 2,
            "gone": 1, "moved": 1, "error": 0}
        with SQLiteStore(second.store_path) as store:
            def outcome(path: str) -> str:
                return store.get_page(url(path))["history"][-1][1]

            assert {p: outcome(p) for p in ["/", *PAGES, "/e2.html", "/new.html"]} == {
                "/": "changed", "/a.html": "unchanged", "/b.html": "changed", "/c.html": "trivial",
                "/d.html": "gone", "/e.html": "moved", "/novalid/f.html": "unchanged",
                "/e2.html": "new", "/new.html": "new"}
            # Changed (b, c), unchanged (a: 304) or answering 404 (d): each keeps its first check.
            assert {p: store.get_page(url(p))["dup_order"] for p in orders} == orders
            a = store.get_page(url("/a.html"))
            assert a["state"] == "C" and a["text"] and a["status"] == 200 and len(a["history"]) == 2
            b = store.get_page(url("/b.html"))
            assert b["changed_at"] == b["fetched_at"] and "quarry" in b["text"] or b["text"]
            d = store.get_page(url("/d.html"))
            assert (d["state"], d["gone_count"], d["status"]) == ("C", 1, 200)  # one 404: not gone yet
            assert d["text"] and d["next_fetch_at"] is not None
            e = store.get_page(url("/e.html"))
            assert (e["state"], e["error"], e["next_fetch_at"]) == ("D", f"moved permanently to {url('/e2.html')}",
                                                                    None)
            assert store.outlinks(url("/e.html")) == [{"url": url("/e2.html"), "anchor": "[redirect 301]"}]
            home = store.get_page(url("/"))
            assert url("/new.html") in [x["url"] for x in store.outlinks(url("/"))]
            assert home["changed_at"] == home["fetched_at"]

        # A second 404 in a row: d is gone; a stays unchanged (304 again).
        time.sleep(1.1)
        mark = server.mark()
        third = run_crawl(server, crawl_dir, ["all=1"], SETTINGS, spider="recrawl")
        assert third.returncode == 0, third.log[-3000:]
        got = answers(server, mark)
        assert got["/d.html"] == (404, True) and got["/a.html"] == (304, True) and "/e.html" not in got
        with SQLiteStore(third.store_path) as store:
            d = store.get_page(url("/d.html"))
            assert (d["state"], d["gone_count"], d["status"], d["next_fetch_at"]) == ("D", 2, 404, None)
            assert d["error"] == "gone: HTTP 404 on 2 visits in a row"
            assert [h[1] for h in d["history"]] == ["new", "gone", "gone"]
            assert store.inlinks(url("/d.html")) == [url("/")]  # its in-links stay, as history

        # The counts add up: every revisit has one outcome, and a 404 is an
        # answer (the page's gone outcome), not a failed revisit.
        status = subprocess.run([sys.executable, "-m", "scrapy", "status", "--json", "-s", f"CRAWL_DIR={crawl_dir}"],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        st = json.loads(status.stdout)
        r, t = st["recrawl"], st["totals"]
        assert r == {"due": 8, "fetched": 15, "not_modified": 7, "new": 0, "unchanged": 9, "trivial": 1,
                     "changed": 2, "gone": 2, "moved": 1, "error": 0}, r
        assert (t["revisits"], t["revisit_errors"], t["errors"]) == (15, 0, 0)
        text = subprocess.run([sys.executable, "-m", "scrapy", "status", "-s", f"CRAWL_DIR={crawl_dir}"],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        lines = text.stdout.splitlines()
        assert lines[0].endswith(", 15 revisits (0 failed: no answer or a server error)"), lines[0]
        assert lines[1] == ("re-crawl: 8 due; 15 revisits stored: 0 new, 9 unchanged (7 of them 304), 1 trivially "
                            "changed, 2 changed, 2 gone, 1 moved, 0 undecided (no answer, a server error or a "
                            "temporary redirect)")
    finally:
        stop_embedded_redis(crawl_dir)


@pytest.mark.slow
def test_head_before_get_on_pages_without_validators(tmp_path):
    """RECRAWL_HEAD: pages stored without validators are asked with a HEAD;
    the same Content-Length stands for unchanged (no GET), another length
    sends the GET, a server refusing HEAD (405) gets the GET; pages with
    validators keep their conditional GET. Off (the default): no HEAD."""
    root = tmp_path / "www"
    (root / "novalid" / "nohead").mkdir(parents=True)
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    pages = ["/a.html", "/novalid/same.html", "/novalid/grows.html", "/novalid/nohead/g.html"]
    (root / "index.html").write_text(index(pages))
    for i, path in enumerate(pages):
        (root / path.lstrip("/")).write_text(article(path, i))
    server = start_server(tmp_path, hosts="127.0.0.1", root=root, validators=True)
    crawl_dir = tmp_path / "crawl"
    url = server.url
    try:
        first = run_crawl(server, crawl_dir, [f"seeds={url('/')}"], SETTINGS)
        assert first.returncode == 0, first.log[-3000:]
        with SQLiteStore(first.store_path) as store:
            assert {p: store.get_page(url(p))["content_length"] for p in pages} == {
                p: len((root / p.lstrip("/")).read_bytes()) for p in pages}

        time.sleep(1.1)  # every page due
        (root / "novalid" / "grows.html").write_text(article("/novalid/grows.html", 40, words=200, extra=" more"))
        mark = server.mark()
        head = {**SETTINGS, "RECRAWL_HEAD": True, "RECRAWL_HEAD_MIN_UNCHANGED": 0}
        second = run_crawl(server, crawl_dir, [], head, spider="recrawl")
        assert second.returncode == 0, second.log[-3000:]
        # 304s, a HEAD that found the same length and one refused (its GET
        # settles the page) are visits that went well, not errors: 7 leases
        # (5 pages, 2 HEADs a GET followed) all done.
        assert "'frontier/acked/C': 7" in second.log and "frontier/acked/E" not in second.log, second.log[-3000:]
        got = Counter((r["method"], r["path"], r["status"]) for r in server.requests(mark))
        assert got == Counter({
            ("GET", "/", 304): 1, ("GET", "/a.html", 304): 1,  # validators: a conditional GET
            ("HEAD", "/novalid/same.html", 200): 1,  # the same length: no GET
            ("HEAD", "/novalid/grows.html", 200): 1, ("GET", "/novalid/grows.html", 200): 1,
            ("HEAD", "/novalid/nohead/g.html", 405): 1, ("GET", "/novalid/nohead/g.html", 200): 1,
        }), got
        assert {k: v for k, v in stats(second.log).items() if k.startswith("recrawl/head")} == {
            "recrawl/head": 3, "recrawl/head_unchanged": 1, "recrawl/head_changed": 1, "recrawl/head_failed": 1}
        with SQLiteStore(second.store_path) as store:
            assert {p: store.get_page(url(p))["history"][-1][1] for p in pages} == {
                "/a.html": "unchanged", "/novalid/same.html": "unchanged", "/novalid/grows.html": "changed",
                "/novalid/nohead/g.html": "unchanged"}
            same = store.get_page(url("/novalid/same.html"))
            assert same["text"] and same["status"] == 200 and same["content_length"] == len(
                (root / "novalid" / "same.html").read_bytes())
            grown = store.get_page(url("/novalid/grows.html"))
            assert grown["text"].endswith("more") and grown["content_length"] == len(
                (root / "novalid" / "grows.html").read_bytes())

        time.sleep(1.1)
        mark = server.mark()
        third = run_crawl(server, crawl_dir, ["all=1"], SETTINGS, spider="recrawl")
        assert third.returncode == 0, third.log[-3000:]
        assert {r["method"] for r in server.requests(mark)} == {"GET"}
        assert len(server.requests(mark)) == 5  # robots.txt: cached by the crawl
    finally:
        stop_embedded_redis(crawl_dir)
        server.stop()


def test_merge_is_idempotent_and_keeps_the_stored_version_on_errors(tmp_path):
    policy = Policy(min_interval=10, max_interval=1000, default_interval=100)
    merge = Revisits(policy, gone_after=2)
    page = {"url": "http://a.example/p", "site": "a.example", "state": "C", "status": 200, "text": "words " * 50,
            "simhash": -5, "content_hash": "h1", "fetched_at": 1000.0, "etag": '"x"', "links": [
                {"url": "http://a.example/q", "anchor": "q"}]}
    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        store.write(merge(store.revisit_state, [page]))
        stored = store.get_page(page["url"])
        assert (stored["next_fetch_at"], stored["revisit_interval"], stored["history"]) == (
            1100.0, 100.0, [[1000.0, "new", None]])
        # A timeout on the next visit: the stored version stands.
        failed = {"url": page["url"], "site": "a.example", "state": "E", "status": None, "fetched_at": 1100.0,
                  "error": "timeout", "revisit": 1100, "links": []}
        batch = merge(store.revisit_state, [failed])
        store.write(batch)
        again = store.get_page(page["url"])
        assert (again["state"], again["text"], again["etag"], again["error"]) == ("C", page["text"], '"x"', None)
        assert [h[1] for h in again["history"]] == ["new", "error"]
        assert store.outlinks(page["url"]) == [{"url": "http://a.example/q", "anchor": "q"}]
        # The same batch merged and written again (a retry) changes nothing.
        store.write(merge(store.revisit_state, [failed]))
        assert store.get_page(page["url"]) == again


def recrawl_worker(crawl_dir: Path, settings: dict, args: list[str] = ()) -> subprocess.Popen:
    return subprocess.Popen(crawl_cmd(list(args), settings, crawl_dir, "recrawl"), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_two_workers_share_a_recrawl_and_a_killed_one_loses_nothing(changing_site, tmp_path, frontier_settings):
    """Two recrawl workers started together find the same pages due: each
    page is fetched once. Then a recrawl SIGKILLed mid-way and started
    again: every page revisited, none more than twice (the killed worker's
    leases are taken back at once), every history a first fetch and its
    visits."""
    server, root = changing_site
    crawl_dir = tmp_path / "crawl"
    url = server.url
    settings = {**SETTINGS, **frontier_settings}
    try:
        first = run_crawl(server, crawl_dir, [f"seeds={url('/')}"], settings)
        assert first.returncode == 0, first.log[-3000:]
        time.sleep(1.1)
        mark = server.mark()
        workers = [recrawl_worker(crawl_dir, settings) for _ in range(2)]
        logs = [w.communicate(timeout=120)[0] for w in workers]
        assert [w.returncode for w in workers] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
        got = answers(server, mark)  # asserts each page was fetched once
        assert sorted(got) == sorted(["/", *PAGES])
        assert all(status == 304 for p, (status, _) in got.items() if p != "/novalid/f.html")
        assert sum(stats(log).get("recrawl/fetched", 0) for log in logs) == 7
        assert sum(stats(log).get("recrawl/unchanged", 0) for log in logs) == 7

        # Every page unchanged twice: due again only after a long interval.
        # -a all=1 revisits them anyway; the first worker is killed mid-way.
        slow = {**settings, "DOWNLOAD_DELAY": 0.4}
        mark = server.mark()
        killed = recrawl_worker(crawl_dir, slow, ["all=1"])
        deadline = time.monotonic() + 60
        while len([r for r in server.requests(mark) if r["path"] != "/robots.txt"]) < 3:
            assert time.monotonic() < deadline and killed.poll() is None, "the recrawl did not get going"
            time.sleep(0.02)
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=30)
        again = recrawl_worker(crawl_dir, slow, ["all=1"])
        out = again.communicate(timeout=120)[0]
        assert again.returncode == 0, out[-3000:]
        fetched = Counter(str(r["path"]) for r in server.requests(mark) if r["path"] != "/robots.txt")
        assert set(fetched) == {"/", *PAGES} and max(fetched.values()) <= 2, fetched
        with SQLiteStore(first.store_path) as store:
            for path in ["/", *PAGES]:
                history = [h[1] for h in store.get_page(url(path))["history"]]
                assert history[:3] == ["new", "unchanged", "unchanged"], (path, history)
                assert len(history) <= 4 and set(history[1:]) == {"unchanged"}, (path, history)
    finally:
        stop_embedded_redis(crawl_dir)


@pytest.mark.slow
def test_a_continuous_recrawl_takes_pages_as_they_fall_due(changing_site, tmp_path):
    """RECRAWL_CONTINUOUS: the worker stays up and revisits each page as it
    falls due (here every 3 s at the longest); a change made while it runs is
    found; Ctrl-C stops it cleanly."""
    server, root = changing_site
    crawl_dir = tmp_path / "crawl"
    settings = {**SETTINGS, "REVISIT_MAX_INTERVAL": 3, "RECRAWL_CONTINUOUS": 1, "RECRAWL_POLL_INTERVAL": 0.5}
    try:
        first = run_crawl(server, crawl_dir, [f"seeds={server.url('/')}"], settings)
        assert first.returncode == 0, first.log[-3000:]
        mark = server.mark()
        worker = recrawl_worker(crawl_dir, settings)

        def visits(path: str) -> int:
            return sum(1 for r in server.requests(mark) if r["path"] == path)

        deadline = time.monotonic() + 60
        while visits("/a.html") < 2:
            assert time.monotonic() < deadline and worker.poll() is None, "no second visit"
            time.sleep(0.1)
        (root / "b.html").write_text(article("/b.html", 41))  # changes while the re-crawl runs
        seen = visits("/b.html")
        while visits("/b.html") < seen + 2:
            assert time.monotonic() < deadline and worker.poll() is None, "b not revisited"
            time.sleep(0.1)
        worker.send_signal(signal.SIGINT)
        out = worker.communicate(timeout=60)[0]
        assert worker.returncode == 0, out[-3000:]
        assert "RECRAWL_CONTINUOUS" in out
        with SQLiteStore(first.store_path) as store:
            history = [h[1] for h in store.get_page(server.url("/b.html"))["history"]]
            assert "changed" in history and history[0] == "new"
            a = store.get_page(server.url("/a.html"))
            assert [h[1] for h in a["history"]][1:] == ["unchanged"] * (len(a["history"]) - 1)
            assert len(a["history"]) >= 3
    finally:
        stop_embedded_redis(crawl_dir)


def test_a_budget_leaves_fast_changing_pages_at_the_longest_interval(tmp_path):
    policy = Policy(min_interval=10, max_interval=100_000, default_interval=100)
    page = {"url": "http://a.example/p", "site": "a.example", "state": "C", "status": 200, "text": "t",
            "content_hash": "h0", "fetched_at": 0.0, "links": []}
    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        for mu in (None, 1e-9, 1e4):
            plan = Plan(RateModel(), mu)
            merge = Revisits(policy, plan=lambda plan=plan: plan)
            store.write(merge(store.revisit_state, [page]))
            at = 0.0
            history = [Visit(0.0, "new")]
            for i in range(1, 4):  # changed at every visit, 20 minutes apart
                at += 1200.0
                history.append(Visit(at, "changed"))
                store.write(merge(store.revisit_state, [{**page, "content_hash": f"h{i}", "fetched_at": at,
                                                         "revisit": int(at)}]))
            got = store.get_page(page["url"])
            assert [h[1] for h in got["history"]] == ["new", "changed", "changed", "changed"]
            assert got["evidence"] == ChangeEvidence.of(history).to_json()
            posterior = RateModel().posterior(ChangeEvidence.of(history))
            assert posterior is not None
            # All changed: the median rate of the posterior, above the bias-reduced lower bound.
            assert got["change_rate"] == pytest.approx(posterior.rate)
            assert got["change_rate"] > -math.log(0.5 / 3.5) / 1200
            if mu is None:  # no budget: when a change is as likely as not, sooner than it was visited
                assert got["revisit_interval"] == pytest.approx(posterior.interval(policy))
                assert 10 < got["revisit_interval"] < 1200
            elif mu < 1:  # an ample budget: as often as allowed
                assert got["revisit_interval"] == policy.min_interval
            else:  # a budget this tight cannot follow the page: the longest interval
                assert got["revisit_interval"] == policy.max_interval
            assert got["next_fetch_at"] == pytest.approx(at + got["revisit_interval"])


def test_evidence_outlives_the_history_and_is_rebuilt_where_missing(tmp_path):
    policy = Policy(min_interval=10, max_interval=100_000, default_interval=100, history=4)
    page = {"url": "http://a.example/p", "site": "a.example", "state": "C", "status": 200, "text": "t",
            "content_hash": "h0", "fetched_at": 0.0, "links": []}
    plan = Plan(RateModel())
    merge = Revisits(policy, plan=lambda: plan)
    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        store.write(merge(store.revisit_state, [page]))
        assert store.get_page(page["url"])["evidence"] == {"u": 0.0, "c": [], "n": 0.0}
        for k in range(1, 11):  # ten visits 100 s apart, a change at every other one
            store.write(merge(store.revisit_state, [{**page, "content_hash": f"h{k // 2}", "fetched_at": 100.0 * k,
                                                     "revisit": 100 * k}]))
        got = store.get_page(page["url"])
        assert len(got["history"]) == 4
        assert got["evidence"] == {"u": 500.0, "c": [[106, 5.0]], "n": 10.0}  # 100 s is class 106
        assert got["change_rate"] == pytest.approx(plan.model.posterior(ChangeEvidence.from_json(got["evidence"])).rate)
        # A page stored before evidence was kept (or with a record edited by
        # hand) has it rebuilt from its history.
        for broken in (None, {"u": "x"}, {"u": 10 ** 400, "c": [], "n": 1}, "[" * 100_000):
            raw = None if broken is None else broken if isinstance(broken, str) else json.dumps(broken)
            with store.conn:
                store.conn.execute("UPDATE pages SET evidence = ?", (raw,))
            old = store.revisit_state([page["url"]])[page["url"]]
            assert evidence_of(old) == ChangeEvidence.of(visits(got["history"]))
            assert evidence_of(old).count == 3


def test_the_store_writer_plans_from_a_sample_of_the_store(tmp_path):
    """The pipeline's plan: the prior and the budget's multiplier from
    REVISIT_SAMPLE stored histories scaled to every page in state C, made
    again only after REVISIT_PLAN_INTERVAL."""
    from scrapy.utils.test import get_crawler

    from crawler import settings as project_settings
    from crawler.pipelines import StorePipeline
    from crawler.recrawl.plan import multiplier_for_budget

    ours = {k: v for k, v in vars(project_settings).items() if k.startswith(("REVISIT_", "RECRAWL_", "STORE_",
                                                                             "SIMHASH_"))}
    crawler = get_crawler(settings_dict={**ours, "REVISIT_BUDGET": 400, "REVISIT_SAMPLE": 200,
                                         "REVISIT_PLAN_INTERVAL": 3600})
    pipeline = StorePipeline.from_crawler(crawler)
    day = 86400.0

    def history(i: int) -> list[list]:  # page i changes every (i % 10 + 1) days, visited daily
        return [[k * day, "new" if k == 0 else ("changed" if k % (i % 10 + 1) == 0 else "unchanged"), None]
                for k in range(20)]

    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        store.write([{"url": f"http://a.example/{i}", "site": "a.example", "state": "C", "status": 200,
                      "fetched_at": 19 * day, "links": [], "history": history(i)} for i in range(1000)])
        pipeline.buffer = type("Buffer", (), {"store": store})()
        merge = pipeline.revisits()
        plan = merge.plan()
        assert crawler.stats.get_value("revisit/plan_sample") == 200
        assert crawler.stats.get_value("revisit/plan_multiplier") == plan.mu
        # Spread over all 1,000 pages, the plan spends the budget (400 a day) to within the sample's error.
        posteriors = [plan.model.posterior(ChangeEvidence.of(visits(history(i)))) for i in range(1000)]
        spent = sum(1 / p.interval(merge.policy, plan.mu) for p in posteriors if p) * day
        assert 400 * 0.85 < spent < 400 * 1.15
        exact = multiplier_for_budget(posteriors, 400 / day, merge.policy)
        assert 0.5 < plan.mu / exact < 2
        store.write([{"url": "http://a.example/new", "site": "a.example", "state": "C", "status": 200,
                      "fetched_at": 0.0, "links": [], "history": [[0.0, "new", None]]}])
        assert merge.plan() is plan  # not made again before REVISIT_PLAN_INTERVAL
        # A plan that cannot be made (here: the store closed under it) is
        # logged and counted; the last one stands, and is not retried at every batch.
        store.close()
        pipeline.buffer = type("Buffer", (), {"store": store})()
        merge = pipeline.revisits()
        assert merge.plan().mu is None and crawler.stats.get_value("revisit/plan_failed") == 1
        assert merge.plan().mu is None and crawler.stats.get_value("revisit/plan_failed") == 1


def test_recrawl_without_a_crawl_says_so_in_one_line_and_makes_nothing(tmp_path):
    crawl_dir = tmp_path / "empty"
    p = subprocess.run(crawl_cmd([], {}, crawl_dir, "recrawl"), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    errors = [line for line in p.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: nothing to revisit: no crawl 'site': no store file {crawl_dir}/site.sqlite3. "
                      "`scrapy crawl site -a seeds=...` makes the crawl first (the same CRAWL_NAME, CRAWL_DIR "
                      "or MONGO_URI)"]
    assert "Traceback" not in p.stderr and not crawl_dir.exists()


@pytest.mark.parametrize("visit", [
    {"state": "E", "status": None, "error": "timeout", "links": []},  # the stored version stands
    {"state": "C", "status": 200, "text": "other words " * 40, "simhash": 77, "content_hash": "h2",
     "links": [{"url": "http://a.example/r", "anchor": "r"}]},  # changed
])
def test_a_recrawl_keeps_a_focused_crawls_topic_score(tmp_path, visit):
    merge = Revisits(Policy(min_interval=10, max_interval=1000, default_interval=100))
    page = {"url": "http://a.example/p", "site": "a.example", "state": "C", "status": 200, "text": "words " * 50,
            "simhash": -5, "content_hash": "h1", "fetched_at": 1000.0, "links": [], "topic_score": 0.8,
            "on_topic": True}
    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        store.write(merge(store.revisit_state, [page]))
        again = {"url": page["url"], "site": "a.example", "fetched_at": 1100.0, "revisit": 1100, **visit}
        store.write(merge(store.revisit_state, [again]))
        stored = store.get_page(page["url"])
        assert (stored["topic_score"], stored["on_topic"]) == (0.8, True)
        assert len(stored["history"]) == 2


@pytest.mark.slow
def test_recrawl_follows_links_by_the_crawls_own_policy_and_keeps_them(tmp_path):
    """A crawl made with -a follow=all: a link added to an information page
    is followed by the re-crawl (its default follows the crawl's recorded
    policy, not follow=index), and a later 304 loses nothing. A re-crawl
    with nothing due says when the next page falls due; -a all=1 says what
    it does; pages are counted once however often they are revisited; a
    worker asking another policy of the crawl is refused in one line."""
    root = tmp_path / "www"
    root.mkdir()
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    (root / "index.html").write_text(index(["/a.html", "/b.html"]))
    (root / "a.html").write_text(article("/a.html", 1))
    (root / "b.html").write_text(article("/b.html", 2))
    server = start_server(tmp_path, hosts="127.0.0.1", root=root, validators=True)
    crawl_dir = tmp_path / "crawl"
    slow = {**SETTINGS, "REVISIT_MIN_INTERVAL": 3600, "REVISIT_DEFAULT_INTERVAL": 3600, "REVISIT_MAX_INTERVAL": 7200}
    url = server.url
    try:
        first = run_crawl(server, crawl_dir, [f"seeds={url('/')}", "follow=all"], slow)
        assert first.returncode == 0, first.log[-3000:]
        assert sorted(set(first.fetched)) == ["/", "/a.html", "/b.html", "/robots.txt"]

        refused = run_crawl(server, crawl_dir, ["follow=index"], slow)
        assert refused.returncode == 1
        assert refused.log.strip().splitlines()[-1] == (
            "Error: crawl 'site' has -a follow=all (recorded when it started); this worker asks "
            "-a follow=index: join it with -a follow=all (or without -a follow), or start another crawl "
            "(-s CRAWL_NAME=...)")

        # An information page gains a link; nothing is due yet.
        (root / "b.html").write_text(article("/b.html", 2, links='<p><a href="/added.html">Added</a></p>'))
        (root / "added.html").write_text(article("/added.html", 5))
        mark = server.mark()
        idle = run_crawl(server, crawl_dir, [], slow, spider="recrawl")
        assert idle.returncode == 0 and server.requests(mark) == [], idle.log[-3000:]
        assert "Revisiting crawl site: 0 of 3 stored pages due; links of changed pages followed as " \
               "-a follow=all" in idle.log, idle.log[-3000:]
        assert "Nothing is due: the next page (" in idle.log and ", in 60m; `scrapy crawl recrawl -a all=1` " \
               "revisits every stored page now" in idle.log, idle.log[-3000:]

        mark = server.mark()
        every = run_crawl(server, crawl_dir, ["all=1"], slow, spider="recrawl")
        assert every.returncode == 0, every.log[-3000:]
        assert "Revisiting crawl site: all 3 of its 3 stored pages, due or not (-a all=1); links of changed " \
               "pages followed as -a follow=all" in every.log, every.log[-3000:]
        assert answers(server, mark) == {"/": (304, True), "/a.html": (304, True), "/b.html": (200, True),
                                         "/added.html": (200, False)}

        mark = server.mark()
        again = run_crawl(server, crawl_dir, ["all=1"], slow, spider="recrawl")
        assert again.returncode == 0, again.log[-3000:]
        assert answers(server, mark) == {"/": (304, True), "/a.html": (304, True), "/b.html": (304, True),
                                         "/added.html": (304, True)}
        with SQLiteStore(again.store_path) as store:
            assert {p["url"]: p["state"] for p in store.iter_pages()} == {
                url(p): "C" for p in ("/", "/a.html", "/b.html", "/added.html")}
            assert url("/added.html") in [x["url"] for x in store.outlinks(url("/b.html"))]
        status = subprocess.run([sys.executable, "-m", "scrapy", "status", "--json", "-s", f"CRAWL_DIR={crawl_dir}"],
                                cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        totals = json.loads(status.stdout)["totals"]
        # Four pages, however often fetched: 3 + 1 first fetches; 3 + 4 revisits.
        assert (totals["pages"], totals["errors"], totals["revisits"], totals["revisit_errors"]) == (4, 0, 7, 0)
    finally:
        server.stop()
        stop_embedded_redis(crawl_dir)
