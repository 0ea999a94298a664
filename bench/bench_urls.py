"""URL normalisation: conformance on public test data, and cost per link.

    python -m bench.bench_urls [--root /usr/share/doc/python3.11/html] [--repeat 3]

1. Conformance: the cases of ``tests/data/urls`` (WPT urltestdata's http(s)
   cases and urlcanon's, expected forms derived as its README says), run
   through the implementation before the WHATWG parser (``crawler/scope/urls.py``
   at commit 89e190a, loaded from git) and the current one. A case passes
   when the outcome (a URL, or InvalidURL) is the expected one; exceptions
   other than InvalidURL and non-idempotent results are counted apart.
2. Speed on real links: every ``<a href>`` of the Python documentation
   (Debian's python3.11-doc, as bench_crawl.py uses), each page standing at
   ``https://docs.python.org/3/<path>``. Per call: ``normalize(href, page)``
   with no cache, and ``LinkResolver.resolve`` over the pages in order as
   the spider calls it (its cache warm from the pages before).
"""

from __future__ import annotations

import argparse
import subprocess
import time
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import lxml.html

import crawler.scope.urls as new
from tests.support.urls_conformance import DEVIATIONS, conformance_cases

ROOT = Path(__file__).resolve().parent.parent

OLD_COMMIT = "89e190a"


def load_old() -> types.ModuleType:
    source = subprocess.run(
        ["git", "show", f"{OLD_COMMIT}:crawler/scope/urls.py"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout
    module = types.ModuleType("old_urls")
    module.__file__ = f"{OLD_COMMIT}:crawler/scope/urls.py"
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def outcome(impl: types.ModuleType, url: str, base: str | None) -> str | None:
    try:
        result: str | None = impl.normalize(url, base)
    except impl.InvalidURL:
        result = None
    return result


def conformance(impl: types.ModuleType, name: str) -> None:
    cases = conformance_cases()
    passed = Counter[str]()
    total = Counter[str]()
    raised = Counter[str]()
    not_idempotent = 0
    for source, url, base, expected in cases:
        total[source] += 1
        try:
            got = outcome(impl, url, base)
        except Exception as exc:  # the old parser leaked ValueError
            raised[type(exc).__name__] += 1
            continue
        if got == expected:
            passed[source] += 1
        if got is not None:
            try:
                again = outcome(impl, got, None)
            except Exception:
                again = None
            if again != got:
                not_idempotent += 1
    per_source = ", ".join(f"{s} {passed[s]}/{total[s]}" for s in total)
    print(f"{name}: {sum(passed.values())}/{len(cases)} passed "
          f"({100 * sum(passed.values()) / len(cases):.1f} %; {per_source}); "
          f"other exceptions: {dict(raised) or 0}; not idempotent: {not_idempotent}")


def links(root: Path) -> list[tuple[str, list[str]]]:
    pages = []
    for path in sorted(root.rglob("*.html")):
        tree = lxml.html.parse(str(path))
        hrefs = [str(h) for h in tree.xpath("//a/@href")]
        pages.append(("https://docs.python.org/3/" + path.relative_to(root).as_posix(), hrefs))
    return pages


def per_call(run: Callable[[], int], repeat: int) -> float:
    """Best time per call over ``repeat`` runs, in microseconds."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        calls = run()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def speed(impl: types.ModuleType, pages: list[tuple[str, list[str]]], repeat: int) -> tuple[float, float]:
    bases = [(impl.normalize(page), hrefs) for page, hrefs in pages]

    def uncached() -> int:
        calls = 0
        for base, hrefs in bases:
            for href in hrefs:
                try:
                    impl.normalize(href, base)
                except ValueError:  # InvalidURL, or the old parser's leaks
                    pass
                calls += 1
        return calls

    def resolver() -> int:
        resolve = impl.LinkResolver().resolve
        calls = 0
        for base, hrefs in bases:
            for href in hrefs:
                try:
                    resolve(base, href)
                except ValueError:
                    pass
                calls += 1
        return calls

    return per_call(uncached, repeat), per_call(resolver, repeat)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=Path, default=Path("/usr/share/doc/python3.11/html"))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    old = load_old()
    print(f"conformance on tests/data/urls ({len(conformance_cases())} cases; "
          f"{len(DEVIATIONS)} listed deviations of the data from the current standard):")
    conformance(old, f"  old ({OLD_COMMIT}, urllib)")
    conformance(new, "  new (ada, WHATWG)   ")

    if not args.root.is_dir():
        print(f"no {args.root} (apt-get install python3.11-doc): speed not measured")
        return
    pages = links(args.root)
    hrefs = sum(len(h) for _, h in pages)
    print(f"speed on {hrefs} hrefs of {len(pages)} pages under {args.root} "
          f"(best of {args.repeat}, microseconds a call):")
    old_norm, old_res = speed(old, pages, args.repeat)
    new_norm, new_res = speed(new, pages, args.repeat)
    print(f"  normalize(href, page), no cache: old {old_norm:.2f} | new {new_norm:.2f} "
          f"| new/old {new_norm / old_norm:.2f}")
    print(f"  LinkResolver.resolve, page order: old {old_res:.2f} | new {new_res:.2f} "
          f"| new/old {new_res / old_res:.2f}")


if __name__ == "__main__":
    main()
