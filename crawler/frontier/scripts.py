"""The frontier's Lua scripts, now ``crawler/redis/lua/*.lua`` read by
``crawler/redis/scripts.py``: this name (``scripts.ALL``, ``scripts.LEASE``
...) stays for the benchmarks that import it until they switch."""

from __future__ import annotations

from crawler.redis.scripts import ALL, SCRIPTS, SHARD_SCRIPTS, TEMPLATE_SCRIPTS

__all__ = ["ALL", "SCRIPTS", "SHARD_SCRIPTS", "TEMPLATE_SCRIPTS"]


def __getattr__(name: str) -> str:
    if name in SCRIPTS:
        return SCRIPTS[name]
    raise AttributeError(name)
