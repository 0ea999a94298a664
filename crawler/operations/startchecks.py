"""What a crawl needs of this machine, checked before the crawl is created.

``scrapy crawl`` (``crawler/commands/crawl.py``) runs ``check_start`` after
the settings (``crawler/config.py``: each value on its own) and the spider's
arguments, and before ``preflight`` records the crawl in Redis. A setting
that cannot work here is then one line (a ``ConfigError``), exit status 1,
and no crawl name is left behind for ``scrapy status`` to list; found once
the crawl ran, the same fault ended it with an ERROR among its log lines
and exit status 0.

- ``CRAWL_DIR`` (the default ``.scrapy/crawl`` too), ``WARC_DIR``: a
  directory that exists or can be made, and that a file can be written in
  (not a file in the way, nor a read-only parent).
  Nothing is made here: a start refused for another reason leaves no
  directory behind.
- ``STORE_PATH`` (without ``MONGO_URI``), ``STORE_SPILL_PATH``: a file
  that can be written (not a directory; its directory usable or one that
  can be made). Scrapy's ``LOG_FILE`` too (its directory must exist): the
  command checks it first, before its log handler opens it.
- ``PROMETHEUS_PORT``: ``PROMETHEUS_BIND:PROMETHEUS_PORT`` can be bound (not
  taken by another program or another worker); with ``CRAWL_PROCESSES``
  above 1 every worker would ask for the same port, so that is refused too.
- ``-a render=auto|always``: a browser to render with (``RENDER_BROWSER``, or
  a Chromium on ``PATH``).
- The seeds: a seed whose host is, or resolves to, an address the network
  policy refuses (``crawler/network/policy.py``; loopback and private networks
  unless ``NETWORK_ALLOWLIST`` allows them) is named in one line that gives
  the option to allow it (``netpolicy.allow_hint``). Every seed refused: a
  ``ConfigError``, nothing crawled. Some: ``check_start`` returns those
  lines, the command prints them and the crawl goes on with the rest (the
  refused ones are stored as errors, as the network guard refuses them in
  any crawl), exit status 0. A worker given no seeds is not checked.

What is not checked here, on purpose: MongoDB and Redis, which ``preflight``
reaches (an unreachable one is one line and exit 1 there, before the crawl
is recorded); and a seed's site being down, which is the crawl's to find
and record. No settings of its own, no stats.
"""

from __future__ import annotations

import errno
import socket
import tempfile
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from crawler.config import ConfigError
from crawler.network.policy import NetworkPolicy, Refusal, allow_hint, ip_of_host, parse_networks

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from scrapy.settings import BaseSettings

__all__ = ["check_directory", "check_file", "check_start", "refused_line", "refused_seeds"]

# Names looked up at once, and how long the lookups may take together: a
# seed whose name has not resolved by then is left to the crawl's own guard.
_LOOKUP_THREADS = 16
_LOOKUP_BUDGET = 5.0


def check_start(settings: BaseSettings, spider_name: str, spargs: dict[str, Any], seeds: Sequence[str]) -> list[str]:
    """``ConfigError`` for a setting that cannot work on this machine; the
    lines to print for seeds refused by the network policy, when others
    are left to crawl."""
    from crawler.crawldir import crawl_dir

    check_directory("CRAWL_DIR", crawl_dir(settings, create=False))
    check_directory("WARC_DIR", settings.get("WARC_DIR"))
    if not settings.get("MONGO_URI"):
        check_file("STORE_PATH", settings.get("STORE_PATH"))
    check_file("STORE_SPILL_PATH", settings.get("STORE_SPILL_PATH"))
    _check_prometheus(settings)
    if spargs.get("render") not in (None, "never"):
        from crawler.render.browser import BrowserUnavailable, find_browser

        try:
            find_browser(settings.get("RENDER_BROWSER") or None)
        except BrowserUnavailable as exc:
            raise ConfigError(str(exc)) from None
    refused = refused_seeds(seeds, parse_networks(settings.get("NETWORK_ALLOWLIST")))
    lines = [refused_line(url, found) for url, found in refused]
    if refused and len(refused) == len(seeds):
        if len(lines) == 1:
            raise ConfigError("nothing to crawl: " + lines[0])
        hints = ",".join(sorted({allow_hint(found) for _, found in refused}))
        first, found = refused[0]
        raise ConfigError(f"nothing to crawl: every seed is refused by the network policy ({len(seeds)} seeds; "
                          f"{_why(first, found)}); allow them with -s NETWORK_ALLOWLIST={hints}")
    return lines


def refused_line(url: str, found: Refusal) -> str:
    """A refused seed in one line, with the option that allows it."""
    return f"seed {url} is refused: {_why(url, found)}; allow it with -s NETWORK_ALLOWLIST={allow_hint(found)}"


