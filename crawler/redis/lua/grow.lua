-- Grown bucket tables (crawler/frontier/buckets.py), the helpers of the
-- duplicate index's scripts (sent before BAND, BAND_UNDO, RECORD, GROWN).
-- A table's final bucket b is the key KEYS gives ("<table>:<b>"); until the
-- table has split down to it, its entries live in the coarse bucket
-- "<table>:<n>/<b mod n>" of the first level n not split yet, which the
-- table's "<table>:grown" string marks bit by bit. Those keys are built from
-- the declared key's own prefix: the same hash tag, the same slot.

local function grow_sizes(text)
  local sizes = {}
  for n in string.gmatch(text, '%d+') do sizes[#sizes + 1] = tonumber(n) end
  return sizes
end

local function grow_num(s)
  local v = 0
  for i = 1, #s do v = v * 256 + string.byte(s, i) end
  return v
end

-- The bucket holding final bucket KEY's entries now: key, level (#sizes:
-- the final one), its bit in the grown string (nil when final), the table's
-- prefix.
local function grow_live(key, sizes)
  local prefix, b = string.match(key, '^(.*:)(%d+)$')
  b = tonumber(b)
  local off = 0
  for l = 1, #sizes - 1 do
    local n = sizes[l]
    local p = b % n
    if redis.call('GETBIT', prefix .. 'grown', off + p) == 0 then
      return prefix .. n .. '/' .. p, l, off + p, prefix
    end
    off = off + n
  end
  return key, #sizes, nil, prefix
end

-- An entry's final bucket: band fields carry it in their first W bytes;
-- records and sketches (W 0) are keyed by a page reference, whose top 3
-- bytes choose it.
local function grow_final(field, w, buckets)
  if w > 0 then return grow_num(string.sub(field, 1, w)) end
  return grow_num(string.sub(field, 1, 3)) % buckets
end

-- Split coarse bucket KEY (level LEVEL, bit BIT) four ways into the next
-- level; into the final buckets, band fields drop their bucket bytes.
local function grow_split(prefix, key, level, bit, sizes, w)
  local all = redis.call('HGETALL', key)
  local last = #sizes
  local n = sizes[level + 1]
  for k = 1, #all, 2 do
    local f = all[k]
    local b = grow_final(f, w, sizes[last])
    local child
    if level + 1 == last then
      child = prefix .. b
      if w > 0 then f = string.sub(f, w + 1) end
    else
      child = prefix .. n .. '/' .. (b % n)
    end
    redis.call('HSET', child, f, all[k + 1])
  end
  redis.call('DEL', key)
  redis.call('SETBIT', prefix .. 'grown', bit, 1)
end

-- After an entry went into final bucket KEY's table: split its bucket while
-- it holds more than AT entries and is not final.
local function grow_after(key, at, sizes, w)
  local live, level, bit, prefix = grow_live(key, sizes)
  while bit and redis.call('TYPE', live).ok == 'hash' and redis.call('HLEN', live) > at do
    grow_split(prefix, live, level, bit, sizes, w)
    live, level, bit, prefix = grow_live(key, sizes)
  end
end
