-- What an operator sees of a shard (read only). KEYS: fixed... ARGV: how
-- many of the largest site queues to return, default delay ms, most sites
-- to look at. Returns {stats as a flat list, sites known, sites ready now,
-- sites backed off, sites looked at, then (site, queued, delay ms, backoff
-- ms, learned pace ms, what the site last answered to earn it, ms until
-- its next request may go) of the largest queues, largest first}.
local top_n, ddelay, limit = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local known, n_known = {}, 0
local ready = redis.call('ZRANGE', READY, 0, limit - 1)
for _, site in ipairs(ready) do known[site] = true; n_known = n_known + 1 end
local nexts = redis.call('HLEN', NEXT)
if nexts <= limit then
  for _, site in ipairs(redis.call('HKEYS', NEXT)) do
    if not known[site] then known[site] = true; n_known = n_known + 1 end
  end
else
  n_known = math.max(n_known, nexts)
end
local top = {}
for _, site in ipairs(ready) do
  local n = qlen(site)
  if n > 0 then
    local k = #top
    if k < top_n or n > top[k][2] then
      if k >= top_n then table.remove(top) end
      local at = #top + 1
      while at > 1 and top[at - 1][2] < n do at = at - 1 end
      table.insert(top, at, {site, n})
    end
  end
end
local out = {redis.call('HGETALL', STATS), n_known, redis.call('ZCOUNT', READY, '-inf', now),
             redis.call('HLEN', BACKOFF), #ready}
for _, t in ipairs(top) do
  out[#out + 1] = t[1]
  out[#out + 1] = t[2]
  out[#out + 1] = tonumber(redis.call('HGET', DELAY, t[1]) or ddelay)
  out[#out + 1] = tonumber(redis.call('HGET', BACKOFF, t[1]) or '0')
  local _, last, strikes, why = pstate(t[1])
  local nxt = tonumber(redis.call('HGET', NEXT, t[1]) or '0') or 0
  out[#out + 1] = pace_of(t[1])
  out[#out + 1] = why
  out[#out + 1] = math.max(nxt - now, 0)
end
return out
