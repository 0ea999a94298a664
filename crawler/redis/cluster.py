"""Redis Cluster URLs: ``redis+cluster://[user:password@]host:port[,host:port...]``
(``rediss+cluster://`` for TLS), read into the startup nodes the cluster
client takes (``crawler/redis/client.py`` connects; ``crawler/config.py``
checks ``REDIS_URL`` at start with :func:`parse_cluster_url`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl

from crawler.scope.urls import redact_credentials

__all__ = ["CLUSTER_SCHEMES", "ClusterURL", "cluster_hint", "parse_cluster_url"]

CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")
_CLUSTER_FORM = "redis+cluster://[user:password@]host:port[,host:port...]"


@dataclass(frozen=True)
class ClusterURL:
    """A parsed ``redis+cluster://`` URL."""

    tls: bool
    userinfo: str  # "user:password" as written (percent-encoded), or ""
    nodes: tuple[tuple[str, int], ...]
    query: str  # connection options, as redis-py reads them from a URL

    def node_url(self, host: str, port: int) -> str:
        """A ``redis://`` (``rediss://``) URL of one node, credentials and
        options kept: redis-py's own URL parsing then reads them."""
        auth = f"{self.userinfo}@" if self.userinfo else ""
        where = f"[{host}]" if ":" in host else host
        return f"{'rediss' if self.tls else 'redis'}://{auth}{where}:{port}" + (f"?{self.query}" if self.query else "")


def _node(text: str) -> tuple[str, int]:
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\](?::(\d*))?|([^:\[\]]+)(?::(\d*))?", text)
    if m is None:
        raise ValueError(f"has a node {text!r} that is not host:port: give {_CLUSTER_FORM}")
    host, port = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
    if port is None:
        return host, 6379
    if not port or not 0 < int(port) < 65536:
        raise ValueError(f"has a node {text!r} whose port is not 1-65535: give {_CLUSTER_FORM}")
    return host, int(port)


def parse_cluster_url(url: str) -> ClusterURL:
    """Read ``redis+cluster://[user:password@]host:port[,host:port...]``
    (``rediss+cluster://`` for TLS; a path may only name database 0). A bad
    one raises ValueError with a complaint that follows the URL."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in CLUSTER_SCHEMES:
        raise ValueError(f"must start with {' or '.join(s + '://' for s in CLUSTER_SCHEMES)}")
    m = re.fullmatch(r"([^/?#]*)(/[^?#]*)?(?:\?([^#]*))?(?:#.*)?", rest)
    assert m is not None  # every string matches
    netloc, path, query = m.group(1), m.group(2) or "", m.group(3) or ""
    userinfo, _, hosts = netloc.rpartition("@")
    if not hosts:
        raise ValueError(f"names no node: give {_CLUSTER_FORM}")
    nodes = tuple(_node(h.strip()) for h in hosts.split(","))
    if path.strip("/") not in ("", "0"):
        raise ValueError(f"selects database {path.strip('/')!r}: a Redis Cluster has database 0 only")
    if any(k == "db" and v != "0" for k, v in parse_qsl(query)):
        raise ValueError("selects a database other than 0: a Redis Cluster has database 0 only")
    return ClusterURL(scheme.lower() == "rediss+cluster", userinfo, nodes, query)


def cluster_hint(url: str) -> str:
    """The ``redis+cluster://`` form of a single node's ``redis://`` URL."""
    scheme, _, rest = redact_credentials(url).partition("://")
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if scheme.lower() not in ("redis", "rediss") or not netloc.rpartition("@")[2]:
        return "redis+cluster://host:port[,host:port...] naming its nodes"
    return f"{scheme.lower()}+cluster://{netloc}"
