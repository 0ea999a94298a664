-- WARC archive index (crawler/warc/digests.py): settle a claim of
-- warc_claim.lua, if it is still the one this writer made (a claim taken
-- over after its deadline is the other writer's now): "written" once its
-- record is on disk, or released when the record was not written.
-- KEYS: the payload's archive bucket (one hash).
-- ARGV: field, the claim as warc_claim.lua returned it, the value to leave
-- ('' to remove the field).
-- Returns 1 when settled, 0 when the field holds another value.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
  return 0
end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
return 1
