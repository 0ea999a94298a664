-- Crawl-wide: forget reaped nodes, unless one came back meanwhile; their
-- records stay for the operator, marked lost. KEYS: nodes, hb.
-- ARGV: timeout_ms, nodes... Returns how many were forgotten.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for k = 2, #ARGV do
  local d = ARGV[k]
  local hb = redis.call('ZSCORE', KEYS[2], d)
  if hb and tonumber(hb) <= now - tonumber(ARGV[1]) then
    redis.call('ZREM', KEYS[2], d)
    n = n + 1
    local rec = redis.call('HGET', KEYS[1], d)
    if rec then
      local ok, obj = pcall(cjson.decode, rec)
      if ok and type(obj) == 'table' then
        obj['state'] = 'lost'
        redis.call('HSET', KEYS[1], d, cjson.encode(obj))
      end
    end
  end
end
return n
