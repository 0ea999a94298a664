"""Path-level spider traps (crawler.scope.traps): the token classifier, the chain
evidence, generated traps cut at a stated step, real deep URL sets never cut,
and a crawl of a real HTTP server's traps."""

from __future__ import annotations

import json
import random
import string
from collections import Counter, deque
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from crawler.scope.traps import (
    META_KEYS, PathEvidence, PathTrapGuard, TrapLimits, Verdict, looks_random, path_tokens,
)
from crawler.frontier.serialize import META_KEYS as SERIALIZED_META
from crawler.scope.urls import max_segment_repeats, normalize, url_shape
from tests.support.crawl import run_crawl
from tests.support.mockserver import TRAP_SESSION_START, next_session_token

DATA = Path(__file__).parent / "data" / "traps"
HOST = "site.test"


# --- the token classifier ------------------------------------------------------------


@pytest.mark.parametrize("part", [
    "3f9a2c7e", "3f9a2c7e1b0d4e5f", "0A1B2C3D4E5F6071",  # hex: hashes, ids
    "550e8400-e29b-41d4-a716-446655440000",  # UUID
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",  # git commit
    "Xk_2pQ-a9LmN", "aZ3kQ9xBmPqR", "vQmXkZpLaB",  # base64url, base62, mixed-case letters
    "k3j9xq0z2m", "JBSWY3DPEHPK3PXP", "01ARZ3NDEKTSV4RRFFQ69G5FAV",  # base36, base32, ULID
    "lit3py55t21z5v55vlm25s55",  # ASP.NET cookieless session id
    "kxjqmzt3",  # one case, a digit, letters without a vowel
])
def test_machine_made_parts_look_random(part):
    assert looks_random(part)


@pytest.mark.parametrize("part", [
    "", "abc123", "a8Xk2p",  # under 8 characters: too little to tell
    "library", "functions", "deadbeefcafe", "kqxvzmtbwr",  # one-case letters
    "20240513", "00000000001",  # numbers
    "sqlite3", "python311", "win32api", "html5lib", "sha256sum", "ubuntu2204lts",
    "getElementById", "MyFirstContribution", "XMLHttpRequest", "Base64Encoder",
    "x86_64-linux-gnu", "release-15-4", "python-3-11-docs",
    "ch01s02s03", "ch01s02s03s01", "a00231", "bk01ch02s03",  # zero-padded numbering
    "_mm256_cmpgt_epi16", "BOOST_STL__1_3_38_15_2_2_1",  # snake_case, generated anchors
    "a20681_source",  # Doxygen
])
def test_names_people_give_do_not(part):
    assert not looks_random(part)


@pytest.mark.parametrize(("path", "tokens"), [
    ("/", []),
    ("/s/3f9a2c7e1b0d4e5f/", [(1, 0, "3f9a2c7e1b0d4e5f")]),
    ("/(S(lit3py55t21z5v55vlm25s55))/default.aspx", [(0, 1, "lit3py55t21z5v55vlm25s55")]),
    ("/app/page.jsp;jsessionid=0A1B2C3D4E5F6071", [(1, 3, "0A1B2C3D4E5F6071")]),
    ("/_static/basic.3f9a2c7e.css", [(1, 1, "3f9a2c7e")]),
    ("/how-to-crawl-1a2b3c4d5e6f", [(0, 0, "how-to-crawl-1a2b3c4d5e6f")]),
    ("/doc/%E4%B8%AD%E6%96%87/3f9a2c7e1b0d4e5f.html", [(2, 0, "3f9a2c7e1b0d4e5f")]),
    ("/docs/15/sql-select.html", []),
])
def test_path_tokens(path, tokens):
    assert path_tokens(path) == tokens


