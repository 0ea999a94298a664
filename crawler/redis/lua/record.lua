-- Duplicate index, the record of a page (its reference: 5 bytes of its page
-- id, 64 bits of its content key: one text): the first page anywhere with
-- this text, and the first on each other site; and, for its first page, the
-- text's odd sketch. The record is also the exact index of such pages: a
-- record already there with the same page id is the same text. Records and
-- sketches are grown tables (grow.lua), their entries keyed by reference.
-- KEYS: the record's and the sketch's final buckets (one shard).
-- ARGV: reference (5 bytes), the page id's other 3 bytes, site tag (5 bytes),
-- order (7 bytes), url, sketch, the tables' levels, split at.
-- The record: field reference -> rest .. tag .. order .. url; field
-- reference .. tag -> order .. url, the first page with that text on the site
-- of tag when the first anywhere is on another site.
-- Returns {created (1: this page's record and sketch are written now; 0: the
-- page id has a record: that record follows; 2: another page id has this
-- reference, or a bucket is not one this index wrote: nothing written),
-- the record there before (or ''), the record on this page's site there
-- before (or ''), 1 if it wrote the sketch}.
local ref, rest, tag, order, url, sketch = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local sizes, at = grow_sizes(ARGV[7]), tonumber(ARGV[8])
local h, s = grow_live(KEYS[1], sizes), grow_live(KEYS[2], sizes)
local th, ts = redis.call('TYPE', h).ok, redis.call('TYPE', s).ok
if (th ~= 'hash' and th ~= 'none') or (ts ~= 'hash' and ts ~= 'none') then return {2, '', '', 0} end
local v = redis.call('HGET', h, ref)
if not v then
  redis.call('HSET', h, ref, rest .. tag .. order .. url)
  local wrote = redis.call('HSETNX', s, ref, sketch)
  grow_after(KEYS[1], at, sizes, 0)
  grow_after(KEYS[2], at, sizes, 0)
  return {1, '', '', wrote}
end
if string.sub(v, 1, 3) ~= rest then return {2, '', '', 0} end
if string.sub(v, 4, 8) == tag then return {0, v, '', 0} end
local own = redis.call('HGET', h, ref .. tag)
if not own then
  redis.call('HSET', h, ref .. tag, order .. url)
  grow_after(KEYS[1], at, sizes, 0)
end
return {0, v, own or '', 0}
