-- A site refused a request (429, 503) or let it time out, with ADAPTIVE_RATE:
-- slow its pace for every worker. A refusal of a request sent before the
-- site's last slow-down, or within PACE_SETTLE (a second, a rate limiter's
-- usual window) or two gaps of it, is part of that incident (it was on its
-- way at the old pace, or the server has not yet seen the new one) and
-- changes nothing. A new incident lengthens the gap: by a
-- third when the site had answered PACE_STEP requests well since the last
-- one (the pace was near its limit), else doubled; a site without a pace
-- starts from the interval its requests were going at (a refusal's latency
-- over the requests in flight; 10 ms after a timeout, whose latency is the
-- timeout). A new incident with no success at all since the
-- last, at a pace of a request a second or slower already (slowing down
-- has not helped: the site is refusing, not limiting), pauses the site:
-- pause_ms, doubled for each such incident in a row, at most
-- max_pause_ms. A Retry-After pauses it at least that long.
-- KEYS: fixed. ARGV: site, retry_after_ms (0: none), latency_ms (of the
-- refused request), pause_ms, max_pause_ms, max_pace_ms, reason (letters,
-- digits, "-" and "_" kept, at most 16: shown by `scrapy status`).
-- Returns {pace_ms, pause_ms, new incident 1/0}.
local site, ra, latency = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local pause_ms, max_pause, max_pace = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local why = string.sub(string.gsub(ARGV[7] or '', '[^%w_-]', ''), 1, 16)
local pace = pace_of(site)
local ok, last, strikes = pstate(site)
local pause = 0
local new = 0
if now - latency < last or now - last < math.max(PACE_SETTLE, 2 * pace) then
  redis.call('HINCRBY', STATS, 'slow_same_incident', 1)
else
  new = 1
  local base = pace
  if base <= 0 then
    local act = math.max(tonumber(redis.call('HGET', ACTIVE, site) or '1'), 1)
    -- A refusal came back after latency_ms: requests went out about every
    -- latency / in flight. A timeout says nothing of that pace (its latency
    -- is the timeout): it starts from the floor.
    base = why == 'timeout' and 10 or math.max(latency / act, 10)
  end
  if ok >= PACE_STEP then pace = base * 4 / 3 else pace = base * 2 end
  pace = math.floor(math.min(pace, max_pace))
  if ok == 0 and last > 0 and base >= PACE_PAUSE_FROM then
    strikes = strikes + 1
    pause = math.min(pause_ms * 2 ^ (strikes - 1), max_pause)
  elseif ok > 0 then
    strikes = 0
  end
  redis.call('HSET', PACE, site, pace)
  set_pstate(site, 0, now, strikes, why)
  redis.call('HINCRBY', STATS, 'slowdowns', 1)
end
if ra > pause then pause = math.min(ra, max_pause) end
if pause > 0 then
  local nxt = math.max(now + pause, tonumber(redis.call('HGET', NEXT, site) or '0'))
  redis.call('HSET', NEXT, site, nxt)
  local score = redis.call('ZSCORE', READY, site)
  if score and tonumber(score) < nxt then redis.call('ZADD', READY, nxt, site) end
  redis.call('HINCRBY', STATS, 'pauses', 1)
end
return {pace, math.floor(pause), new}
