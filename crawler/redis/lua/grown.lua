-- Duplicate index, a page reference's record and sketch where the grown
-- tables (grow.lua) hold them now: read them (a candidate's), or take the
-- sketch out (a copy of a page of its own site).
-- KEYS: the record's and the sketch's final buckets (one shard).
-- ARGV: "read" or "drop", the tables' levels, the reference, and for "read"
-- the reference and a site tag (the first page on that site).
-- Returns for "read" {record, record on that site, sketch} (false: none);
-- for "drop" the sketches taken out (0 or 1).
local op, sizes, ref = ARGV[1], grow_sizes(ARGV[2]), ARGV[3]
local h, s = grow_live(KEYS[1], sizes), grow_live(KEYS[2], sizes)
if op == 'drop' then
  if redis.call('TYPE', s).ok ~= 'hash' then return 0 end
  return redis.call('HDEL', s, ref)
end
local first, mine, sketch = false, false, false
if redis.call('TYPE', h).ok == 'hash' then
  first = redis.call('HGET', h, ref)
  mine = redis.call('HGET', h, ARGV[4])
end
if redis.call('TYPE', s).ok == 'hash' then sketch = redis.call('HGET', s, ref) end
return {first, mine, sketch}
