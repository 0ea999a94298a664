"""``scrapy graph``: strings XML 1.0 forbids never reach a file, every format
loads in networkx with exactly what the store holds (cleaned), and a crawl
that does not exist is one line and a non-zero exit, with nothing created."""

from __future__ import annotations

import csv
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import networkx as nx
import pytest

from crawler.operations.graph import clean_name, clean_text, export_graph, write_csv, write_gexf, write_graphml
from crawler.store import SQLiteStore
from crawler.store.mongo import MongoStore
from tests.support import ROOT

C0 = "".join(map(chr, range(0x20)))
KEPT = "\t\n\r"  # the only C0 controls XML 1.0 allows
# Allowed in XML 1.0 and kept: DEL, C1 controls, markup characters, other scripts.
ALLOWED = "\x7f\x85\x9f<&>\"' é網\U0001f600"
# Every C0 control (but tab, LF, CR) and U+FFFE, U+FFFF: replaced in text.
CLEAN_C0 = "".join(c if c in KEPT else "\ufffd" for c in C0)

ROOT_URL = "http://127.0.0.1/"
FORMATS = [".graphml", ".gexf", ".csv"]


@pytest.mark.parametrize("char", [chr(c) for c in range(0x20) if chr(c) not in KEPT]
                         + ["\ud800", "\udbff", "\udc00", "\udfff", "\ufffe", "\uffff"])
def test_forbidden_characters_are_replaced_in_text(char):
    assert clean_text(f"a{char}b") == "a\ufffdb"


@pytest.mark.parametrize("char", [*KEPT, " ", "\x7f", "\x80", "\x9f", "\ud7ff", "\ue000", "\ufffd", "\U00010000",
                                  "\U0010ffff"])
def test_allowed_characters_are_kept(char):
    assert clean_text(f"a{char}b") == f"a{char}b"
    assert clean_name(f"a{char}b") == f"a{char}b"


@pytest.mark.parametrize(("name", "cleaned"), [
    ("http://h/a\x00b", "http://h/a%00b"),
    ("http://h/a\x01\x1fb", "http://h/a%01%1Fb"),
    ("http://h/\ufffe", "http://h/%EF%BF%BE"),
    ("http://h/\uffff", "http://h/%EF%BF%BF"),
    ("http://h/\ud800", "http://h/%EF%BF%BD"),  # a lone surrogate: as U+FFFD
    ("x\x0by.test", "x%0By.test"),
    ("http://h/a%01b", "http://h/a%01b"),
])
def test_forbidden_characters_are_percent_encoded_in_names(name, cleaned):
    assert clean_name(name) == cleaned


def page(url: str, title: str | None, links: list[tuple[str, str]], page_type: str = "info") -> dict[str, object]:
    return {"url": url, "site": "127.0.0.1", "depth": 0, "state": "C", "status": 200, "page_type": page_type,
            "title": title, "fetched_at": 1.0, "links": [{"url": u, "anchor": a} for u, a in links]}


@pytest.fixture
def dirty_store(tmp_path):
    """Pages and links whose titles, anchors, URLs and sites hold every control
    character; one page per C0 control, each linked from the root page."""
    pages = [page(ROOT_URL, "Root " + C0 + "\ufffe\uffff" + ALLOWED,
                  [(f"{ROOT_URL}p{i}", f"anchor {i}:{chr(i)}.") for i in range(0x20)]
                  + [(f"{ROOT_URL}raw\x01\x1f", "\x00" + ALLOWED + "\uffff"),  # never stored
                     ("http://x\x01y.test/", "off-site \x08")],
                  page_type="index")]
    pages += [page(f"{ROOT_URL}p{i}", f"title {i}:{chr(i)}.", []) for i in range(0x20)]
    pages.append(page(f"{ROOT_URL}ctl\x02page", None, [(ROOT_URL, "back\x1b")]))
    path = tmp_path / "dirty.sqlite3"
    with SQLiteStore(path) as store:
        store.write(pages)
    return path