# The classifier on random ids of common generators (the seeded draw is fixed):
# at least this share of each is recognised. A chain needs only a token here
# and there (the next one at the same place is recognised by its position).
@pytest.mark.parametrize(("alphabet", "length", "share"), [
    ("0123456789abcdef", 16, 0.99),
    (string.ascii_letters + string.digits + "-_", 11, 0.85),
    (string.ascii_letters + string.digits, 12, 0.9),
    (string.ascii_lowercase + string.digits, 12, 0.85),
    (string.ascii_uppercase + "234567", 16, 0.85),
])
def test_share_of_random_ids_recognised(alphabet, length, share):
    rnd = random.Random(f"{alphabet}{length}")
    ids = ["".join(rnd.choice(alphabet) for _ in range(length)) for _ in range(500)]
    assert sum(map(looks_random, ids)) >= share * len(ids)


# --- evidence and limits ---------------------------------------------------------------


@pytest.mark.parametrize(("meta", "evidence"), [
    ({}, PathEvidence()),
    ({"descent_run": 3, "numbered_run": 2, "token_run": 1}, PathEvidence(3, 2, 1)),
    ({"descent_run": "3", "numbered_run": -1, "token_run": True}, PathEvidence()),  # bad values
    ({"descent_run": 2.5, "shape_run": 4}, PathEvidence()),
])
def test_evidence_from_meta(meta, evidence):
    assert PathEvidence.from_meta(meta) == evidence


def test_evidence_to_meta_is_compact_json():
    assert PathEvidence().to_meta() == {}
    meta = PathEvidence(4, 0, 2).to_meta()
    assert meta == {"descent_run": 4, "token_run": 2}
    assert PathEvidence.from_meta(json.loads(json.dumps(meta))) == PathEvidence(4, 0, 2)
    assert set(PathEvidence(1, 1, 1).to_meta()) == set(META_KEYS)


@pytest.mark.parametrize(("limits", "message"), [
    ({"max_descent_run": -1}, "TRAP_MAX_DESCENT_RUN (-1) must be 0 (off) or more."),
    ({"max_numbered_run": -2}, "TRAP_MAX_NUMBERED_RUN (-2) must be 0 (off) or more."),
    ({"max_token_run": -1}, "TRAP_MAX_TOKEN_RUN (-1) must be 0 (off) or more."),
    ({"max_token_variants": -1}, "TRAP_MAX_TOKEN_VARIANTS (-1) must be 0 (off) or more."),
    ({"hosts_tracked": 0}, "TRAP_HOSTS_TRACKED (0) must be 1 or more."),
])
def test_limits_reject_bad_values(limits, message):
    with pytest.raises(ValueError) as info:
        TrapLimits(**limits)
    assert str(info.value) == message


def test_limits_enabled():
    assert TrapLimits().enabled
    assert not TrapLimits(max_descent_run=0, max_numbered_run=0, max_token_run=0,
                          max_token_variants=0).enabled


def _step(parent: str, child: str, meta: dict[str, int] | None = None, guard: PathTrapGuard | None = None):
    guard = guard or PathTrapGuard()
    return guard.judge(guard.page("http://site.test" + parent, meta or {}), "http://site.test" + child, HOST)


@pytest.mark.parametrize(("parent", "meta", "child", "evidence"), [
    # deeper: both runs grow; numbered only when a new level has a digit or a token
    ("/", {}, "/docs/", PathEvidence(1, 0, 0)),
    ("/docs/", {"descent_run": 1}, "/docs/15/", PathEvidence(2, 1, 0)),
    ("/docs/15/", {"descent_run": 2, "numbered_run": 1}, "/docs/15/tutorial/", PathEvidence(3, 0, 0)),
    ("/a/", {"descent_run": 5, "numbered_run": 5}, "/a/%E4%B8%AD/", PathEvidence(6, 0, 0)),  # escapes are no digits
    # sideways keeps, upwards resets
    ("/2024/05/", {"descent_run": 2, "numbered_run": 2}, "/2024/06/", PathEvidence(2, 2, 0)),
    ("/2024/05/13/", {"descent_run": 3, "numbered_run": 3}, "/2024/", PathEvidence(0, 0, 0)),
    # tokens: fresh ones grow the run, the page's own do not
    ("/", {}, "/s/3f9a2c7e1b0d4e5f/", PathEvidence(1, 1, 1)),
    ("/s/3f9a2c7e1b0d4e5f/", {"descent_run": 1, "numbered_run": 1, "token_run": 1},
     "/s/e1c5b773141f0602/", PathEvidence(1, 1, 2)),
    ("/tree/da39a3ee5e6b4b0d3255bfef95601890afd80709/", {"token_run": 3},
     "/tree/da39a3ee5e6b4b0d3255bfef95601890afd80709/src/", PathEvidence(1, 0, 0)),
    # a token one case of letters only is still the next token where the page had one
    ("/s/k3j9xq0z2m/", {"token_run": 4}, "/s/kqxvzmtbwr/", PathEvidence(0, 0, 5)),
    ("/s/k3j9xq0z2m/", {"token_run": 4}, "/s/library/", PathEvidence(0, 0, 0)),  # another length: a name
    # numbered names that count on (ch01s02s03 -> ch01s02s04) are not fresh tokens
    ("/book/ch01s02s03.html", {}, "/book/ch01s02s04.html", PathEvidence(0, 0, 0)),
])
def test_one_step_of_evidence(parent, meta, child, evidence):
    verdict = _step(parent, child, meta)
    assert verdict == Verdict(evidence)  # followed, with this evidence


