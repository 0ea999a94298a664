"""Focused crawling against breadth-first order, in the same run.

    python -m bench.bench_focused [--web-pages 2400] [--seed 1] [--reference DIR] [--lang ja] [--plot PATH]
                                  [--min-priority 0,0.2,...] [--tunnel N] [--tunnel-links N] [--replay]
    python -m bench.bench_focused --root DIR --topic FILE [--start index.html] [--min-priority ...] [--replay]

With ``--root DIR --topic FILE``: a documentation tree of your own served
from disk (127.0.0.2), crawled breadth-first and then focused, left to
finish, at each ``--min-priority`` (the default's when none): pages
fetched, precision against breadth-first's and recall, the truth on topic
by term density (``bench/focused_tree.py``), and why each on-topic page
missed was missed. ``--replay``: no crawls, the focused crawls replayed
offline by the follower's rules (seconds; checked against the real crawl,
bench/JOURNAL.md), on the tree or on the generated web alone.

Two webs, each crawled twice by the product (embedded defaults, no delay,
``CONCURRENT_REQUESTS_PER_DOMAIN=2``, robots.txt obeyed), the order of the
fetches read from the local server's log:

- **breadth-first**: ``scrapy crawl site -a follow=all`` (every page's links,
  first in, first out: the anchor);
- **focused**: ``scrapy crawl site -a topic=FILE`` (``TOPIC_TUNNEL`` 2).

The webs:

- a **generated web** of four sites (127.0.0.2-5, ``--web-pages`` pages in
  all, ``--seed``): each site a tree of regions (directories) of 10-40
  pages about one subject, 20 % of them astronomy (the topic); a region's
  pages link to each other and to other regions' hubs, astronomy regions
  more often to astronomy regions (the textbook's topical locality); anchors
  to astronomy pages name their subject more often than not; some astronomy
  regions hang behind tunnels of one or two off-topic pages; the sites
  differ in how much astronomy they hold. Truth: the generator's labels.
- a **real multilingual documentation tree** (``--reference``, Debian's
  *Debian Reference* in eleven languages: ``apt-get install
  debian-reference``, whose ``index.html`` links every language's edition),
  the topic one language (``--lang``, detected by the crawler per page with
  py3langid; truth: the language in each file's name).

Reported per web: on-topic pages reached; harvest rate (on-topic fetches /
fetches) over the first 20 % of the fetch budget (the breadth-first crawl's
total fetches); on-topic share found by the time breadth-first has found
50 %; on-topic pages the focused crawl never fetched; and the crawler's own
on_topic against the truth. With ``--min-priority``, focused crawls left
to finish with each ``TOPIC_MIN_PRIORITY``: pages fetched, precision
(on-topic pages / pages fetched) against breadth-first's (the on-topic
share of all the pages reachable) and on-topic recall. With ``--plot``, the share of on-topic pages
found against fetches, both orders, both webs (matplotlib, the bench extra).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import tempfile
from pathlib import Path

from scrapy.settings import Settings

from bench.focused_tree import explain_misses, reachable, read_tree, replay
from bench.harness import ROOT, query, run, scrapy_crawl, serve, store_path
from crawler import settings as crawler_settings
from crawler.following.topic import load_topic, parse_topic
DEFAULTS = Settings()
DEFAULTS.setmodule(crawler_settings)

SETTINGS = {"DOWNLOAD_DELAY": 0, "CONCURRENT_REQUESTS": 4, "CONCURRENT_REQUESTS_PER_DOMAIN": 2,
            "LOG_LEVEL": "INFO", "TELNETCONSOLE_ENABLED": False, "NETWORK_ALLOWLIST": "127.0.0.0/8",
            "PROGRESS_INTERVAL": 0}
HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5")

TOPIC_WORDS = ["telescope", "galaxy", "nebula", "orbit", "comet", "asteroid", "supernova", "planet",
               "exoplanet", "quasar"]
OFF_SUBJECTS = {
    "cooking": ["recipe", "oven", "flour", "simmer", "garlic", "pastry", "broth", "knead"],
    "gardening": ["compost", "seedling", "prune", "mulch", "tomato", "hedge", "soil", "bulb"],
    "finance": ["invoice", "ledger", "dividend", "mortgage", "budget", "pension", "audit", "equity"],
    "travel": ["itinerary", "luggage", "ferry", "hostel", "passport", "museum", "harbour", "visa"],
}
FILLER = ("the of and to in is that for it as with was on be at by this from or have an they which one "
          "you were her all she there would their we him been has when who will more no if out so said "
          "what up its about into than them can only other new some could time these two may then do "
          "first any my now such like our over man me even most made after also did many before must "
          "through back years where much your way well down should because each just those people how "
          "too little state good very make world still own see men work long get here between both life "
          "being under never day same another know while last might us great old year off come since "
          "against go came right used take three").split()
TOPIC = {"name": "astronomy", "keywords": {w: 1 for w in TOPIC_WORDS}, "threshold": 0.3}


# -- the generated web --------------------------------------------------------------------------
class Web:
    """Pages (url -> html) and the truth (url -> on topic) of four sites."""

    def __init__(self, pages: int, seed: int, port: int) -> None:
        self.rng = random.Random(seed)
        self.port = port
        self.html: dict[str, str] = {}
        self.truth: dict[str, bool] = {}
        per_site = pages // len(HOSTS)
        richness = [0.35, 0.25, 0.15, 0.05]  # share of astronomy regions by site
        for host, rich in zip(HOSTS, richness):
            self._site(host, per_site, rich)

    def url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"

    def _text(self, subject: str, words: int) -> str:
        rng = self.rng
        vocab = TOPIC_WORDS if subject == "astronomy" else OFF_SUBJECTS[subject]
        out = []
        for _ in range(words):
            r = rng.random()
            if r < 0.04:
                out.append(rng.choice(vocab))
            elif subject != "astronomy" and r < 0.043:
                out.append(rng.choice(TOPIC_WORDS))  # a passing mention
            else:
                out.append(rng.choice(FILLER))
        return " ".join(out)

    def _anchor(self, subject: str) -> str:
        rng = self.rng
        if subject == "astronomy":
            if rng.random() < 0.6:
                return f"{rng.choice(TOPIC_WORDS)} {rng.choice(FILLER)} notes"
        elif rng.random() < 0.05:
            return f"{rng.choice(TOPIC_WORDS)} and {rng.choice(OFF_SUBJECTS[subject])}"
        elif rng.random() < 0.6:
            return f"{rng.choice(OFF_SUBJECTS[subject])} {rng.choice(FILLER)}"
        return f"page {rng.randrange(10_000)}"

    def _site(self, host: str, n: int, rich: float) -> None:
        rng = self.rng
        regions: list[tuple[str, str, list[str]]] = []  # (subject, hub path, page paths)
        made = 1
        r = 0
        while made < n:
            size = min(rng.randint(10, 40), n - made)
            if size <= 0:
                break
            subject = "astronomy" if rng.random() < rich else rng.choice(sorted(OFF_SUBJECTS))
            base = f"/{host.rsplit('.', 1)[1]}/r{r}/"
            paths = [base] + [f"{base}p{i}.html" for i in range(1, size)]
            regions.append((subject, base, paths))
            made += size
            r += 1
        links: dict[str, list[tuple[str, str]]] = {}  # path -> [(url, anchor)]
        subject_of: dict[str, str] = {}
        for subject, hub, paths in regions:
            for p in paths:
                subject_of[p] = subject
        astro = [reg for reg in regions if reg[0] == "astronomy"]
        # A third of the astronomy regions (not the first) hang behind a
        # tunnel of one or two off-topic pages; the others the root lists.
        tunneled = {reg[1] for i, reg in enumerate(astro) if i > 0 and i % 3 == 0}
        root = f"/{host.rsplit('.', 1)[1]}/"
        root_links = [(self.url(host, hub), self._anchor(subject)) for subject, hub, _ in regions
                      if hub not in tunneled]
        rng.shuffle(root_links)
        links[root] = root_links
        for subject, hub, paths in regions:
            links[hub] = [(self.url(host, p), self._anchor(subject)) for p in paths[1:]]
            for p in paths[1:]:
                out = [(self.url(host, q), self._anchor(subject)) for q in rng.sample(paths, min(4, len(paths)))
                       if q != p]
                for _ in range(2):  # cross links to other regions' hubs
                    pool = astro if subject == "astronomy" and rng.random() < 0.6 else regions
                    other = rng.choice(pool)
                    if other[1] not in tunneled:
                        out.append((self.url(host, other[1]), self._anchor(other[0])))
                links[p] = out
        # The tunnels: a page of a visible astronomy region leads, through
        # one or two off-topic pages, to the hidden astronomy region's hub.
        visible = [reg for reg in astro if reg[1] not in tunneled]
        for i, hub in enumerate(sorted(tunneled)):
            entry = rng.choice(visible)
            off_subject = rng.choice(sorted(OFF_SUBJECTS))
            chain = [f"{entry[1]}t{i}-{k}.html" for k in range(1 + i % 2)]
            for k, p in enumerate(chain):
                subject_of[p] = off_subject
                nxt = chain[k + 1] if k + 1 < len(chain) else hub
                links[p] = [(self.url(host, nxt), self._anchor(subject_of.get(nxt, "astronomy")))]
            links[rng.choice(entry[2])].append((self.url(host, chain[0]), self._anchor(off_subject)))
        subject_of[root] = "travel"
        for p, out in links.items():
            subject = subject_of[p]
            items = "".join(f'<li><a href="{u}">{a}</a> {self._text(subject, 6)}</li>' for u, a in out)
            title = f"{subject} {p}"
            body = self._text(subject, self.rng.randint(150, 400))
            self.html[self.url(host, p)] = (f"<!doctype html><html><head><title>{title}</title></head><body>"
                                            f"<h1>{title}</h1><p>{body}</p><ul>{items}</ul></body></html>")
            self.truth[self.url(host, p)] = subject == "astronomy"

    def write(self, root: Path) -> None:
        for url, html in self.html.items():
            path = url.split(f":{self.port}", 1)[1]
            f = root / (path.lstrip("/") + ("index.html" if path.endswith("/") else ""))
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(html)

    def seeds(self) -> list[str]:
        return [self.url(h, f"/{h.rsplit('.', 1)[1]}/") for h in HOSTS]


# -- crawling -----------------------------------------------------------------------------------
def crawl(seeds: list[str], work: Path, server, topic: Path | None,
          min_priority: float = 0.0, tunnel: int | None = None,
          tunnel_links: int | None = None) -> tuple[list[str], dict[str, bool]]:
    """The fetched URLs in order (from the server's log), and the crawler's
    own on_topic of each stored page (``tunnel``, ``tunnel_links``: the
    settings' when None)."""
    crawl_dir = work / ("focused" if topic else "bfs")
    shutil.rmtree(crawl_dir, ignore_errors=True)
    args = [f"seeds={','.join(seeds)}"] + ([f"topic={topic}"] if topic else ["follow=all"])
    extra = {k: v for k, v in (("TOPIC_TUNNEL", tunnel), ("TOPIC_TUNNEL_LINKS", tunnel_links)) if v is not None}
    mark = server.mark()
    run(scrapy_crawl(args, {**SETTINGS, "CRAWL_DIR": crawl_dir, "TOPIC_MIN_PRIORITY": min_priority, **extra}), ROOT,
        stats=False, timeout=3600)
    order = [f"http://{r['host']}:{server.port}{r['path']}" for r in server.requests(mark)
             if not str(r["path"]).endswith("robots.txt")]
    rows = query(store_path(crawl_dir), "SELECT url, on_topic FROM pages WHERE state = 'C'")
    judged = {url: bool(on) for url, on in rows}
    return order, judged


def first_fetches(order: list[str]) -> list[str]:
    return list(dict.fromkeys(order))


def found_curve(order: list[str], truth: dict[str, bool]) -> list[int]:
    """On-topic pages found after each fetch."""
    n, out = 0, []
    for url in order:
        n += truth.get(url, False)
        out.append(n)
    return out


def report(name: str, bfs: list[str], focused: list[str], truth: dict[str, bool],
           judged: dict[str, bool]) -> dict:
    bfs, focused = first_fetches(bfs), first_fetches(focused)
    total_on = sum(1 for u in set(bfs) if truth.get(u))
    budget = max(1, round(0.2 * len(bfs)))
    h_bfs = sum(truth.get(u, False) for u in bfs[:budget]) / budget
    h_foc = sum(truth.get(u, False) for u in focused[:budget]) / budget
    cb, cf = found_curve(bfs, truth), found_curve(focused, truth)
    half = next(i for i, n in enumerate(cb) if n >= total_on / 2) + 1
    at_half = cf[min(half, len(cf)) - 1] / total_on
    lost = sorted(u for u in bfs if truth.get(u) and u not in set(focused))
    agree = sum(judged.get(u) == truth[u] for u in judged if u in truth)
    print(f"\n{name}: {len(bfs)} pages reachable, {total_on} on topic; focused crawl fetched {len(focused)}")
    print(f"  harvest rate over the first 20 % of the budget ({budget} fetches): breadth-first {h_bfs:.3f}, "
          f"focused {h_foc:.3f}: {h_foc / h_bfs if h_bfs else float('inf'):.2f}x")
    print(f"  on-topic pages found when breadth-first has found 50 % (after {half} fetches): "
          f"focused {at_half:.3f}")
    print(f"  on-topic pages the focused crawl never fetched: {len(lost)} {lost[:5]}")
    print(f"  the crawler's on_topic against the truth: {agree} of {len(judged)} pages agree")
    return {"name": name, "bfs": cb, "focused": cf, "total": total_on, "budget": budget}


def stopping(name: str, bfs: list[str], runs: dict[float, list[str]], truth: dict[str, bool]) -> None:
    """Focused crawls left to finish, by TOPIC_MIN_PRIORITY: precision (on-topic
    pages / pages fetched) and recall (on-topic pages fetched / on-topic
    pages reachable), against breadth-first's precision (the whole web's)."""
    bfs = first_fetches(bfs)
    total_on = sum(1 for u in set(bfs) if truth.get(u))
    p_bfs = total_on / max(1, len(bfs))
    print(f"\n{name}: focused crawls left to finish; breadth-first precision {p_bfs:.3f} "
          f"({total_on} of {len(bfs)} pages on topic)")
    for threshold, order in sorted(runs.items()):
        fetched = first_fetches(order)
        on = sum(1 for u in fetched if truth.get(u))
        precision, recall = on / max(1, len(fetched)), on / max(1, total_on)
        print(f"  TOPIC_MIN_PRIORITY {threshold:g}: {len(fetched)} fetched, precision {precision:.3f} "
              f"({precision / p_bfs:.2f}x breadth-first's), on-topic recall {recall:.3f}")


def plot(results: list[dict], path: Path) -> None:
    """Top: the harvest rate (on-topic pages / pages fetched so far); bottom:
    the share of on-topic pages found; both against pages fetched."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(6 * len(results), 7.5), squeeze=False)
    for col, r in enumerate(results):
        top, bottom = axes[0][col], axes[1][col]
        for key, label, style in (("bfs", "breadth-first", "--"), ("focused", "focused", "-")):
            curve = r[key]
            x = range(1, len(curve) + 1)
            top.plot(x, [n / i for i, n in zip(x, curve)], style, label=label)
            bottom.plot(x, [n / r["total"] for n in curve], style, label=label)
        for ax, ylabel in ((top, "harvest rate (on topic / fetched)"), (bottom, "share of on-topic pages found")):
            ax.axvline(r["budget"], color="grey", lw=0.8, ls=":", label="20 % of the budget")
            ax.set_xlabel("pages fetched")
            ax.set_ylabel(ylabel)
            ax.set_ylim(0, 1.02)
            ax.legend(loc="upper right" if ax is top else "lower right")
        top.set_title(r["name"])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"plot: {path}")


def tree(args: argparse.Namespace, thresholds: list[float], work: Path) -> None:
    """A real tree (``--root``) with a topic file (``--topic``): breadth-first,
    then focused crawls left to finish at each TOPIC_MIN_PRIORITY (the
    default's when none is given), recall and precision against the truth
    by term density (bench/focused_tree.py), and why each miss was missed."""
    topic = load_topic(args.topic)
    name = f"{args.root}, topic {args.topic.name}"
    server = serve(work, args.root, "127.0.0.2")
    try:
        seed = f"http://127.0.0.2:{server.port}/{args.start}"
        if args.replay:
            graph = read_tree(args.root, reachable(args.root, seed, topic), topic)
            bfs = sorted(graph)
            runs = {t: replay(graph, [seed], topic, args.tunnel, t, args.tunnel_links) for t in thresholds}
        else:
            bfs, _ = crawl([seed], work, server, None)
            graph = read_tree(args.root, set(bfs), topic)
            runs = {t: crawl([seed], work, server, args.topic, t, args.tunnel, args.tunnel_links)[0]
                    for t in thresholds}
        truth = {u: topic.on_topic(node.score) for u, node in graph.items()}
        stopping(name, [u for u in bfs if u in graph], runs, truth)
        for t, order in sorted(runs.items()):
            done = set(order)
            missed = sorted(u for u, on in truth.items() if on and u not in done)
            for url, why in explain_misses(graph, topic, done, missed).items():
                print(f"    missed at {t:g}: {url.split('/', 3)[-1]}: {why}")
    finally:
        server.stop()


def replay_web(args: argparse.Namespace, thresholds: list[float], work: Path) -> None:
    """The generated web, its focused crawls replayed offline (``--replay``)."""
    web = Web(args.web_pages, args.seed, 8000)
    web.write(work / "web")
    topic = parse_topic(TOPIC)
    graph = read_tree(work / "web", set(web.html), topic)
    runs = {t: replay(graph, web.seeds(), topic, args.tunnel, t, args.tunnel_links) for t in thresholds}
    stopping(f"generated web, seed {args.seed} (replayed, TOPIC_TUNNEL_LINKS {args.tunnel_links})",
             sorted(web.html), runs, web.truth)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--web-pages", type=int, default=2400)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reference", type=Path, default=Path("/usr/share/doc/debian-reference-common/docs"))
    ap.add_argument("--lang", default="ja")
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--min-priority", default="",
                    help="comma-separated TOPIC_MIN_PRIORITY values: focused crawls left to finish, their "
                         "precision and recall")
    ap.add_argument("--root", type=Path, default=None,
                    help="a documentation tree on disk to crawl instead of the two webs (needs --topic)")
    ap.add_argument("--topic", type=Path, default=None, help="the topic file (JSON or YAML) for --root")
    ap.add_argument("--start", default="index.html", help="the seed's path under --root")
    ap.add_argument("--tunnel", type=int, default=None, help="TOPIC_TUNNEL (default: the setting's)")
    ap.add_argument("--tunnel-links", type=int, default=None, help="TOPIC_TUNNEL_LINKS (default: the setting's)")
    ap.add_argument("--replay", action="store_true",
                    help="no crawls: the focused crawls replayed offline (bench/focused_tree.py), the "
                         "breadth-first one read offline; with --root, or the generated web alone")
    args = ap.parse_args()
    thresholds = [float(x) for x in args.min_priority.split(",") if x.strip()]
    work = Path(tempfile.mkdtemp(prefix="bench-focused-"))
    results = []
    if args.root is not None or args.replay:
        if args.root is not None and args.topic is None:
            ap.error("--root needs --topic")
        args.tunnel = DEFAULTS.getint("TOPIC_TUNNEL") if args.tunnel is None else args.tunnel
        args.tunnel_links = DEFAULTS.getint("TOPIC_TUNNEL_LINKS") if args.tunnel_links is None else args.tunnel_links
        try:
            (tree if args.root is not None else replay_web)(
                args, thresholds or [DEFAULTS.getfloat("TOPIC_MIN_PRIORITY")], work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    try:
        server = serve(work, work / "web", HOSTS)
        try:
            web = Web(args.web_pages, args.seed, server.port)
            web.write(work / "web")
            topic = work / "astronomy.json"
            topic.write_text(json.dumps(TOPIC))
            bfs, _ = crawl(web.seeds(), work, server, None)
            focused, judged = crawl(web.seeds(), work, server, topic)
            results.append(report(f"generated web ({len(web.html)} pages, 4 sites)", bfs, focused, web.truth,
                                  judged))
            if thresholds:
                stopping(f"generated web, seed {args.seed}", bfs,
                         {t: crawl(web.seeds(), work, server, topic, t)[0] for t in thresholds}, web.truth)
        finally:
            server.stop()
        if (args.reference / "index.html").exists():
            (work / "ref").mkdir()
            server = serve(work / "ref", args.reference, "127.0.0.2")
            try:
                seed = f"http://127.0.0.2:{server.port}/index.html"
                topic = work / "lang.json"
                topic.write_text(json.dumps({"name": f"pages in {args.lang}", "languages": [args.lang]}))
                bfs, _ = crawl([seed], work, server, None)
                focused, judged = crawl([seed], work, server, topic)
                lang = re.compile(rf"\.{re.escape(args.lang)}\.html$")
                truth = {u: bool(lang.search(u)) for u in set(bfs) | set(focused)}
                results.append(report(f"Debian Reference, 11 languages, topic {args.lang}", bfs, focused, truth,
                                      judged))
                if thresholds:
                    runs = {t: crawl([seed], work, server, topic, t)[0] for t in thresholds}
                    truth = {u: bool(lang.search(u)) for u in set(bfs).union(*runs.values())}
                    stopping(f"Debian Reference, topic {args.lang}", bfs, runs, truth)
            finally:
                server.stop()
        else:
            print(f"\n{args.reference}/index.html not found: apt-get install debian-reference (skipped)")
        if args.plot:
            plot(results, args.plot)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
