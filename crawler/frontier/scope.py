"""The crawl's scope, shared by its workers: the registrable domains
(``scope:sites``), hosts (``scope:hosts``) and directories
(``scope:prefixes``, ``urls.url_prefix``) of every worker's seeds, so that
a worker started without seeds crawls what the others' seeds opened.
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

    def share(self, add_sites: Sequence[str] = (), add_hosts: Sequence[str] = (),
              add_prefixes: Sequence[str] = ()) -> tuple[set[str], set[str], set[str]]:
        """Add to the crawl's scope (the seeds' sites, hosts and directories)
        and read it."""
        k = self.keys
        calls: list[Call] = []
        for key, values in ((k.scope_sites, add_sites), (k.scope_hosts, add_hosts), (k.scope_prefixes, add_prefixes)):
            if values:
                calls.append(("SADD", [key], list(values)))
        calls += [("SMEMBERS", [key], []) for key in (k.scope_sites, k.scope_hosts, k.scope_prefixes)]
        *_, sites, hosts, prefixes = self.gateway.run_many(calls)
        return {_s(x) for x in sites}, {_s(x) for x in hosts}, {_s(x) for x in prefixes}
