"""The frontier's Lua scripts: every frontier operation on a shard is one of
these, so a crash (of a worker or of Redis) between two commands leaves
nothing half done.

Each script runs on one shard (``crawler/frontier/keys.py``): a site shard
(queues, leases, politeness, URL dedup), a duplicate-index shard, or the
crawl-wide keys. ``KEYS`` declares the keys a script touches: a site-shard
script gets the shard's fixed keys as ``KEYS[1..10]`` (in ``SHARD_KEYS``
order) and then the per-call keys the caller knows (seen buckets, queues of
the sites it enqueues, its lease hash). The one exception is a site's queue
key when the site is read from Redis itself (the ready set, a lease): it is
built from the shard's own prefix, so it carries the same hash tag and lies
in the same slot; Redis refuses a script that touches a key of another slot
("non local key"), so this cannot go wrong quietly.

Times are the server's (``TIME``), so workers with skewed clocks still agree
on per-site delays.

The counts that decide when a crawl ends (``queued``, ``leased``,
``delayed`` in each shard's ``stats``) change only through ``move``; a
lease ends only through ``settle``.
"""

from __future__ import annotations

# Shared Lua helpers of the site-shard scripts.
_SHARD = r"""
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
  local rank = 1000 - (prio or entry_priority(entry))
  local seq = 0
  if not head then seq = redis.call('HINCRBY', STATS, 'qseq', 1) % PBASE end
  local added = redis.call('ZADD', qkey(site), rank * PBASE + seq, entry)
  redis.call('ZADD', BEST, 'LT', rank, site)
  return added
end

local function qpop(site)
  if not ORDERED then return redis.call('LPOP', qkey(site)) end
  local r = redis.call('ZPOPMIN', qkey(site))
  local first = redis.call('ZRANGE', qkey(site), 0, 0, 'WITHSCORES')
  if first[2] then
    redis.call('ZADD', BEST, math.floor(tonumber(first[2]) / PBASE), site)
  else
    redis.call('ZREM', BEST, site)
  end
  return r[1] or false
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

-- The gap (ms) between two requests to a site: its delay and backoff, plus
-- the margin that covers jitter; 0 for a site without a delay.
local function site_gap(site, default_delay, margin)
  local g = tonumber(redis.call('HGET', DELAY, site) or default_delay)
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
-- error, with reason), 'R'
-- (retry: to the delayed set, due after delay ms, as the new entry), 'H'
-- (back to the head of its queue: given back or reaped). A second letter
-- says what the visit was: 'V' a re-crawl's revisit of a stored page (counted
-- as revisits and revisit_errors, not as pages and errors: a page is a page
-- however often it is fetched), 'A' a URL settled as an error before and
-- done now (a seed given again: one error less). False if the lease
-- is not held (acknowledged late, after it was reaped).
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
  elseif outcome == 'E' then
    move('leased', nil, 1)
    redis.call('HINCRBY', STATS, kind == 'V' and 'revisit_errors' or 'errors', 1)
    redis.call('HINCRBY', P .. 'node:' .. node, 'errors', 1)
    redis.call('LPUSH', ERRORS, cjson.encode({site = site, reason = reason, at = now,
                                              entry = string.sub(entry, 1, 2048)}))
    redis.call('LTRIM', ERRORS, 0, 999)
  else
    move('leased', nil, 1)
    if kind == 'V' then
      redis.call('HINCRBY', STATS, 'revisits', 1)
    else
      redis.call('HINCRBY', STATS, 'done', 1)
      if kind == 'A' and tonumber(redis.call('HGET', STATS, 'errors') or '0') > 0 then
        redis.call('HINCRBY', STATS, 'errors', -1)
      end
    end
    redis.call('HINCRBY', P .. 'node:' .. node, 'pages', 1)
    if outcome == 'T' then  -- done, and a focused crawl's page on its topic
      redis.call('HINCRBY', STATS, 'on_topic', 1)
      redis.call('HINCRBY', P .. 'node:' .. node, 'on_topic', 1)
    end
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
-- priority in an ordered shard. Returns added, dup, capped.
local function enqueue(i, ki, n, cap, conc)
  local added, dup, capped = 0, 0, 0
  for k = 0, n - 1 do
    local j = i + k * 4
    local m, site, entry, place = ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3]
    local seen = KEYS[ki + k * 2]
    if m ~= '' and redis.call('SADD', seen, m) == 0 then
      dup = dup + 1
    elseif m ~= '' and cap > 0 and redis.call('HINCRBY', SITECOUNT, site, 1) > cap then
      capped = capped + 1
    else
      local prio = tonumber(place)
      if prio and prio == prio then prio = math.max(0, math.min(1000, math.floor(prio))) else prio = 0 end
      if place == 'h' then prio = nil end  -- first of its priority, which the entry carries
      if qpush(site, entry, place == 'h', prio) == 1 then
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
"""

