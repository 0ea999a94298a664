-- Site templates (crawler/frontier/templates.py, crawler/pagetypes/template.py): count
-- one page's block keys in its site's evidence while the site is learned,
-- and return the evidence for them. KEYS: the site's ``tpl2:<site>`` hash.
-- ARGV: pages counted before freezing, counts kept at most, min_count,
-- share (per mille), then the page's block keys. The hash holds "#" (pages
-- counted) and a count per key; when the last page is counted, every key
-- that is not template is dropped. A malformed entry (another type, a count
-- that is not a whole number) is no evidence: {-1}, and nothing is written.
-- Returns {pages, count of each key asked (as Redis strings, or false)}.
local K = KEYS[1]
local limit, max_keys = tonumber(ARGV[1]), tonumber(ARGV[2])
local min_count, share = tonumber(ARGV[3]), tonumber(ARGV[4])
local kind = redis.call('TYPE', K)['ok']
if kind ~= 'hash' and kind ~= 'none' then return {-1} end
local pages = tonumber(redis.call('HGET', K, '#') or '0')
if not pages or pages < 0 or pages ~= math.floor(pages) or pages > limit then return {-1} end
local function whole(v)
  local c = tonumber(v)
  if c and c >= 0 and c == math.floor(c) then return c end
  return nil
end
if pages < limit then
  pages = pages + 1
  redis.call('HSET', K, '#', pages)
  local n = redis.call('HLEN', K) - 1
  if n + #ARGV - 4 > max_keys then
    -- No room for this page's keys: drop the keys that can no longer be
    -- template when the counts freeze (too few pages left to reach the
    -- share), then those seen on one page only. Once a page at most.
    local need = math.max(min_count, math.ceil(share * limit / 1000))
    local all = redis.call('HGETALL', K)
    for j = 1, #all, 2 do
      if all[j] ~= '#' then
        local c = whole(all[j + 1])
        if not c or c <= 1 or c + (limit - pages) < need then
          redis.call('HDEL', K, all[j])
          n = n - 1
        end
      end
    end
  end
  for i = 5, #ARGV do
    local v = redis.call('HGET', K, ARGV[i])
    if v then
      local c = whole(v)
      if c then redis.call('HSET', K, ARGV[i], c + 1) end
    elseif n < max_keys then
      redis.call('HSET', K, ARGV[i], 1)
      n = n + 1
    end
  end
  if pages == limit then
    local all = redis.call('HGETALL', K)
    for i = 1, #all, 2 do
      local c = whole(all[i + 1])
      if all[i] ~= '#' and (not c or c < min_count or c * 1000 < share * pages) then
        redis.call('HDEL', K, all[i])
      end
    end
    redis.call('PERSIST', K)
  else
    -- A site still learned expires a week after its last page (a small
    -- site crawled once must not hold its counts for ever); frozen
    -- evidence stays.
    redis.call('EXPIRE', K, 604800)
  end
end
local out = {pages}
if #ARGV >= 5 then
  local counts = redis.call('HMGET', K, unpack(ARGV, 5))
  for i = 1, #counts do out[#out + 1] = counts[i] end
end
return out
