"""The network guard: which addresses are refused and why, the allow-list,
and real crawls (``AsyncCrawlerProcess``, as ``scrapy crawl`` runs, in a
subprocess) against an aiohttp server on 127.0.0.1, asserting what the
server saw and what was refused with which message."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import ip_address
from pathlib import Path

import pytest

from crawler.network.guard import AddressRefused, NetworkGuardMiddleware
from crawler.network.policy import REASONS, NetworkPolicy, ip_of_host, parse_networks, refusal

ROOT = Path(__file__).resolve().parent.parent


# --- Addresses ---------------------------------------------------------------------

@pytest.mark.parametrize(("host", "expected"), [
    # numeric IPv4 forms, as browsers and inet_aton read them
    ("2852039166", "169.254.169.254 (cloud metadata service)"),
    ("0xa9fea9fe", "169.254.169.254 (cloud metadata service)"),
    ("0x7f.1", "127.0.0.1 (loopback)"),
    ("127.1", "127.0.0.1 (loopback)"),
    ("0177.0.0.1", "127.0.0.1 (loopback)"),
    ("2130706433", "127.0.0.1 (loopback)"),
    ("127.0.0.1.", "127.0.0.1 (loopback)"),
    ("0X7F.0.0.1", "127.0.0.1 (loopback)"),
    ("10.1", "10.0.0.1 (private network)"),
    # IPv4
    ("127.255.255.254", "127.255.255.254 (loopback)"),
    ("10.0.0.5", "10.0.0.5 (private network)"),
    ("172.16.0.1", "172.16.0.1 (private network)"),
    ("172.31.255.255", "172.31.255.255 (private network)"),
    ("192.168.1.1", "192.168.1.1 (private network)"),
    ("169.254.1.1", "169.254.1.1 (link-local)"),
    ("169.254.169.254", "169.254.169.254 (cloud metadata service)"),
    ("169.254.170.2", "169.254.170.2 (cloud metadata service)"),
    ("100.100.100.200", "100.100.100.200 (cloud metadata service)"),
    ("168.63.129.16", "168.63.129.16 (cloud metadata service)"),
    ("192.0.0.192", "192.0.0.192 (cloud metadata service)"),
    ("100.64.0.1", "100.64.0.1 (carrier-grade NAT)"),
    ("100.127.255.255", "100.127.255.255 (carrier-grade NAT)"),
    ("224.0.0.1", "224.0.0.1 (multicast)"),
    ("239.255.255.250", "239.255.255.250 (multicast)"),
    ("255.255.255.255", "255.255.255.255 (broadcast)"),
    ("240.0.0.1", "240.0.0.1 (reserved)"),
    ("192.0.0.8", "192.0.0.8 (reserved)"),
    ("192.88.99.1", "192.88.99.1 (reserved)"),
    ("0.0.0.0", "0.0.0.0 (unspecified address)"),
    ("0", "0.0.0.0 (unspecified address)"),
    ("", "0.0.0.0 (unspecified address)"),  # http:///x connects to 0.0.0.0
    ("0.1.2.3", "0.1.2.3 (this-network block)"),
    ("198.18.0.1", "198.18.0.1 (benchmarking network)"),
    ("198.19.255.255", "198.19.255.255 (benchmarking network)"),
    ("192.0.2.1", "192.0.2.1 (documentation network)"),
    ("198.51.100.7", "198.51.100.7 (documentation network)"),
    ("203.0.113.9", "203.0.113.9 (documentation network)"),
    # IPv6
    ("[::1]", "::1 (loopback)"),
    ("[::]", ":: (unspecified address)"),
    ("[fd00::1]", "fd00::1 (private network)"),
    ("[fc00::1]", "fc00::1 (private network)"),
    ("[fd00:ec2::254]", "fd00:ec2::254 (cloud metadata service)"),
    ("[fd20:ce::254]", "fd20:ce::254 (cloud metadata service)"),
    ("[fe80::1]", "fe80::1 (link-local)"),
    ("fe80::1%25eth0", "fe80::1 (link-local)"),
    ("[fec0::1]", "fec0::1 (site-local)"),
    ("[ff02::1]", "ff02::1 (multicast)"),
    ("[2001:db8::1]", "2001:db8::1 (documentation network)"),
    ("[3fff::1]", "3fff::1 (documentation network)"),
    ("[2001:2::1]", "2001:2::1 (benchmarking network)"),
    ("[2001::1]", "2001::1 (reserved)"),  # Teredo, inside the IETF block
    ("[100::1]", "100::1 (reserved)"),  # discard-only
    ("[4000::1]", "4000::1 (reserved)"),  # outside global unicast 2000::/3
    ("[64:ff9b:1::a00:1]", "64:ff9b:1::a00:1 (private network)"),  # local-use NAT64
    # IPv6 forms carrying an IPv4 address
    ("[::ffff:169.254.169.254]", "::ffff:169.254.169.254 (cloud metadata service, IPv4-mapped 169.254.169.254)"),
    ("[::ffff:10.0.0.1]", "::ffff:10.0.0.1 (private network, IPv4-mapped 10.0.0.1)"),
    ("[::ffff:7f00:1]", "::ffff:127.0.0.1 (loopback, IPv4-mapped 127.0.0.1)"),
    ("[::ffff:0.0.0.0]", "::ffff:0.0.0.0 (unspecified address, IPv4-mapped 0.0.0.0)"),
    ("[64:ff9b::a00:1]", "64:ff9b::a00:1 (private network, NAT64 10.0.0.1)"),
    ("[64:ff9b::169.254.169.254]", "64:ff9b::a9fe:a9fe (cloud metadata service, NAT64 169.254.169.254)"),
    ("[2002:a00:1::1]", "2002:a00:1::1 (private network, 6to4 10.0.0.1)"),
    ("[2002:7f00:1::]", "2002:7f00:1:: (loopback, 6to4 127.0.0.1)"),
    ("[::a00:1]", "::a00:1 (private network, IPv4-compatible 10.0.0.1)"),
    ("[::8.8.8.8]", "::808:808 (reserved)"),  # IPv4-compatible: deprecated, routed nowhere
])
def test_refused_addresses_and_reasons(host, expected):
    address = ip_of_host(host)
    assert address is not None
    assert str(refusal(address)) == expected


@pytest.mark.parametrize("host", [
    "8.8.8.8", "1.1.1.1", "93.184.216.34", "172.32.0.1", "172.15.255.255", "100.128.0.1",
    "169.253.255.255", "192.169.0.1", "11.0.0.1", "223.255.255.255", "198.20.0.1",
    "[2606:4700:4700::1111]", "[2a00:1450:4001::200e]", "[::ffff:8.8.8.8]", "[64:ff9b::808:808]",
    "[2002:808:808::1]", "134744072",  # 8.8.8.8 in decimal
])
def test_public_addresses_pass(host):
    address = ip_of_host(host)
    assert address is not None and refusal(address) is None


@pytest.mark.parametrize("host", [
    "example.com", "localhost", "intranet", "1.2.3.4.5", "256.1", "0x100000000", "09.1.1.1",
    "1.2.3.a", "0x7g.1", "127.0.0.1..", ".127.0.0.1", "١٢٧.0.0.1", "[not:an:address]", "1e3",
])
def test_names_are_not_addresses(host):
    # These go to the resolver, whose answer is checked in turn.
    assert ip_of_host(host) is None


@pytest.mark.parametrize(("host", "address"), [
    ("2852039166", "169.254.169.254"),
    ("0x7f.1", "127.0.0.1"),
    ("0x7f.0x0.0.01", "127.0.0.1"),
    ("0x", "0.0.0.0"),
    ("1.16777215", "1.255.255.255"),
    ("1.2.65535", "1.2.255.255"),
    ("[fd00::1]", "fd00::1"),
    ("FD00::1", "fd00::1"),
    (" 10.0.0.1 ", "10.0.0.1"),
])
def test_hosts_read_as_addresses(host, address):
    assert ip_of_host(host) == ip_address(address)


def test_every_reason_has_a_text():
    assert set(REASONS) == {
        "loopback", "private", "link-local", "cgnat", "multicast", "broadcast", "reserved",
        "unspecified", "this-network", "benchmarking", "documentation", "site-local", "cloud-metadata"}


# --- The allow-list ----------------------------------------------------------------

@pytest.mark.parametrize(("value", "networks"), [
    (None, []),
    ("", []),
    ([], []),
    ("127.0.0.0/8", ["127.0.0.0/8"]),
    ("127.0.0.0/8, ::1", ["127.0.0.0/8", "::1/128"]),
    ("127.0.0.0/8,", ["127.0.0.0/8"]),
    (["10.0.0.0/8", "192.168.1.5"], ["10.0.0.0/8", "192.168.1.5/32"]),
    (("fd00::/8", "[::1]"), ["fd00::/8", "::1/128"]),
    (["0.0.0.0/0", "::/0"], ["0.0.0.0/0", "::/0"]),
])
def test_allowlist_parsing(value, networks):
    assert [str(n) for n in parse_networks(value)] == networks


@pytest.mark.parametrize(("value", "message"), [
    ("10.0.0.0/33", "NETWORK_ALLOWLIST: entry '10.0.0.0/33' is not an IP address or network (CIDR)"),
    ("127.0.0.0/8,intranet", "NETWORK_ALLOWLIST: entry 'intranet' is not an IP address or network (CIDR)"),
    (["10.1.2.3/8"], "NETWORK_ALLOWLIST: entry '10.1.2.3/8' has host bits set; did you mean '10.0.0.0/8'?"),
    ("fd00::1/8", "NETWORK_ALLOWLIST: entry 'fd00::1/8' has host bits set; did you mean 'fd00::/8'?"),
    (["127.0.0.0/8", 8], "NETWORK_ALLOWLIST: entry 8 is not an IP address or network (CIDR)"),
    ("2130706433", "NETWORK_ALLOWLIST: entry '2130706433' is not an IP address or network (CIDR)"),
    (8, "NETWORK_ALLOWLIST: must be a list or a comma-separated string of networks (CIDR) "
        "or addresses, not int"),
])
def test_allowlist_bad_values(value, message):
    with pytest.raises(ValueError) as info:
        parse_networks(value)
    assert str(info.value) == message


@pytest.mark.parametrize(("allow", "host", "reason"), [
    ("127.0.0.0/8", "127.0.0.1", None),
    ("127.0.0.0/8", "127.255.0.1", None),
    ("127.0.0.0/8", "10.0.0.1", "private"),  # that network only
    ("127.0.0.0/8", "[::1]", "loopback"),  # IPv4 entries allow no IPv6
    ("127.0.0.0/8", "[::ffff:127.0.0.1]", None),  # the same IPv4 address on a dual-stack socket
    ("127.0.0.0/8", "[64:ff9b::7f00:1]", "loopback"),  # NAT64 goes elsewhere
    ("127.0.0.1", "127.0.0.2", "loopback"),
    ("10.0.0.0/8", "169.254.169.254", "cloud-metadata"),
    ("169.254.0.0/16", "169.254.169.254", None),
    ("::1", "[::1]", None),
    ("fd00::/8", "[fd00:ec2::254]", None),
    ("", "8.8.8.8", None),
    ("0.0.0.0/0,::/0", "[fd00::1]", None),
])
def test_allowlist_allows_its_networks_only(allow, host, reason):
    address = ip_of_host(host)
    assert address is not None
    found = NetworkPolicy(parse_networks(allow)).check(address)
    assert (found.reason if found else None) == reason


# --- The middleware on IP literals (no resolver needed) --------------------------------

def _middleware(**settings):
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(settings_dict=settings)
    crawler.stats.open_spider()
    return crawler, NetworkGuardMiddleware.from_crawler(crawler)


def _process(mw, url, **meta):
    from scrapy import Request

    return asyncio.run(mw.process_request(Request(url, meta=meta)))


@pytest.mark.parametrize(("url", "meta", "message", "stat"), [
    ("http://10.0.0.5/", {},
     "refused 10.0.0.5 (private network) for host 10.0.0.5; allow with NETWORK_ALLOWLIST", "private"),
    ("https://2852039166/latest/meta-data/", {},
     "refused 169.254.169.254 (cloud metadata service) for host 2852039166; allow with NETWORK_ALLOWLIST",
     "cloud-metadata"),
    ("http://[::ffff:169.254.169.254]:8080/", {},
     "refused ::ffff:169.254.169.254 (cloud metadata service, IPv4-mapped 169.254.169.254) "
     "for host ::ffff:169.254.169.254; allow with NETWORK_ALLOWLIST", "cloud-metadata"),
    ("http://user:pw@0x7f.1:8080/", {},
     "refused 127.0.0.1 (loopback) for host 0x7f.1; allow with NETWORK_ALLOWLIST", "loopback"),
    ("ftp://[fd00::1]/file", {},
     "refused fd00::1 (private network) for host fd00::1; allow with NETWORK_ALLOWLIST", "private"),
    ("http:///path", {},
     "refused 0.0.0.0 (unspecified address) for host ; allow with NETWORK_ALLOWLIST", "unspecified"),
    ("https://8.8.8.8/", {"proxy": "http://10.1.2.3:3128"},
     "refused 10.1.2.3 (private network) for proxy 10.1.2.3; allow with NETWORK_ALLOWLIST", "private"),
    ("https://8.8.8.8/", {"proxy": "[fd00::3]:3128"},
     "refused fd00::3 (private network) for proxy fd00::3; allow with NETWORK_ALLOWLIST", "private"),
])
def test_middleware_refuses_literals(url, meta, message, stat, caplog):
    crawler, mw = _middleware()
    with caplog.at_level(logging.WARNING, logger="crawler.network.guard"):
        with pytest.raises(AddressRefused) as info:
            _process(mw, url, **meta)
    assert str(info.value) == message
    assert info.value.refusal.reason == stat
    assert crawler.stats.get_value(f"netguard/refused/{stat}") == 1
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [
        f"{message} (further requests to this host are counted in netguard/refused/{stat}, not logged)"]


@pytest.mark.parametrize("url", [
    "http://8.8.8.8/", "https://[2606:4700:4700::1111]/", "http://134744072/",
    "data:text/plain,hello", "file:///etc/hostname",  # no host: not the guard's business
])
def test_middleware_passes_public_literals_and_hostless_schemes(url):
    crawler, mw = _middleware()
    assert _process(mw, url) is None
    assert crawler.stats.get_stats() == {}


def test_middleware_counts_every_refusal_and_logs_each_host_once(caplog):
    crawler, mw = _middleware(NETWORK_ALLOWLIST="10.0.0.0/8")
    urls = ["http://10.0.0.1/", "http://127.0.0.1/a", "http://127.0.0.1/b", "http://[::1]/",
            "http://192.168.0.1/", "http://127.0.0.1:8080/c", "http://10.9.9.9/"]
    outcomes = []
    with caplog.at_level(logging.WARNING, logger="crawler.network.guard"):
        for url in urls:
            try:
                outcomes.append(_process(mw, url))
            except AddressRefused as exc:
                outcomes.append(exc.refusal.reason)
    assert outcomes == [None, "loopback", "loopback", "loopback", "private", "loopback", None]
    assert crawler.stats.get_stats() == {"netguard/refused/loopback": 4, "netguard/refused/private": 1}
    assert [r.getMessage().split(" (further")[0] for r in caplog.records] == [
        "<GET http://127.0.0.1/a>: refused 127.0.0.1 (loopback) for host 127.0.0.1; allow with NETWORK_ALLOWLIST",
        "<GET http://[::1]/>: refused ::1 (loopback) for host ::1; allow with NETWORK_ALLOWLIST",
        "<GET http://192.168.0.1/>: refused 192.168.0.1 (private network) for host 192.168.0.1; "
        "allow with NETWORK_ALLOWLIST",
    ]


def test_middleware_rejects_a_bad_allowlist():
    with pytest.raises(ValueError, match=r"^NETWORK_ALLOWLIST: entry '10\.0\.0\.0/33' is not"):
        _middleware(NETWORK_ALLOWLIST="127.0.0.0/8,10.0.0.0/33")


# --- Real crawls -------------------------------------------------------------------------

@dataclass
class Site:
    port: int
    seen: list[tuple[str, str]] = field(default_factory=list)  # (Host header, path)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    from aiohttp import web

    box: dict[str, Site] = {}

    async def handle(request: web.Request) -> web.StreamResponse:
        s = box["site"]
        s.seen.append((request.host, request.path))
        if request.path == "/to-metadata":
            raise web.HTTPFound("http://169.254.169.254/latest/meta-data/")
        if request.path == "/to-localhost":
            raise web.HTTPFound(s.url("/landed", host="localhost"))
        return web.Response(text="<html><body>ok</body></html>", content_type="text/html")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app, access_log=None)
    loop.run_until_complete(runner.setup())
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(tcp.start())
    box["site"] = Site(port=runner.addresses[0][1])
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield box["site"]
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.run_until_complete(runner.cleanup())
    loop.close()


GUARD = {"DOWNLOADER_MIDDLEWARES": {"crawler.network.guard.NetworkGuardMiddleware": 80},
         "TWISTED_DNS_RESOLVER": "crawler.network.guard.GuardedResolver"}


@dataclass
class Crawl:
    fetched: Counter[tuple[str, str]]  # what the server saw
    outcomes: dict[str, str]  # URL -> "200" or "ExcClass: message"
    stats: dict[str, int]
    warnings: list[str]  # crawler.network.guard's log lines


def crawl(site: Site, tmp_path: Path, urls: list[str], settings: dict[str, object],
          spider_settings: dict[str, object] | None = None) -> Crawl:
    before = len(site.seen)
    out = tmp_path / "probe.json"
    config = {"urls": urls, "settings": settings, "spider_settings": spider_settings or {}, "out": str(out)}
    proc = subprocess.run([sys.executable, "-m", "tests.test_netguard", json.dumps(config)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    marker = "[crawler.network.guard] WARNING: "
    warnings = [line.split(marker, 1)[1] for line in proc.stderr.splitlines() if marker in line]
    return Crawl(Counter(site.seen[before:]), result["outcomes"], result["stats"], warnings)


def _refused(message: str) -> str:
    return f"AddressRefused: {message}; allow with NETWORK_ALLOWLIST"


@pytest.mark.slow
def test_crawl_refuses_loopback_by_default(site, tmp_path):
    p = site.port
    urls = [site.url("/a"), site.url("/a2"), site.url("/b", host="localhost"),
            site.url("/c", host="2130706433"), site.url("/d", host="0x7f.1"), site.url("/e", host="[::1]")]
    result = crawl(site, tmp_path, urls, GUARD)
    assert result.fetched == Counter()
    assert result.outcomes == {
        f"http://127.0.0.1:{p}/a": _refused("refused 127.0.0.1 (loopback) for host 127.0.0.1"),
        f"http://127.0.0.1:{p}/a2": _refused("refused 127.0.0.1 (loopback) for host 127.0.0.1"),
        f"http://localhost:{p}/b": _refused("refused 127.0.0.1 (loopback) for host localhost"),
        f"http://2130706433:{p}/c": _refused("refused 127.0.0.1 (loopback) for host 2130706433"),
        f"http://0x7f.1:{p}/d": _refused("refused 127.0.0.1 (loopback) for host 0x7f.1"),
        f"http://[::1]:{p}/e": _refused("refused ::1 (loopback) for host ::1"),
    }
    assert result.stats == {"netguard/refused/loopback": 6}
    # One line per host, not per request.
    assert sorted(w.split(">: ", 1)[1].split(";")[0] for w in result.warnings) == [
        "refused 127.0.0.1 (loopback) for host 0x7f.1",
        "refused 127.0.0.1 (loopback) for host 127.0.0.1",
        "refused 127.0.0.1 (loopback) for host 2130706433",
        "refused 127.0.0.1 (loopback) for host localhost",
        "refused ::1 (loopback) for host ::1",
    ]


@pytest.mark.slow
def test_crawl_with_allowlist_fetches_loopback_and_checks_every_redirect_hop(site, tmp_path):
    p = site.port
    urls = [site.url("/a"), site.url("/b", host="localhost"), site.url("/c", host="2130706433"),
            site.url("/d", host="0x7f.1"), site.url("/e", host="[::1]"), site.url("/to-metadata"),
            site.url("/to-localhost")]
    result = crawl(site, tmp_path, urls, {**GUARD, "NETWORK_ALLOWLIST": "127.0.0.0/8"})
    assert result.fetched == Counter([
        (f"127.0.0.1:{p}", "/a"), (f"localhost:{p}", "/b"), (f"2130706433:{p}", "/c"),
        (f"0x7f.1:{p}", "/d"), (f"127.0.0.1:{p}", "/to-metadata"), (f"127.0.0.1:{p}", "/to-localhost"),
        (f"localhost:{p}", "/landed"),
    ])
    assert result.outcomes == {
        f"http://127.0.0.1:{p}/a": "200",
        f"http://localhost:{p}/b": "200",
        f"http://2130706433:{p}/c": "200",
        f"http://0x7f.1:{p}/d": "200",
        # 127.0.0.0/8 allows no IPv6 (and Scrapy's resolver could not connect to it anyway).
        f"http://[::1]:{p}/e": _refused("refused ::1 (loopback) for host ::1"),
        # The redirect hop is a request like any other: refused before connecting.
        "http://169.254.169.254/latest/meta-data/": _refused(
            "refused 169.254.169.254 (cloud metadata service) for host 169.254.169.254"),
        f"http://localhost:{p}/landed": "200",
    }
    assert result.stats == {"netguard/refused/loopback": 1, "netguard/refused/cloud-metadata": 1}


def _dns_failed(host: str) -> str:
    return f"CannotResolveHostError: DNS lookup failed: no results for hostname lookup: {host}."


@pytest.mark.slow
def test_resolver_refuses_at_connect_time_what_the_check_let_through(site, tmp_path):
    # The spider's own NETWORK_ALLOWLIST reaches the middleware but not the
    # resolver (built from the process's settings): the check passes, as it
    # would for a name that rebinds after it, and the connection is refused.
    p = site.port
    urls = [site.url("/a"), site.url("/b", host="localhost"), site.url("/c", host="2130706433")]
    result = crawl(site, tmp_path, urls, GUARD, spider_settings={"NETWORK_ALLOWLIST": "127.0.0.0/8"})
    assert result.fetched == Counter()
    assert result.outcomes == {
        f"http://127.0.0.1:{p}/a": _dns_failed("127.0.0.1"),
        f"http://localhost:{p}/b": _dns_failed("localhost"),
        f"http://2130706433:{p}/c": _dns_failed("2130706433"),
    }
    assert result.stats == {}
    assert sorted(result.warnings) == [
        f"DNS answer 127.0.0.1 (loopback) for {host} refused at connect time: the request fails "
        "as a DNS lookup error. Allow with NETWORK_ALLOWLIST."
        for host in ("127.0.0.1", "2130706433", "localhost")
    ]


@pytest.mark.slow
def test_middleware_without_the_guarded_resolver_still_refuses_names(site, tmp_path):
    p = site.port
    result = crawl(site, tmp_path, [site.url("/b", host="localhost")],
                   {**GUARD, "TWISTED_DNS_RESOLVER": "scrapy.resolver.CachingThreadedResolver"})
    assert result.fetched == Counter()
    assert result.outcomes == {
        f"http://localhost:{p}/b": _refused("refused 127.0.0.1 (loopback) for host localhost")}
    assert result.warnings == [
        "The reactor's resolver is CachingThreadedResolver, not crawler.network.guard.GuardedResolver "
        "(TWISTED_DNS_RESOLVER, installed by `scrapy crawl`): addresses are checked before each "
        "request but not when connecting, so a name that rebinds gets through.",
        f"<GET http://localhost:{p}/b>: refused 127.0.0.1 (loopback) for host localhost; allow with "
        "NETWORK_ALLOWLIST (further requests to this host are counted in netguard/refused/loopback, "
        "not logged)",
    ]


# The crawl itself, run as `python -m tests.test_netguard CONFIG` so that each
# crawl gets a fresh process: a reactor, its resolver and Scrapy's DNS cache
# are per process, as in `scrapy crawl`.

def _probe(config: dict) -> None:
    import scrapy
    from scrapy.crawler import AsyncCrawlerProcess

    outcomes: dict[str, str] = {}

    class Probe(scrapy.Spider):
        name = "probe"
        custom_settings = config["spider_settings"]

        async def start(self):
            for url in config["urls"]:
                yield scrapy.Request(url, callback=self.parse, errback=self.failed, dont_filter=True)

        def parse(self, response):
            outcomes[response.url] = str(response.status)

        def failed(self, failure):
            outcomes[failure.request.url] = f"{type(failure.value).__name__}: {failure.value}"

    process = AsyncCrawlerProcess({
        "ROBOTSTXT_OBEY": False, "RETRY_ENABLED": False, "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False, "LOG_LEVEL": "INFO", "DOWNLOAD_TIMEOUT": 20,
        **config["settings"],
    })
    crawler = process.create_crawler(Probe)
    process.crawl(crawler)
    process.start()
    stats = {k: v for k, v in crawler.stats.get_stats().items() if k.startswith("netguard/")}
    Path(config["out"]).write_text(json.dumps({"outcomes": outcomes, "stats": stats}))


if __name__ == "__main__":
    _probe(json.loads(sys.argv[1]))
