"""A generated web for crawl-order benchmarks: many sites, a power-law
in-degree, importance independent of directory depth.

    python -m bench.webgen [--pages 20000] [--sites 100] [--seed 1] [--words 50-2000] --log FILE.jsonl

Run as a module it serves the web (aiohttp, one port bound on each site's
loopback address, the port chosen by the system), prints one JSON line
``{"port": P, "hosts": [...]}`` as ``tests/support/mockserver.py`` does and
logs every request as a JSON line (``t``, ``host``, ``path``, ``status``).
Imported, ``Web(pages, sites, seed, words)`` gives the same web without a server:
its pages, their out-links and the seeds, to compute on the graph a
complete crawl would find.

The web, a pure function of (pages, sites, seed, words):

- **Sites**: ``sites`` hosts, 127.0.1.1, 127.0.1.2, ... (254 a /24, then
  127.0.2.1 ...); their sizes drawn from a log-normal distribution (sigma
  0.8), at least 20 pages each, summing to ``pages``.
- **Directories**: each site a random tree of directories (about one for
  every 10 pages, each hung under a random directory less than 4 levels
  deep), every directory an index page (``/``, ``/lantern/``,
  ``/lantern/orchard/``) linking to its subdirectories and to its leaf
  pages (``/lantern/orchard/meadow-violin.html``), which are spread over
  all the directories: every page is reachable from its site's home page
  ``/`` by these tree links. Names are words (digits would make the
  pages' URL shapes alike to the crawler's trap guard), never repeated in
  one path.
- **Random links**: every page (index or leaf) also links to 4-12 pages
  (uniform), 15 % of them on another site. A target is drawn with weight
  ``1 / (1 + rank) ** 0.9``, ``rank`` a random permutation of all the
  pages (within the site: its pages' weights; elsewhere: every other
  site's), so in-degree follows a power law (Zipf over ranks, exponent
  0.9: a degree distribution of exponent about 2.1, the web's) and the
  popular pages sit at every depth, home pages included only by chance.
  No page links to itself or twice to one page.
- **Pages**: HTML with a ``<title>``, a paragraph of 120 words drawn from a
  300-word vocabulary by an RNG seeded with the page (no page a near copy of
  another: the crawler does not follow a near copy's links), then the links
  as ``<a href>``: tree links first, then the random ones, cross-site links
  absolute (``http://HOST:PORT/path``), the others root-relative.
  ``/robots.txt`` and any other path answer 404. With ``words=(fewest,
  most)`` (``--words 50-2000``) each page's paragraph is as long as an RNG
  of its own draws, uniformly in that range (words as before, so the web
  is otherwise the same).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import json
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

WORDS = (
    "anchor apple arrow autumn badge bakery balcony bamboo banner barrel basket beacon blanket blossom bottle "
    "bramble breeze bridge bucket butter button cabin cactus camera candle canvas canyon carpet castle cellar "
    "chalk cherry chimney cinder circus cliff clock cloud clover cobble comet copper coral cotton cradle crater "
    "crystal curtain cushion dagger daisy dawn desert diamond dolphin donkey dragon drizzle drum eagle earth "
    "ember engine falcon feather fence fern ferry fiddle field flame flint forest fossil fountain fox garden "
    "garnet ginger glacier globe goblet granite grape gravel guitar hammer harbour harvest hazel helmet hermit "
    "hollow honey horizon island ivory jacket jasmine jelly jungle kettle kitten ladder lagoon lantern lava "
    "lemon lily linen lizard lobster locket lotus magnet maple marble marsh meadow melon mirror mist monsoon "
    "mosaic moss mountain muffin mustard needle nectar nest nickel nutmeg oak oasis ocean olive onion orbit "
    "orchard otter owl paddle palace panther paper parrot pebble pepper piano pillow pine pirate planet plum "
    "pocket pond poppy prism pumpkin quarry quartz quill rabbit radish rain raven reef ribbon ripple river "
    "robin rocket rose ruby saddle saffron sail salmon sand satin scarf shadow shell shore silver sky sleet "
    "slate snow sparrow spice spider spruce squirrel star stone storm straw stream sugar summit sun swan "
    "tablet teapot thistle thunder tide tiger timber topaz torch tower trail tulip tunnel turtle twig umbrella "
    "valley velvet violet violin volcano wagon walnut walrus wave wheat whistle willow window winter wizard "
    "wolf yarrow yellow zebra zephyr acorn alder amber aspen basil birch bison cedar chisel cobalt cricket "
    "cypress dune elm fjord gecko heron iris juniper kestrel lichen lynx mango marten mesa newt opal orca "
    "pansy peony quail raisin sage sequoia sorrel tapir tundra vole wren yak"
).split()

PAGE_WORDS = 120  # words of text a page
MIN_SITE_PAGES = 20
PAGES_PER_DIR = 10
MAX_DIR_DEPTH = 4  # directories at most this deep (/a/b/c/d/)
OUT_LINKS = (4, 12)  # random links a page, uniform
CROSS_SITE = 0.15  # share of the random links that go to another site
ZIPF = 0.9  # weight of the page of popularity rank r: 1 / (1 + r) ** ZIPF


def site_host(i: int) -> str:
    """Site ``i``'s loopback address: 127.0.1.1 ... 127.0.1.254, 127.0.2.1 ..."""
    return f"127.0.{1 + i // 254}.{1 + i % 254}"


