-- Duplicate index: take a page out of band keys again (its own check added
-- it there, and it turned out a copy of a page of its own site).
-- KEYS: the band buckets. ARGV: page, then each table's band key field.
local page = ARGV[1]
local w = #page
local n = 0
for k, h in ipairs(KEYS) do
  local field = ARGV[k + 1]
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
