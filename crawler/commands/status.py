"""``scrapy status [--json] [--watch] [--interval S] [--errors [N]]``: the crawl at a glance.

Reads the crawl's frontier (``REDIS_URL``, ``CRAWL_NAME``, ``CRAWL_DIR`` as
the spiders do; on embedded defaults the embedded Redis in ``CRAWL_DIR``).
``--json`` prints one object (``crawler/operations/ops.py`` documents its fields);
without it, tables: the crawl's state, every node, the frontier, Redis's
memory (each node's used memory, its ``maxmemory`` and policy, and whether
it is full), the errors by reason and the largest site queues. ``--watch`` redraws in place every
``--interval`` seconds (2) until Ctrl-C, and goes on while Redis restarts
or nodes die (it says what it cannot reach and keeps trying).

``--errors [N]`` lists the URLs the crawl settled as errors instead, newest
first, at most N (20): one line each, ``<time>  <reason>  <url>``, under a
line that says how many there are; with ``--json``, ``{"crawl",
"errors_total", "failed": [{"url", "site", "reason", "at"}]}``
(``ops.failed``; ``errors_total``: the pages, revisits and sitemaps
settled as errors). URLs robots.txt forbade are not errors and not listed.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any

import redis

from crawler.operations import ops
from crawler.config import ConfigError
from crawler.redis.client import RedisUnavailable
from crawler.operations.cli import FrontierCommand
from crawler.operations.progress import duration
from crawler.redis.memory import size

if TYPE_CHECKING:
    import argparse

    from crawler.frontier.frontier import Frontier

    from rich.console import RenderableType


def _age(seconds: float) -> str:
    return duration(seconds) + " ago"


def render(st: dict[str, Any]) -> RenderableType:
    """``scrapy status`` as rich tables."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    f, t = st["frontier"], st["totals"]
    head = Text.assemble(
        ("crawl ", "bold"), (st["crawl"], "bold cyan"), "  ",
        (st["state"].upper(), {"running": "bold green", "stopping": "bold yellow", "stopped": "bold red",
                               "finished": "bold blue"}.get(st["state"], "bold")),
        f"   {t['pages']:,} pages, {t['errors']:,} errors, {t['pages_per_min']:,.0f} pages/min, "
        f"{t['links']:,} links parsed",
    )
    if "download_delay" in st:
        head.append(f", {st['download_delay']:g} s between a site's fetches")
    if t.get("robots_forbidden"):
        head.append(f", {t['robots_forbidden']:,} forbidden by robots.txt")
    if t.get("revisits") or t.get("revisit_errors"):
        head.append(f", {t['revisits'] + t['revisit_errors']:,} revisits ({t['revisit_errors']:,} failed: no answer "
                    "or a server error)")
    r = st.get("recrawl") or {}
    if any(r.values()):
        # Each revisit stored has one outcome: they add up to "stored".
        head.append(f"\nre-crawl: {r['due']:,} due; {r['fetched']:,} revisits stored: {r['new']:,} new, "
                    f"{r['unchanged']:,} unchanged ({r['not_modified']:,} of them 304), {r['trivial']:,} trivially "
                    f"changed, {r['changed']:,} changed, {r['gone']:,} gone, {r['moved']:,} moved, {r['error']:,} "
                    "undecided (no answer, a server error or a temporary redirect)")
    c = st.get("control") or {}
    if any(v is not None for v in c.values()):
        best = c.get("best_waiting")
        head.append(f"\ncontrol: order {c.get('order') or 'bfs'}"
                    + (f" (best waiting {best:g})" if best is not None else "")
                    + f", scope {c.get('scope') or 'site'}, follow {c.get('follow') or 'index'}, "
                    f"sitemaps {'off' if c.get('sitemaps') == '0' else 'on'}, "
                    f"languages {c.get('languages') or 'any'}, render {c.get('render') or 'never'}"
                    + (f", URL rules {c['rules']}" if c.get("rules") not in (None, '{"allow": [], "deny": []}') else ""))
    sm = st.get("sitemaps") or {}
    if sm.get("read") or sm.get("errors"):
        head.append(f"\nsitemaps: {sm['read']:,} read, {sm['errors']:,} failed, {sm['listed']:,} URLs listed, "
                    f"{sm['taken']:,} taken")
    tp = st.get("topic")
    if tp:
        head.append(f"\nfocused: {tp['on_topic']:,} of {tp['pages']:,} pages on topic (harvest rate "
                    f"{tp['harvest_rate']:.1%}); tunnels: {tp['tunnel_pages']:,} pages through off-topic "
                    f"parents, {tp['tunnel_on_topic']:,} of them on topic, {tp['tunnel_stopped']:,} stopped")
    for m in st.get("redis") or []:
        if m["full"]:
            head.append(f"\nRedis at {m['node']} is full ({size(m['used'])} of maxmemory {size(m['limit'])}): "
                        "workers take no new work until memory is raised or freed", style="bold red")
    if st["state"] == "stopped" and not st.get("stop"):
        head.append(f"\n{resume_line(st)}", style="yellow")
    if st.get("stop"):
        head.append(f"\nstop asked ({st['stop']['stop']}) by {st['stop']['by']}; "
                    "`scrapy stop --clear` lets workers run again", style="yellow")
    nodes = Table(title="nodes", title_justify="left", expand=False)
    cols = ["node", "host", "pid", "state", "pages", "pages/min", "links", "errors", "heartbeat"]
    if tp:
        cols[6:6] = ["on topic", "harvest"]
    for col in cols:
        nodes.add_column(col, justify="left" if col in ("node", "host", "state", "heartbeat") else "right")
    for n in st["nodes"]:
        style = "" if n["alive"] else "dim"
        # A node that left cleanly reads "stopped"; only one whose record
        # still claims to work without a heartbeat reads "(dead)".
        gone = not n["alive"] and n["state"] not in ("stopped", "lost")
        row = [n["id"], n["host"], str(n["pid"]), f"{n['state']} (dead)" if gone else n["state"],
               f"{n['pages']:,}", f"{n['pages_per_min']:,.1f}", f"{n['links']:,}", f"{n['errors']:,}",
               _age(st["time"] - n["last_heartbeat"])]
        if tp:
            row[6:6] = [f"{n['on_topic']:,}", f"{n['harvest_rate']:.1%}"]
        nodes.add_row(*row, style=style)
    fr = Table(title="frontier", title_justify="left", show_header=True)
    for col in ("queued", "leased", "delayed", "sites", "ready", "backed off", "seen"):
        fr.add_column(col, justify="right")
    fr.add_row(*(f"{f[k]:,}" for k in ("queued", "leased", "delayed", "sites", "sites_ready",
                                         "sites_backed_off", "seen")))
    parts: list[Any] = [head, nodes if st["nodes"] else Text("no worker has joined this crawl", style="dim"), fr]
    if st.get("redis"):
        parts.append(memory_table(st["redis"]))
    if st["top_sites"]:
        top = Table(title="largest site queues", title_justify="left")
        for col in ("site", "queued", "delay s", "backoff s", "pace s", "why", "next in s"):
            top.add_column(col, justify="left" if col == "site" else "right")
        for s in st["top_sites"]:
            top.add_row(s["site"], f"{s['queued']:,}", f"{s['delay']:g}", f"{s['backoff']:g}",
                        f"{s['pace']:g}" if s.get("pace") else "-", s.get("pace_why") or "-",
                        f"{s['next_in']:.1f}" if s.get("next_in") else "0")
        parts.append(top)
    if st.get("steps"):
        costs = Table(title="costliest page steps (CPU ms a page)", title_justify="left")
        costs.add_column("step")
        costs.add_column("ms", justify="right")
        for x in st["steps"][:6]:
            costs.add_row(x["step"], f"{x['ms_a_page']:.3f}")
        parts.append(costs)
    if st["errors"]:
        err = Table(title="errors by reason (latest 1,000)", title_justify="left")
        err.add_column("reason")
        err.add_column("count", justify="right")
        for reason, count in list(st["errors"].items())[:10]:
            err.add_row(reason, f"{count:,}")
        parts.append(err)
    return Group(*parts)


