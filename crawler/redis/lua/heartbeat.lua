-- Crawl-wide: record this node alive; list the nodes whose heartbeat
-- stopped (they are reaped shard by shard, then forgotten).
-- KEYS: nodes, hb. ARGV: node ('' = none), record JSON, timeout_ms.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] ~= '' then
  -- A full Redis (maxmemory, noeviction) refuses a script at its first write
  -- if that write may add data; once a script has written, Redis lets it run
  -- to its end (Redis 6.2 and 7). A beat only replaces what the node's last
  -- beat wrote: it frees first (ZREM), so that workers still beat while
  -- Redis is full and none is reaped for it once memory is raised.
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[2], now, ARGV[1])
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]))
return {redis.call('ZCOUNT', KEYS[2], now - tonumber(ARGV[3]) + 1, '+inf'), dead}
