"""The page's main content against the extraction libraries (issue 50): WCXB's
word F1 for the crawler's stored text and for trafilatura, resiliparse and
rs-trafilatura, on the same pages in the same run, overall and by kind; CPU a
page; the metadata's title, author and date against trafilatura's; and
ScrapingHub's news articles.

    python -m bench.bench_content [--data DIR] [--split dev|test] [--news DIR]
        [--baselines trafilatura,resiliparse,rs-trafilatura] [--base-python PY] [--dump FILE] [--limit N]

- **Data.** WCXB (``--data``, default ``~/.cache/site-crawler/wcxb``) is cloned
  there at its pinned commit when absent (``bench/contentscore.py``); it is
  never committed. ``--news DIR``: ScrapingHub's article-extraction-benchmark
  (``html/*.html.gz``, ``ground-truth.json``), scored with the same F1.
- **The crawler.** Each page goes as an ``HtmlResponse`` (its bytes as
  fetched, ``Content-Type: text/html``) through the steps of a site spider's
  chain built as ``scrapy crawl`` builds it, those that read the page itself:
  every step but the crawl's own (``OUTSIDE``: the frontier, the duplicate
  index in Redis, the browser, the store, following). Decode, parse and read
  today, and any step added between them (metadata, kind) without a change
  here. Its CPU a page (``time.process_time``, one thread) is taken around
  the record's making and those steps alone. Scored: ``analysis.main`` (the
  main content, what the record's ``text`` is to be) as "crawler", and the
  record's ``text`` as it is as "crawler text".
- **Baselines** run in another Python (``--base-python``, default
  ``$BENCH_BASE_PYTHON`` or ``~/.cache/site-crawler/venv-base/bin/python``:
  a venv with ``trafilatura==2.3.1 lxml_html_clean resiliparse rs-trafilatura``,
  which is for Python 3.12 only), through ``bench/content_worker.py``, on the
  HTML as the crawler's decode step decoded it; their CPU a page is the
  extraction call's alone.
- **Scores** as WCXB's ``evaluate.py``: word precision, recall and F1 a page,
  averaged; the share of ``with`` snippets present and of ``without``
  snippets present (lower is better), a page, averaged. Metadata: the share
  right among the pages whose ground truth has the field (``contentscore``'s
  rules) for ``analysis.metadata``'s ``title``, ``author``, ``published``
  against trafilatura's (and rs-trafilatura's) metadata.
- ``--dump FILE``: a JSON line a page and system (set, id, kind, system, f1,
  p, r, with, without, ms, chars) for error analysis.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.contentscore import (KINDS, Sample, Score, author_right, date_right, fetch_wcxb, mean_scores, news_pages,
                                score, title_right, wcxb_pages)

__all__ = ["OUTSIDE", "CrawlerReader", "Result", "main", "run_set"]

BASELINES = ("trafilatura", "resiliparse", "rs-trafilatura")
WORKER = Path(__file__).with_name("content_worker.py")
DEFAULT_DATA = Path("~/.cache/site-crawler/wcxb").expanduser()
DEFAULT_PYTHON = os.environ.get("BENCH_BASE_PYTHON",
                                str(Path("~/.cache/site-crawler/venv-base/bin/python").expanduser()))
# The chain's steps that are the crawl's, not the page's reading: marking the
# URL fetched and redirects (the frontier), rendering (a browser), a topic's
# score (-a topic only), a bot wall's retry (the frontier), the duplicate and
# template check (Redis), typing (reads that check), variants, the store and
# following.
OUTSIDE = frozenset({"Visit", "Redirect", "Render", "Blocked", "Focus", "Check", "Classify", "Variants", "Store",
                     "Follow"})
META_FIELDS = (("title", "title", title_right), ("author", "author", author_right),
               ("published", "published", date_right))

Result = dict[str, Any]  # {"text", "ms", "meta": {...}, "error"}


class CrawlerReader:
    """A site spider's page steps, built once; ``read(sample)`` runs a page through them."""

    def __init__(self) -> None:
        from scrapy.utils.project import get_project_settings
        from scrapy.utils.test import get_crawler

        from crawler.spiders.site import SiteSpider

        project = {k: v for k, v in get_project_settings().copy_to_dict().items() if "REACTOR" not in k}
        # The spider is built, never opened: no step run here reaches Redis.
        self.crawler = get_crawler(SiteSpider, {**project, "LOG_LEVEL": "WARNING", "CRAWL_NAME": "bench-content"})
        self.spider = SiteSpider.from_crawler(self.crawler, seeds="http://bench.test/")
        self.steps = [s for s in self.spider.chain.steps if type(s).__name__ not in OUTSIDE]
        self.names = [type(s).__name__ for s in self.steps]
        self.step_cpu: dict[str, float] = {}  # step name (chain's) -> seconds of thread CPU, timed pages
        self.timed = 0

    def response(self, url: str, body: bytes) -> Any:
        """The page as the spider gets it (``ValueError``: not a URL Scrapy takes)."""
        from scrapy.http import HtmlResponse, Request

        request = Request(url, callback=self.spider.parse, errback=self.spider.errback, meta={"depth": 1})
        return HtmlResponse(url, status=200, body=body, headers={"Content-Type": "text/html"}, request=request)

    def run(self, response: Any) -> tuple[Any, str | None]:
        """The page through the steps (each one's CPU added to ``step_cpu``),
        and the error that stopped it (None)."""
        from crawler.chain import Page, record, step_name

        clock, cpu = time.thread_time, self.step_cpu
        t0 = clock()
        page = Page(response, record.fetched(self.crawler, response))
        cpu["record"] = cpu.get("record", 0.0) + clock() - t0
        self.timed += 1
        try:
            for step in self.steps:
                t0 = clock()
                _drive(step.process_page(page))
                name = step_name(step)
                cpu[name] = cpu.get(name, 0.0) + clock() - t0
                if page.stopped:
                    break
        except Exception as exc:  # noqa: BLE001  (counted: a page the crawler could not read)
            return page, f"{type(exc).__name__}: {exc}"[:300]
        return page, None

    def read(self, sample: Sample) -> tuple[Result, str]:
        """The page's result (``text``: analysis.main; ``stored``: the record's
        text) and its HTML as the decode step decoded it."""
        url = sample.url if sample.url.startswith(("http://", "https://")) else f"http://bench.test/{sample.id}"
        try:
            response = self.response(url, sample.body())
        except ValueError:
            response = self.response(f"http://bench.test/{sample.id}", sample.body())
        start = time.process_time()
        page, error = self.run(response)
        ms = (time.process_time() - start) * 1000
        analysis = page.analysis
        meta = analysis.metadata if analysis is not None and isinstance(analysis.metadata, dict) else {}
        return ({"text": analysis.main if analysis is not None else "", "stored": page.item.text or "", "ms": ms,
                 "meta": {k: meta.get(k) for k, _, _ in META_FIELDS}, "error": error}, page.text)