# --- generated traps: cut at a stated step --------------------------------------------------


def crawl(guard: PathTrapGuard, seed: str, links: Callable[[str], Iterable[str]],
          limit: int = 100_000, shape_limit: int = 30, repeat_limit: int = 3):
    """Breadth-first over a link graph as the crawler walks it: each new link
    judged on the page where it is first found, by the existing checks (URL
    shape runs, repeated segments) and the path rules.

    Returns (fetched paths, {dropped path: reason}, {path: evidence})."""
    seed = normalize("http://site.test" + seed)
    seen = {seed}
    queue = deque([(seed, {}, 0)])
    fetched: list[str] = []
    dropped: dict[str, str] = {}
    evidence: dict[str, PathEvidence] = {seed: PathEvidence()}
    while queue and len(fetched) < limit:
        url, meta, shape_run = queue.popleft()
        fetched.append(url[len("http://site.test"):])
        page = guard.page(url, meta)
        shape = url_shape(url)
        for href in links(url[len("http://site.test"):]):
            link = normalize(href, url)
            if link in seen:
                continue
            seen.add(link)
            path = link[len("http://site.test"):]
            if max_segment_repeats(link) >= repeat_limit:
                dropped[path] = "repeated_segment"
                continue
            run = shape_run + 1 if url_shape(link) == shape else 0
            if run > shape_limit:
                dropped[path] = "shape_run"
                continue
            verdict = guard.judge(page, link, HOST)
            if verdict.reason:
                dropped[path] = verdict.reason
                continue
            evidence[link] = verdict.evidence
            queue.append((link, verdict.evidence.to_meta(), run))
    return fetched, dropped, evidence


def numbered_levels(path: str) -> list[str]:
    """/x1/y2/z3/...: each page links to a child one level deeper."""
    n = path.count("/")
    return ["xyz"[(n - 1) % 3] + f"{n}/"]