# KEYS: fixed..., lease hash of the node, then (seen, queue) per link.
# ARGV: node, cap, conc, default_delay_ms, margin_ms, n_links, link groups
# (member, site, entry, head)..., n_acks, ack groups (id, C|E, reason)...,
# n_requeues, requeue groups (id, delay ms, entry)..., then the ids of the
# node's leases whose download is over.
# Returns {added, dup, capped, acked, stale}.
COMMIT = _SHARD + r"""
local lkey, node = KEYS[11], ARGV[1]
local cap, conc, ddelay, margin = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local n = tonumber(ARGV[6])
local added, dup, capped = enqueue(7, 12, n, cap, conc)
local i = 7 + n * 4
local na = tonumber(ARGV[i])
i = i + 1
local acked, stale = 0, 0
for k = 0, na - 1 do
  local j = i + k * 3
  if settle(lkey, node, ARGV[j], ARGV[j + 1], conc, ARGV[j + 2]) then acked = acked + 1 else stale = stale + 1 end
end
i = i + na * 3
local nr = tonumber(ARGV[i])
i = i + 1
for k = 0, nr - 1 do
  local j = i + k * 3
  if not settle(lkey, node, ARGV[j], 'R', conc, '', tonumber(ARGV[j + 1]), ARGV[j + 2]) then stale = stale + 1 end
end
for k = i + nr * 3, #ARGV do downloaded(lkey, ARGV[k], conc, ddelay, margin) end
return {added, dup, capped, acked, stale}
"""

# KEYS: fixed..., lease hash of the node. ARGV: node, max_n, default_delay_ms,
# conc, margin_ms, shard index, share (most downloads of one site this node
# may have at once: its share of the site's concurrency among the live
# workers), the node's downloads in flight by site ("site\tcount" lines),
# then the ids of this node's leases whose download is over.
# Returns {wait_ms, id1, site1, entry1, gap1_ms, id2, ...};
# wait_ms: how long until the shard's next site is ready (-1: none will be by
# time alone; -2: none, and a site with queued work waits for one of its
# concurrency slots, which a download's end, here or in another worker, frees).
LEASE = _SHARD + r"""
local lkey, node, max_n = KEYS[11], ARGV[1], tonumber(ARGV[2])
local ddelay, conc, margin, shard = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
local share = tonumber(ARGV[7])
local mine = {}
for line in string.gmatch(ARGV[8], '[^\n]+') do
  local s, c = string.match(line, '^(.*)\t(%d+)$')
  if s then mine[s] = tonumber(c) end
end
for k = 9, #ARGV do downloaded(lkey, ARGV[k], conc, ddelay, margin) end
-- Retries whose backoff has passed go to the tail of their site queue.
local due = redis.call('ZRANGEBYSCORE', DELAYED, '-inf', now, 'LIMIT', 0, 200)
for _, v in ipairs(due) do
  redis.call('ZREM', DELAYED, v)
  local site, entry = split_entry(v)
  if qpush(site, entry, false) == 1 then move('delayed', 'queued', 1) else move('delayed', nil, 1) end
  if not redis.call('ZSCORE', READY, site) then wake(site, conc) end
end
local out = {0}
local taken = 0
if max_n > 0 then
  local sites = redis.call('ZRANGEBYSCORE', READY, '-inf', now, 'LIMIT', 0, max_n)
  if ORDERED then
    -- The ready sites with the most promising work first: of the sites with
    -- the best queued priorities, those ready now; then by time as usual.
    -- The best sites are often waiting for their delay: read on, a page
    -- at a time, up to 512 of them; then the other ready sites, by time.
    local best, chosen = {}, {}
    local page, offset = math.max(4 * max_n, 32), 0
    while #best < max_n and offset < 512 do
      local batch = redis.call('ZRANGE', BEST, offset, offset + page - 1)
      if #batch == 0 then break end
      for _, site in ipairs(batch) do
        local at = redis.call('ZSCORE', READY, site)
        if at and tonumber(at) <= now and #best < max_n then
          best[#best + 1] = site
          chosen[site] = true
        end
      end
      offset = offset + page
    end
    for _, site in ipairs(sites) do
      if not chosen[site] and #best < max_n then best[#best + 1] = site end
    end
    sites = best
  end
  for _, site in ipairs(sites) do
    -- One request per site and call (Larbin: spread consecutive leases over
    -- sites); more only from a site with no delay and free concurrency, and
    -- never more of one site at once than this node's share: a worker whose
    -- CPU is the bottleneck holds its slots until it gets round to saying
    -- its downloads are over, and would hold them all.
    local held = mine[site] or 0
    local more = held < share
    while more and taken < max_n do
      more = false
      local entry = qpop(site)
      if not entry then
        redis.call('ZREM', READY, site)
      else
        local id = shard .. '.' .. redis.call('HINCRBY', STATS, 'lease_seq', 1)
        redis.call('HSET', lkey, id, site .. '\n' .. entry)
        local act = redis.call('HINCRBY', ACTIVE, site, 1)
        local gap = site_gap(site, ddelay, margin)
        redis.call('HSET', NEXT, site, now + gap)
        wake(site, conc)
        move('queued', 'leased', 1)
        out[#out + 1] = id
        out[#out + 1] = site
        out[#out + 1] = entry
        out[#out + 1] = gap
        taken = taken + 1
        held = held + 1
        more = gap == 0 and act < conc and held < share
      end
    end
    if taken >= max_n then break end
  end
end
local first = redis.call('ZRANGE', READY, 0, 0, 'WITHSCORES')
local wait = -1
if first[2] and tonumber(first[2]) < FAR then wait = math.max(tonumber(first[2]) - now, 0)
elseif first[2] then wait = -2 end
local d1 = redis.call('ZRANGE', DELAYED, 0, 0, 'WITHSCORES')
if d1[2] then
  local dw = math.max(tonumber(d1[2]) - now, 0)
  if wait < 0 or dw < wait then wait = dw end
end
out[1] = wait
return out
"""

