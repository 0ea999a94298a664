-- Duplicate index, LSH band tables (those of one shard): in each, add the
-- page (its reference: 5 bytes of its page id; every page of a call the
-- same width) to the pages of its band key, and return those there just
-- before. At most ARGV[2] pages a key: a full key still names its pages as
-- candidates. The tables are grown (grow.lua): a band key lives in the
-- bucket of its table that holds its final bucket now, and a coarse bucket
-- past ARGV[4] entries is split.
-- KEYS: the band keys' final buckets. ARGV: page, cap, the tables' levels
-- ("4,16,64,256,1024"), split at, bytes of a final bucket in a coarse field,
-- then each table's band key field (those bytes, then 3 of the band key),
-- in the order of KEYS.
-- Returns {added (1: the page was not there), pages already there (bytes),
-- ...} for each table in turn.
local page, cap, sizes, at, wb = ARGV[1], tonumber(ARGV[2]), grow_sizes(ARGV[3]), tonumber(ARGV[4]),
  tonumber(ARGV[5])
local w = #page
local out = {}
for n, key in ipairs(KEYS) do
  local h, level = grow_live(key, sizes)
  local field = ARGV[n + 5]
  if level == #sizes then field = string.sub(field, wb + 1) end
  local t = redis.call('TYPE', h).ok
  local v = nil
  if t == 'hash' then v = redis.call('HGET', h, field) end
  local added = 0
  if t ~= 'hash' and t ~= 'none' then
    v = ''  -- not a table this index wrote: no evidence, left as it is
  elseif not v or #v % w ~= 0 or #v > w * cap then
    -- absent, or not whole page names within the cap: this page alone
    redis.call('HSET', h, field, page)
    v, added = '', 1
  else
    local there = false
    for i = 1, #v - w + 1, w do
      if string.sub(v, i, i + w - 1) == page then there = true; break end
    end
    if not there and #v < w * cap then
      redis.call('HSET', h, field, v .. page)
      added = 1
    end
  end
  if added == 1 and level < #sizes then grow_after(key, at, sizes, wb) end
  out[#out + 1] = added
  out[#out + 1] = v
end
return out
