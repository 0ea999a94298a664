"""The documents' links: every relative link names a file of the checkout
and every ``#anchor`` a heading of that file (GitHub's slugs), and a section
named in quotes as "see ..." exists. A new user follows these first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "deploy" / "README.md",
               ROOT / "bench" / "RESULTS.md"])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SEE = re.compile(r'see "([^"]+)" in the \[[^\]]*\]\(([^)#\s]+)')


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens
    and underscores dropped, spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def headings(path: Path) -> list[str]:
    out, fenced = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            out.append(line.lstrip("#").strip())
    return out


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in headings(path):
        s = slug(h)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(doc: Path) -> None:
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(target)
    assert broken == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_section_named_in_words_exists(doc: Path) -> None:
    missing = [(name, file) for name, file in SEE.findall(doc.read_text())
               if name not in headings((doc.parent / file).resolve())]
    assert missing == []


def test_slugs_as_github_makes_them() -> None:
    assert slug("Redis memory at scale: a million-page crawl") == "redis-memory-at-scale-a-million-page-crawl"
    assert slug("3. MongoDB") == "3-mongodb"
    assert slug("`scrapy status`") == "scrapy-status"
