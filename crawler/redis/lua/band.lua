-- Duplicate index, LSH band tables (those of one shard): in each, add the
-- page (its SimHash, 8 bytes) to the pages of its band key, and return those
-- there just before. At most ARGV[2] pages a key: a full key still names its
-- pages as candidates. KEYS: the band buckets. ARGV: page, cap, then each
-- table's band key field (6 bytes), in the order of KEYS.
-- Returns {added (1: the page was not there), pages already there (bytes),
-- ...} for each table in turn.
local page, cap = ARGV[1], tonumber(ARGV[2])
local out = {}
for n, h in ipairs(KEYS) do
  local field = ARGV[n + 2]
  local t = redis.call('TYPE', h).ok
  local v = nil
  if t == 'hash' then v = redis.call('HGET', h, field) end
  local added = 0
  if t ~= 'hash' and t ~= 'none' then
    v = ''  -- not a table this index wrote: no evidence, left as it is
  elseif not v or #v % 8 ~= 0 or #v > 8 * cap then
    -- absent, or not whole page names within the cap: this page alone
    redis.call('HSET', h, field, page)
    v, added = '', 1
  else
    local there = false
    for i = 1, #v - 7, 8 do
      if string.sub(v, i, i + 7) == page then there = true; break end
    end
    if not there and #v < 8 * cap then
      redis.call('HSET', h, field, v .. page)
      added = 1
    end
  end
  out[#out + 1] = added
  out[#out + 1] = v
end
return out
