"""The crawl's scope, shared by its workers: the registrable domains
(``scope:sites``) and hosts (``scope:hosts``) of every worker's seeds, so
that a worker started without seeds crawls what the others' seeds opened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from crawler.redis.gateway import text as _s

if TYPE_CHECKING:
    from crawler.redis.gateway import Call, Gateway
    from crawler.redis.keys import Keys

__all__ = ["Scope"]


class Scope:
    def __init__(self, gateway: Gateway, keys: Keys) -> None:
        self.gateway = gateway
        self.keys = keys

    def share(self, add_sites: Sequence[str] = (), add_hosts: Sequence[str] = ()) -> tuple[set[str], set[str]]:
        """Add to the crawl's scope (the seeds' sites and hosts) and read it."""
        k = self.keys
        calls: list[Call] = []
        if add_sites:
            calls.append(("SADD", [k.scope_sites], list(add_sites)))
        if add_hosts:
            calls.append(("SADD", [k.scope_hosts], list(add_hosts)))
        calls += [("SMEMBERS", [k.scope_sites], []), ("SMEMBERS", [k.scope_hosts], [])]
        *_, sites, hosts = self.gateway.run_many(calls)
        return {_s(x) for x in sites}, {_s(x) for x in hosts}