def _why(url: str, found: Refusal) -> str:
    host = urlsplit(url).hostname or ""
    return str(found) if ip_of_host(host) is not None else f"{host} resolves to {found}"


def check_directory(name: str, value: Any) -> None:
    """``ConfigError`` unless ``value`` is a directory this process can
    write in, or can make (its nearest existing ancestor is a writable
    directory). Written to, not judged by its mode bits: root passes those."""
    if not value:
        return
    complaint = _directory_problem(Path(str(value)).expanduser())
    if complaint is not None:
        raise ConfigError(f"{name}={str(value)!r} {complaint}")


def check_file(name: str, value: Any, make_directory: bool = True) -> None:
    """``ConfigError`` unless ``value`` can be written as a file: not a
    directory, in a directory that is usable (or, with ``make_directory``,
    can be made: the store and the spill file make theirs, Scrapy's log
    file does not)."""
    if not value:
        return
    path = Path(str(value)).expanduser()
    if path.is_dir():
        raise ConfigError(f"{name}={str(value)!r} is a directory, not a file")
    parent = path.parent
    if not make_directory and not parent.is_dir():
        what = "is a file" if parent.exists() or parent.is_symlink() else "does not exist"
        raise ConfigError(f"{name}={str(value)!r} cannot be written: its directory {parent} {what}")
    complaint = _directory_problem(parent)
    if complaint is not None:
        raise ConfigError(f"{name}={str(value)!r} cannot be written: its directory {parent} {complaint}")


def _directory_problem(path: Path) -> str | None:
    """Why ``path`` cannot be used as a directory (None: it can)."""
    probe = path
    while not probe.exists():
        if probe.is_symlink():  # a dangling link: mkdir would fail on it
            return f"cannot be made: {probe} is a broken symbolic link"
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        return "is a file, not a directory" if probe == path else f"cannot be made: {probe} is a file, not a directory"
    try:
        with tempfile.TemporaryFile(dir=probe):
            pass
    except OSError as exc:
        where = "" if probe == path else f" (in {probe}, where it would be made)"
        return f"cannot be written{where}: {exc.strerror or exc}"
    return None


def _check_prometheus(settings: BaseSettings) -> None:
    port = settings.getint("PROMETHEUS_PORT")
    if not port:
        return
    from crawler.operations.supervisor import process_count

    processes = process_count(settings.get("CRAWL_PROCESSES"))
    if processes > 1:
        raise ConfigError(f"PROMETHEUS_PORT={port} with CRAWL_PROCESSES={settings.get('CRAWL_PROCESSES')}: "
                          "each worker needs a port of its own; start the workers one by one, each with its "
                          "own -s PROMETHEUS_PORT, or leave PROMETHEUS_PORT unset")
    bind = settings.get("PROMETHEUS_BIND") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # As the metrics server binds (http.server sets SO_REUSEADDR): a port
        # in TIME_WAIT after the last crawl is free, one listened on is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((bind, port))
        except OSError as exc:
            why = "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
            raise ConfigError(f"PROMETHEUS_PORT={port}: cannot listen on {bind}:{port} ({why}); "
                              "give a free port") from None


def refused_seeds(seeds: Iterable[str], allow: Iterable[Any] = ()) -> list[tuple[str, Refusal]]:
    """The seeds (normal form) whose host the network policy refuses, each
    with why: a literal address at once, a name by the address it resolves
    to (one IPv4 address, as Scrapy's resolver connects to). A name that
    does not resolve, or not within the lookups' budget, passes: the crawl
    records its DNS error, and its guard still checks it."""
    policy = NetworkPolicy(allow)
    hosts: dict[str, list[str]] = {}
    for url in seeds:
        try:
            host = urlsplit(url).hostname or ""
        except ValueError:
            continue
        hosts.setdefault(host, []).append(url)
    found: dict[str, Refusal] = {}
    names = []
    for host in hosts:
        literal = ip_of_host(host)
        if literal is None:
            names.append(host)
            continue
        refusal = policy.check(literal)
        if refusal is not None:
            found[host] = refusal
    if names:
        pool = ThreadPoolExecutor(min(_LOOKUP_THREADS, len(names)))
        futures = {pool.submit(_lookup, name): name for name in names}
        done, _ = wait(futures, timeout=_LOOKUP_BUDGET)
        pool.shutdown(wait=False, cancel_futures=True)
        for future in done:
            address = future.result()
            if address is not None:
                refusal = policy.check(address)
                if refusal is not None:
                    found[futures[future]] = refusal
    return [(url, found[host]) for host, urls in hosts.items() if host in found for url in urls]


def _lookup(name: str) -> Any:
    from ipaddress import ip_address

    try:
        return ip_address(socket.gethostbyname(name))
    except (OSError, UnicodeError, ValueError):
        return None
