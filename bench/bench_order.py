"""Crawl orders by the PageRank they fetch first: ``-a order=bfs``, ``dfs``
and ``importance`` in the same run.

    python -m bench.bench_order [--web-pages 20000] [--sites 100] [--trees sphinx,cmake,glib] [--seed 1] [--keep]
                                [--plot bench/order.png]

The measure of Cho, Garcia-Molina and Page ("Efficient crawling through URL
ordering", WWW 1998) and Baeza-Yates, Castillo, Marin and Rodriguez
("Crawling a country: better strategies than breadth-first for web page
ordering", WWW 2005): the share of the whole graph's PageRank (networkx
``pagerank``, alpha 0.85) held by the first 10 % and the first 20 % of the
pages fetched. ``N`` pages in the graph: the first ``ceil(0.1 N)`` distinct
pages in fetch order, read from the local server's log (a page: on the
generated web, a request answered 200, ``/robots.txt`` left out; on a
tree, a URL the crawl stored as a page, state C: its HTML pages and the
text files some trees link to, not ``/robots.txt``, style sheets, images
or 404s); a fetched page not in the graph counts 0.

Every crawl is ``scrapy crawl site`` as a user runs it, one at a time, to
completion, in a fresh ``CRAWL_DIR`` (its own embedded Redis and SQLite
store; ``REDIS_URL`` removed from the environment): ``-a follow=all -a
order=ORDER``, ``-s DOWNLOAD_DELAY=0 -s SITEMAP_ENABLED=0 -s
NETWORK_ALLOWLIST=127.0.0.0/8``, the defaults otherwise (one request at a
time a site, 16 in all).

The graphs:

- **the generated web** (``bench/webgen.py``: ``--web-pages`` pages over
  ``--sites`` sites on 127.0.1.1 ..., ``--seed``): power-law in-degree,
  15 % of the random links cross-site, popularity independent of depth.
  PageRank on the generator's full graph (what a complete crawl finds;
  checked against the ``bfs`` crawl's exported graph). Seeds: every site's
  home page.
- **real documentation trees** (``--trees``, named as in
  ``bench/bench_reach.py``'s ``TREES``; Debian packages ``sphinx-doc``,
  ``cmake-doc``, ``libglib2.0-doc``), each served from disk by
  ``tests/support/mockserver.py --root`` on 127.0.0.2, seeded at its start
  page. The ``bfs`` crawl's graph is the reference: its stored pages
  (``scrapy export --state C``) are the nodes, the links between them
  (``scrapy graph -o links.csv``) the edges. Which of two near-copies is
  the copy depends on the order (the copy's links are not followed), so
  another order may fetch a few pages that graph lacks (``not in the
  graph``: cmake's ``_sources/*.rst.txt`` of near-identical module pages).

Printed per graph and order: pages fetched, seconds, the shares at 10 % and
20 %, their ratio to ``bfs``'s, the share of the graph's top 10 % by
PageRank among the first 10 % fetched, and the mean directory depth of the
first 10 % fetched (``/`` and ``/a.html`` 0, ``/a/b.html`` 1); then the best
possible shares (pages fetched in PageRank order). Targets: importance at
least 1.3x bfs's share at 10 % on the generated web; never below 0.98x
bfs's (10 % and 20 %) on a real tree; dfs is reported, not targeted.
``--no-web`` skips the generated web; ``--keep`` keeps the work directory (server logs, crawl logs, crawl
directories) and prints where it is.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import networkx as nx

from bench.harness import LOOPBACK, ROOT, run, serve, serve_web
from bench.webgen import Web

ORDERS = ("bfs", "dfs", "importance")
FRACTIONS = (0.10, 0.20)
WEB_TARGET = 1.3  # importance / bfs at 10 %, generated web
TREE_FLOOR = 0.98  # importance / bfs at 10 % and 20 %, every real tree
SETTINGS = {"DOWNLOAD_DELAY": 0, "SITEMAP_ENABLED": 0, "NETWORK_ALLOWLIST": LOOPBACK, "LOG_LEVEL": "INFO"}


# -- running the crawler ---------------------------------------------------------------------------
def scrapy(args: list[str], log: Path, timeout: float = 7200) -> float:
    """``python -m scrapy ARGS`` from the project, as a user runs it; its
    output into ``log``; seconds taken."""
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    return float(run([sys.executable, "-m", "scrapy", *args], ROOT, stats=False, env=env, log=log,
                     timeout=timeout)["wall"])


def crawl(seeds: list[str], order: str, work: Path) -> tuple[Path, float]:
    """A complete crawl of ``seeds`` in ``order`` in a fresh CRAWL_DIR; (its dir, seconds)."""
    crawl_dir = work / f"crawl-{order}"
    shutil.rmtree(crawl_dir, ignore_errors=True)
    args = ["crawl", "site", "-a", f"seeds={','.join(seeds)}", "-a", "follow=all", "-a", f"order={order}"]
    for k, v in {**SETTINGS, "CRAWL_DIR": crawl_dir}.items():
        args += ["-s", f"{k}={v}"]
    return crawl_dir, scrapy(args, work / f"crawl-{order}.log")


def stored_pages(crawl_dir: Path, work: Path) -> list[str]:
    """The URLs a finished crawl stored as pages (state C), as ``scrapy export`` writes them."""
    pages_file = work / f"{crawl_dir.name}-pages.jsonl"
    scrapy(["export", "--state", "C", "-o", str(pages_file), "-s", f"CRAWL_DIR={crawl_dir}"],
           work / f"{crawl_dir.name}-export.log")
    with pages_file.open() as f:
        return [json.loads(line)["url"] for line in f if line.strip()]


def crawl_graph(crawl_dir: Path, work: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """The stored pages (state C) and every link of a finished crawl, as
    ``scrapy export`` and ``scrapy graph`` write them."""
    links_file = work / f"{crawl_dir.name}-links.csv"
    pages = stored_pages(crawl_dir, work)
    scrapy(["graph", "-o", str(links_file), "-s", f"CRAWL_DIR={crawl_dir}"], work / f"{crawl_dir.name}-graph.log")
    with links_file.open(newline="") as f:
        links = [(row["source"], row["target"]) for row in csv.DictReader(f)]
    return pages, links


def url_key(url: str) -> str:
    """``host/path`` (path unquoted, no port, query or fragment): how a
    graph's URLs and the server log's requests are matched."""
    parts = urlsplit(url)
    return (parts.hostname or "") + unquote(parts.path or "/")


# -- the measure -------------------------------------------------------------------------------------
def depth(key: str) -> int:
    path = key[key.index("/"):]
    return max(0, path.count("/") - 1)


def measure(fetched: list[str], pr: dict[str, float], top: set[str]) -> dict:
    """Shares of ``pr`` held by the first 10 % / 20 % of the distinct pages
    in ``fetched`` (keys), the top-10 % hit share and the mean depth there."""
    n = len(pr)
    first = list(dict.fromkeys(fetched))
    out: dict = {"fetched": len(first), "outside": sum(1 for k in first if k not in pr)}
    for f in FRACTIONS:
        head = first[:math.ceil(f * n)]
        out[f] = sum(pr.get(k, 0.0) for k in head)
        out[f"short{f}"] = len(head) < math.ceil(f * n)
    head = first[:math.ceil(FRACTIONS[0] * n)]
    out["top_hit"] = len(set(head) & top) / max(1, len(top))
    out["depth"] = sum(depth(k) for k in head) / max(1, len(head))
    out["head"] = head
    # The share held after each 1 % of the graph's pages fetched (the plot).
    shares, total, step = [], 0.0, max(1, n // 100)
    for i, k in enumerate(first[:n]):
        total += pr.get(k, 0.0)
        if (i + 1) % step == 0:
            shares.append(total)
    out["curve"] = shares
    return out


def best(pr: dict[str, float]) -> dict:
    ranked = sorted(pr, key=pr.get, reverse=True)
    return measure(ranked, pr, set(ranked[:math.ceil(FRACTIONS[0] * len(pr))]))


def pagerank(nodes: list[str], edges: list[tuple[str, str]]) -> dict[str, float]:
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_edges_from(edges)
    return nx.pagerank(g)


CURVES: dict[str, dict[str, list[float]]] = {}  # graph -> order -> shares, for --plot


def plot(path: Path) -> None:
    """The share of each graph's PageRank held against the share of its pages
    fetched, one panel a graph (matplotlib, the bench extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(CURVES), figsize=(4.5 * len(CURVES), 4), squeeze=False)
    for ax, (title, curves) in zip(axes[0], CURVES.items()):
        for order, style in (("bfs", "--"), ("dfs", ":"), ("importance", "-"), ("PR order", "-.")):
            if order in curves:
                ys = curves[order]
                ax.plot([(i + 1) / len(ys) for i in range(len(ys))], ys, style, label=order)
        for f in FRACTIONS:
            ax.axvline(f, color="grey", lw=0.6, ls=":")
        ax.set_title(title.split(":")[0][:40], fontsize=9)
        ax.set_xlabel("share of pages fetched")
        ax.set_ylabel("share of PageRank fetched")
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1.02)
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"plot: {path}")


