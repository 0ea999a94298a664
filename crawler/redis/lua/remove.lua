-- An operator removes unprocessed requests of one site: all of them (no
-- ARGV after the site) or those whose entry starts with one of the given
-- prefixes ('{"u":<url as JSON>,': the entry of that URL). Queued and
-- delayed (retry) entries go; leased ones are being fetched and stay. The
-- URLs stay seen, so links found later do not bring them back.
-- KEYS: fixed..., the site's queue. ARGV: site, prefixes... Returns removed.
local q, site = KEYS[11], ARGV[1]
local function wanted(entry)
  if #ARGV == 1 then return true end
  for k = 2, #ARGV do
    if string.sub(entry, 1, #ARGV[k]) == ARGV[k] then return true end
  end
  return false
end
local removed_q = 0
local entries
if ORDERED then entries = redis.call('ZRANGE', q, 0, -1) else entries = redis.call('LRANGE', q, 0, -1) end
local kept = {}
for _, e in ipairs(entries) do
  if wanted(e) then removed_q = removed_q + 1 else kept[#kept + 1] = e end
end
if ORDERED and removed_q > 0 then
  for _, e in ipairs(entries) do
    if wanted(e) then
      redis.call('ZREM', q, e)
      if IMPORTANCE then
        local k = entry_importance(e)
        if k then redis.call('HDEL', qkkey(site), k) end
      end
    end
  end
  move('queued', nil, removed_q)
  if #kept == 0 then
    redis.call('ZREM', READY, site)
    redis.call('ZREM', BEST, site)
  else
    local first = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
    redis.call('ZADD', BEST, math.floor(tonumber(first[2]) / PBASE), site)
  end
elseif removed_q > 0 then
  redis.call('DEL', q)
  for i = 1, #kept, 1000 do
    redis.call('RPUSH', q, unpack(kept, i, math.min(i + 999, #kept)))
  end
  move('queued', nil, removed_q)
  if #kept == 0 then redis.call('ZREM', READY, site) end
end
local removed_d = 0
for _, v in ipairs(redis.call('ZRANGE', DELAYED, 0, -1)) do
  local s, e = split_entry(v)
  if s == site and wanted(e) then
    redis.call('ZREM', DELAYED, v)
    removed_d = removed_d + 1
  end
end
move('delayed', nil, removed_d)
if removed_q + removed_d > 0 then
  redis.call('HINCRBY', STATS, 'removed', removed_q + removed_d)
end
return removed_q + removed_d
