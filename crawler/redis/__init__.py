"""Redis for the crawler, knowing nothing of crawling: the client factory
(``client.py``: ``get_redis``, ``RedisUnavailable``, ``is_cluster``),
Redis Cluster URLs (``cluster.py``), the embedded Redis (``embedded.py`` and
its ``watcher.py``), the gateway every call goes through (``gateway.py``:
pipelines, cluster routing, the script registry, round-trip counts), the
key names of a crawl (``keys.py``), its Lua scripts (``lua/*.lua``, read
by ``scripts.py``) and Redis's memory as a crawl sees it (``memory.py``:
each node's use, limit and policy; an out-of-memory refusal told from an
outage).

(Named for what it wraps; inside it ``import redis`` is still redis-py, as
every import in the project is absolute.)
"""
