"""A real documentation tree for ``bench_focused --root DIR --topic FILE``:
its truth by term density, its link graph, why the focused crawl missed the
on-topic pages it missed, and an offline replay of a focused crawl's
following (to try a stop rule on a tree in seconds, not minutes; the
figures that count are the real crawls').

Truth: a page is on topic when the topic's own score of its title and own
text (``crawler.reading.extract.analyze``, ``Topic.score``: weighted hits per 100
words) reaches the topic's threshold: the crawler's own judgement, made of
every page breadth-first reaches, so recall counts what the focused crawl
did not fetch, not what it judged otherwise.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from crawler.reading.extract import analyze
from crawler.reading.resolve import resolve_links
from crawler.following.topic import Siblings, Topic, follow_links, passage
from crawler.scope.urls import LinkResolver

__all__ = ["Node", "explain_misses", "reachable", "read_tree", "replay"]


@dataclass
class Node:
    score: float
    links: dict[str, tuple[str, str]] = field(default_factory=dict)  # url -> (anchor, context)


def file_of(root: Path, url: str) -> Path:
    path = unquote(urlsplit(url).path)
    return root / (path.lstrip("/") + ("index.html" if path.endswith("/") else ""))


def read_tree(root: Path, urls: set[str], topic: Topic) -> dict[str, Node]:
    """Each HTML page of ``urls`` (served from ``root``), scored, with its
    links on its own host."""
    resolver = LinkResolver()
    graph: dict[str, Node] = {}
    for url in sorted(urls):
        f = file_of(root, url)
        if not f.is_file() or f.suffix.lower() not in (".html", ".htm", ""):
            continue
        page = analyze(f.read_bytes(), url, link_context=True)
        links, contexts = resolve_links(resolver, url, page, with_contexts=True)
        graph[url] = Node(topic.score(page.title, page.own_text),
                          {u: (a, contexts.get(u, "")) for u, a in links.items()
                           if urlsplit(u).netloc == urlsplit(url).netloc})
    return graph


def reachable(root: Path, seed: str, topic: Topic) -> set[str]:
    """The pages breadth-first reaches from ``seed``, read offline (every
    link of every page)."""
    urls, todo = {seed}, [seed]
    while todo:
        grown = read_tree(root, set(todo), topic)
        todo = sorted({u for node in grown.values() for u in node.links if u not in urls})
        urls.update(todo)
    return {u for u in urls if file_of(root, u).is_file()}


def explain_misses(graph: dict[str, Node], topic: Topic, fetched: set[str], missed: list[str]) -> dict[str, str]:
    """Why each missed on-topic page was not fetched, as far as the graph
    tells: no fetched page links it; only off-topic pages do (the tunnel may
    have stopped there); or its best link from an on-topic page has a
    priority (siblings unknown: the parent's score) below the gate."""
    out = {}
    for url in missed:
        parents = [p for p in fetched if p in graph and url in graph[p].links]
        if not parents:
            out[url] = "no fetched page links it"
            continue
        best = max(topic.link_priority(url, *graph[p].links[url], graph[p].score, None) for p in parents)
        on = [p for p in parents if topic.on_topic(graph[p].score)]
        out[url] = (f"{len(parents)} fetched parents, {len(on)} on topic; best link priority {best:.3f}")
    return out


def replay(graph: dict[str, Node], seeds: list[str], topic: Topic, tunnel: int, min_priority: float,
           tunnel_links: int) -> list[str]:
    """The pages a focused crawl of one worker fetches, in order, as
    ``Follower.follow_topic`` follows (``crawler/following/follow.py``), one request
    at a time: the most promising link first; an on-topic page's links
    below ``min_priority`` set aside (not remembered: a better page may
    link them later), an off-topic page's ``tunnel_links`` best passed on
    within the tunnel (``topic.passage``); the crawl ends when nothing is
    left. Checked against the real crawl on the generated web, seed 1: the
    same 702 pages fetched (bench/JOURNAL.md)."""
    heap: list[tuple[float, int, str, int, int]] = [(-1.0, i, seed, 0, 0) for i, seed in enumerate(seeds)]
    seen = set(seeds)
    siblings = Siblings()
    order: list[str] = []
    n = len(seeds)
    while heap:
        _, _, url, hops, depth = heapq.heappop(heap)
        node = graph.get(url)
        if node is None:
            continue
        on = topic.on_topic(node.score)
        order.append(url)
        siblings.record(url, on)
        go, hops_out = follow_links(on or depth == 0, hops, tunnel)
        if not go:
            continue
        priorities = {link: topic.link_priority(link, anchor, context, node.score, siblings.rate(link, node.score))
                      for link, (anchor, context) in node.links.items() if link not in seen}
        if depth > 0 and hops_out > 0 and tunnel_links > 0:
            priorities = passage(priorities, tunnel_links)
        elif depth > 0:
            priorities = {link: p for link, p in priorities.items() if p >= min_priority}
        for link, p in priorities.items():
            seen.add(link)
            n += 1
            heapq.heappush(heap, (-p, n, link, hops_out, depth + 1))
    return order
