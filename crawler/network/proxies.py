"""Proxy pools: each site's requests through one proxy of ``PROXY_LIST``,
a proxy that fails cooled down and its sites moved to the others.

Settings:

- ``PROXY_LIST``: proxies as ``scheme://[user:password@]host:port``,
  comma-separated, or the path of a file with one a line (``#`` starts a
  comment). ``http`` and ``https`` proxies (Scrapy speaks to those; a
  ``socks5`` proxy is refused at start: Scrapy's downloader has no SOCKS).
  Credentials come from the URL or, for a proxy without any, from the
  environment variables ``PROXY_USERNAME`` and ``PROXY_PASSWORD``.
- Each proxy's address must be in ``NETWORK_ALLOWLIST``, public or not: a
  proxy sees every request sent through it, so it is a place the operator
  chose, never a default. The network guard still judges every target
  (``crawler/network/guard.py``: the target's host as resolved here).
- ``PROXY_MAX_FAILURES`` (3): failures in a row (a connection error or
  timeout through it, 407, 403 or 429 answers, a bot wall) before the proxy
  cools down for ``PROXY_COOLDOWN`` seconds (30), doubled each time it cools
  down again without a success between (at most 16 times as long). A 407
  (the proxy refuses the credentials) cools it down at once.

Which proxy a site uses is decided in each worker, never read from Redis or
carried by the frontier (the serializer drops meta ``proxy``): rendezvous
hashing of the site over the proxies not cooling down, so every worker
picks the same proxy for a site and a proxy that cools down moves only its
own sites. While every proxy cools down, requests go through the one whose
cooldown ends first. A bot wall's URL is retried, in the worker that met
it, through another proxy than the one that met the wall.

A proxy's credentials never leave the worker: logs and stats name a proxy
by ``scheme://host:port`` (``Proxy.label``), and the WARC writer redacts
``Proxy-Authorization`` (``crawler/warc/service.py``).

Stats: ``proxy/requests/<label>``, ``proxy/failures/<reason>``,
``proxy/cooldowns``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

from crawler.network.policy import NetworkPolicy, ip_of_host, parse_networks
from crawler.requestmeta import PROXY, PROXY_POOL
from crawler.scope.urls import host_of, queue_key

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = ["Proxy", "ProxyPool", "ProxyPoolMiddleware", "check_proxies", "parse_proxy_list"]

_SCHEMES = ("http", "https")
_MAX_BACKOFF = 16  # a cooldown grows to at most this many times PROXY_COOLDOWN
_FAILING_STATUSES = frozenset({403, 429})
_AVOID = 10_000  # URLs remembered with the proxy that met a wall on them


@dataclass(slots=True)
class Proxy:
    url: str  # as Scrapy's meta "proxy" takes it, credentials included
    label: str  # scheme://host:port: what logs and stats show
    host: str
    failures: int = 0
    cooldowns: int = 0
    cool_until: float = 0.0
    key: bytes = field(default=b"")


def _parse_one(text: str, env: dict[str, str]) -> Proxy:
    """One proxy URL; ValueError with the reason."""
    if "://" not in text:
        raise ValueError(f"{text!r} is not a proxy URL (scheme://host:port)")
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme.startswith("socks"):
        raise ValueError(f"{scheme} proxies are not supported (Scrapy's downloader speaks to http and https "
                         "proxies only)")
    if scheme not in _SCHEMES:
        raise ValueError(f"scheme {scheme!r} is not http or https")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("its port is not a number from 0 to 65535") from None
    host = parts.hostname or ""
    if not host or port is None:
        raise ValueError("needs a host and a port (scheme://host:port)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("a proxy URL has no path, query or fragment")
    user, password = parts.username, parts.password
    if user is None and env.get("PROXY_USERNAME"):
        user, password = env["PROXY_USERNAME"], env.get("PROXY_PASSWORD", "")
    shown_host = f"[{host}]" if ":" in host else host
    label = f"{scheme}://{shown_host}:{port}"
    auth = f"{quote(unquote(user), safe='')}:{quote(unquote(password or ''), safe='')}@" if user is not None else ""
    return Proxy(url=f"{scheme}://{auth}{shown_host}:{port}", label=label, host=host,
                 key=label.encode("utf-8"))


def parse_proxy_list(value: Any, env: dict[str, str] | None = None) -> list[Proxy]:
    """``PROXY_LIST``'s proxies (see the module); ValueError naming the
    file and line, or the entry, and what is wrong."""
    env = dict(os.environ) if env is None else env
    if value is None or value == "" or value == []:
        return []
    items = [str(v) for v in value] if isinstance(value, (list, tuple)) else None
    source = None
    if items is None:
        text = str(value).strip()
        if "://" in text:
            items = [p.strip() for p in text.split(",") if p.strip()]
        else:
            source = Path(text).expanduser()
            try:
                lines = source.read_text(encoding="utf-8").splitlines()
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"cannot read the proxy file {text}: {exc}") from None
            items = lines
    proxies: list[Proxy] = []
    seen: set[str] = set()
    for number, raw in enumerate(items, 1):
        entry = raw.split("#", 1)[0].strip() if source is not None else raw.strip()
        if not entry:
            continue
        try:
            proxy = _parse_one(entry, env)
        except ValueError as exc:
            where = f"{source} line {number}" if source is not None else f"entry {number}"
            shown = re.sub(r"//[^/@]*@", "//", entry)  # no credentials in the message
            raise ValueError(f"{where}: {shown!r}: {exc}") from None
        if proxy.label not in seen:
            seen.add(proxy.label)
            proxies.append(proxy)
    if not proxies:
        raise ValueError(f"{source or 'the list'} names no proxy")
    return proxies


def check_proxies(proxies: list[Proxy], allowlist: Any) -> str | None:
    """The complaint when a proxy's address is not in ``NETWORK_ALLOWLIST``
    (resolved here for a name), else None."""
    policy = NetworkPolicy(parse_networks(allowlist))
    for proxy in proxies:
        literal = ip_of_host(proxy.host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                infos = socket.getaddrinfo(proxy.host, None, proto=socket.IPPROTO_TCP)
            except OSError as exc:
                return f"proxy {proxy.label}: cannot resolve {proxy.host} ({exc})"
            addresses = [a for a in (ip_of_host(str(info[4][0])) for info in infos) if a is not None]
        for address in addresses:
            if not policy._allowed(address):
                net = f"{address}/{address.max_prefixlen}"
                return (f"proxy {proxy.label} ({address}) is not in NETWORK_ALLOWLIST: a proxy sees every request "
                        f"sent through it; allow its address explicitly ({net})")
    return None


class ProxyPool:
    """The proxies of one worker and their health (see the module)."""

    def __init__(self, proxies: list[Proxy], max_failures: int = 3, cooldown: float = 30.0,
                 stats: Any = None, clock: Any = time.monotonic) -> None:
        self.proxies = proxies
        self.max_failures = max_failures
        self.cooldown = cooldown
        self.stats = stats
        self.clock = clock
        self.by_label = {p.label: p for p in proxies}
        self.avoid: OrderedDict[str, str] = OrderedDict()

    def choose(self, site: str, url: str | None = None) -> Proxy:
        """The proxy for ``site``: the rendezvous winner among the proxies
        not cooling down (and not the one that met a wall on ``url``, when
        another is up)."""
        now = self.clock()
        up = [p for p in self.proxies if p.cool_until <= now]
        if url is not None and url in self.avoid and len(up) > 1:
            shunned = self.avoid[url]
            up = [p for p in up if p.label != shunned] or up
        if not up:
            return min(self.proxies, key=lambda p: p.cool_until)
        site_key = site.encode("utf-8", "surrogatepass")
        return max(up, key=lambda p: hashlib.blake2b(p.key + b"\0" + site_key, digest_size=8).digest())

    def succeeded(self, proxy: Proxy) -> None:
        proxy.failures = 0
        proxy.cooldowns = 0

    def failed(self, proxy: Proxy, reason: str, at_once: bool = False) -> None:
        if self.stats is not None:
            self.stats.inc_value(f"proxy/failures/{reason}")
        proxy.failures += 1
        if not at_once and proxy.failures < self.max_failures:
            return
        seconds = self.cooldown * min(2 ** proxy.cooldowns, _MAX_BACKOFF)
        proxy.cool_until = self.clock() + seconds
        proxy.cooldowns += 1
        proxy.failures = 0
        if self.stats is not None:
            self.stats.inc_value("proxy/cooldowns")
        logger.warning("Proxy %(proxy)s cools down for %(s).0fs (%(reason)s); its sites move to the other proxies",
                       {"proxy": proxy.label, "s": seconds, "reason": reason})

    def met_wall(self, url: str, label: str) -> None:
        """A bot wall on ``url`` through the proxy ``label``: a failure of
        that proxy, and the URL's retry in this worker goes another way."""
        proxy = self.by_label.get(label)
        if proxy is None:
            return
        self.avoid[url] = label
        self.avoid.move_to_end(url)
        while len(self.avoid) > _AVOID:
            self.avoid.popitem(last=False)
        self.failed(proxy, "blocked")


