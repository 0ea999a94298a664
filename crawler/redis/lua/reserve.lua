-- A request that a rendered page makes goes to a site outside the frontier
-- (crawler/render/): it takes the site's next send time, at least one gap
-- after the last request any worker sent, leased or reserved there, and
-- moves that time on by one gap, so the site's pages and the requests of
-- rendered pages share one timeline. KEYS: fixed. ARGV: site,
-- default_delay_ms, margin_ms. Returns ms to wait.
local site, ddelay, margin = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local gap = site_gap(site, ddelay, margin)
if gap <= 0 then return 0 end
local at = math.max(now, tonumber(redis.call('HGET', NEXT, site) or '0'))
redis.call('HSET', NEXT, site, at + gap)
local score = redis.call('ZSCORE', READY, site)
if score and tonumber(score) < at + gap then redis.call('ZADD', READY, at + gap, site) end
return at - now