def error_list(crawl: str, total: int, failed: list[dict[str, Any]]) -> str:
    """``scrapy status --errors`` as text: a line saying how many, then one a URL."""
    if not failed:
        return f"crawl {crawl}: no URL failed"
    lines = [f"crawl {crawl}: {total:,} URL{'' if total == 1 else 's'} failed; the latest {len(failed):,}, "
             "newest first:"]
    for e in failed:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e["at"]))
        lines.append(f"{when}  {e['reason']}  {e['url'] or '(URL not kept: ' + e['site'] + ')'}")
    return "\n".join(lines)


def resume_line(st: dict[str, Any]) -> str:
    """What a crawl whose workers left with work queued holds, and how to go on."""
    f = st["frontier"]
    pending = f["queued"] + f["leased"] + f["delayed"]
    spider = next((n["spider"] for n in sorted(st["nodes"], key=lambda n: -n["last_heartbeat"]) if n["spider"]), "site")
    return (f"stopped with {pending:,} URLs to fetch ({f['queued']:,} queued, {f['leased']:,} leased, "
            f"{f['delayed']:,} waiting for a retry); `scrapy crawl {spider}` with the same -s CRAWL_NAME "
            "(and CRAWL_DIR or REDIS_URL) resumes it")


def memory_table(memory: list[dict[str, Any]]) -> Any:
    """One row per Redis node: memory used, its limit, its policy, full or not."""
    from rich.table import Table

    table = Table(title="redis memory", title_justify="left")
    for col in ("node", "used", "maxmemory", "policy", "state"):
        table.add_column(col, justify="right" if col in ("used", "maxmemory") else "left")
    for m in memory:
        used = size(m["used"]) + (f" ({m['used'] / m['limit']:.0%})" if m["limit"] else "")
        table.add_row(m["node"], used, size(m["limit"]) if m["limit"] else "no limit",
                      m["policy"] if m["policy"] == "noeviction" else f"{m['policy']} (evicts keys)",
                      "FULL" if m["full"] else "ok", style="bold red" if m["full"] else "")
    return table


