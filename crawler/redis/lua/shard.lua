-- Shared Lua helpers of the site-shard scripts.
local STATS, READY, DELAYED, NEXT, ACTIVE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local DELAY, BACKOFF, SITECOUNT, ERRORS, MIRRORS = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local P = string.sub(STATS, 1, -6)  -- the shard's prefix "{tag}:" ("stats" is 5 characters)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local FAR = 9007199254740  -- "not ready": a site at its concurrency limit

local function qkey(site) return P .. 'q:' .. site end

-- A focused crawl's shards are ordered ('ordered' in the shard's stats, set
-- when the crawl is created with a topic): a site's queue is then a sorted
-- set, scored (1000 - priority) * PBASE + sequence, so the most promising
-- request goes first and requests of one priority in the order queued; and
-- BEST (a sorted set like the site queues, built from the shard's prefix)
-- holds each site's best queued (1000 - priority), so a lease serves the
-- ready sites with the most promising work first. Otherwise a site's queue
-- is a list: first in, first out (breadth-first).
local ORDERED = redis.call('HGET', STATS, 'ordered') == '1'
local BEST = P .. 'best'
local PBASE = 4294967296
-- An importance crawl's (-a order=importance) shards are ordered too, by
-- rank IRANGE - importance (in hundredths, 0..IRANGE), and keep in
-- 'qk:<site>' each queued entry by its URL's dedup member (meta imp_key),
-- so that links found to a queued URL later raise its importance (bump).
-- A depth-first crawl's (-a order=dfs) site queues are lists whose new
-- links go first (last in, first out).
local IMPORTANCE = ORDERED and redis.call('HGET', STATS, 'importance') == '1'
local LIFO = (not ORDERED) and redis.call('HGET', STATS, 'lifo') == '1'
local IRANGE = 100000

local function qkkey(site) return P .. 'qk:' .. site end

-- An importance entry's dedup member and importance at enqueue (hundredths).
local function entry_importance(entry)
  local ok, d = pcall(cjson.decode, entry)
  if ok and type(d) == 'table' and type(d.m) == 'table' then
    local p = tonumber(d.m.imp)
    if p and p == p and p ~= math.huge and p ~= -math.huge then p = math.max(0, math.min(IRANGE, math.floor(p))) else p = 0 end
    local k = d.m.imp_key
    if type(k) ~= 'string' then k = nil end
    return k, p
  end
  return nil, 0
end

local function qlen(site)
  if ORDERED then return redis.call('ZCARD', qkey(site)) end
  return redis.call('LLEN', qkey(site))
end

-- The priority an entry carries (meta topic_priority, 0..1000), for entries
-- pushed back without one given: a lease given back, a retry now due.
local function entry_priority(entry)
  local ok, d = pcall(cjson.decode, entry)
  if ok and type(d) == 'table' and type(d.m) == 'table' then
    local p = tonumber(d.m.topic_priority)
    if p and p == p and p ~= math.huge and p ~= -math.huge then return math.max(0, math.min(1000, math.floor(p))) end
  end
  return 0
end

-- Queue an entry at the head (head) or in its place; prio nil: read it from
-- the entry. Returns 1, or 0 when the very same entry is already queued.
local function qpush(site, entry, head, prio)
  if not ORDERED then
    if head then redis.call('LPUSH', qkey(site), entry) else redis.call('RPUSH', qkey(site), entry) end
    return 1
  end
  local rank
  if IMPORTANCE then
    local k, p = entry_importance(entry)
    rank = IRANGE - (prio or p)
    -- A mirror's pages come last.
    if redis.call('HEXISTS', MIRRORS, site) == 1 then rank = IRANGE end
    if k then redis.call('HSET', qkkey(site), k, entry) end
  else
    rank = 1000 - (prio or entry_priority(entry))
  end
  local seq = 0
  if not head then seq = redis.call('HINCRBY', STATS, 'qseq', 1) % PBASE end
  local added = redis.call('ZADD', qkey(site), rank * PBASE + seq, entry)
  redis.call('ZADD', BEST, 'LT', rank, site)
  return added
end

-- The site's next entry, and its rank in an ordered shard (-1 otherwise).
local function qpop(site)
  if not ORDERED then return redis.call('LPOP', qkey(site)), -1 end
  local r = redis.call('ZPOPMIN', qkey(site))
  local first = redis.call('ZRANGE', qkey(site), 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('ZADD', BEST, math.floor(tonumber(first[2]) / PBASE), site)
  else
    redis.call('ZREM', BEST, site)
  end
  if not r[1] then return false, -1 end
  if IMPORTANCE then
    local k = entry_importance(r[1])
    if k then redis.call('HDEL', qkkey(site), k) end
  end
  return r[1], math.floor(tonumber(r[2]) / PBASE)
end

-- Raise a queued URL's importance by cash (hundredths): a link to it found
-- after it was queued. Nothing for a URL no longer queued, or a mirror's.
local function bump(site, m, cash)
  if not IMPORTANCE or not cash or cash ~= cash or cash <= 0 then return end
  local entry = redis.call('HGET', qkkey(site), m)
  if not entry then return end
  local s = redis.call('ZSCORE', qkey(site), entry)
  if not s then
    redis.call('HDEL', qkkey(site), m)
    return
  end
  if redis.call('HEXISTS', MIRRORS, site) == 1 then return end
  s = tonumber(s)
  local rank = math.floor(s / PBASE)
  local newrank = math.max(0, rank - math.floor(cash))
  if newrank < rank then
    redis.call('ZADD', qkey(site), 'XX', newrank * PBASE + (s - rank * PBASE), entry)
    redis.call('ZADD', BEST, 'LT', newrank, site)
    redis.call('HINCRBY', STATS, 'bumped', 1)
  end
end

-- The pending counts (queued, leased, delayed) change here and only here.
local function move(from, to, n)
  if n == 0 then return end
  if from then redis.call('HINCRBY', STATS, from, -n) end
  if to then redis.call('HINCRBY', STATS, to, n) end
end

-- A lease value is "<site>\n<entry>", prefixed with "~" once its download
-- is over (the site's concurrency slot is then already free).
local function split_entry(v)
  if string.sub(v, 1, 1) == '~' then v = string.sub(v, 2) end
  local i = string.find(v, '\n', 1, true)
  return string.sub(v, 1, i - 1), string.sub(v, i + 1)
end

local function holds_slot(v)
  return string.sub(v, 1, 1) ~= '~'
end

-- A site's adaptive pace (ADAPTIVE_RATE, slow.lua): PACE holds the gap (ms)
-- the site's answers taught (none: the site has not refused); PSTATE its
-- "successes since the last slow-down|time of that slow-down (ms)|incidents
-- in a row without a success between|what the site last answered (429, 503,
-- timeout)". A malformed value reads as none.
local PACE, PSTATE = P .. 'pace', P .. 'pstate'
local PACE_STEP = 25        -- successes between two steps back towards the delay
local PACE_RECOVER = 0.97   -- each step: the gap 3 % shorter
local PACE_FLOOR = 5        -- ms: a learned gap this short is forgotten
local PACE_SETTLE = 1000     -- ms after a slow-down during which refusals are the same incident (slow.lua)
local PACE_PAUSE_FROM = 1000  -- ms: refused again at this pace or slower, a site is paused (slow.lua)

local function pace_of(site)
  local v = tonumber(redis.call('HGET', PACE, site) or '0')
  if not v or v ~= v or v < 0 or v == math.huge then return 0 end
  return v
end

local function pstate(site)
  local v = redis.call('HGET', PSTATE, site)
  if v then
    local ok, last, strikes, why = string.match(v, '^(%d+)|(%d+)|(%d+)|?([%w_-]*)$')
    if ok then return tonumber(ok), tonumber(last), tonumber(strikes), why end
  end
  return 0, 0, 0, ''
end

local function set_pstate(site, ok, last, strikes, why)
  redis.call('HSET', PSTATE, site, string.format('%d|%d|%d|%s', ok, last, strikes, why))
end

-- A success from a site with a learned pace: every PACE_STEP of them the
-- pace steps back towards the site's delay.
local function pace_success(site)
  local pace = pace_of(site)
  if pace <= 0 then return end
  local ok, last, strikes, why = pstate(site)
  ok = ok + 1
  if ok % PACE_STEP == 0 then
    pace = math.floor(pace * PACE_RECOVER)
    if pace < PACE_FLOOR then
      redis.call('HDEL', PACE, site)
      redis.call('HDEL', PSTATE, site)
      return
    end
    redis.call('HSET', PACE, site, pace)
  end
  set_pstate(site, ok, last, strikes, why)
end

-- The gap (ms) between two requests to a site: its delay (never less than
-- its robots.txt Crawl-delay) or, when slower, the pace its answers taught,
-- and its backoff, plus the margin that covers jitter; 0 for a site
-- without either.
local function site_gap(site, default_delay, margin)
  local g = math.max(tonumber(redis.call('HGET', DELAY, site) or default_delay), pace_of(site))
          + tonumber(redis.call('HGET', BACKOFF, site) or '0')
  if g > 0 then g = g + margin end
  return g
end

-- Make a site with queued entries servable again at max(now, its next time).
local function wake(site, conc)
  if qlen(site) == 0 then
    redis.call('ZREM', READY, site)
    return
  end
  local act = tonumber(redis.call('HGET', ACTIVE, site) or '0')
  if act >= conc then
    redis.call('ZADD', READY, FAR, site)
  else
    local nxt = tonumber(redis.call('HGET', NEXT, site) or '0')
    redis.call('ZADD', READY, math.max(now, nxt), site)
  end
end

local function release_active(site)
  local act = redis.call('HINCRBY', ACTIVE, site, -1)
  if act <= 0 then redis.call('HDEL', ACTIVE, site) end
end

-- The download of a leased request is over: free its site's concurrency
-- slot. The site's next request waits a full gap from now: the delay counts
-- from the end of the previous fetch, as in Nutch and Heritrix, so it holds
-- however late a busy worker sent the request and reported its end.
local function downloaded(lkey, id, conc, default_delay, margin)
  local v = redis.call('HGET', lkey, id)
  if not v or not holds_slot(v) then return end
  redis.call('HSET', lkey, id, '~' .. v)
  local site = split_entry(v)
  release_active(site)
  local gap = site_gap(site, default_delay, margin)
  if gap > 0 then
    local nxt = math.max(now + gap, tonumber(redis.call('HGET', NEXT, site) or '0'))
    redis.call('HSET', NEXT, site, nxt)
  end
  wake(site, conc)
end

-- End a lease. outcome: 'C' (done; 'T': done, on a focused crawl's topic), 'E' (final
-- error, with reason), 'F' (forbidden by robots.txt: not fetched, neither a page nor
-- an error; counted as robots_forbidden), 'R'
-- (retry: to the delayed set, due after delay ms, as the new entry), 'H'
-- (back to the head of its queue: given back or reaped). A second letter
-- says what the visit was: 'V' a re-crawl's revisit of a stored page (counted
-- as revisits and revisit_errors, not as pages and errors: a page is a page
-- however often it is fetched), 'A' a URL settled as an error before and
-- done now (a seed given again: one error less), 'S' a sitemap (not a
-- page: its failure is counted as a sitemap_error, its success by the
-- worker that read it). False if the lease is not held (acknowledged late,
-- after it was reaped).
local function settle(lkey, node, id, outcome, conc, reason, delay, entry2)
  local v = redis.call('HGET', lkey, id)
  if not v then return false end
  redis.call('HDEL', lkey, id)
  local site, entry = split_entry(v)
  if holds_slot(v) then release_active(site) end
  local kind = string.sub(outcome, 2, 2)
  outcome = string.sub(outcome, 1, 1)
  if outcome == 'H' then
    if qpush(site, entry, true) == 1 then move('leased', 'queued', 1) else move('leased', nil, 1) end
  elseif outcome == 'R' then
    redis.call('ZADD', DELAYED, now + delay, site .. '\n' .. entry2)
    move('leased', 'delayed', 1)
    redis.call('HINCRBY', STATS, 'retried', 1)
  elseif outcome == 'F' then
    move('leased', nil, 1)
    -- a sitemap robots.txt forbids is counted by its reader (sitemap/robots_forbidden)
    if kind ~= 'S' then redis.call('HINCRBY', STATS, 'robots_forbidden', 1) end
  elseif outcome == 'E' then
    move('leased', nil, 1)
    -- An error's URL failing again ('A') is counted once, as it was.
    if kind == 'S' then
      redis.call('HINCRBY', STATS, 'sitemap_errors', 1)
    else
      if kind ~= 'A' then redis.call('HINCRBY', STATS, kind == 'V' and 'revisit_errors' or 'errors', 1) end
      redis.call('HINCRBY', P .. 'node:' .. node, 'errors', 1)
    end
    redis.call('LPUSH', ERRORS, cjson.encode({site = site, reason = reason, at = now,
                                              entry = string.sub(entry, 1, 2048)}))
    redis.call('LTRIM', ERRORS, 0, 999)
  else
    move('leased', nil, 1)
    if kind == 'S' then
      -- a sitemap read: counted by its reader (sitemapqueue.py)
    elseif kind == 'V' then
      redis.call('HINCRBY', STATS, 'revisits', 1)
    else
      redis.call('HINCRBY', STATS, 'done', 1)
      if kind == 'A' and tonumber(redis.call('HGET', STATS, 'errors') or '0') > 0 then
        redis.call('HINCRBY', STATS, 'errors', -1)
      end
    end
    if kind ~= 'S' then redis.call('HINCRBY', P .. 'node:' .. node, 'pages', 1) end
    if outcome == 'T' then  -- done, and a focused crawl's page on its topic
      redis.call('HINCRBY', STATS, 'on_topic', 1)
      redis.call('HINCRBY', P .. 'node:' .. node, 'on_topic', 1)
    end
    if kind ~= 'S' then pace_success(site) end
    -- A success halves any backoff the site had: it recovers step by step.
    local bo = tonumber(redis.call('HGET', BACKOFF, site) or '0')
    if bo > 0 then
      bo = math.floor(bo / 2)
      if bo < 50 then redis.call('HDEL', BACKOFF, site) else redis.call('HSET', BACKOFF, site, bo) end
    end
  end
  wake(site, conc)
  return true
end

-- Dedup and enqueue links: ARGV groups of (member, site, entry, place) from
-- index i, KEYS pairs (seen bucket, queue) from index ki. An empty member
-- means "do not dedup" (dont_filter); place "h" puts the request first in
-- its site queue (raised priority: redirects), a number (0..1000) is its
-- priority in an ordered shard; in an importance shard "i<importance>:<cash>"
-- (hundredths: a new URL's importance, and what a URL already queued gains),
-- and "b<cash>" raises a URL this worker sent before (no dedup, no count).
-- Returns added, dup, capped.
local function enqueue(i, ki, n, cap, conc)
  local added, dup, capped = 0, 0, 0
  for k = 0, n - 1 do
    local j = i + k * 4
    local m, site, entry, place = ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3]
    local seen = KEYS[ki + k * 2]
    local cash = nil
    if string.sub(place, 1, 1) == 'i' then
      local total, c = string.match(place, '^i(%d+):(%d+)$')
      place, cash = total or '0', tonumber(c)
    end
    if string.sub(place, 1, 1) == 'b' then
      bump(site, m, tonumber(string.sub(place, 2)))
    elseif m ~= '' and redis.call('SADD', seen, m) == 0 then
      bump(site, m, cash)
      dup = dup + 1
    elseif m ~= '' and cap > 0 and redis.call('HINCRBY', SITECOUNT, site, 1) > cap then
      capped = capped + 1
    else
      local prio = tonumber(place)
      local top = IMPORTANCE and IRANGE or 1000
      if prio and prio == prio then prio = math.max(0, math.min(top, math.floor(prio))) else prio = 0 end
      if place == 'h' then prio = nil end  -- first of its priority, which the entry carries
      if qpush(site, entry, place == 'h' or LIFO, prio) == 1 then
        if not redis.call('ZSCORE', READY, site) then wake(site, conc) end
        added = added + 1
      else
        dup = dup + 1  -- the very same entry is queued already (dont_filter twice)
      end
    end
  end
  move(nil, 'queued', added)
  if dup > 0 then redis.call('HINCRBY', STATS, 'duplicates', dup) end
  if capped > 0 then redis.call('HINCRBY', STATS, 'capped', capped) end
  if added > 0 then redis.call('HINCRBY', STATS, 'enqueued', added) end
  return added, dup, capped
end