def table(title: str, pr: dict[str, float], results: dict[str, dict]) -> None:
    CURVES[title] = {("PR order" if k == "best" else k): v["curve"]
                     for k, v in {**results, "best": best(pr)}.items()}
    print(f"\n{title}")
    print(f"  {'order':<11} {'fetched':>7} {'seconds':>7} {'PR@10%':>8} {'PR@20%':>8} {'/bfs@10%':>8} "
          f"{'/bfs@20%':>8} {'top10%hit':>9} {'depth@10%':>9}")
    rows = {**results, "best": {**best(pr), "seconds": None}}
    base = results["bfs"]
    for name, r in rows.items():
        ratios = [r[f] / base[f] if base[f] else float("nan") for f in FRACTIONS]
        secs = f"{r['seconds']:7.0f}" if r["seconds"] is not None else f"{'-':>7}"
        short = " (fewer pages fetched than the share needs)" if any(r[f"short{f}"] for f in FRACTIONS) else ""
        outside = f" ({r['outside']} not in the graph)" if r["outside"] else ""
        label = name if name != "best" else "PR order"
        print(f"  {label:<11} {r['fetched']:>7} {secs} {r[0.1]:8.4f} {r[0.2]:8.4f} {ratios[0]:8.2f} "
              f"{ratios[1]:8.2f} {100 * r['top_hit']:8.1f}% {r['depth']:9.2f}{outside}{short}")