def _reason(exception: Exception) -> str:
    name = type(exception).__name__
    return {"TunnelError": "tunnel", "ConnectionRefusedError": "refused", "TCPTimedOutError": "timeout",
            "TimeoutError": "timeout", "DownloadTimeoutError": "timeout"}.get(name, name)


class ProxyPoolMiddleware:
    """Downloader middleware, before Scrapy's ``HttpProxyMiddleware`` (750),
    after ``RetryMiddleware`` (550) on the way back: it sees an outcome
    before a retry is made of it."""

    def __init__(self, crawler: Crawler, pool: ProxyPool) -> None:
        self.crawler = crawler
        self.pool = pool
        self.queue_by = crawler.settings.get("FRONTIER_QUEUE_BY")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        from scrapy.exceptions import NotConfigured

        proxies = parse_proxy_list(crawler.settings.get("PROXY_LIST"))  # checked at start
        if not proxies:
            raise NotConfigured  # no message: Scrapy would warn of a part that is off by default
        pool = ProxyPool(proxies, crawler.settings.getint("PROXY_MAX_FAILURES"),
                         crawler.settings.getfloat("PROXY_COOLDOWN"), crawler.stats)
        crawler.proxy_pool = pool  # type: ignore[attr-defined]  # the chain's blocked step tells it of walls
        return cls(crawler, pool)

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        meta = request.meta
        if meta.get(PROXY) and PROXY_POOL not in meta:
            return  # a proxy the spider's own code chose
        proxy = self.pool.choose(queue_key(host_of(request.url), self.queue_by), request.url)
        meta[PROXY] = proxy.url
        meta[PROXY_POOL] = proxy.label
        self.crawler.stats.inc_value(f"proxy/requests/{proxy.label}")

    def _proxy(self, request: Request) -> Proxy | None:
        label = request.meta.get(PROXY_POOL)
        return self.pool.by_label.get(label) if isinstance(label, str) else None

    def process_response(self, request: Request, response: Response, spider: Spider | None = None) -> Response:
        proxy = self._proxy(request)
        if proxy is not None:
            if response.status == 407:
                logger.error("Proxy %(proxy)s refused the credentials (407)", {"proxy": proxy.label})
                self.pool.failed(proxy, "407", at_once=True)
            elif response.status in _FAILING_STATUSES:
                self.pool.failed(proxy, str(response.status))
            else:
                self.pool.succeeded(proxy)
        return response

    def process_exception(self, request: Request, exception: Exception, spider: Spider | None = None) -> None:
        proxy = self._proxy(request)
        if proxy is not None:
            refused = "407" in str(exception)  # a CONNECT the proxy refused for its credentials
            self.pool.failed(proxy, "407" if refused else _reason(exception), at_once=refused)
