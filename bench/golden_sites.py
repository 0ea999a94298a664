"""The golden crawls' sites and steps (``bench/golden.py``): which site
each crawl reads, what it is seeded with, the settings it runs with, and
what changes between the steps of a crawl that runs twice (the re-crawl).

Every page is written by code here, from fixed words (no clock, no random
seed of the run's), so two captures serve the same bytes. A site is
served by ``tests.support.mockserver`` from a directory (``serve_file``,
or ``serve_changing`` when it needs validators and redirects), or is the
generated test site itself (``root`` None). The branches each crawl covers
are named in its ``covers``.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.mockserver import article_page, index_page
from tests.support.pdfs import one_page_raw_pdf, text_content

Url = Callable[[str], str]  # path -> absolute URL on the crawl's server
MTIME = 1_700_000_000  # every served file's mtime: Last-Modified stays the same from run to run

WORDS = ("harbour lantern meadow orchard quarry tunnel valley window garden bridge castle forest river market "
         "village mountain island candle engine ladder mirror pocket rabbit saddle thunder violin wagon yellow").split()
# Prose in three languages, for the language detector (its own words, not the tests').
EN = ("The library opens at nine in the morning and closes late in the evening. Students come to read the old "
      "newspapers, to borrow books about history and travel, and to sit by the windows when the weather is cold. "
      "The librarian knows every shelf and answers every question with patience.")
DE = ("Die Bibliothek öffnet um neun Uhr morgens und schließt spät am Abend. Die Studenten kommen, um die alten "
      "Zeitungen zu lesen, Bücher über Geschichte und Reisen auszuleihen und an den Fenstern zu sitzen, wenn das "
      "Wetter kalt ist. Die Bibliothekarin kennt jedes Regal und beantwortet jede Frage mit Geduld.")
FR = ("La bibliothèque ouvre à neuf heures du matin et ferme tard le soir. Les étudiants viennent lire les vieux "
      "journaux, emprunter des livres d'histoire et de voyage, et s'asseoir près des fenêtres quand il fait froid. "
      "La bibliothécaire connaît chaque étagère et répond à chaque question avec patience.")
ROBOTS = "User-agent: *\nAllow: /\n"


@dataclass
class Step:
    spider: str = "site"
    args: list[str] = field(default_factory=list)  # "-a" values; "{url:/path}" and "{tmp}" filled in
    settings: dict[str, object] = field(default_factory=dict)
    before: Callable[[Path, Url], None] | None = None  # changes the site before this step
    wait: float = 0.0  # seconds slept before (re-crawl: the pages fall due)


@dataclass
class Crawl:
    name: str
    covers: str
    build: Callable[[Path, Url], None] | None  # None: the generated test site
    steps: list[Step]
    hosts: str = "127.0.0.1"
    validators: bool = False


def own_text(seed: str, words: int = 150) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(100)) for _ in range(words))


def page(title: str, text: str, links: list[str] = (), head: str = "", lang: str = "") -> str:
    items = "".join(f'<li><a href="{u}">{u}</a></li>' for u in links)
    attr = f' lang="{lang}"' if lang else ""
    return (f"<!DOCTYPE html><html{attr}><head><title>{title}</title>{head}</head><body><h1>{title}</h1>"
            f"<p>{text}</p><ul>{items}</ul></body></html>")


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for path, body in files.items():
        f = root / path.lstrip("/")
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(body if isinstance(body, bytes) else body.encode())
        os.utime(f, (MTIME, MTIME))


def pages_site(root: Path, url: Url) -> None:
    article = article_page("Release notes", "The crawler got faster.")
    write(root, {
        "robots.txt": "User-agent: *\nDisallow: /private/\n",
        "index.html": index_page("Pages", [(p, p) for p in (
            "/refresh.html", "/doc.pdf", "/logo.png", "/notes.txt", "/canon-a.html", "/canon-c.html",
            "/dup-1.html", "/dup-2.html", "/near-1.html", "/near-2.html", "/private/x.html", "/gone.html")]),
        "refresh.html": '<html><head><meta http-equiv="refresh" content="0; url=/refreshed.html"></head>'
                        "<body>Moved.</body></html>",
        "refreshed.html": article_page("Refreshed", "Where the refresh leads."),
        "doc.pdf": one_page_raw_pdf(text_content(["Golden PDF document.", "Its second line of text."])),
        "logo.png": b"\x89PNG\r\n\x1a\n" + bytes(range(256)),
        "notes.txt": "Plain notes, not HTML.\n" * 20,
        "canon-a.html": page("Canon A", own_text("a"), head='<link rel="canonical" href="/canon-b.html">'),
        "canon-b.html": page("Canon B", own_text("b")),
        "canon-c.html": page("Canon C", own_text("c"), head=f'<link rel="canonical" href="{url("/canon-t.html")}">'),
        "canon-t.html": page("Canon target", own_text("t")),
        "dup-1.html": article, "dup-2.html": article,
        "near-1.html": article_page("Near copy", "Words of a page.", paragraphs=8),
        "near-2.html": article_page("Near copy", "Words of a page.", paragraphs=8).replace(
            "</article>", "<p>One more line.</p></article>"),
        "private/x.html": page("Private", own_text("x")),
    })


def languages_site(root: Path, url: Url) -> None:
    alternates = "".join(f'<link rel="alternate" hreflang="{h}" href="{u}">' for h, u in (
        ("de", "/de/start.html"), ("fr", "/fr/start.html"), ("x-default", "/index.html"),
        ("not a tag!", "/x.html"), ("es", url("/es/").replace("127.0.0.1", "127.0.0.2"))))

    def p(lang: str | None, text: str, links: list[str] = (), head: str = "") -> str:
        words = text.split()
        random.Random(text).shuffle(words)
        return page(" ".join(words[:3]), " ".join(words), links, head, lang or "")

    write(root, {
        "robots.txt": ROBOTS,
        "index.html": p("en", EN + " index", ["/en/a.html", "/de/a.html", "/fr/a.html"], alternates),
        "en/a.html": p("de", EN + " a", ["/en/b.html"]), "en/b.html": p(None, EN + " b"),
        "de/a.html": p("de", DE + " a", ["/de/b.html"]), "de/b.html": p("de", DE + " b"),
        "de/start.html": p("de", DE + " start"),
        "fr/a.html": p("fr", FR + " a", ["/fr/b.html"]), "fr/b.html": p("fr", FR + " b"),
        "fr/start.html": p("fr", FR + " start", ["/fr/c.html"]),
    })


def template_site(root: Path, url: Url, n: int = 12) -> None:
    sidebar = "".join(f'<li><a href="/article/{i}.html">Topic number {i} of the manual</a></li>' for i in range(n))
    files = {"robots.txt": ROBOTS, "index.html":
             f"<html><head><title>Manual</title></head><body><div class='toc'><ul>{sidebar}</ul></div>"
             "<div class='body'><h1>Manual</h1><p>Welcome.</p></div></body></html>"}
    for i in range(n):
        text = " ".join(f"Paragraph {j} of article {i} explains one more detail of the subject at length."
                        for j in range(4))
        files[f"article/{i}.html"] = (f"<html><head><title>Article {i}</title></head><body><div class='toc'>"
                                      f"<ul>{sidebar}</ul></div><div class='body'><h1>Article {i}</h1>"
                                      f"<p>{text}</p></div></body></html>")
    write(root, files)


NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*locs: str) -> str:
    return (f'<?xml version="1.0"?><urlset {NS}>' + "".join(
        f"<url><loc>{u}</loc><lastmod>2024-05-0{i % 9 + 1}</lastmod><changefreq>weekly</changefreq></url>"
        for i, u in enumerate(locs)) + "</urlset>")


def sitemaps_site(root: Path, url: Url) -> None:
    write(root, {
        "robots.txt": "User-agent: *\nAllow: /\nSitemap: /sitemap_index.xml\n",
        "index.html": page("Home", own_text("home"), ["/linked.html"]),
        "linked.html": page("Linked", own_text("linked")),
        "sitemap_index.xml": f'<?xml version="1.0"?><sitemapindex {NS}><sitemap><loc>{url("/maps/a.xml")}</loc>'
                             "</sitemap></sitemapindex>",
        "maps/a.xml": urlset(url("/only-in-map.html"), url("/linked.html"), url("/missing-in-map.html")),
        "only-in-map.html": page("In the sitemap", own_text("map")),
    })


def sitemap_root_site(root: Path, url: Url) -> None:
    write(root, {"robots.txt": ROBOTS, "index.html": page("Home", own_text("root-home")),
                 "sitemap.xml": urlset(url("/from-root-map.html")),
                 "from-root-map.html": page("From /sitemap.xml", own_text("root-map"))})


ON = "PostgreSQL vacuum reclaims the storage of dead rows. Run vacuum often; autovacuum does it for you. "
OFF = "Tomatoes need sun, water and patience. Prune the side shoots and feed the plants every second week. "
FOCUSED = {"/": (False, ["/a/", "/b/", "/t/1.html"]), "/a/": (True, ["/a/1.html", "/a/2.html"]),
           "/a/1.html": (True, ["/a/2.html"]), "/a/2.html": (True, []), "/b/": (False, ["/b/1.html"]),
           "/b/1.html": (False, ["/b/2.html"]), "/b/2.html": (False, []), "/t/1.html": (False, ["/t/2.html"]),
           "/t/2.html": (False, ["/c/"]), "/c/": (True, [])}


def focused_site(root: Path, url: Url) -> None:
    files: dict[str, str | bytes] = {"robots.txt": ROBOTS}
    for path, (on, links) in FOCUSED.items():
        files[path + ("index.html" if path.endswith("/") else "")] = page(
            ("Vacuum " if on else "Garden ") + path, (ON if on else OFF) + own_text(path, 120), links)
    write(root, files)
    (root.parent / "topic.yaml").write_text(
        "name: PostgreSQL maintenance\nkeywords:\n  vacuum: 1\n  postgresql: 1\nthreshold: 0.3\n")


ORDER_SITE = {"/index.html": ["/a/", "/b/", "/c/"], "/a/index.html": ["/a/1.html", "/a/2.html", "/a/3.html"],
              "/b/index.html": ["/b/1.html", "/x/deep/p.html"],
              "/c/index.html": ["/x/deep/p.html", "/c/1.html", "/b/1.html"],
              "/a/1.html": [], "/a/2.html": [], "/a/3.html": [], "/b/1.html": [], "/c/1.html": [],
              "/x/deep/p.html": []}


def importance_site(root: Path, url: Url) -> None:
    write(root, {"robots.txt": ROBOTS, **{p: page(p, own_text(p, 200), links) for p, links in ORDER_SITE.items()}})


CHANGING = ["/a.html", "/b.html", "/c.html", "/d.html", "/e.html", "/novalid/f.html"]


def changing_site(root: Path, url: Url) -> None:
    write(root, {"robots.txt": ROBOTS,
                 "index.html": page("Home", "Home.", [*CHANGING, "/loop/a", "/bad"]),
                 **{p: page(p, own_text(p, 160)) for p in CHANGING}})
    # A redirect loop and a Location that is no URL (serve_changing answers these 301).
    (root / "_moves.json").write_text(json.dumps({"/loop/a": "/loop/b", "/loop/b": "/loop/a", "/bad": "http://[::1"}))


def change_the_site(root: Path, url: Url) -> None:
    (root / "d.html").unlink()
    moves = json.loads((root / "_moves.json").read_text())
    (root / "_moves.json").write_text(json.dumps({**moves, "/e.html": "/e2.html"}))
    write(root, {"b.html": page("/b.html", own_text("rewritten", 160)),
                 "c.html": page("/c.html", own_text("/c.html", 160) + " garden"),
                 "e2.html": page("/e2.html", own_text("/e.html", 160)),
                 "new.html": page("/new.html", own_text("new", 160)),
                 "index.html": page("Home", "Home.", [*CHANGING, "/loop/a", "/bad", "/new.html"])})
    for f in ("b.html", "c.html", "index.html"):  # changed since the first visit's Last-Modified
        os.utime(root / f, (MTIME + 100, MTIME + 100))


REVISIT = {"REVISIT_MIN_INTERVAL": 1, "REVISIT_DEFAULT_INTERVAL": 1, "REVISIT_MAX_INTERVAL": 100}
SEED = "seeds={url:/}"

CRAWLS = [
    Crawl("testsite", "index/info pages, 3xx chain, 404, 500 retried, robots.txt disallow, X-Robots-Tag, "
          "meta noindex/nofollow, charsets, exact and near duplicates (/dups/), a second host, WARC",
          None, [Step(args=["seeds={url:/},{url:/dups/}"],
                      settings={"TRAP_MAX_SHAPE_RUN": 3, "WARC_DIR": "{tmp}/warc",
                                "FRONTIER_RETRY_BACKOFF": 0})],
          hosts="127.0.0.1,127.0.0.2"),
    Crawl("pages", "meta refresh, PDF, non-HTML files, canonical links, exact/near copies, robots.txt, 404, WARC",
          pages_site, [Step(args=[SEED], settings={"WARC_DIR": "{tmp}/warc"})]),
    Crawl("languages", "lang, hreflang alternates, -a languages=en,de", languages_site,
          [Step(args=[SEED, "languages=en,de"])], hosts="127.0.0.1,127.0.0.2"),
    Crawl("template", "a site's template learned, its first pages typed again", template_site,
          [Step(args=["seeds={url:/index.html}"])]),
    Crawl("sitemaps", "sitemap index named in robots.txt, a urlset, a sitemap URL missing", sitemaps_site,
          [Step(args=[SEED], settings={"SITEMAP_ENABLED": True})]),
    Crawl("sitemap-root", "/sitemap.xml read when robots.txt names none", sitemap_root_site,
          [Step(args=[SEED], settings={"SITEMAP_ENABLED": True})]),
    Crawl("focused", "-a topic=FILE, a tunnel of off-topic pages", focused_site,
          [Step(args=[SEED, "topic={tmp}/topic.yaml"], settings={"TOPIC_TUNNEL": 1, "TOPIC_MIN_PRIORITY": 0.0})]),
    Crawl("importance", "-a order=importance -a follow=all", importance_site,
          [Step(args=[SEED, "follow=all", "order=importance"])]),
    Crawl("recrawl", "validators, a redirect loop, a bad Location; then scrapy crawl recrawl after pages "
          "changed, were deleted, moved and added", changing_site,
          [Step(args=[SEED], settings=REVISIT),
           Step(spider="recrawl", settings=REVISIT, before=change_the_site, wait=1.2)], validators=True),
]

__all__ = ["CRAWLS", "Crawl", "Step"]
