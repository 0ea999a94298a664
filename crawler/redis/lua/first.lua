-- Duplicate index: the order key of a URL's first near-duplicate check.
-- KEYS: the bucket (in the site's shard). ARGV: the URL's 8-byte hash, this
-- check's order key. Returns the first order key ('' for a key of another
-- type: no evidence).
local h, u, o = KEYS[1], ARGV[1], ARGV[2]
local t = redis.call('TYPE', h).ok
if t ~= 'hash' and t ~= 'none' then return '' end
if redis.call('HSETNX', h, u, o) == 1 then return o end
return redis.call('HGET', h, u)
