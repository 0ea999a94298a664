"""Where ``crawler/config.py`` and older callers find the Redis client
factory and cluster URLs, now in ``crawler/redis/`` (``client.py``,
``cluster.py``). New code imports from there; this module goes once
``crawler/config.py`` does."""

from __future__ import annotations

from crawler.redis.client import RedisClient, RedisUnavailable, get_redis, is_cluster
from crawler.redis.cluster import CLUSTER_SCHEMES, ClusterURL, parse_cluster_url
from crawler.redis.embedded import embedded_redis
from crawler.urls import redact_credentials as redact

__all__ = ["CLUSTER_SCHEMES", "ClusterURL", "RedisClient", "RedisUnavailable", "embedded_redis", "get_redis",
           "is_cluster", "parse_cluster_url", "redact"]
