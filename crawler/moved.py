"""Modules that moved into capability packages (issue 49), by their old path.

``crawler.netguard.NetworkGuardMiddleware`` in a project's settings, or
``import crawler.urls`` in a user's code, still works for one release: the
old path is the new module, with a ``DeprecationWarning`` that names it.
``install`` (run by ``crawler/__init__.py``) puts the finder on
``sys.meta_path``; it answers for the old paths only.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from collections.abc import Callable
from typing import Any

__all__ = ["MOVED", "install", "names_of"]

MOVED = {
    "crawler.canonical": "crawler.duplicates.canonical",
    "crawler.classify": "crawler.pagetypes.classify",
    "crawler.console": "crawler.operations.console",
    "crawler.documents": "crawler.reading.documents",
    "crawler.encoding": "crawler.reading.encoding",
    "crawler.extract": "crawler.reading.extract",
    "crawler.featurehash": "crawler.duplicates.featurehash",
    "crawler.feeds": "crawler.operations.feeds",
    "crawler.fingerprint": "crawler.duplicates.fingerprint",
    "crawler.follow": "crawler.following.follow",
    "crawler.graph": "crawler.operations.graph",
    "crawler.htmlparse": "crawler.reading.html",
    "crawler.importance": "crawler.following.importance",
    "crawler.language": "crawler.reading.language",
    "crawler.linkresolve": "crawler.reading.resolve",
    "crawler.netguard": "crawler.network.guard",
    "crawler.netpolicy": "crawler.network.policy",
    "crawler.ops": "crawler.operations.ops",
    "crawler.opscli": "crawler.operations.cli",
    "crawler.pagecheck": "crawler.duplicates.check",
    "crawler.pagecount": "crawler.operations.pagecount",
    "crawler.pagefeatures": "crawler.pagetypes.features",
    "crawler.pagehead": "crawler.reading.head",
    "crawler.pagelinks": "crawler.reading.links",
    "crawler.pagerules": "crawler.pagetypes.rules",
    "crawler.pagetype": "crawler.pagetypes.typer",
    "crawler.pdf": "crawler.reading.pdf",
    "crawler.pdfworker": "crawler.reading.pdfworker",
    "crawler.progress": "crawler.operations.progress",
    "crawler.redirects": "crawler.reading.redirects",
    "crawler.responses": "crawler.reading.responses",
    "crawler.revisit": "crawler.recrawl.change",
    "crawler.revisitplan": "crawler.recrawl.plan",
    "crawler.rules": "crawler.scope.rules",
    "crawler.seeds": "crawler.scope.seeds",
    "crawler.sitemapparse": "crawler.sitemaps.parse",
    "crawler.startchecks": "crawler.operations.startchecks",
    "crawler.supervisor": "crawler.operations.supervisor",
    "crawler.template": "crawler.pagetypes.template",
    "crawler.textfeatures": "crawler.reading.textfeatures",
    "crawler.topic": "crawler.following.topic",
    "crawler.traps": "crawler.scope.traps",
    "crawler.urls": "crawler.scope.urls",
    "crawler.variants": "crawler.duplicates.variants",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.new}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the new module, already run


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        return importlib.machinery.ModuleSpec(fullname, _Alias(new)) if new is not None else None


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())  # before an editable install's finder, which would look for the old file


def names_of(package: str, module: str) -> Callable[[str], object]:
    """A ``__getattr__`` for ``package``, whose path was the module now at
    ``package.module``: that module's names, each with a DeprecationWarning."""

    def getattr_(name: str) -> object:
        moved = importlib.import_module(f"{package}.{module}")
        if name.startswith("__") or not hasattr(moved, name):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        warnings.warn(f"{package}.{name} moved to {package}.{module}.{name}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return getattr(moved, name)

    return getattr_
