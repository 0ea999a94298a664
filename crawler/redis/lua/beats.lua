-- Crawl-wide, read only: Redis's clock and the nodes watched, with their
-- last heartbeat. KEYS: hb. Returns {seconds, microseconds, node, ms, ...}.
local t = redis.call('TIME')
local out = {t[1], t[2]}
for _, v in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')) do out[#out + 1] = v end
return out