def expected_nodes() -> dict[str, dict[str, object]]:
    def node(title: str, site: str = "127.0.0.1", stored: bool = True, page_type: str = "info") -> dict[str, object]:
        return {"title": title, "page_type": page_type if stored else "", "site": site,
                "state": "C" if stored else "", "stored": stored}

    nodes = {ROOT_URL: node("Root " + CLEAN_C0 + "\ufffd\ufffd" + ALLOWED, page_type="index")}
    for i in range(0x20):
        nodes[f"{ROOT_URL}p{i}"] = node(f"title {i}:{CLEAN_C0[i]}.")
    nodes[f"{ROOT_URL}ctl%02page"] = node("")
    nodes[f"{ROOT_URL}raw%01%1F"] = node("", stored=False)
    nodes["http://x%01y.test/"] = node("", site="x%01y.test", stored=False)
    return nodes


def expected_edges() -> dict[tuple[str, str], str]:
    edges = {(ROOT_URL, f"{ROOT_URL}p{i}"): f"anchor {i}:{CLEAN_C0[i]}." for i in range(0x20)}
    edges[(ROOT_URL, f"{ROOT_URL}raw%01%1F")] = "\ufffd" + ALLOWED + "\ufffd"
    edges[(ROOT_URL, "http://x%01y.test/")] = "off-site \ufffd"
    edges[(f"{ROOT_URL}ctl%02page", ROOT_URL)] = "back\ufffd"
    return edges


def read_back(path: Path) -> nx.DiGraph:
    if path.suffix == ".csv":
        with path.open(encoding="utf-8", newline="") as f:
            return nx.DiGraph([(r["source"], r["target"], {k: v for k, v in r.items() if k not in ("source", "target")})
                               for r in csv.DictReader(f)])
    g = nx.read_graphml(path) if path.suffix == ".graphml" else nx.read_gexf(path)
    for _, attrs in g.nodes(data=True):
        attrs.pop("label", None)  # GEXF's label: the node's id again
    for _, _, attrs in g.edges(data=True):
        attrs.pop("id", None)
    return g


@pytest.mark.parametrize("suffix", FORMATS)
def test_page_graph_with_every_control_character_loads_exactly(dirty_store, tmp_path, suffix):
    out = tmp_path / f"pages{suffix}"
    with SQLiteStore(dirty_store) as store:
        counts = export_graph(store, out)
    nodes, edges = expected_nodes(), expected_edges()
    assert counts == (len(nodes), len(edges)) == (36, 35)
    out.read_text(encoding="utf-8")  # valid UTF-8 (no lone surrogate got through)
    g = read_back(out)
    assert {(a, b): attrs["anchor"] for a, b, attrs in g.edges(data=True)} == edges
    if suffix == ".csv":
        assert set(g.nodes) == set(nodes)
        return
    assert dict(g.nodes(data=True)) == nodes


@pytest.mark.parametrize("suffix", FORMATS)
def test_site_graph_with_a_control_character_in_a_site_loads_exactly(dirty_store, tmp_path, suffix):
    out = tmp_path / f"sites{suffix}"
    with SQLiteStore(dirty_store) as store:
        assert export_graph(store, out, sites=True) == (2, 1)
    g = read_back(out)
    assert [(a, b, int(w["weight"])) for a, b, w in g.edges(data=True)] == [("127.0.0.1", "x%01y.test", 1)]
    if suffix != ".csv":
        assert {n: {k: int(v) for k, v in a.items()} for n, a in g.nodes(data=True)} == {
            "127.0.0.1": {"pages": 34, "links": 35, "errors": 0},
            "x%01y.test": {"pages": 0, "links": 0, "errors": 0}}