def word_levels(path: str) -> list[str]:
    """/alpha/bravo/charlie/...: levels named with words, never repeated."""
    words = ("alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike november "
             "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()
    return [words[path.count("/") - 1] + "/"]


def session(path: str) -> list[str]:
    """/s/<token>/: every page issues a fresh session id (the mock server's trap)."""
    token = path.split("/")[2] if path.startswith("/s/") else TRAP_SESSION_START
    return [f"/s/{next_session_token(token)}/" if path.startswith("/s/") else f"/s/{token}/"]


def session_leaves(path: str) -> list[str]:
    """/p/<token>: the same, the token as the last segment (no place is counted)."""
    token = path[3:] if path.startswith("/p/") else TRAP_SESSION_START
    return [f"/p/{next_session_token(token)}"]


def wide_session(path: str) -> list[str]:
    """A session trap whose pages each issue a new session id and link to five
    sections under it."""
    token = next_session_token(path)
    return [f"/s/{token}/section-{k}/" for k in range(5)]


# Session ids of lowercase letters and digits; every third has no digit and
# cannot be told from a word.
ONE_CASE_IDS = ["k3j9xq0z2m", "p2m9zx7q1k", "zxqvbnmlkj", "q9w8e7r6t5", "u4z1goopuh", "mbvcxzqwrt",
                "zejm81y7fe", "pqd2m95ceg", "hgfdsqwrtz", "dipgj1pd4b", "6tr9pj8mfo", "wqrtzpsdfg"]


def one_case_session(path: str) -> list[str]:
    n = ONE_CASE_IDS.index(path.split("/")[2]) + 1 if path.startswith("/s/") else 0
    return [f"/s/{ONE_CASE_IDS[n]}/"]


def token_levels(path: str) -> list[str]:
    """/t/<token>/<token>/...: a fresh token one level deeper at every step."""
    return [next_session_token(path)[:12] + "/"] if path.startswith("/t/") else ["/t/"]


def zigzag(path: str) -> list[str]:
    """/n1/ -> /n2/ -> /n2/n3/ -> /n2/n4/ ...: a sideways step between two deeper ones."""
    parts = [p for p in path.split("/") if p]
    n = int(parts[-1][1:]) if parts else 0
    if n % 2:  # went deeper last: now sideways
        return ["/" + "/".join([*parts[:-1], f"n{n + 1}"]) + "/"]
    return [f"n{n + 1}/"]


@pytest.mark.parametrize(("links", "seed", "fetched", "reason", "last"), [
    # 8 numbered levels fetched, the link to the ninth cut
    (numbered_levels, "/", 9, "numbered_run", "/x1/y2/z3/x4/y5/z6/x7/y8/"),
    # levels named with words: only the descent rule, after 20 levels
    (word_levels, "/", 21, "descent_run", None),
    # one session path a page: ten fetched, the eleventh cut (also the
    # eleventh fresh token in a row: the place's count says it first)
    (session, "/", 11, "token_variants", None),
    # the token as a leaf: only the run of fresh tokens
    (session_leaves, "/", 11, "token_run", None),
    # fresh token levels: numbered (tokens count as numbered levels)
    (token_levels, "/", 10, "numbered_run", None),
    # sideways steps do not reset the runs: 8 numbered levels in 16 steps
    (zigzag, "/", 17, "numbered_run", "/n2/n4/n6/n8/n10/n12/n14/n16/"),
])
def test_generated_trap_chain_is_cut_at_the_stated_step(links, seed, fetched, reason, last):
    got, dropped, _ = crawl(PathTrapGuard(), seed, links)
    assert len(got) == fetched  # the seed and the pages the chain was allowed
    assert list(dropped.values()) == [reason]
    if last is not None:
        assert got[-1] == last


def test_session_ids_that_look_like_words_do_not_break_the_chain():
    """An id standing where the page had one, with its length, is the next id."""
    assert [looks_random(t) for t in ONE_CASE_IDS[:3]] == [True, True, False]
    got, dropped, evidence = crawl(PathTrapGuard(), "/", one_case_session)
    assert got == ["/", *(f"/s/{t}/" for t in ONE_CASE_IDS[:10])]
    assert dropped == {f"/s/{ONE_CASE_IDS[10]}/": "token_variants"}
    assert [evidence[normalize(f"http://site.test/s/{t}/")].token_run for t in ONE_CASE_IDS[:10]] == list(
        range(1, 11))


def test_wide_session_trap_is_cut_by_the_count_at_its_place():
    """Five links a page: without the count it would grow 5^10 pages before
    token_run ends it; the place /s/* stops it after TRAP_MAX_TOKEN_VARIANTS."""
    got, dropped, _ = crawl(PathTrapGuard(), "/", wide_session)
    # The seed, the 5 sections of the first session, and the 5 links of the
    # first section page, which bring the place's count to 10. The other 4
    # first-session pages' links (20) and the 5 x 5 of the second session's
    # pages are cut.
    assert len(got) == 11
    assert Counter(dropped.values()) == {"token_variants": 45}
    alone, _, _ = crawl(PathTrapGuard(TrapLimits(max_token_variants=0)), "/", wide_session, limit=2000)
    assert len(alone) == 2000


@pytest.mark.parametrize(("limits", "links", "fetched"), [
    ({"max_numbered_run": 3}, numbered_levels, 4),
    ({"max_numbered_run": 0}, numbered_levels, 21),  # off: the descent rule is left
    ({"max_numbered_run": 0, "max_descent_run": 5}, numbered_levels, 6),
    ({"max_token_variants": 0}, session, 11),  # token_run alone: the same step
    ({"max_token_variants": 0, "max_token_run": 0, "max_numbered_run": 0, "max_descent_run": 0},
     session, 500),  # all off: never cut
])
def test_limits_move_the_cut(limits, links, fetched):
    got, _, _ = crawl(PathTrapGuard(TrapLimits(**limits)), "/", links, limit=500)
    assert len(got) == fetched


def test_known_place_counts_are_per_host_and_bounded():
    guard = PathTrapGuard(TrapLimits(max_token_variants=2, hosts_tracked=2))
    page = guard.page("http://a.test/s/3f9a2c7e1b0d4e5f/", {"token_run": 1})

    def judge(host: str, token: str) -> str | None:
        return guard.judge(page, f"http://{host}/s/{token}/", host).reason

    assert [judge("a.test", t) for t in ("e1c5b773141f0602", "0a1b2c3d4e5f6071", "1b2c3d4e5f60718a")] == [
        None, None, "token_variants"]
    assert judge("b.test", "e1c5b773141f0602") is None  # another host: its own count
    assert judge("c.test", "e1c5b773141f0602") is None  # a third host: a.test is forgotten
    assert judge("a.test", "2c3d4e5f60718a9b") is None
    assert len(guard._places) == 2


def test_places_per_host_are_bounded():
    from crawler.scope.traps import PLACES_PER_HOST

    guard = PathTrapGuard(TrapLimits(max_token_variants=1))
    page = guard.page("http://a.test/", {})
    names = [a + b for a in string.ascii_lowercase for b in string.ascii_lowercase][:PLACES_PER_HOST * 3]
    for name in names:
        guard.judge(page, f"http://a.test/{name}/3f9a2c7e1b0d4e5f/", "a.test")
    assert len(guard._places._hosts["a.test"]) == PLACES_PER_HOST
    # numbers are masked: /p1/<token>/ and /p2/<token>/ are one place
    guard.judge(page, "http://b.test/p1/3f9a2c7e1b0d4e5f/", "b.test")
    guard.judge(page, "http://b.test/p2/3f9a2c7e1b0d4e5f/", "b.test")
    assert list(guard._places._hosts["b.test"].values()) == [2]


# --- real deep URL sets are never cut -----------------------------------------------------------


def url_list(name: str) -> list[str]:
    return [line for line in (DATA / name).read_text().splitlines() if line and not line.startswith("#")]


def directory_listing(paths: list[str]) -> Callable[[str], list[str]]:
    """Each directory page lists its subdirectories and files (an autoindex),
    so every page is reached down the whole chain of its directories: the
    longest descent a real tree can give."""
    children: dict[str, set[str]] = {}
    for path in paths:
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i]) + "/"
            child = "/".join(parts[:i + 1]) + ("/" if i + 1 < len(parts) else "")
            children.setdefault(parent, set()).add(child)
    return lambda path: sorted(children.get(path, ()))


