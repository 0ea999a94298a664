-- Duplicate index, exact copies of pages too short for a sketch
-- (crawler/frontier/dupindex.py; a page with a sketch is found by its
-- record, record.lua). Values are "<site tag><page>": a 10-character tag of
-- the site, then the page's URL ("=<page id>" in an earlier version).
-- KEYS: the content bucket. ARGV: content key, site tag, this page's value.
-- Returns {'new'}, {'own', page} or {'other', page}; a page given as a
-- reference may be this very page (the caller resolves it and tells).
local h, ch, tag, mine = KEYS[1], ARGV[1], ARGV[2], ARGV[3]
local t = redis.call('TYPE', h).ok
if t ~= 'hash' and t ~= 'none' then return {'new'} end  -- not a table this index wrote
local v = redis.call('HGET', h, ch)
if not v then
  redis.call('HSET', h, ch, tag .. mine)
  return {'new'}
end
local ref = string.sub(mine, 1, 1) == '='
local first = string.sub(v, 11)
if first == mine and not ref then return {'new'} end
if string.sub(v, 1, 10) == tag then return {'own', first} end
local own = redis.call('HGET', h, ch .. '\t' .. tag)
if own and (own ~= mine or ref) then return {'own', own} end
if not own then redis.call('HSET', h, ch .. '\t' .. tag, mine) end
return {'other', first}
