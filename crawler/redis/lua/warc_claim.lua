-- WARC archive index (crawler/warc/digests.py): claim a payload for the
-- writer about to archive it in full, so that a copy fetched at the same
-- time anywhere in the cluster becomes a revisit of it rather than a
-- second full record. A claim is "<rest> <WARC-Date> <URI> <owner>
-- <deadline ms, Redis time>" until its record is on disk (warc_settle.lua
-- then makes it "<rest> <WARC-Date> <URI>"); a claim past its deadline was
-- left by a writer that died (or stalled) between claim and write: it is
-- taken over, and the payload archived in full again.
-- KEYS: the payload's archive bucket (one hash).
-- ARGV: field, "<rest> <WARC-Date> <URI> <owner>", the claim's lifetime (ms).
-- Returns {1, the claim written} when this writer claimed it (write it in
-- full; 2: taking over an expired claim), else {0, what the field holds}
-- (written, pending, or not ours).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held = redis.call('HGET', KEYS[1], ARGV[1])
local taken = 1
if held then
  local deadline = string.match(held, '^%S+ %S+ %S+ %S+ (%d+)$')
  if not deadline or tonumber(deadline) >= now then
    return {0, held}
  end
  taken = 2
end
local claim = ARGV[2] .. ' ' .. string.format('%d', now + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], ARGV[1], claim)
return {taken, claim}
