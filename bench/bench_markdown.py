"""CPU a page of crawler.reading.markdown.render, and what it keeps, on WCXB pages.

    python -m bench.bench_markdown --data DIR [--split dev] [--step 1]

DIR is a checkout of WCXB (github.com/Murrough-Foley/web-content-extraction-benchmark,
fetched, never committed). Each page is decoded (crawler.reading.encoding),
parsed and stripped as ``analyze`` does, then its whole ``<body>`` is rendered:
the CPU of render alone is timed (best of three passes). Nothing is tuned
on the pages: the figures say that render runs on every one of them, that
the words of its Markdown are the words of its text, and how much of the
ground truth's ``main_content_markdown`` the whole body's Markdown holds
(its words; its headings as headings; lists, tables and code blocks).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

import lxml.etree

from crawler.reading.encoding import decode_html
from crawler.reading.extract import SKIP_TAGS
from crawler.reading.html import UNSAFE, parse_html, scrub_tree
from crawler.reading.markdown import render
from tests.test_markdown import md_words

_WORD = re.compile(r"\w+")
_HEAD = re.compile(r"^#{1,6} +(.+?)\s*$", re.M)
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)]) +\S", re.M)
_TABLE = re.compile(r"^\|.*\|\s*$", re.M)


def pages(data: Path, split: str, step: int) -> list[tuple[str, Any, dict[str, Any]]]:
    out = []
    for gt_path in sorted((data / split / "ground-truth").glob("*.json"))[::step]:
        raw = gzip.decompress((data / split / "html" / f"{gt_path.stem}.html.gz").read_bytes())
        doc = json.loads(gt_path.read_text())
        root = parse_html(decode_html(raw, None)[0])
        if root is None:
            continue
        lxml.etree.strip_elements(root, *SKIP_TAGS, with_tail=False)
        if UNSAFE.search(lxml.etree.tostring(root, method="text", encoding=str)):
            scrub_tree(root)
        body = root.find("body")
        out.append((doc.get("url") or "", body if body is not None else root, doc["ground_truth"]))
    return out


def _heading(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().lower()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=Path.home() / ".cache/site-crawler/wcxb")
    ap.add_argument("--split", default="dev")
    ap.add_argument("--step", type=int, default=1, help="every step-th page")
    args = ap.parse_args()
    todo = pages(args.data, args.split, args.step)
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for url, body, _gt in todo:
            render([body], url)
        best = min(best, time.process_time() - started)
    print(f"{len(todo)} pages, render of the whole body: {best / len(todo) * 1000:.2f} ms a page (CPU, best of 3)")
    differ = n = got = total = heads = heads_found = 0
    shapes = Counter[str]()
    for url, body, gt in todo:
        out = render([body], url)
        differ += md_words(out.markdown) != Counter(_WORD.findall(out.text))
        truth = gt.get("main_content_markdown") or ""
        if not truth:
            continue
        n += 1
        want = Counter(w.lower() for w in md_words(truth).elements())
        have = Counter(w.lower() for w in md_words(out.markdown).elements())
        got += sum((want & have).values())
        total += sum(want.values())
        ours = {_heading(h) for h in _HEAD.findall(out.markdown)}
        for h in _HEAD.findall(truth):
            heads += 1
            heads_found += _heading(h) in ours
        for name, pattern in (("list", _ITEM), ("table", _TABLE)):
            if pattern.search(truth):
                shapes[name] += 1
                shapes[name + " kept"] += pattern.search(out.markdown) is not None
        if "```" in truth:
            shapes["code"] += 1
            shapes["code kept"] += "```" in out.markdown
    print(f"pages whose Markdown words differ from their text's: {differ} of {len(todo)}")
    print(f"{n} pages with main_content_markdown: its words in the body's Markdown {got / max(total, 1):.3f}, "
          f"its headings as headings {heads_found}/{heads}, pages with a list {shapes['list kept']}/{shapes['list']}, "
          f"a table {shapes['table kept']}/{shapes['table']}, a code block {shapes['code kept']}/{shapes['code']} "
          "kept as such")


if __name__ == "__main__":
    main()
