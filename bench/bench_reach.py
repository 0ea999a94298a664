"""Reach of the default crawl: how much of a documentation tree
``follow=index`` fetches, against everything reachable from its start page.

    python -m bench.bench_reach [--only NAME,...] [--root NAME=DIR[:START]] [--code DIR] [--missed N] [--json FILE]

By default (``-a follow=index``) the crawler follows only the links of pages
it types ``index``; a contents page or a back-of-book index typed ``info``
hides every page linked from it alone. For each tree of ``TREES`` (Debian
documentation packages of several generators; never the PostgreSQL or
Python documentation, where the crawler is judged), this serves the tree's
directory from a local HTTP server on 127.0.0.1 (``tests/support/mockserver.py
--root``) and crawls it twice with ``scrapy crawl site`` as a user would
(no delay, ``-s NETWORK_ALLOWLIST=127.0.0.0/8``, the embedded Redis and
store in a fresh ``CRAWL_DIR``):

- ``-a follow=all``: every page reachable from the start page by any link
  (the reference);
- the default, ``follow=index``: what a user gets.

Printed per tree: pages the default crawl stored of those the ``follow=all``
crawl stored, the ratio (the target: at least 99.5 %), the pages it stored
in all (a page only a navigation link reaches is not among the
``follow=all`` pages when no ``<a>`` links it) and the requests
information pages' navigation links added, the pages it typed
``index``; then each missed page (at most ``--missed`` a tree) with the
pages that link to it in the ``follow=all`` crawl and the type the default
crawl gave each of them (``-`` where it never fetched it).

``--root NAME=DIR[:START]`` measures a tree that is not one of ``TREES``
instead (``START`` defaults to ``index.html``): the held-out judges,
``--root python3.11=/usr/share/doc/python3.11/html`` (``apt-get install
python3.11-doc``), which no rule may be fitted to.

``--code DIR`` runs the crawls with the ``crawler`` package of another
checkout (``git worktree add /tmp/before HEAD~1``): the figures before a
change. Install the trees first::

    apt-get install --no-install-recommends docbook-xsl-doc-html libgtk-3-doc libglib2.0-doc \\
        libcairo2-doc libharfbuzz-doc sphinx-doc cmake-doc octave-doc maxima-doc flex-doc \\
        mailutils-doc autogen-doc libsigc++-3.0-doc junit4-doc
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from bench.harness import LOOPBACK, ROOT, query, run, scrapy_crawl, serve, store_path

TARGET = 0.995


@dataclass(frozen=True)
class Tree:
    name: str
    package: str
    generator: str
    root: str
    start: str = "index.html"


TREES = (
    Tree("docbook-xsl", "docbook-xsl-doc-html", "docbook", "/usr/share/doc/docbook-xsl-doc-html/doc"),
    Tree("gtk3", "libgtk-3-doc", "gtk-doc", "/usr/share/gtk-doc/html/gtk3"),
    Tree("gio", "libglib2.0-doc", "gtk-doc", "/usr/share/gtk-doc/html/gio"),
    Tree("glib", "libglib2.0-doc", "gtk-doc", "/usr/share/gtk-doc/html/glib"),
    Tree("cairo", "libcairo2-doc", "gtk-doc", "/usr/share/gtk-doc/html/cairo"),
    Tree("harfbuzz", "libharfbuzz-doc", "gtk-doc", "/usr/share/gtk-doc/html/harfbuzz"),
    Tree("sphinx", "sphinx-doc", "sphinx", "/usr/share/doc/sphinx-doc/html"),
    Tree("cmake", "cmake-doc", "sphinx", "/usr/share/doc/cmake-data/html"),
    Tree("octave", "octave-doc", "texinfo", "/usr/share/doc/octave/octave.html"),
    Tree("maxima", "maxima-doc", "texinfo", "/usr/share/doc/maxima-doc/html", "maxima_toc.html"),
    Tree("flex", "flex-doc", "texinfo", "/usr/share/doc/flex-doc/html"),
    Tree("mailutils", "mailutils-doc", "texinfo", "/usr/share/doc/mailutils/mailutils.html"),
    Tree("autogen", "autogen-doc", "texinfo", "/usr/share/doc/autogen/autogen.html"),
    Tree("sigc++", "libsigc++-3.0-doc", "doxygen", "/usr/share/doc/libsigc++-3.0-doc/reference/html"),
    Tree("junit4", "junit4-doc", "javadoc", "/usr/share/doc/junit4/api"),
)


def crawl(seed: str, crawl_dir: Path, follow: str, code: Path) -> tuple[Path, int]:
    """``scrapy crawl site`` of ``seed`` with the defaults but the delay and
    the loopback allowlist; returns its store and its requests that
    information pages' navigation links added (``frontier/navigation_new``
    in its closing stats)."""
    shutil.rmtree(crawl_dir, ignore_errors=True)
    settings = {"DOWNLOAD_DELAY": 0, "NETWORK_ALLOWLIST": LOOPBACK, "CRAWL_DIR": crawl_dir, "LOG_LEVEL": "INFO",
                "TELNETCONSOLE_ENABLED": False}
    stats = run(scrapy_crawl([f"seeds={seed}", f"follow={follow}"], settings), code,
                env={**os.environ, "PYTHONPATH": str(code)}, timeout=3600)
    return store_path(crawl_dir), int(stats.get("frontier/navigation_new", 0))


def pages_of(store: Path) -> dict[str, str | None]:
    """Each stored page's URL and type (HTML pages fetched: state C)."""
    return dict(query(store, "SELECT url, page_type FROM pages WHERE state = 'C'"))