def _drive(done: Any) -> None:
    """Finish what a step returned: a coroutine that does not wait on
    anything (a page's reading never does) ends on its first send."""
    if done is None:
        return
    try:
        done.send(None)
    except StopIteration:
        return
    done.close()
    raise RuntimeError("a page step waited on something outside the page")


def run_baseline(name: str, python: str, pages_file: Path, work: Path) -> tuple[dict[str, Result], str]:
    """``name``'s results by page id, and its version (or why it did not run)."""
    out = work / f"{name}.jsonl"
    try:
        got = subprocess.run([python, str(WORKER), "--version", name], capture_output=True, text=True, check=False)
    except OSError as exc:
        return {}, f"not runnable: {exc}"
    if got.returncode != 0:
        return {}, "not runnable: " + (got.stderr.strip().splitlines() or ["?"])[-1]
    version = got.stdout.strip()
    done = subprocess.run([python, str(WORKER), name, str(pages_file), str(out)], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        return {}, "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1]
    results: dict[str, Result] = {}
    with out.open(encoding="utf-8") as rows:
        for line in rows:
            row = json.loads(line)
            results[row["id"]] = {"text": row["text"], "ms": row["ms"], "error": row["error"],
                                  "meta": {k: row.get(k) for k, _, _ in META_FIELDS}}
    return results, version


def run_set(samples: list[Sample], baselines: Iterable[str], python: str,
            reader: CrawlerReader | None = None, log: Callable[[str], None] = print) -> tuple[
                dict[str, dict[str, Result]], dict[str, str]]:
    """Every system's results on ``samples`` (by system, then page id) and each system's version."""
    reader = reader or CrawlerReader()
    ours: dict[str, Result] = {}
    stored: dict[str, Result] = {}
    versions = {"crawler": "+".join(reader.names), "crawler text": "the record's text"}
    with tempfile.TemporaryDirectory(prefix="bench-content-") as tmp:
        work = Path(tmp)
        pages_file = work / "pages.jsonl"
        with pages_file.open("w", encoding="utf-8") as handoff:
            for i, sample in enumerate(samples):
                if i == 0:
                    reader.read(sample)  # warm: lazy imports and first-call caches, untimed
                    reader.step_cpu.clear()
                    reader.timed = 0
                result, html = reader.read(sample)
                ours[sample.id] = result
                stored[sample.id] = {**result, "text": result["stored"]}
                handoff.write(json.dumps({"id": sample.id, "url": sample.url, "html": html}) + "\n")
        systems = {"crawler": ours, "crawler text": stored}
        for name in baselines:
            log(f"  {name} ...")
            systems[name], versions[name] = run_baseline(name, python, pages_file, work)
    return systems, versions


# -- the report ----------------------------------------------------------------------------------
def _scores(samples: list[Sample], results: dict[str, Result]) -> dict[str, Score]:
    return {s.id: score(results.get(s.id, {}).get("text") or "", s) for s in samples}


def _ms(samples: list[Sample], results: dict[str, Result]) -> float:
    got = [results[s.id]["ms"] for s in samples if s.id in results]
    return sum(got) / len(got) if got else float("nan")


def report(title: str, samples: list[Sample], systems: dict[str, dict[str, Result]], versions: dict[str, str],
           by_kind: bool, meta: bool, dump: Any = None, set_name: str = "") -> dict[str, Any]:
    """Print the tables; return the figures (for tests and the dump)."""
    ran = {n: r for n, r in systems.items() if r}
    scores = {n: _scores(samples, r) for n, r in ran.items()}
    figures: dict[str, Any] = {"pages": len(samples), "systems": {}}
    print(f"\n## {title} ({len(samples)} pages)\n")
    print("| System | F1 | Precision | Recall | `with` present | `without` present | CPU ms a page | Errors |")
    print("|---|---|---|---|---|---|---|---|")
    snippets = any(s.with_ or s.without for s in samples)  # the news set has none: no rates
    for name, results in ran.items():
        m = mean_scores(list(scores[name].values()))
        ms, errors = _ms(samples, results), sum(1 for r in results.values() if r.get("error"))
        figures["systems"][name] = {"f1": m.f1, "precision": m.precision, "recall": m.recall, "with": m.with_rate,
                                    "without": m.without_rate, "ms": ms, "errors": errors}
        rates = f"{m.with_rate:.1%} | {m.without_rate:.1%}" if snippets else "- | -"
        print(f"| {name} ({versions[name]}) | {m.f1:.3f} | {m.precision:.3f} | {m.recall:.3f} | {rates} | {ms:.2f} "
              f"| {errors} |")
    for name, why in versions.items():
        if name not in ran:
            print(f"| {name} | {why} | | | | | | |")
    base = [n for n in ran if not n.startswith("crawler")]
    if "crawler" in ran and base:
        ours = figures["systems"]["crawler"]
        print("\nCrawler / baseline: " + "; ".join(
            f"{n}: F1 {ours['f1'] / figures['systems'][n]['f1']:.3f}x, CPU {ours['ms'] / figures['systems'][n]['ms']:.2f}x"
            for n in base))
    if by_kind:
        kinds: dict[str, dict[str, float]] = {}
        figures["kinds"] = kinds
        print("\nF1 by kind (precision / recall):\n")
        print("| Kind | Pages | " + " | ".join(ran) + " |")
        print("|---|---|" + "---|" * len(ran))
        for kind in KINDS:
            ids = [s.id for s in samples if s.kind == kind]
            if not ids:
                continue
            cells, kinds[kind] = [], {}
            for name in ran:
                m = mean_scores([scores[name][i] for i in ids])
                kinds[kind][name] = m.f1
                cells.append(f"{m.f1:.3f} ({m.precision:.2f} / {m.recall:.2f})")
            print(f"| {kind} | {len(ids)} | " + " | ".join(cells) + " |")
    if meta:
        shares: dict[str, dict[str, float]] = {}
        figures["metadata"] = shares
        named = [n for n in ran if n != "crawler text" and n != "resiliparse"]
        print("\nMetadata right (pages whose ground truth has the field):\n")
        print("| Field | Pages | " + " | ".join(named) + " |")
        print("|---|---|" + "---|" * len(named))
        for field, truth_field, right in META_FIELDS:
            having = [s for s in samples if getattr(s, truth_field)]
            shares[field] = {}
            cells = []
            for name in named:
                ok = sum(1 for s in having if right(ran[name].get(s.id, {}).get("meta", {}).get(field),
                                                    getattr(s, truth_field)))
                shares[field][name] = ok / len(having) if having else float("nan")
                cells.append(f"{shares[field][name]:.1%}")
            print(f"| {field} | {len(having)} | " + " | ".join(cells) + " |")
    if dump is not None:
        for s in samples:
            for name in ran:
                r, sc = ran[name].get(s.id, {}), scores[name][s.id]
                dump.write(json.dumps({"set": set_name, "id": s.id, "kind": s.kind, "system": name, "f1": sc.f1,
                                       "p": sc.precision, "r": sc.recall, "with": sc.with_rate,
                                       "without": sc.without_rate, "ms": r.get("ms"),
                                       "chars": len(r.get("text") or ""), "error": r.get("error")}) + "\n")
    return figures


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="WCXB's clone (made there when absent)")
    ap.add_argument("--split", choices=("dev", "test"), default="dev")
    ap.add_argument("--baselines", default=",".join(BASELINES), help="comma-separated; '' for none")
    ap.add_argument("--base-python", default=DEFAULT_PYTHON, help="the baselines' Python")
    ap.add_argument("--news", type=Path, help="ScrapingHub's article-extraction-benchmark, scored too")
    ap.add_argument("--dump", type=Path, help="per-page rows, JSON lines")
    ap.add_argument("--limit", type=int, help="the first N pages of each set only (a quick look)")
    args = ap.parse_args(argv)
    baselines = [b for b in (x.strip() for x in args.baselines.split(",")) if b]
    unknown = set(baselines) - set(BASELINES)
    if unknown:
        ap.error(f"unknown baselines: {', '.join(sorted(unknown))}")
    fetch_wcxb(args.data, args.split)
    reader = CrawlerReader()
    out: dict[str, Any] = {}
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    try:
        started = time.time()
        samples = wcxb_pages(args.data, args.split, args.limit)
        print(f"WCXB {args.split}: {len(samples)} pages; crawler steps {'+'.join(reader.names)}", file=sys.stderr)
        systems, versions = run_set(samples, baselines, args.base_python, reader,
                                    log=lambda m: print(m, file=sys.stderr))
        if reader.timed:
            steps = sorted(reader.step_cpu.items(), key=lambda x: -x[1])
            print(f"crawler's page steps, CPU ms a page over {reader.timed} pages: "
                  + ", ".join(f"{k} {v * 1000 / reader.timed:.3f}" for k, v in steps), file=sys.stderr)
        out["wcxb"] = report(f"WCXB {args.split}", samples, systems, versions, by_kind=True, meta=True, dump=dump,
                             set_name=f"wcxb-{args.split}")
        if args.news:
            news = news_pages(args.news, args.limit)
            systems, versions = run_set(news, baselines, args.base_python, reader,
                                        log=lambda m: print(m, file=sys.stderr))
            out["news"] = report("News articles (ScrapingHub)", news, systems, versions, by_kind=False, meta=False,
                                 dump=dump, set_name="news")
        print(f"\n({time.time() - started:.0f} s)", file=sys.stderr)
    finally:
        if dump is not None:
            dump.close()
    return out


if __name__ == "__main__":
    main()