@pytest.mark.parametrize(("name", "directories", "deepest"), [
    ("rust-doc.txt", 41, PathEvidence(11, 1, 1)),
    ("openjdk-17-doc.txt", 11, PathEvidence(7, 0, 0)),
    ("libstdc++-12-doc.txt", 4, PathEvidence(2, 0, 1)),
    ("libboost1.81-doc.txt", 33, PathEvidence(8, 0, 0)),
    ("python-django-doc.txt", 84, PathEvidence(7, 1, 0)),
])
def test_real_doc_trees_are_never_cut(name, directories, deepest):
    paths = url_list(name)
    got, dropped, evidence = crawl(PathTrapGuard(), "/", directory_listing(paths))
    assert dropped == {}
    assert set(paths) <= set(got)
    assert len(got) == len(paths) + directories  # every file and every directory page
    # the longest runs the tree gave: well below the limits (20, 8, 10)
    assert PathEvidence(*(max(getattr(e, f) for e in evidence.values())
                      for f in ("descent_run", "numbered_run", "token_run"))) == deepest


def git_web_ui() -> tuple[Callable[[str], list[str]], int]:
    """A git web UI over this repository's first commits: log pages of ten
    commits, each commit linking its parents, its tree and the files of that
    tree, trees listing their directories, for every commit."""
    history = [line.split() for line in url_list("git-history.txt")]
    newest_first = [sha for sha, *_ in reversed(history)]
    parents = {sha: rest for sha, *rest in history}
    files = ["README.md", "crawler/urls.py", "crawler/frontier/scheduler.py", "crawler/store/sqlite.py",
             "tests/data/urls/whatwg.txt", "docs/reference.md"]
    repo = "/acme/site-crawler"

    def links(path: str) -> list[str]:
        rest = path[len(repo):]
        if rest == "/":
            return [f"{repo}/commits/main?page=1", f"{repo}/tree/main/"]
        if rest.startswith("/commits/main?page="):
            page = int(rest.rpartition("=")[2])
            shas = newest_first[(page - 1) * 10:page * 10]
            more = [f"{repo}/commits/main?page={page + 1}"] if page * 10 < len(newest_first) else []
            return [f"{repo}/commit/{sha}" for sha in shas] + more
        if rest.startswith("/commit/"):
            sha = rest[len("/commit/"):]
            return ([f"{repo}/commit/{p}" for p in parents[sha]] + [f"{repo}/tree/{sha}/"]
                    + [f"{repo}/blob/{sha}/{f}" for f in files[:3]])
        if rest.startswith("/tree/"):
            ref, _, sub = rest[len("/tree/"):].partition("/")
            listing = directory_listing([f"/{f}" for f in files])("/" + sub)
            return [f"{repo}/tree/{ref}{p}" if p.endswith("/") else f"{repo}/blob/{ref}{p}" for p in listing]
        return []

    return links, len(history)