def ratio(results: dict[str, dict], order: str, f: float) -> float:
    return results[order][f] / results["bfs"][f] if results["bfs"][f] else float("nan")


# -- the generated web ---------------------------------------------------------------------------------
def run_web(args: argparse.Namespace, work: Path) -> tuple[bool, str]:
    t0 = time.monotonic()
    web = Web(args.web_pages, args.sites, args.seed)
    keys = [web.key(i) for i in range(len(web.pages))]
    edges = web.edges()
    pr = pagerank(keys, edges)
    top = set(sorted(pr, key=pr.get, reverse=True)[:math.ceil(FRACTIONS[0] * len(pr))])
    stats = web.stats()
    server = serve_web(work, args.web_pages, args.sites, args.seed, log_name="web-requests.jsonl")
    try:
        results = {}
        found = None
        for order in ORDERS:
            mark = server.mark()
            crawl_dir, seconds = crawl(web.seeds(server.port), order, work)
            fetched = [f"{r['host']}{r['path']}" for r in server.requests(mark)
                       if r.get("status") == 200 and r["path"] != "/robots.txt"]
            results[order] = {**measure(fetched, pr, top), "seconds": seconds}
            if order == "bfs":  # the crawl's graph against the generator's
                pages, links = crawl_graph(crawl_dir, work)
                stored = {url_key(u) for u in pages}
                crawled = {(url_key(a), url_key(b)) for a, b in links}
                found = (len(stored & set(keys)), len(set(edges) & crawled), len(set(edges)))
            if not args.keep:
                shutil.rmtree(crawl_dir, ignore_errors=True)
    finally:
        server.stop()
    assert found is not None
    title = (f"generated web (seed {args.seed}): {stats['pages']} pages, {stats['sites']} sites, "
             f"{len(set(edges))} links, {100 * stats['cross_site']:.1f} % of the random links cross-site, "
             f"largest in-degree {stats['max_in']}; bfs crawl stored {found[0]} of the pages and "
             f"{found[1]} of the links ({time.monotonic() - t0:.0f} s)")
    table(title, pr, results)
    r10 = ratio(results, "importance", 0.1)
    ok = r10 >= WEB_TARGET
    return ok, (f"generated web: importance/bfs at 10 % {r10:.2f} (target >= {WEB_TARGET}) "
                f"{'met' if ok else 'NOT MET'}")