@dataclass
class Page:
    site: int
    path: str
    depth: int  # directory depth: / and /x.html 0, /a/ and /a/x.html 1, /a/b/x.html 2
    children: list[int] = field(default_factory=list)  # tree links (index pages)
    links: list[int] = field(default_factory=list)  # random links


class Web:
    """The pages (``pages[i]``), their links and each page's popularity weight."""

    def __init__(self, pages: int = 20_000, sites: int = 100, seed: int = 1,
                 words: tuple[int, int] | None = None) -> None:
        if pages < sites * MIN_SITE_PAGES:
            raise ValueError(f"{pages} pages for {sites} sites: at least {MIN_SITE_PAGES} a site")
        self.seed = seed
        self.words = words  # (fewest, most) words of text a page; None: PAGE_WORDS each
        self.sites = sites
        rng = random.Random(f"webgen:{seed}")
        self.sizes = self._sizes(rng, pages, sites)
        self.pages: list[Page] = []
        self.site_pages: list[list[int]] = []
        for s, n in enumerate(self.sizes):
            self.site_pages.append(self._site(rng, s, n))
        self.index = {(site_host(p.site), p.path): i for i, p in enumerate(self.pages)}
        order = list(range(len(self.pages)))
        rng.shuffle(order)  # order[r]: the page of popularity rank r
        self.weight = [0.0] * len(self.pages)
        for r, i in enumerate(order):
            self.weight[i] = 1.0 / (1 + r) ** ZIPF
        self._links(rng)

    @staticmethod
    def _sizes(rng: random.Random, pages: int, sites: int) -> list[int]:
        raw = [rng.lognormvariate(0, 0.8) for _ in range(sites)]
        spare = pages - sites * MIN_SITE_PAGES
        sizes = [MIN_SITE_PAGES + int(spare * w / sum(raw)) for w in raw]
        for i in range(pages - sum(sizes)):  # the rounding's remainder
            sizes[i % sites] += 1
        return sizes

    def _site(self, rng: random.Random, s: int, n: int) -> list[int]:
        """Site ``s`` of ``n`` pages: its directory tree and leaf pages."""
        first = len(self.pages)
        ndirs = max(1, round(n / PAGES_PER_DIR))
        dirs = [("/", 0)]  # (path, depth), the home page first
        names: dict[str, set[str]] = {"/": set()}
        self.pages.append(Page(s, "/", 0))
        while len(dirs) < ndirs:
            parent = rng.choice([d for d in dirs if d[1] < MAX_DIR_DEPTH])
            used = set(parent[0].strip("/").split("/"))
            name = rng.choice([w for w in WORDS if w not in used and w not in names[parent[0]]])
            names[parent[0]].add(name)
            path = f"{parent[0]}{name}/"
            names[path] = set()
            dirs.append((path, parent[1] + 1))
            self.pages.append(Page(s, path, parent[1] + 1))
            self.pages[first + dirs.index(parent)].children.append(len(self.pages) - 1)
        for _ in range(n - ndirs):
            k = rng.randrange(len(dirs))
            path, depth = dirs[k]
            while True:
                leaf = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}.html"
                if leaf not in names[path]:
                    break
            names[path].add(leaf)
            self.pages.append(Page(s, path + leaf, depth))
            self.pages[first + k].children.append(len(self.pages) - 1)
        return list(range(first, len(self.pages)))

    def _links(self, rng: random.Random) -> None:
        everyone = list(range(len(self.pages)))
        cum_all = list(itertools.accumulate(self.weight[i] for i in everyone))
        cum_site = [list(itertools.accumulate(self.weight[i] for i in members)) for members in self.site_pages]
        for i, page in enumerate(self.pages):
            own = self.site_pages[page.site]
            chosen: list[int] = []
            seen = {i}
            for cross in [rng.random() < CROSS_SITE for _ in range(rng.randint(*OUT_LINKS))]:
                for _ in range(100):  # a new target, of the kind drawn
                    if cross:
                        j = everyone[bisect.bisect(cum_all, rng.random() * cum_all[-1])]
                        if self.pages[j].site == page.site:
                            continue
                    else:
                        cum = cum_site[page.site]
                        j = own[bisect.bisect(cum, rng.random() * cum[-1])]
                    if j not in seen:
                        seen.add(j)
                        chosen.append(j)
                        break
            page.links = chosen

    # -- views ---------------------------------------------------------------------------------
    def key(self, i: int) -> str:
        """A page's port-free name: ``host/path`` (``127.0.1.7/lantern/``)."""
        return site_host(self.pages[i].site) + self.pages[i].path

    def out_links(self, i: int) -> list[int]:
        return self.pages[i].children + self.pages[i].links

    def edges(self) -> list[tuple[str, str]]:
        """Every link as (source key, target key): the graph a complete crawl finds."""
        return [(self.key(i), self.key(j)) for i in range(len(self.pages)) for j in self.out_links(i)]

    def seeds(self, port: int) -> list[str]:
        return [f"http://{site_host(s)}:{port}/" for s in range(self.sites)]

    def hosts(self) -> list[str]:
        return [site_host(s) for s in range(self.sites)]

    def title(self, i: int) -> str:
        page = self.pages[i]
        words = [w for w in page.path.replace(".html", "").replace("-", "/").split("/") if w]
        return " ".join(w.capitalize() for w in words[-2:]) + f" (site {page.site + 1})" if words \
            else f"Home of site {page.site + 1}"

    def html(self, i: int, port: int) -> bytes:
        page = self.pages[i]
        rnd = random.Random(f"text:{self.seed}:{i}")
        n = PAGE_WORDS if self.words is None else random.Random(f"length:{self.seed}:{i}").randint(*self.words)
        words = [rnd.choice(WORDS) for _ in range(n)]
        text = " ".join((w.capitalize() if k % 12 == 0 else w) + ("." if k % 12 == 11 else "")
                        for k, w in enumerate(words))
        items = []
        for j in self.out_links(i):
            target = self.pages[j]
            href = target.path if target.site == page.site else f"http://{site_host(target.site)}:{port}{target.path}"
            items.append(f'<li><a href="{href}">{self.title(j)}</a></li>')
        title = self.title(i)
        return (f"<!DOCTYPE html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
                f"<p>{text}</p><ul>{''.join(items)}</ul></body></html>").encode()

    def stats(self) -> dict[str, float]:
        indeg = [0] * len(self.pages)
        cross = total = 0
        for i in range(len(self.pages)):
            for j in self.pages[i].links:
                indeg[j] += 1
                total += 1
                cross += self.pages[j].site != self.pages[i].site
        return {"pages": len(self.pages), "sites": self.sites, "random_links": total,
                "tree_links": sum(len(p.children) for p in self.pages), "cross_site": cross / max(1, total),
                "max_in": max(indeg), "max_depth": max(p.depth for p in self.pages),
                "mean_depth": sum(p.depth for p in self.pages) / len(self.pages)}


