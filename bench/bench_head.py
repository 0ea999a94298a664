"""HEAD before GET on a server without validators: when does it pay?

    python -m bench.bench_head [--pages 200] [--kb 20] [--delay 0.05] [--shares 0.1,0.5,0.9]

A site of ``--pages`` pages of about ``--kb`` KB each, served from disk with
no ``ETag`` and no ``Last-Modified`` (tests/support/mockserver.py ``/novalid/``), is
crawled once; then, for each share of pages changed (their length changes),
the re-crawl (``scrapy crawl recrawl -a all=1``) is run twice on the same
kind of change, in the same run: the anchor, a GET per page (the default),
and ``RECRAWL_HEAD=1`` with ``RECRAWL_HEAD_MIN_UNCHANGED=0`` (a HEAD for
every page, the GET after it where the length moved). Politeness as in a
crawl: one request at a time per site, ``--delay`` seconds apart.

Printed per share: requests, bytes received (Scrapy's
``downloader/response_bytes``, headers included), seconds (Scrapy's
``elapsed_time_seconds``), the changes found, and HEAD's ratios to GET.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
from pathlib import Path

from bench.harness import ROOT, run, serve
from tests.support.crawl import crawl_cmd, stop_embedded_redis

WORDS = ("river mountain harbour lantern meadow orchard quarry tunnel valley window garden bridge "
         "castle forest island market station theatre village canyon desert glacier").split()


def page(i: int, version: int, kb: int) -> str:
    rng = random.Random(i * 1000 + version)
    words = " ".join(rng.choice(WORDS) for _ in range(kb * 1024 // 7 + version * 3))
    return f"<html><head><title>Page {i}</title></head><body><h1>Page {i}</h1><p>{words}</p></body></html>"


def recrawl(work: Path, settings: dict) -> dict:
    return run(crawl_cmd(["all=1"], settings, work / "crawl", "recrawl"), ROOT)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--kb", type=int, default=20)
    ap.add_argument("--delay", type=float, default=0.05)
    ap.add_argument("--shares", default="0.1,0.5,0.9")
    args = ap.parse_args()
    shares = [float(s) for s in args.shares.split(",")]

    work = Path(tempfile.mkdtemp(prefix="bench_head_"))
    root = work / "www"
    site = root / "novalid"
    site.mkdir(parents=True)
    (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
    links = "".join(f'<li><a href="/novalid/p{i}.html">page {i}</a></li>' for i in range(args.pages))
    (site / "index.html").write_text(f"<html><head><title>Index</title></head><body><ul>{links}</ul></body></html>")
    versions = [0] * args.pages
    for i in range(args.pages):
        (site / f"p{i}.html").write_text(page(i, 0, args.kb))
    server = serve(work, root, validators=True)
    base = {"DOWNLOAD_DELAY": args.delay, "REVISIT_DEFAULT_INTERVAL": 1, "REVISIT_MIN_INTERVAL": 1,
            "LOG_LEVEL": "INFO"}
    rng = random.Random(1)
    try:
        run(crawl_cmd([f"seeds={server.url('/novalid/')}", "follow=all"], base, work / "crawl"), ROOT)
        print(f"{args.pages} pages of about {args.kb} KB, no validators, DOWNLOAD_DELAY {args.delay} s, "
              "one request at a time per site\n")
        print(f"{'changed':>8} {'mode':>5} {'requests':>9} {'KB received':>12} {'seconds':>8} {'changes found':>14}")
        for share in shares:
            rows = {}
            for mode in ("GET", "HEAD"):
                changed = rng.sample(range(args.pages), round(share * args.pages))
                for i in changed:
                    versions[i] += 1
                    (site / f"p{i}.html").write_text(page(i, versions[i], args.kb))
                settings = {**base, "RECRAWL_HEAD": mode == "HEAD", "RECRAWL_HEAD_MIN_UNCHANGED": 0}
                st = recrawl(work, settings)
                found = int(st.get("recrawl/changed", 0)) + int(st.get("recrawl/trivial", 0))
                rows[mode] = (int(st.get("downloader/request_count", 0)), int(st.get("downloader/response_bytes", 0)),
                              float(st.get("elapsed_time_seconds", 0.0)), found, len(changed))
                r = rows[mode]
                print(f"{share:>8.0%} {mode:>5} {r[0]:>9,} {r[1] / 1024:>12,.0f} {r[2]:>8.1f} "
                      f"{r[3]:>6,} of {r[4]:,}")
            g, h = rows["GET"], rows["HEAD"]
            print(f"{'':>8} HEAD/GET: requests {h[0] / g[0]:.2f}x, bytes {h[1] / g[1]:.2f}x, "
                  f"time {h[2] / g[2]:.2f}x")
    finally:
        stop_embedded_redis(work / "crawl")
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