# Give leases back to the head of their queues (a worker closing with
# requests it had not started). KEYS: fixed..., lease hash. ARGV: node, conc, ids...
RELEASE = _SHARD + r"""
local lkey, node, conc = KEYS[11], ARGV[1], tonumber(ARGV[2])
local released = 0
for k = #ARGV, 3, -1 do
  if settle(lkey, node, ARGV[k], 'H', conc) then released = released + 1 end
end
return released
"""

# The leases of stopped nodes go back to the head of their site queues; and
# this node's own lease ids. KEYS: fixed..., this node's lease hash, then
# the lease hashes of the stopped nodes. ARGV: node, conc, then the stopped
# nodes' names (as in KEYS). Returns {reaped leases, this node's lease ids}.
REAP = _SHARD + r"""
local conc = tonumber(ARGV[2])
local reaped = 0
for k = 12, #KEYS do
  local dead, node = KEYS[k], ARGV[k - 9]
  local ids = redis.call('HKEYS', dead)
  for _, id in ipairs(ids) do
    if settle(dead, node, id, 'H', conc) then reaped = reaped + 1 end
  end
  redis.call('DEL', dead)
end
if reaped > 0 then redis.call('HINCRBY', STATS, 'reaped', reaped) end
return {reaped, redis.call('HKEYS', KEYS[11])}
"""

# A request went to the site outside the frontier (robots.txt): the next
# request may not start before now + delay_ms. KEYS: fixed. ARGV: site, delay_ms.
TOUCH = _SHARD + r"""
local site, delay = ARGV[1], tonumber(ARGV[2])
local nxt = math.max(now + delay, tonumber(redis.call('HGET', NEXT, site) or '0'))
redis.call('HSET', NEXT, site, nxt)
local score = redis.call('ZSCORE', READY, site)
if score and tonumber(score) < nxt then redis.call('ZADD', READY, nxt, site) end
return nxt
"""

