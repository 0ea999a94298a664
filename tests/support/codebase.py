"""The crawler's source read as a whole (``tests/test_codebase.py``): its
modules and their sizes, the import graph among them, and the private
Scrapy and protego names each one touches.

- ``modules(root)``: every ``.py`` file of the ``crawler`` package under
  ``root``, by dotted module name.
- ``import_graph(root)``: module to the crawler modules it imports when it
  is loaded: imports at module level (in ``try``, ``if`` and class bodies
  too), not those under ``if TYPE_CHECKING:`` nor inside functions, which
  run later. Importing ``a.b.c`` loads the packages ``a`` and ``a.b``
  first: edges to them too, but for the packages the module is itself in
  (being loaded already, they are no circle).
- ``cycles(graph)``: the import circles, each a sorted list of modules
  (Tarjan's strongly connected components of more than one module, and a
  module importing itself).
- ``private_uses(source, ...)``: each use of a private Scrapy or protego
  name in a module's source, as ``(line, what)``.
"""

from __future__ import annotations

import ast
import functools
import inspect
from collections.abc import Iterator, Mapping
from pathlib import Path

PACKAGES = ("scrapy", "protego")


def modules(root: Path, package: str = "crawler") -> dict[str, Path]:
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def load_time_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when a module with ``body`` is loaded."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from load_time_imports(node.body)
            yield from load_time_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from load_time_imports(block)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from load_time_imports(node.body)


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, found: Mapping[str, Path]
              ) -> Iterator[str]:
    """The modules an import statement names: ``import m`` names ``m``;
    ``from m import n`` names the module ``m.n`` if there is one, else
    ``m`` (whose ``n`` is then a name it must have defined)."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    for alias in node.names:
        yield f"{source}.{alias.name}" if f"{source}.{alias.name}" in found else source


def import_graph(root: Path, package: str = "crawler") -> dict[str, set[str]]:
    found = modules(root, package)
    graph: dict[str, set[str]] = {}
    for module, path in found.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in load_time_imports(ast.parse(path.read_text(encoding="utf-8")).body):
            for name in _imported(module, is_package, node, found):
                parts = name.split(".")
                if name in found:
                    edges.add(name)
                for end in range(1, len(parts)):
                    parent = ".".join(parts[:end])
                    # Loaded before the module named; but the packages this
                    # module is in are loading already.
                    if parent in found and not (module + ".").startswith(parent + "."):
                        edges.add(parent)
        graph[module] = edges
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node (and
    nodes with an edge to themselves), each sorted, the list sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(out)


# -- private Scrapy and protego names -----------------------------------------------------

def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _root(node: ast.expr) -> ast.expr:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


def _in_packages(dotted: str) -> bool:
    return dotted.split(".", 1)[0] in PACKAGES


@functools.cache
def private_names_of(cls: type) -> frozenset[str]:
    """The private names of a Scrapy or protego class and its bases from
    those packages: its methods and class attributes, and the instance
    attributes its methods set (``self._x = ...``)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if not _in_packages(klass.__module__):
            continue
        names |= {n for n in vars(klass) if _private(n)}
        try:
            tree = ast.parse(inspect.getsource(klass).lstrip())
        except (OSError, TypeError, SyntaxError):
            continue
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and _private(n.attr)
                  and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Store)}
    return frozenset(names)


def private_uses(source: str | ast.Module, classes: Mapping[str, type] | None = None,
                 everywhere: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """Each use of a private Scrapy or protego name in ``source`` (a
    module's text, or its tree):

    - a private module or name imported from those packages
      (``import scrapy.utils._x``, ``from scrapy.x import _y``);
    - a private attribute of a name bound to one of their modules or
      objects (``scrapy_reactor._asyncio_reactor_path``,
      ``Protego._get_matching_rule_set``), also through ``getattr``,
      ``hasattr`` and ``setattr`` with the name as a string;
    - in a class of ``classes`` (its name to the class object) whose bases
      include a class of theirs: ``self._x``, ``cls._x``, ``super()._x``
      and a method ``_x`` where ``_x`` is a private name of those bases
      (``private_names_of``): an override of a private hook, or a private
      attribute read or clobbered;
    - anywhere else, ``obj._x`` where ``_x`` is in ``everywhere`` (private
      names of theirs that the crawler does not define itself: the object
      is then one of theirs, such as ``crawler.engine._slot``)."""
    nodes = list(ast.walk(ast.parse(source) if isinstance(source, str) else source))
    bound: set[str] = set()
    out: list[tuple[int, str]] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _in_packages(alias.name):
                    bound.add(alias.asname or alias.name.split(".")[0])
                    if any(_private(p) for p in alias.name.split(".")):
                        out.append((node.lineno, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and _in_packages(node.module):
            for alias in node.names:
                bound.add(alias.asname or alias.name)
                if any(_private(p) for p in [*node.module.split("."), alias.name]):
                    out.append((node.lineno, f"from {node.module} import {alias.name}"))
    in_class: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.ClassDef) and classes and node.name in classes:
            hidden = private_names_of(classes[node.name])
            for inner in ast.walk(node):
                in_class.add(id(inner))
                if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) and inner.name in hidden:
                    out.append((inner.lineno, f"{node.name}.{inner.name} overrides a private method"))
                elif isinstance(inner, ast.Attribute) and inner.attr in hidden and (
                        isinstance(inner.value, ast.Name) and inner.value.id in ("self", "cls")
                        or isinstance(inner.value, ast.Call) and isinstance(inner.value.func, ast.Name)
                        and inner.value.func.id == "super"):
                    out.append((inner.lineno, f"{node.name}: {ast.unparse(inner)}"))
    for node in nodes:
        if isinstance(node, ast.Attribute) and _private(node.attr):
            root = _root(node.value)
            if isinstance(root, ast.Name) and root.id in bound:
                out.append((node.lineno, ast.unparse(node)))
            elif node.attr in everywhere and id(node) not in in_class:
                out.append((node.lineno, ast.unparse(node)))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and _private(node.args[1].value)):
            root = _root(node.args[0])
            if (isinstance(root, ast.Name) and root.id in bound) or node.args[1].value in everywhere:
                out.append((node.lineno, ast.unparse(node)))
    return sorted(set(out))


def package_private_names() -> set[str]:
    """Every private name Scrapy and protego define (functions, classes,
    class and instance attributes, module globals), read from their source."""
    import protego
    import scrapy

    names: set[str] = set()
    for package in (scrapy, protego):
        for path in Path(package.__file__).parent.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = node.name
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    name = node.attr
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    name = node.id
                else:
                    continue
                if _private(name):
                    names.add(name)
    return names


def defined_names(tree: ast.Module) -> set[str]:
    """The private names a module defines: functions, classes, attributes
    and variables it assigns, arguments."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return {n for n in names if _private(n)}