def test_git_web_ui_is_never_cut():
    links, commits = git_web_ui()
    got, dropped, evidence = crawl(PathTrapGuard(), "/acme/site-crawler/", links)
    assert dropped == {}
    assert sum("/commit/" in p for p in got) == commits
    # per commit and for main: the tree and its 7 directories
    assert sum("/tree/" in p for p in got) == 8 * (commits + 1)
    assert max(e.token_run for e in evidence.values()) == 2


# --- end to end: a crawl of the mock server's traps -----------------------------------------------


def test_the_chain_evidence_travels_through_the_frontier():
    assert set(META_KEYS) <= set(SERIALIZED_META)


def test_crawl_stops_in_the_session_and_numbered_traps(server, tmp_path, frontier_settings):
    result = run_crawl(server, tmp_path, [f"seeds={server.url('/trap/')}", "follow=all"],
                       {**frontier_settings, "CONCURRENT_REQUESTS": 1, "LOG_LEVEL": "DEBUG",
                        "CLOSESPIDER_PAGECOUNT": 60},  # ends an uncut crawl quickly
                       timeout=90)
    assert result.returncode == 0, result.log[-3000:]
    tokens = [TRAP_SESSION_START]
    for _ in range(9):
        tokens.append(next_session_token(tokens[-1]))
    levels = ["/trap/" + "".join("xyz"[i % 3] + f"{i + 1}/" for i in range(n)) for n in range(1, 9)]
    assert Counter(result.fetched) == Counter(
        ["/robots.txt", "/trap/", *(f"/trap/s/{t}/" for t in tokens), *levels])
    # the tenth session page's link, and the link to the ninth level, were cut
    assert "'trap/dropped/token_variants': 1" in result.log
    assert "'trap/dropped/numbered_run': 1" in result.log
    assert f"Dropped <GET {server.url('/trap/x1/y2/z3/x4/y5/z6/x7/y8/z9/')}>: path trap" in result.log
    eleventh = next_session_token(tokens[-1])
    assert f"Dropped <GET {server.url(f'/trap/s/{eleventh}/')}>: path trap" in result.log