def inlinks_of(store: Path, urls: set[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {u: [] for u in urls}
    for src, dst in query(store, "SELECT src, dst FROM links"):
        if dst in out and src != dst:
            out[dst].append(src)
    return out


def contents_typed_info(tree: Tree, default: dict[str, str | None], prefix: str) -> list[str]:
    """The pages of the default crawl that the generator's own markup says
    are contents pages or indexes (``tools.pagetypes.sources.label``: its
    table-of-contents and index blocks hold at least half of the page's
    text) and that were typed ``info``: each hides whatever it alone
    links to, even where the tree links it from elsewhere too."""
    from tools.pagetypes.sources import label

    generator = "docbook" if tree.generator == "gtk-doc" else tree.generator
    if tree.package == "-":
        return []  # a held-out tree (--root): its generator is not named
    root = Path(tree.root)
    out = []
    for url, kind in sorted(default.items()):
        path = root / unquote(urlsplit(url).path).lstrip("/")
        if kind != "index" and path.suffix in (".html", ".htm") and path.is_file():
            if label(path.read_bytes(), generator)[0] == "index":
                out.append(url)
    return out


def measure(tree: Tree, work: Path, code: Path, missed_shown: int) -> dict:
    server = serve(work, Path(tree.root))
    try:
        seed = server.url("/" + tree.start)
        t0 = time.monotonic()
        everything = pages_of(crawl(seed, work / "all", "all", code)[0])
        default_store, by_navigation = crawl(seed, work / "index", "index", code)
        default = pages_of(default_store)
        seconds = time.monotonic() - t0
        missed = set(everything) - set(default)
        inlinks = inlinks_of(store_path(work / "all"), missed)
    finally:
        server.stop()
    prefix = server.url("")
    hidden = contents_typed_info(tree, default, prefix)
    short = lambda u: u[len(prefix):] if u.startswith(prefix) else u  # noqa: E731
    reached = len(set(everything) & set(default))
    ratio = reached / len(everything) if everything else 1.0
    # Where the missed pages are linked from, and what the default crawl
    # made of those pages: the pages whose type hid them.
    hiders: dict[str, int] = {}
    for srcs in inlinks.values():
        for s in srcs:
            hiders[s] = hiders.get(s, 0) + 1
    return {
        "tree": tree.name, "generator": tree.generator, "reachable": len(everything), "fetched": reached,
        "ratio": ratio, "stored": len(default), "by_navigation": by_navigation, "index_pages": sum(1 for t in default.values() if t == "index"),
        "seconds": seconds,
        "missed": [{"page": short(u), "linked_from": [[short(s), default.get(s, "-")] for s in sorted(inlinks[u])]}
                   for u in sorted(missed)[:missed_shown]],
        "missed_count": len(missed),
        "contents_typed_info": [short(u) for u in hidden],
        "hiding_pages": sorted(([short(s), default.get(s, "-"), n] for s, n in hiders.items()),
                               key=lambda r: -int(r[2]))[:missed_shown],
    }


def held_out(spec: str) -> Tree:
    """A tree given as ``NAME=DIR[:START]`` (``--root``)."""
    name, eq, where = spec.partition("=")
    if not eq or not name or not where:
        sys.exit(f"--root {spec}: give NAME=DIR[:START]")
    root, _, start = where.partition(":")
    return Tree(name, "-", "held-out", root, start or "index.html")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated tree names")
    ap.add_argument("--root", action="append", default=[], metavar="NAME=DIR[:START]",
                    help="a held-out tree to measure instead of TREES (repeatable)")
    ap.add_argument("--code", type=Path, default=ROOT, help="a checkout whose crawler package crawls")
    ap.add_argument("--missed", type=int, default=10, help="missed pages and hiding pages shown a tree")
    ap.add_argument("--json", type=Path, help="write the figures there too")
    args = ap.parse_args()
    names = {n for n in args.only.split(",") if n}
    trees = [t for t in TREES if not names or t.name in names]
    unknown = names - {t.name for t in TREES}
    if args.root:
        trees = [held_out(r) for r in args.root]
    if unknown:
        sys.exit(f"--only: no tree named {', '.join(sorted(unknown))}")
    results = []
    for tree in trees:
        if not (Path(tree.root) / tree.start).exists():
            print(f"{tree.name}: {tree.root}/{tree.start} not found (apt-get install {tree.package}); skipped")
            continue
        work = Path(tempfile.mkdtemp(prefix=f"reach-{tree.name}-"))
        try:
            r = measure(tree, work, args.code.resolve(), args.missed)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        results.append(r)
        mark = "ok" if r["ratio"] >= TARGET else "MISSES"
        print(f"{r['tree']:<12} {r['generator']:<8} {r['fetched']:>5} of {r['reachable']:>5} pages "
              f"{100 * r['ratio']:6.2f} %  ({r['stored']} stored in all, {r['by_navigation']} by navigation, {r['index_pages']} typed index, "
              f"{r['seconds']:.0f} s)  {mark}",
              flush=True)
        for m in r["missed"]:
            links = ", ".join(f"{s} ({t})" for s, t in m["linked_from"][:4])
            more = len(m["linked_from"]) - 4
            print(f"    missed {m['page']}  <- {links}{f' and {more} more' if more > 0 else ''}")
        if r["missed_count"] > len(r["missed"]):
            print(f"    ... {r['missed_count'] - len(r['missed'])} more missed")
        for page, kind, n in r["hiding_pages"]:
            print(f"    hiding page {page} (typed {kind}): links {n} missed pages")
        hidden = r["contents_typed_info"]
        if hidden:
            print(f"    {len(hidden)} contents or index pages (by the generator's markup) typed info: "
                  + ", ".join(hidden[:args.missed]) + (" ..." if len(hidden) > args.missed else ""))
    if results:
        met = sum(r["ratio"] >= TARGET for r in results)
        low = min(results, key=lambda r: r["ratio"])
        print(f"target {100 * TARGET:.1f} % met on {met} of {len(results)} trees; lowest {low['tree']} "
              f"{100 * low['ratio']:.2f} %")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