# -- the server ----------------------------------------------------------------------------------
def make_app(web_: Web, holder: dict[str, int], log_path: Path | None):
    from aiohttp import web

    log = open(log_path, "a", buffering=1) if log_path else None  # noqa: SIM115

    async def handle(request: web.Request) -> web.Response:
        host = (request.host or "").rsplit(":", 1)[0]
        i = web_.index.get((host, request.path))
        status = 404 if i is None else 200
        if log is not None:
            log.write(json.dumps({"t": time.time(), "host": host, "path": request.path_qs,
                                  "status": status}) + "\n")
        if i is None:
            return web.Response(status=404, text="not found")
        # Links to other sites on the port the client asked for: the same web
        # behind a proxy (bench/faultproxy.py) links through the proxy.
        asked = (request.host or "").rsplit(":", 1)
        port = int(asked[1]) if len(asked) == 2 and asked[1].isdigit() else holder["port"]
        return web.Response(body=web_.html(i, port), content_type="text/html", charset="utf-8")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return app


async def main() -> None:
    from tests.support.mockserver import serve

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=20_000)
    ap.add_argument("--sites", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--words", default="", help="N or FEWEST-MOST words of text a page, drawn for each "
                    f"(default: {PAGE_WORDS} each)")
    ap.add_argument("--log", type=Path)
    ap.add_argument("--stats", action="store_true", help="print the web's figures and exit")
    args = ap.parse_args()
    words = None
    if args.words:
        bounds = [int(x) for x in args.words.split("-") if x.isdigit()]
        if len(bounds) not in (1, 2) or len(bounds) != args.words.count("-") + 1 or not 1 <= bounds[0] <= bounds[-1]:
            ap.error(f"--words {args.words!r}: N or FEWEST-MOST, as 50-2000")
        words = (bounds[0], bounds[-1])  # N: N each
    w = Web(args.pages, args.sites, args.seed, words)
    if args.stats:
        print(json.dumps(w.stats()))
        return
    holder: dict[str, int] = {}
    await serve(make_app(w, holder, args.log), w.hosts(), holder)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(0)