class Command(FrontierCommand):
    def syntax(self) -> str:
        return "[--json] [--watch] [--interval SECONDS] [--errors [N]]"

    def short_desc(self) -> str:
        return "Show the crawl's state, its nodes, frontier and errors"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--watch", action="store_true", help="redraw in place until Ctrl-C")
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between redraws (--watch)")
        parser.add_argument("--top", type=int, default=10, help="how many of the largest site queues")
        parser.add_argument("--errors", type=int, nargs="?", const=20, default=None, metavar="N",
                            help="list the latest N URLs that failed, newest first, with their reasons (20)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        timeout = self.settings.getfloat("FRONTIER_LEASE_TIMEOUT")
        if opts.errors is not None:
            self._errors(opts)
            return
        if opts.watch:
            self._watch(opts, timeout)
            return
        st = self.guarded("status", lambda: ops.status(self.open_frontier(), timeout, top=opts.top))
        if st is None:
            return
        if opts.json:
            print(ops.dumps(st))
        else:
            from rich.console import Console

            # Piped (to a file, grep, less), rich would fit the tables to 80
            # columns and cut their cells ("pages/…"): each line is as long
            # as its table needs instead.
            console = Console() if sys.stdout.isatty() else Console(width=10_000)
            console.print(render(st))

    def _errors(self, opts: argparse.Namespace) -> None:
        if opts.errors < 1:
            print(f"scrapy status: --errors {opts.errors}: give a number of URLs, 1 or more", file=sys.stderr)
            self.exitcode = 1
            return

        def read() -> tuple[Frontier, int, list[dict[str, Any]]]:
            frontier = self.open_frontier()
            c = frontier.views.stats()
            # Pages, revisits and sitemaps settled as errors: what the list holds.
            total = c.get("errors", 0) + c.get("revisit_errors", 0) + c.get("sitemap_errors", 0)
            return frontier, total, ops.failed(frontier, opts.errors)

        got = self.guarded("status", read)
        if got is None:
            return
        frontier, total, failed = got
        if opts.json:
            print(ops.dumps({"crawl": frontier.crawl, "errors_total": total, "failed": failed}))
            return
        print(error_list(frontier.crawl, total, failed))

    def _watch(self, opts: argparse.Namespace, timeout: float) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        assert self.settings is not None
        try:
            frontier = self.open_frontier()
        except (ops.NoSuchCrawl, ConfigError) as exc:  # a typo is one line, as without --watch
            print(f"scrapy status: {exc}", file=sys.stderr)
            self.exitcode = 1
            return
        except (RedisUnavailable, redis.RedisError):
            frontier = None  # shown below, and tried again
        console = Console()
        last: Any = Text("connecting ...")
        with Live(last, console=console, auto_refresh=False, screen=False) as live:
            try:
                while True:
                    try:
                        if frontier is None:
                            frontier = self.open_frontier()
                        st = ops.status(frontier, timeout, top=opts.top)
                        last = render(st)
                        view: Any = last
                    except (RedisUnavailable, redis.RedisError, ops.NoSuchCrawl) as exc:
                        from rich.console import Group

                        what = "Redis unreachable" if not isinstance(exc, ops.NoSuchCrawl) else "Crawl gone"
                        view = Group(Text(f"{what} ({exc}); trying again every {opts.interval:g} s",
                                          style="bold red"), last)
                        if isinstance(exc, ops.NoSuchCrawl):
                            frontier = None
                    live.update(view, refresh=True)
                    time.sleep(opts.interval)
            except KeyboardInterrupt:
                pass