# A request to a site is about to go on the wire (sites with more than one
# request at a time and a delay): reserve its send time, at least the site's
# gap after the last one reserved by any worker. KEYS: fixed..., the shard's
# "sent" hash. ARGV: site, default_delay_ms, margin_ms. Returns ms to wait.
SEND = _SHARD + r"""
local site, ddelay, margin = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local gap = site_gap(site, ddelay, margin)
if gap <= 0 then return 0 end
local at = math.max(now, tonumber(redis.call('HGET', KEYS[11], site) or '0') + gap)
redis.call('HSET', KEYS[11], site, at)
return at - now
"""

# Back a site off after 429, 503 or a timeout: double its backoff (at least
# min_ms, at most max_ms) and push its next fetch time out.
# KEYS: fixed. ARGV: site, min_ms, max_ms. Returns the new backoff (ms).
BACKOFF = _SHARD + r"""
local site, min_ms, max_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local bo = tonumber(redis.call('HGET', BACKOFF, site) or '0')
bo = math.min(math.max(bo * 2, min_ms), max_ms)
redis.call('HSET', BACKOFF, site, bo)
local nxt = math.max(now + bo, tonumber(redis.call('HGET', NEXT, site) or '0'))
redis.call('HSET', NEXT, site, nxt)
local score = redis.call('ZSCORE', READY, site)
if score and tonumber(score) < nxt then redis.call('ZADD', READY, nxt, site) end
redis.call('HINCRBY', STATS, 'backoffs', 1)
return bo
"""

# A site's pages counted towards it being a mirror (fsite '': a page of it was
# fingerprinted; else: one of its pages copies a page of fsite). KEYS: fixed...,
# the site's mirror hash. ARGV: site, fsite, mirror_min_pages, mirror_share,
# and the copy's kind (exact, near). Returns the site it mirrors, or ''.
MIRROR = _SHARD + r"""
local site, fsite = ARGV[1], ARGV[2]
local min_pages, share = tonumber(ARGV[3]), tonumber(ARGV[4])
if fsite == '' then
  redis.call('HINCRBY', KEYS[11], 'pages', 1)
  return redis.call('HGET', MIRRORS, site) or ''
end
redis.call('HINCRBY', STATS, 'cross_site_copies', 1)
redis.call('HINCRBY', STATS, ARGV[5] .. '_duplicates', 1)
local copies = redis.call('HINCRBY', KEYS[11], 'copies\t' .. fsite, 1)
local mirror = redis.call('HGET', MIRRORS, site)
if not mirror then
  local pages = tonumber(redis.call('HGET', KEYS[11], 'pages') or '0')
  if pages >= min_pages and copies >= share * pages then
    redis.call('HSET', MIRRORS, site, fsite)
    mirror = fsite
  end
end
return mirror or ''
"""

# Crawl-wide: record this node alive; list the nodes whose heartbeat
# stopped (they are reaped shard by shard, then forgotten).
# KEYS: nodes, hb. ARGV: node ('' = none), record JSON, timeout_ms.
HEARTBEAT = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[2], now, ARGV[1])
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]))
return {redis.call('ZCOUNT', KEYS[2], now - tonumber(ARGV[3]) + 1, '+inf'), dead}
"""

# Crawl-wide: forget reaped nodes, unless one came back meanwhile; their
# records stay for the operator, marked lost. KEYS: nodes, hb.
# ARGV: timeout_ms, nodes... Returns how many were forgotten.
FORGET = r"""
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local n = 0
for k = 2, #ARGV do
  local d = ARGV[k]
  local hb = redis.call('ZSCORE', KEYS[2], d)
  if hb and tonumber(hb) <= now - tonumber(ARGV[1]) then
    redis.call('ZREM', KEYS[2], d)
    n = n + 1
    local rec = redis.call('HGET', KEYS[1], d)
    if rec then
      local ok, obj = pcall(cjson.decode, rec)
      if ok and type(obj) == 'table' then
        obj['state'] = 'lost'
        redis.call('HSET', KEYS[1], d, cjson.encode(obj))
      end
    end
  end
