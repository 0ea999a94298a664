-- Back a site off after 429, 503 or a timeout: double its backoff (at least
-- min_ms, at most max_ms) and push its next fetch time out.
-- KEYS: fixed. ARGV: site, min_ms, max_ms. Returns the new backoff (ms).
local site, min_ms, max_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local bo = tonumber(redis.call('HGET', BACKOFF, site) or '0')
bo = math.min(math.max(bo * 2, min_ms), max_ms)
redis.call('HSET', BACKOFF, site, bo)
local nxt = math.max(now + bo, tonumber(redis.call('HGET', NEXT, site) or '0'))
redis.call('HSET', NEXT, site, nxt)
local score = redis.call('ZSCORE', READY, site)
if score and tonumber(score) < nxt then redis.call('ZADD', READY, nxt, site) end
redis.call('HINCRBY', STATS, 'backoffs', 1)
return bo
