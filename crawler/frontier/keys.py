"""The crawl's key names, now ``crawler/redis/keys.py``: this name stays
for the tests and benchmarks that import it until they switch."""

from __future__ import annotations

from crawler.redis.keys import SHARD_KEYS, Keys, ShardKeys, shard_of, template_key

__all__ = ["SHARD_KEYS", "Keys", "ShardKeys", "shard_of", "template_key"]