# -- real trees ----------------------------------------------------------------------------------------
def run_tree(tree, work: Path, keep: bool) -> tuple[bool, str]:
    t0 = time.monotonic()
    server = serve(work, Path(tree.root), "127.0.0.2")
    try:
        seed = server.url("/" + tree.start, host="127.0.0.2")
        results = {}
        pr: dict[str, float] = {}
        top: set[str] = set()
        graph = (0, 0)
        for order in ORDERS:
            mark = server.mark()
            crawl_dir, seconds = crawl([seed], order, work)
            if order == "bfs":
                pages, links = crawl_graph(crawl_dir, work)
                nodes = list(dict.fromkeys(url_key(u) for u in pages))
                known = set(nodes)
                edges = list(dict.fromkeys((a, b) for a, b in ((url_key(s), url_key(d)) for s, d in links)
                                           if a in known and b in known))
                pr = pagerank(nodes, edges)
                top = set(sorted(pr, key=pr.get, reverse=True)[:math.ceil(FRACTIONS[0] * len(pr))])
                graph = (len(nodes), len(edges))
            else:
                pages = stored_pages(crawl_dir, work)
            # Pages: what this crawl stored as pages (HTML, and the text
            # files some trees link to); not style sheets, images, 404s.
            stored = {url_key(u) for u in pages}
            fetched = [k for r in server.requests(mark)
                       if (k := url_key(f"http://{r['host']}{r['path']}")) in stored]
            results[order] = {**measure(fetched, pr, top), "seconds": seconds}
            if not keep:
                shutil.rmtree(crawl_dir, ignore_errors=True)
    finally:
        server.stop()
    table(f"{tree.name} ({tree.generator}, {tree.root}/{tree.start}): {graph[0]} pages, {graph[1]} links "
          f"between them in the bfs crawl ({time.monotonic() - t0:.0f} s)", pr, results)
    lows = {f: ratio(results, "importance", f) for f in FRACTIONS}
    ok = all(v >= TREE_FLOOR for v in lows.values())
    return ok, (f"{tree.name}: importance/bfs {lows[0.1]:.2f} at 10 %, {lows[0.2]:.2f} at 20 % "
                f"(floor {TREE_FLOOR}) {'met' if ok else 'NOT MET'}")


def main() -> None:
    from bench.bench_reach import TREES

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--web-pages", type=int, default=20_000)
    ap.add_argument("--sites", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--trees", default="sphinx,cmake,glib", help="comma-separated names of bench_reach's TREES")
    ap.add_argument("--no-web", action="store_true", help="the real trees only")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--plot", type=Path, default=None, help="draw the PageRank share curves (matplotlib)")
    args = ap.parse_args()
    names = [n for n in args.trees.split(",") if n]
    by_name = {t.name: t for t in TREES}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        sys.exit(f"--trees: no tree named {', '.join(unknown)} (one of {', '.join(by_name)})")
    print("command: python -m bench.bench_order " + shlex.join(sys.argv[1:]))
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="bench-order-"))
    verdicts = []
    try:
        if not args.no_web:
            verdicts.append(run_web(args, work))
        for name in names:
            tree = by_name[name]
            if not (Path(tree.root) / tree.start).exists():
                print(f"\n{tree.name}: {tree.root}/{tree.start} not found (apt-get install {tree.package}); skipped")
                continue
            (work / name).mkdir()
            verdicts.append(run_tree(tree, work / name, args.keep))
    finally:
        if args.keep:
            print(f"\nwork directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print()
    for _, line in verdicts:
        print(line)
    if args.plot:
        plot(args.plot)
    print(f"total {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