end
return n
"""

# Duplicate index, exact copies (crawler/frontier/dupindex.py). Values are
# "<site tag><page>": a 10-character tag of the site, then the page as a URL,
# or as "=<simhash>" (its URL is in that fingerprint's record).
# KEYS: the content bucket. ARGV: content key, site tag, this page's value.
# Returns {'new'}, {'own', page} or {'other', page}; a page given as a
# reference may be this very page (the caller resolves it and tells).
EXACT = r"""
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
"""

# Duplicate index, LSH band tables (those of one shard): in each, add the
# page (its SimHash, 8 bytes) to the pages of its band key, and return those
# there just before. At most ARGV[2] pages a key: a full key still names its
# pages as candidates. KEYS: the band buckets. ARGV: page, cap, then each
# table's band key field (6 bytes), in the order of KEYS.
# Returns {added (1: the page was not there), pages already there (bytes),
# ...} for each table in turn.
BAND = r"""
local page, cap = ARGV[1], tonumber(ARGV[2])
local out = {}
for n, h in ipairs(KEYS) do
  local field = ARGV[n + 2]
  local t = redis.call('TYPE', h).ok
  local v = nil
  if t == 'hash' then v = redis.call('HGET', h, field) end
  local added = 0
  if t ~= 'hash' and t ~= 'none' then
    v = ''  -- not a table this index wrote: no evidence, left as it is
  elseif not v or #v % 8 ~= 0 or #v > 8 * cap then
    -- absent, or not whole page names within the cap: this page alone
    redis.call('HSET', h, field, page)
    v, added = '', 1
  else
    local there = false
    for i = 1, #v - 7, 8 do
      if string.sub(v, i, i + 7) == page then there = true; break end
    end
    if not there and #v < 8 * cap then
      redis.call('HSET', h, field, v .. page)
      added = 1
    end
  end
  out[#out + 1] = added
  out[#out + 1] = v
end
return out
"""

# Duplicate index: take a page out of band keys again (its own check added
# it there, and it turned out a copy of a page of its own site).
# KEYS: the band buckets. ARGV: page, then each table's band key field.
BAND_UNDO = r"""
local page = ARGV[1]
local n = 0
for k, h in ipairs(KEYS) do
  local field = ARGV[k + 1]
  local v = redis.call('HGET', h, field)
  if v then
    for i = 1, #v - 7, 8 do
      if string.sub(v, i, i + 7) == page then
        local rest = string.sub(v, 1, i - 1) .. string.sub(v, i + 8)
        if rest == '' then redis.call('HDEL', h, field) else redis.call('HSET', h, field, rest) end
        n = n + 1
        break
      end
    end
  end
end
return n
"""

# Duplicate index: the order key of a URL's first near-duplicate check.
# KEYS: the bucket (in the site's shard). ARGV: the URL's 8-byte hash, this
# check's order key. Returns the first order key ('' for a key of another
# type: no evidence).
FIRST = r"""
local h, u, o = KEYS[1], ARGV[1], ARGV[2]
local t = redis.call('TYPE', h).ok
if t ~= 'hash' and t ~= 'none' then return '' end
if redis.call('HSETNX', h, u, o) == 1 then return o end
return redis.call('HGET', h, u)
"""

# Duplicate index, the record of a page id (64 bits of a content key: one
# text): the first page anywhere with this text, and the first on each
# other site; and, for its first page, the text's shingle sample. KEYS: the
# record bucket, the sample bucket (one shard). ARGV: page id (16 hex
# digits), site tag, "<order>\t<url>", page id (8 bytes), sample. Returns
# {the record field it created ('' if none), 1 if it wrote the sample}.
# A bucket of another type is left alone (nothing written there).
RECORD = r"""
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
"""

# What an operator sees of a shard (read only). KEYS: fixed... ARGV: how
# many of the largest site queues to return, default delay ms, most sites
# to look at. Returns {stats as a flat list, sites known, sites ready now,
# sites backed off, sites looked at, then (site, queued, delay ms, backoff
# ms) of the largest queues, largest first}.
VIEW = _SHARD + r"""
local top_n, ddelay, limit = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local known, n_known = {}, 0
local ready = redis.call('ZRANGE', READY, 0, limit - 1)
for _, site in ipairs(ready) do known[site] = true; n_known = n_known + 1 end
local nexts = redis.call('HLEN', NEXT)
if nexts <= limit then
  for _, site in ipairs(redis.call('HKEYS', NEXT)) do
    if not known[site] then known[site] = true; n_known = n_known + 1 end
  end
else
  n_known = math.max(n_known, nexts)
end
local top = {}
for _, site in ipairs(ready) do
  local n = qlen(site)
  if n > 0 then
    local k = #top
    if k < top_n or n > top[k][2] then
      if k >= top_n then table.remove(top) end
      local at = #top + 1
      while at > 1 and top[at - 1][2] < n do at = at - 1 end
      table.insert(top, at, {site, n})
    end
  end
end
local out = {redis.call('HGETALL', STATS), n_known, redis.call('ZCOUNT', READY, '-inf', now),
             redis.call('HLEN', BACKOFF), #ready}
for _, t in ipairs(top) do
  out[#out + 1] = t[1]
  out[#out + 1] = t[2]
  out[#out + 1] = tonumber(redis.call('HGET', DELAY, t[1]) or ddelay)
  out[#out + 1] = tonumber(redis.call('HGET', BACKOFF, t[1]) or '0')
end
return out
"""

# An operator removes unprocessed requests of one site: all of them (no
# ARGV after the site) or those whose entry starts with one of the given
# prefixes ('{"u":<url as JSON>,': the entry of that URL). Queued and
# delayed (retry) entries go; leased ones are being fetched and stay. The
# URLs stay seen, so links found later do not bring them back.
# KEYS: fixed..., the site's queue. ARGV: site, prefixes... Returns removed.
REMOVE = _SHARD + r"""
local q, site = KEYS[11], ARGV[1]
local function wanted(entry)
  if #ARGV == 1 then return true end
  for k = 2, #ARGV do
    if string.sub(entry, 1, #ARGV[k]) == ARGV[k] then return true end
  end
  return false
end
local removed_q = 0
local entries
if ORDERED then entries = redis.call('ZRANGE', q, 0, -1) else entries = redis.call('LRANGE', q, 0, -1) end
local kept = {}
for _, e in ipairs(entries) do
  if wanted(e) then removed_q = removed_q + 1 else kept[#kept + 1] = e end
end
if ORDERED and removed_q > 0 then
  for _, e in ipairs(entries) do
    if wanted(e) then redis.call('ZREM', q, e) end
  end
  move('queued', nil, removed_q)
  if #kept == 0 then
    redis.call('ZREM', READY, site)
    redis.call('ZREM', BEST, site)
  else
    local first = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
    redis.call('ZADD', BEST, math.floor(tonumber(first[2]) / PBASE), site)
  end
elseif removed_q > 0 then
  redis.call('DEL', q)
  for i = 1, #kept, 1000 do
    redis.call('RPUSH', q, unpack(kept, i, math.min(i + 999, #kept)))
  end
  move('queued', nil, removed_q)
  if #kept == 0 then redis.call('ZREM', READY, site) end
end
local removed_d = 0
for _, v in ipairs(redis.call('ZRANGE', DELAYED, 0, -1)) do
  local s, e = split_entry(v)
  if s == site and wanted(e) then
    redis.call('ZREM', DELAYED, v)
    removed_d = removed_d + 1
  end
end
move('delayed', nil, removed_d)
if removed_q + removed_d > 0 then
  redis.call('HINCRBY', STATS, 'removed', removed_q + removed_d)
end
return removed_q + removed_d
"""

# Crawl-wide, read only: Redis's clock and the nodes watched, with their
# last heartbeat. KEYS: hb. Returns {seconds, microseconds, node, ms, ...}.
BEATS = r"""
local t = redis.call('TIME')
local out = {t[1], t[2]}
for _, v in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')) do out[#out + 1] = v end
return out
"""

SHARD_SCRIPTS = ("COMMIT", "LEASE", "RELEASE", "REAP", "TOUCH", "SEND", "BACKOFF", "MIRROR", "VIEW", "REMOVE")
ALL = (*SHARD_SCRIPTS, "HEARTBEAT", "FORGET", "BEATS", "EXACT", "BAND", "BAND_UNDO", "RECORD", "FIRST")

# Site templates (crawler/frontier/templates.py, crawler/template.py): count
# one page's block keys in its site's evidence while the site is learned,
# and return the evidence for them. KEYS: the site's ``tpl2:<site>`` hash.
# ARGV: pages counted before freezing, counts kept at most, min_count,
# share (per mille), then the page's block keys. The hash holds "#" (pages
# counted) and a count per key; when the last page is counted, every key
# that is not template is dropped. A malformed entry (another type, a count
# that is not a whole number) is no evidence: {-1}, and nothing is written.
# Returns {pages, count of each key asked (as Redis strings, or false)}.
TEMPLATE = r"""
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
"""
TEMPLATE_SCRIPTS = ("TEMPLATE",)  # loaded by the frontier with ALL