@pytest.mark.parametrize("suffix", FORMATS)
def test_writers_clean_lone_surrogates_they_are_given(tmp_path, suffix):
    """No store holds a lone surrogate (SQLite and BSON want UTF-8), but the
    writers take any nodes and edges: a surrogate must not stop the file."""
    nodes = {"a\ud800": {"title": "t\udfff\x01", "n": 3}, "b": {"title": "\ufffe", "n": 4}}
    edges = [("a\ud800", "b", {"anchor": "x\udc00y"})]
    out = tmp_path / f"raw{suffix}"
    {".graphml": write_graphml, ".gexf": write_gexf}.get(suffix, lambda p, n, e: write_csv(p, e))(out, nodes, edges)
    g = read_back(out)
    assert list(g.edges(data=True)) == [("a\ufffd", "b", {"anchor": "x\ufffdy"})]
    if suffix != ".csv":
        assert {n: (a["title"], int(a["n"])) for n, a in g.nodes(data=True)} == {
            "a\ufffd": ("t\ufffd\ufffd", 3), "b": ("\ufffd", 4)}


def scrapy_graph(out: Path, *settings: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "scrapy", "graph", "-o", str(out)]
    for s in settings:
        cmd += ["-s", s]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["crawl_dir", "store_path"])
def test_missing_sqlite_crawl_is_one_line_and_creates_nothing(tmp_path, how):
    crawl_dir = tmp_path / "crawls"
    out = tmp_path / "graph.graphml"
    if how == "crawl_dir":
        proc = scrapy_graph(out, f"CRAWL_DIR={crawl_dir}", "CRAWL_NAME=nosuch")
        where = crawl_dir / "nosuch.sqlite3"
    else:
        where = crawl_dir / "elsewhere.sqlite3"
        proc = scrapy_graph(out, f"STORE_PATH={where}", "CRAWL_NAME=nosuch")
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr == f"scrapy graph: no crawl 'nosuch': no store file {where}\n"
    assert list(tmp_path.iterdir()) == []  # no store, no crawl directory, no graph file


@pytest.mark.slow
def test_existing_sqlite_crawl_is_exported(dirty_store, tmp_path):
    out = tmp_path / "graph.gexf"
    proc = scrapy_graph(out, f"STORE_PATH={dirty_store}")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"wrote {out}: 36 nodes, 35 edges\n"


def test_missing_mongodb_crawl_is_one_line_and_creates_no_database(tmp_path, mongo_uri):
    import pymongo

    name = "nosuch_" + uuid.uuid4().hex[:8]
    out = tmp_path / "graph.csv"
    proc = scrapy_graph(out, f"MONGO_URI={mongo_uri}", f"CRAWL_NAME={name}")
    assert proc.returncode == 1
    assert proc.stderr == (f"scrapy graph: no crawl {name!r}: MongoDB at {mongo_uri} has no 'pages' collection "
                           f"in database {name!r}\n")
    assert not out.exists()
    with pymongo.MongoClient(mongo_uri) as client:
        assert name not in client.list_database_names()


def test_existing_mongodb_crawl_is_exported(tmp_path, mongo_uri):
    import pymongo

    name = "graph_" + uuid.uuid4().hex[:8]
    with MongoStore(mongo_uri, name) as store:
        store.write([page(ROOT_URL, "Root\x01", [(f"{ROOT_URL}a", "A\x02")])])
    try:
        out = tmp_path / "graph.graphml"
        proc = scrapy_graph(out, f"MONGO_URI={mongo_uri}", f"MONGO_DATABASE={name}", "CRAWL_NAME=other")
        assert (proc.returncode, proc.stderr) == (0, "")
        g = read_back(out)
        assert g.nodes[ROOT_URL]["title"] == "Root\ufffd"
        assert list(g.edges(data=True)) == [(ROOT_URL, f"{ROOT_URL}a", {"anchor": "A\ufffd"})]
    finally:
        with pymongo.MongoClient(mongo_uri) as client:
            client.drop_database(name)


@pytest.mark.slow
def test_unreachable_mongodb_is_one_line(tmp_path):
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "graph.csv"
    proc = scrapy_graph(out, f"MONGO_URI=mongodb://user:secret@127.0.0.1:{port}", "MONGO_TIMEOUT=0.5")
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"scrapy graph: cannot reach MongoDB at mongodb://***@127.0.0.1:{port} "
                                  "within 0.5 s: ")
    assert proc.stderr.count("\n") == 1 and "secret" not in proc.stderr
    assert not out.exists()
