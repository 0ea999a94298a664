-- Duplicate index, the record of a page id (64 bits of a content key: one
-- text): the first page anywhere with this text, and the first on each
-- other site; and, for its first page, the text's shingle sample. KEYS: the
-- record bucket, the sample bucket (one shard). ARGV: page id (16 hex
-- digits), site tag, "<order>\t<url>", page id (8 bytes), sample. Returns
-- {the record field it created ('' if none), 1 if it wrote the sample}.
-- A bucket of another type is left alone (nothing written there).
local h, s = KEYS[1], KEYS[2]
local fp, tag, rec, page, sample = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local created, wrote = '', 0
local t = redis.call('TYPE', s).ok
if t == 'hash' or t == 'none' then wrote = redis.call('HSETNX', s, page, sample) end
t = redis.call('TYPE', h).ok
if t ~= 'hash' and t ~= 'none' then return {created, wrote} end
if redis.call('HSETNX', h, fp, tag .. rec) == 1 then
  created = fp
elseif string.sub(redis.call('HGET', h, fp), 1, 10) ~= tag
   and redis.call('HSETNX', h, fp .. '\t' .. tag, rec) == 1 then
  created = fp .. '\t' .. tag
end
return {created, wrote}
