"""The link graph of a crawl as GraphML, GEXF or a CSV edge list.

Pages are nodes (``title``, ``page_type``, ``site``, ``state``, ``stored``:
link targets that were never stored are nodes too); every link is an edge
with its ``anchor``. The site-level graph has one node per site (``pages``,
``links``, ``errors``) and one edge per pair of sites with the number of
links between them (``weight``); links within a site are left out.

Written directly (no graph library at run time); the files load in networkx
(``read_graphml``, ``read_gexf``) and Gephi.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import quoteattr

from crawler.urls import url_site

if TYPE_CHECKING:
    from crawler.store import Store

__all__ = ["FORMATS", "export_graph", "page_graph", "site_graph"]

FORMATS = (".graphml", ".gexf", ".csv")

Nodes = dict[str, dict[str, Any]]
Edges = list[tuple[str, str, dict[str, Any]]]


def page_graph(store: Store, site: str | None = None) -> tuple[Nodes, Edges]:
    nodes: Nodes = {}
    for page in store.iter_pages(site):
        nodes[page["url"]] = {"title": page.get("title") or "", "page_type": page.get("page_type") or "",
                              "site": page["site"], "state": page.get("state") or "", "stored": True}
    edges: Edges = []
    for link in store.iter_links(site):
        edges.append((link["src"], link["dst"], {"anchor": link.get("anchor") or ""}))
        for url in (link["src"], link["dst"]):
            if url not in nodes:
                nodes[url] = {"title": "", "page_type": "", "site": url_site(url), "state": "", "stored": False}
    return nodes, edges


def site_graph(store: Store) -> tuple[Nodes, Edges]:
    nodes: Nodes = {s["site"]: {"pages": int(s["pages"]), "links": int(s["links"] or 0), "errors": int(s["errors"])}
                    for s in store.sites()}
    pairs: Counter[tuple[str, str]] = Counter()
    for link in store.iter_links():
        a, b = url_site(link["src"]), url_site(link["dst"])
        if a != b:
            pairs[(a, b)] += 1
    for a, b in pairs:
        for s in (a, b):
            nodes.setdefault(s, {"pages": 0, "links": 0, "errors": 0})
    return nodes, [(a, b, {"weight": n}) for (a, b), n in sorted(pairs.items())]


def _attr_keys(items: Iterable[dict[str, Any]]) -> dict[str, str]:
    keys: dict[str, str] = {}
    for attrs in items:
        for k, v in attrs.items():
            keys.setdefault(k, "boolean" if isinstance(v, bool) else "int" if isinstance(v, int) else "string")
    return keys


def _value(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def write_graphml(path: Path, nodes: Nodes, edges: Edges) -> None:
    nkeys, ekeys = _attr_keys(nodes.values()), _attr_keys(a for _, _, a in edges)
    with path.open("w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n')
        for k, t in nkeys.items():
            f.write(f'  <key id="n_{k}" for="node" attr.name="{k}" attr.type="{t}"/>\n')
        for k, t in ekeys.items():
            f.write(f'  <key id="e_{k}" for="edge" attr.name="{k}" attr.type="{t}"/>\n')
        f.write('  <graph edgedefault="directed">\n')
        for node, attrs in nodes.items():
            f.write(f"    <node id={quoteattr(node)}>")
            f.write("".join(f'<data key="n_{k}">{_xml(_value(v))}</data>' for k, v in attrs.items()))
            f.write("</node>\n")
        for src, dst, attrs in edges:
            f.write(f"    <edge source={quoteattr(src)} target={quoteattr(dst)}>")
            f.write("".join(f'<data key="e_{k}">{_xml(_value(v))}</data>' for k, v in attrs.items()))
            f.write("</edge>\n")
        f.write("  </graph>\n</graphml>\n")


def write_gexf(path: Path, nodes: Nodes, edges: Edges) -> None:
    nkeys = _attr_keys(nodes.values())
    ekeys = {k: t for k, t in _attr_keys(a for _, _, a in edges).items() if k != "weight"}
    gexf_type = {"boolean": "boolean", "int": "integer", "string": "string"}
    with path.open("w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                '<gexf xmlns="http://gexf.net/1.3" version="1.3">\n'
                '  <graph defaultedgetype="directed" mode="static">\n'
                '    <attributes class="node">\n')
        for i, (k, t) in enumerate(nkeys.items()):
            f.write(f'      <attribute id="{i}" title="{k}" type="{gexf_type[t]}"/>\n')
        f.write('    </attributes>\n    <attributes class="edge">\n')
        for i, (k, t) in enumerate(ekeys.items()):
            f.write(f'      <attribute id="{i}" title="{k}" type="{gexf_type[t]}"/>\n')
        f.write("    </attributes>\n    <nodes>\n")
        nidx = {k: i for i, k in enumerate(nkeys)}
        eidx = {k: i for i, k in enumerate(ekeys)}
        for node, attrs in nodes.items():
            values = "".join(f'<attvalue for="{nidx[k]}" value={quoteattr(_value(v))}/>' for k, v in attrs.items())
            f.write(f"      <node id={quoteattr(node)} label={quoteattr(node)}><attvalues>{values}</attvalues></node>\n")
        f.write("    </nodes>\n    <edges>\n")
        for i, (src, dst, attrs) in enumerate(edges):
            weight = f' weight="{attrs["weight"]}"' if "weight" in attrs else ""
            values = "".join(f'<attvalue for="{eidx[k]}" value={quoteattr(_value(v))}/>'
                             for k, v in attrs.items() if k != "weight")
            f.write(f'      <edge id="{i}" source={quoteattr(src)} target={quoteattr(dst)}{weight}>'
                    f"<attvalues>{values}</attvalues></edge>\n")
        f.write("    </edges>\n  </graph>\n</gexf>\n")


def write_csv(path: Path, edges: Edges) -> None:
    keys = list(_attr_keys(a for _, _, a in edges)) or ["anchor"]
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["source", "target", *keys])
        for src, dst, attrs in edges:
            w.writerow([src, dst, *(attrs.get(k, "") for k in keys)])


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def export_graph(store: Store, path: Path, site: str | None = None, sites: bool = False) -> tuple[int, int]:
    """Write the page graph (or, with ``sites``, the site graph) to ``path``,
    in the format its suffix names. Returns (nodes, edges)."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"unknown graph format {suffix!r}: use one of {', '.join(FORMATS)}")
    nodes, edges = site_graph(store) if sites else page_graph(store, site)
    if suffix == ".graphml":
        write_graphml(path, nodes, edges)
    elif suffix == ".gexf":
        write_gexf(path, nodes, edges)
    else:
        write_csv(path, edges)
    return len(nodes), len(edges)
