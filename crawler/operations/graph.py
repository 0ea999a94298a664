"""The link graph of a crawl as GraphML, GEXF or a CSV edge list.

Pages are nodes (``title``, ``page_type``, ``site``, ``state``, ``stored``:
link targets that were never stored are nodes too); every link is an edge
with its ``anchor``. The site-level graph has one node per site (``pages``,
``links``, ``errors``) and one edge per pair of sites with the number of
links between them (``weight``); links within a site are left out.

Written directly (no graph library at run time); the files load in networkx
(``read_graphml``, ``read_gexf``) and Gephi.

Every string is made writable first, since a crawl stores whatever pages
hold and one bad character makes a whole XML file unreadable: characters
XML 1.0 forbids (C0 controls but tab, LF and CR; lone surrogates; U+FFFE,
U+FFFF) become U+FFFD in titles and anchors, and are percent-encoded
(UTF-8, a lone surrogate as U+FFFD) in URLs and site names, which name
nodes: an equivalent URL, so distinct pages stay distinct nodes. The CSV
gets the same strings as the XML formats.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import quoteattr

from crawler.scope.urls import url_site

if TYPE_CHECKING:
    from crawler.store import Store

__all__ = ["FORMATS", "clean_name", "clean_text", "export_graph", "page_graph", "site_graph"]

FORMATS = (".graphml", ".gexf", ".csv")

Nodes = dict[str, dict[str, Any]]
Edges = list[tuple[str, str, dict[str, Any]]]


# XML 1.0's Char production leaves these out; tab, LF and CR stay.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def clean_text(text: str) -> str:
    """``text`` with every character XML 1.0 forbids replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", text)


def _percent(match: re.Match[str]) -> str:
    char = match.group()
    # A lone surrogate has no UTF-8 form: percent-encode U+FFFD for it, as a
    # WHATWG URL parser does.
    data = "\ufffd".encode() if "\ud800" <= char <= "\udfff" else char.encode()
    return "".join(f"%{b:02X}" for b in data)


def clean_name(name: str) -> str:
    """A URL or site name with the characters XML 1.0 forbids percent-encoded."""
    return _NOT_XML.sub(_percent, name)


def page_graph(store: Store, site: str | None = None) -> tuple[Nodes, Edges]:
    nodes: Nodes = {}
    for page in store.iter_pages(site):
        nodes[clean_name(page["url"])] = {
            "title": clean_text(page.get("title") or ""), "page_type": clean_text(page.get("page_type") or ""),
            "site": clean_name(page["site"]), "state": clean_text(page.get("state") or ""), "stored": True}
    # Keyed by (src, dst): two stored URLs that differ only by a character
    # cleaned away are one node, and their links one edge.
    edges: dict[tuple[str, str], dict[str, Any]] = {}
    for link in store.iter_links(site):
        src, dst = clean_name(link["src"]), clean_name(link["dst"])
        edges.setdefault((src, dst), {"anchor": clean_text(link.get("anchor") or "")})
        for url in (src, dst):
            if url not in nodes:
                nodes[url] = {"title": "", "page_type": "", "site": clean_name(url_site(url)), "state": "",
                              "stored": False}
    return nodes, [(src, dst, attrs) for (src, dst), attrs in edges.items()]


def site_graph(store: Store) -> tuple[Nodes, Edges]:
    nodes: Nodes = {clean_name(s["site"]): {"pages": int(s["pages"]), "links": int(s["links"] or 0),
                                            "errors": int(s["errors"])}
                    for s in store.sites()}
    pairs: Counter[tuple[str, str]] = Counter()
    for link in store.iter_links():
        a, b = clean_name(url_site(link["src"])), clean_name(url_site(link["dst"]))
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
            f.write(f"    <node id={_attr(node)}>")
            f.write("".join(f'<data key="n_{k}">{_xml(_value(v))}</data>' for k, v in attrs.items()))
            f.write("</node>\n")
        for src, dst, attrs in edges:
            f.write(f"    <edge source={_attr(src)} target={_attr(dst)}>")
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
            values = "".join(f'<attvalue for="{nidx[k]}" value={_attr(_value(v))}/>' for k, v in attrs.items())
            f.write(f"      <node id={_attr(node)} label={_attr(node)}><attvalues>{values}</attvalues></node>\n")
        f.write("    </nodes>\n    <edges>\n")
        for i, (src, dst, attrs) in enumerate(edges):
            weight = f' weight="{attrs["weight"]}"' if "weight" in attrs else ""
            values = "".join(f'<attvalue for="{eidx[k]}" value={_attr(_value(v))}/>'
                             for k, v in attrs.items() if k != "weight")
            f.write(f'      <edge id="{i}" source={_attr(src)} target={_attr(dst)}{weight}>'
                    f"<attvalues>{values}</attvalues></edge>\n")
        f.write("    </edges>\n  </graph>\n</gexf>\n")


def write_csv(path: Path, edges: Edges) -> None:
    keys = list(_attr_keys(a for _, _, a in edges)) or ["anchor"]
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["source", "target", *keys])
        for src, dst, attrs in edges:
            w.writerow([clean_text(src), clean_text(dst), *(clean_text(_value(attrs.get(k, ""))) for k in keys)])


def _xml(text: str) -> str:
    # A raw CR would come back as LF (XML's end-of-line handling): escape it.
    # clean_text again: the writers take any nodes and edges, cleaned or not.
    text = clean_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("\r", "&#13;")


def _attr(text: str) -> str:
    """A quoted XML attribute value (quoteattr escapes tab, LF and CR)."""
    return quoteattr(clean_text(text))


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
