-- Duplicate index: take a page out of band keys again (its own check added
-- it there, and it turned out a copy of a page of its own site), wherever
-- the tables' splits have moved it since (grow.lua).
-- KEYS: the band keys' final buckets. ARGV: page, the tables' levels, bytes
-- of a final bucket in a coarse field, then each table's band key field (as
-- BAND takes them).
local page, sizes, wb = ARGV[1], grow_sizes(ARGV[2]), tonumber(ARGV[3])
local w = #page
local n = 0
for k, key in ipairs(KEYS) do
  local h, level = grow_live(key, sizes)
  local field = ARGV[k + 3]
  if level == #sizes then field = string.sub(field, wb + 1) end
  local v = redis.call('HGET', h, field)
  if v then
    for i = 1, #v - w + 1, w do
      if string.sub(v, i, i + w - 1) == page then
        local rest = string.sub(v, 1, i - 1) .. string.sub(v, i + w)
        if rest == '' then redis.call('HDEL', h, field) else redis.call('HSET', h, field, rest) end
        n = n + 1
        break
      end
    end
  end
end
return n
