-- A request went to the site outside the frontier (robots.txt): the next
-- request may not start before now + delay_ms. KEYS: fixed. ARGV: site, delay_ms.
local site, delay = ARGV[1], tonumber(ARGV[2])
local nxt = math.max(now + delay, tonumber(redis.call('HGET', NEXT, site) or '0'))
redis.call('HSET', NEXT, site, nxt)
local score = redis.call('ZSCORE', READY, site)
if score and tonumber(score) < nxt then redis.call('ZADD', READY, nxt, site) end
return nxt
