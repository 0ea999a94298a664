-- A request to a site is about to go on the wire (sites with more than one
-- request at a time and a delay): reserve its send time, at least the site's
-- gap after the last one reserved by any worker. KEYS: fixed..., the shard's
-- "sent" hash. ARGV: site, default_delay_ms, margin_ms. Returns ms to wait.
local site, ddelay, margin = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local gap = site_gap(site, ddelay, margin)
if gap <= 0 then return 0 end
local at = math.max(now, tonumber(redis.call('HGET', KEYS[11], site) or '0') + gap)
redis.call('HSET', KEYS[11], site, at)
return at - now
