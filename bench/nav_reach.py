"""What a documentation tree's navigation links reach, offline: the check
of the default crawl's navigation rule (``crawler.reading.links.is_navigation``)
on trees before a crawl.

    python -m bench.nav_reach [--only NAME,...] [--root NAME=DIR[:START]]

For each tree of ``bench.bench_reach.TREES`` (or ``--root``), read from
disk with the crawler's own page reading (``crawler.reading.extract.analyze``):
the HTML pages reachable from the start page by any link (what a
``follow=all`` crawl fetches, its HTML pages), those reachable by
navigation links alone (``<link rel="next">``, ``<a rel="up">`` ...), and
the navigation links a page gives (what the rule can cost a page). Where
navigation alone reaches (nearly) every page, a part of the tree is reached
whichever of its pages the crawl meets first and however its pages are
typed; where the generator writes none (javadoc, Doxygen), the rule adds
nothing. Links are resolved on disk: a directory link to its index.html,
the query and fragment dropped; only files under the tree's root count.
"""

from __future__ import annotations

import argparse
import sys
from collections import deque
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from bench.bench_reach import TREES, Tree, held_out
from crawler.reading.extract import analyze

BASE = "http://tree.invalid/"


def read(root: Path, start: str) -> dict[str, tuple[list[str], list[str]]]:
    """Every HTML page reachable from ``start`` by any link: its links and
    its navigation links, both as paths from ``root``."""
    pages: dict[str, tuple[list[str], list[str]]] = {}
    todo = deque([start])
    seen = {start}
    while todo:
        rel = todo.popleft()
        page = analyze((root / rel).read_bytes(), BASE + rel)
        links = _local(root, rel, [h for h, _ in page.links])
        navigation = _local(root, rel, page.navigation)
        pages[rel] = (links, navigation)
        for to in links + navigation:
            if to not in seen:
                seen.add(to)
                todo.append(to)
    return pages


def _local(root: Path, rel: str, hrefs: list[str]) -> list[str]:
    out: dict[str, None] = {}
    for href in hrefs:
        url = urljoin(BASE + rel, href.strip())
        if not url.startswith(BASE):
            continue
        path = unquote(urlsplit(url).path)[1:]
        if path == "" or path.endswith("/"):
            path += "index.html"
        if path != rel and path.endswith((".html", ".htm")) and (root / path).is_file():
            out[path] = None
    return list(out)


def reach(pages: dict[str, tuple[list[str], list[str]]], start: str, navigation_only: bool) -> set[str]:
    seen = {start}
    todo = deque([start])
    while todo:
        links, navigation = pages[todo.popleft()]
        for to in navigation if navigation_only else links + navigation:
            if to not in seen:
                seen.add(to)
                todo.append(to)
    return seen


def measure(tree: Tree) -> str:
    root = Path(tree.root)
    pages = read(root, tree.start)
    by_navigation = reach(pages, tree.start, navigation_only=True)
    per_page = sum(len(n) for _, n in pages.values()) / len(pages)
    with_any = sum(1 for _, n in pages.values() if n)
    return (f"{tree.name:<12} {tree.generator:<8} {len(pages):>5} HTML pages reachable; by navigation links alone "
            f"{len(by_navigation):>5} ({100 * len(by_navigation) / len(pages):6.2f} %); pages with navigation "
            f"links {with_any:>5}, {per_page:.1f} a page")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated tree names")
    ap.add_argument("--root", action="append", default=[], metavar="NAME=DIR[:START]",
                    help="a tree to read instead of TREES (repeatable)")
    args = ap.parse_args()
    names = {n for n in args.only.split(",") if n}
    trees = [held_out(r) for r in args.root] or [t for t in TREES if not names or t.name in names]
    for tree in trees:
        if not (Path(tree.root) / tree.start).exists():
            print(f"{tree.name}: {tree.root}/{tree.start} not found; skipped", file=sys.stderr)
            continue
        print(measure(tree), flush=True)


if __name__ == "__main__":
    main()
