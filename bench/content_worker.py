"""One baseline extractor over pages, in a Python of its own (bench/bench_content.py
runs it as ``PYTHON bench/content_worker.py NAME IN OUT``): the extraction
libraries are not the crawler's dependencies and their imports must not
touch the crawler's process. Imports nothing of the project.

IN: JSON lines ``{"id", "url", "html"}`` (the HTML as the crawler decoded it).
OUT: JSON lines ``{"id", "text", "ms", "title", "author", "published", "error"}``:
``ms`` the CPU (``time.process_time``) of the extraction call alone; the
metadata (trafilatura: ``bare_extraction``, taken apart and not timed;
rs-trafilatura: the same call's result) is None where the library gives none.

Names: ``trafilatura`` (2.3.1, ``extract(html, url=url)``, default settings),
``resiliparse`` (``extract_plain_text(html, main_content=True)``),
``rs-trafilatura`` (``extract(html, url=url)``, default settings).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

Extractor = Callable[[str, str], tuple[str, dict[str, Any] | None]]


def _trafilatura() -> tuple[Extractor, Callable[[str, str], dict[str, Any]]]:
    import trafilatura

    def extract(html: str, url: str) -> tuple[str, dict[str, Any] | None]:
        return trafilatura.extract(html, url=url or None) or "", None

    def metadata(html: str, url: str) -> dict[str, Any]:
        doc = trafilatura.bare_extraction(html, url=url or None, with_metadata=True)
        if doc is None:
            return {}

        def get(key: str) -> Any:
            return doc.get(key) if isinstance(doc, dict) else getattr(doc, key, None)

        return {"title": get("title"), "author": get("author"), "published": get("date")}

    return extract, metadata


def _resiliparse() -> tuple[Extractor, None]:
    from resiliparse.extract.html2text import extract_plain_text

    def extract(html: str, url: str) -> tuple[str, dict[str, Any] | None]:
        return extract_plain_text(html, main_content=True) or "", None

    return extract, None


def _rs_trafilatura() -> tuple[Extractor, None]:
    import rs_trafilatura

    def extract(html: str, url: str) -> tuple[str, dict[str, Any] | None]:
        r = rs_trafilatura.extract(html, url=url or None)
        return r.main_content or "", {"title": r.title, "author": r.author, "published": r.date}

    return extract, None


EXTRACTORS: dict[str, Callable[[], tuple[Extractor, Any]]] = {
    "trafilatura": _trafilatura, "resiliparse": _resiliparse, "rs-trafilatura": _rs_trafilatura}


def version(name: str) -> str:
    from importlib.metadata import version as v
    return v(name)


def main(name: str, src: str, dst: str) -> None:
    extract, metadata = EXTRACTORS[name]()
    warm = True
    with open(src, encoding="utf-8") as pages, open(dst, "w", encoding="utf-8") as out:
        for line in pages:
            page = json.loads(line)
            html, url = page["html"], page["url"]
            if warm:  # lazy imports and first-call caches, untimed, as the crawler's side has them
                warm = False
                try:
                    extract(html, url)
                except Exception:  # noqa: BLE001  (a library's failure is a page's result)
                    pass
            row: dict[str, Any] = {"id": page["id"], "text": "", "error": None,
                                   "title": None, "author": None, "published": None}
            start = time.process_time()
            try:
                text, meta = extract(html, url)
            except Exception as exc:  # noqa: BLE001
                text, meta, row["error"] = "", None, f"{type(exc).__name__}: {exc}"[:300]
            row["ms"] = (time.process_time() - start) * 1000
            row["text"] = text
            if metadata is not None:
                try:
                    meta = metadata(html, url)
                except Exception as exc:  # noqa: BLE001
                    row["error"] = row["error"] or f"metadata {type(exc).__name__}: {exc}"[:300]
            for key, value in (meta or {}).items():
                row[key] = value if isinstance(value, str) else None
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--version"]:
        print(version(sys.argv[2]))
    else:
        main(*sys.argv[1:4])
