"""The request.meta registry (crawler/requestmeta.py): every key the crawler
uses with ``.meta`` is one of its constants, and the docs list exactly its
keys."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from crawler import requestmeta
from crawler.frontier.serialize import META_KEYS
from crawler.requestmeta import ENTRY_KINDS, ENTRY_VALUE_KINDS, REGISTRY

ROOT = Path(__file__).resolve().parents[1]
NAMES = {k.name for k in REGISTRY}


def _is_meta(node: ast.AST) -> bool:
    """``x.meta``, or a name holding a meta dict (``meta``, ``meta_in``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "meta"
    return isinstance(node, ast.Name) and node.id in {"meta", "meta_in"}


def literal_meta_keys(source: str) -> list[tuple[int, str]]:
    """(line, key) of every string literal used as a ``request.meta`` key:
    ``m.meta["k"]``, ``m.meta.get/pop/setdefault("k")``, ``"k" in m.meta``,
    ``meta={"k": ...}``, ``meta_int(m.meta, "k")`` and ``meta = {"k": ...}``."""
    found: list[tuple[int, str]] = []

    def add(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))

    def add_dict(node: ast.AST | None) -> None:
        if isinstance(node, ast.Dict):
            for key in node.keys:
                add(key)

    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _is_meta(node.value):
            add(node.slice)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in {"get", "pop", "setdefault"} \
                    and _is_meta(func.value) and node.args:
                add(node.args[0])
            if isinstance(func, ast.Name) and func.id == "meta_int" and len(node.args) > 1:
                add(node.args[1])
            for kw in node.keywords:
                if kw.arg == "meta":
                    add_dict(kw.value.body if isinstance(kw.value, ast.IfExp) else kw.value)
        elif isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                and any(_is_meta(c) for c in node.comparators):
            add(node.left)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_is_meta(t) for t in targets):
                add_dict(node.value)
    return found


def test_the_scan_finds_every_shape_of_literal_key():
    source = '''
r.meta["a"] = 1
r.meta.get("b")
response.meta.pop("c", None)
r.meta.setdefault("d", 2)
if "e" in r.meta: pass
Request(u, meta={"f": 1})
Request(u, meta={"g": 1} if x else None)
meta_int(page.meta, "h")
meta: dict = {"i": 1}
r.meta[KEY] = 1
other.get("j")
'''
    assert sorted(literal_meta_keys(source)) == [(n, k) for n, k in enumerate("abcdefghi", start=2)]


def test_every_meta_key_in_the_crawler_is_a_registry_constant():
    used = {}
    for path in sorted((ROOT / "crawler").rglob("*.py")):
        if path.name == "requestmeta.py":
            continue
        for line, key in literal_meta_keys(path.read_text()):
            used[f"{path.relative_to(ROOT)}:{line}"] = key
    # Not a string anywhere: a key is named by its constant.
    assert used == {}


def test_every_constant_is_registered_once():
    constants = {v for n, v in vars(requestmeta).items() if n.isupper() and isinstance(v, str)}
    assert constants == NAMES
    assert len(REGISTRY) == len(NAMES)
    assert all(k.meaning and k.set_by for k in REGISTRY)


def test_the_frontier_entry_spec_is_the_registrys():
    assert META_KEYS is ENTRY_KINDS
    assert set(ENTRY_KINDS.values()) <= ENTRY_VALUE_KINDS
    # The guards' opt-outs and limits never come from Redis.
    for key in ("dont_trap_guard", "trap_parent", "dont_obey_robotstxt", "download_maxsize", "proxy",
                "frontier_lease", "frontier_gap", "importance", "imp_cash", "render_for"):
        assert key not in ENTRY_KINDS
    assert ENTRY_KINDS == {
        "depth": "int", "referer_url": "str", "retry_times": "int", "shape_run": "int", "redirect_times": "int",
        "redirect_urls": "strs", "descent_run": "int", "numbered_run": "int", "token_run": "int",
        "revisit": "time", "again": "int", "head_length": "int", "head_since": "time", "topic_hops": "int",
        "topic_parent": "int", "topic_priority": "int", "sitemap": "int", "sitemap_named": "int", "imp": "int",
        "imp_key": "str", "warc_original": "strs", "dup_order": "str"}


def _docs_table() -> tuple[set[str], set[str]]:
    """The keys of docs/reference.md's request.meta table, and those the
    prose after it says a frontier entry is trusted with."""
    text = (ROOT / "docs" / "reference.md").read_text()
    section = text.split("## `request.meta` keys", 1)[1]
    rows = [line for line in section.split("A frontier entry is trusted", 1)[0].splitlines()
            if line.startswith("| `")]
    table = {name for row in rows for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])}
    trusted_text = section.split("A frontier entry is trusted with none of these but", 1)[1].split("(each checked", 1)[0]
    return table, set(re.findall(r"`([a-z_]+)`", trusted_text))


def test_the_docs_list_exactly_the_registry():
    table, trusted = _docs_table()
    assert table == NAMES
    assert trusted == set(ENTRY_KINDS)


@pytest.mark.parametrize("alias, key", [
    ("crawler.warc.service:ORIGINAL_META", "warc_original"), ("crawler.sitemaps.crawl:SITEMAP_META", "sitemap"),
    ("crawler.sitemaps.crawl:NAMED_META", "sitemap_named"), ("crawler.frontier.scheduler:LEASE_META", "frontier_lease"),
    ("crawler.frontier.scheduler:GAP_META", "frontier_gap"), ("crawler.frontier.tracking:AGAIN_META", "again"),
    ("crawler.render.router:RENDER_META", "render_for"), ("crawler.middlewares:TRAP_PARENT", "trap_parent"),
    ("crawler.following.importance:IMPORTANCE_META", "importance"),
])
def test_old_names_stay_importable(alias, key):
    import importlib

    module, name = alias.split(":")
    assert getattr(importlib.import_module(module), name) == key
