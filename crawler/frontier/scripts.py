"""The frontier's Lua scripts: every frontier operation is one of these, so a
crash (of a worker or of Redis) between two commands leaves nothing half done.

All keys of one crawl start with the prefix ``{<crawl>}:`` (one hash tag, one
Redis Cluster slot); ``KEYS[1]`` is always the crawl's ``stats`` key so that a
cluster client routes the call to that slot. Times are the server's
(``TIME``), so workers with skewed clocks still agree on per-site delays.

Keys (``P`` = prefix):

- ``P ready``          zset site -> earliest time (ms) the site may be served
- ``P q:<site>``       list of queued entries (JSON requests), FIFO
- ``P next``           hash site -> next allowed fetch time (ms)
- ``P active``         hash site -> requests being downloaded now (cluster-wide)
- ``P delay``          hash site -> delay between fetches (ms), from robots.txt
- ``P backoff``        hash site -> extra delay after 429/503/timeouts (ms)
- ``P sent``           hash site -> the last send time reserved (ms), for the gap at the wire
- ``P delayed``        zset "<site>\\n<entry>" -> due time (retries with backoff)
- ``P leases:<node>``  hash lease id -> "<site>\\n<entry>"
- ``P seen:<bucket>``  set of 64-bit fingerprints (intset encoding: 8 bytes each)
- ``P sitecount``      hash site -> URLs admitted (per-site cap)
- ``P stats``          hash of counters (queued, leased, delayed, done, errors ...)
- ``P nodes``          hash node -> JSON record; ``P hb`` zset node -> heartbeat (ms)
- ``P node:<node>``    hash of a node's counters (pages, errors)
- ``P errors``         list of the latest final errors (JSON), capped
- ``P content``        hash content key -> "<site>\t<url>" of the first page with that text;
                        "<key>\t<site>" -> the first on that site, when another site was first
- ``P sh:<i>:<block>`` sets of SimHashes by 16-bit block; ``P shurl`` hash SimHash ->
                        "<site>\t<url>" (and "<simhash>\t<site>" -> url, as for content)
- ``P mirror:<site>``  hash: "pages" fingerprinted, "copies\t<other site>" copies of it
- ``P mirrors``        hash site -> the site it mirrors
"""

from __future__ import annotations

# Shared Lua helpers, prepended to every script.
_PRELUDE = r"""
local P = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local FAR = 9007199254740  -- "not ready": a site at its concurrency limit

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

-- Make a site with queued entries servable again at max(now, its next time).
local function wake(site, conc)
  if redis.call('LLEN', P .. 'q:' .. site) == 0 then
    redis.call('ZREM', P .. 'ready', site)
    return
  end
  local act = tonumber(redis.call('HGET', P .. 'active', site) or '0')
  if act >= conc then
    redis.call('ZADD', P .. 'ready', FAR, site)
  else
    local nxt = tonumber(redis.call('HGET', P .. 'next', site) or '0')
    redis.call('ZADD', P .. 'ready', math.max(now, nxt), site)
  end
end

local function release_active(site)
  local act = redis.call('HINCRBY', P .. 'active', site, -1)
  if act <= 0 then redis.call('HDEL', P .. 'active', site) end
end

-- Dedup and enqueue links: groups of (bucket, member, site, entry, head) from
-- index i. An empty bucket means "do not dedup" (dont_filter); head "1" puts
-- the request first in its site queue (raised priority: redirects).
-- Returns added, dup, capped.
local function enqueue(i, n, cap, conc)
  local added, dup, capped = 0, 0, 0
  for k = 0, n - 1 do
    local j = i + k * 5
    local b, m, site, entry, head = ARGV[j], ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4]
    local new = true
    if b ~= '' then new = redis.call('SADD', P .. 'seen:' .. b, m) == 1 end
    if not new then
      dup = dup + 1
    else
      local ok = true
      if cap > 0 and b ~= '' then
        if redis.call('HINCRBY', P .. 'sitecount', site, 1) > cap then ok = false end
      end
      if ok then
        if head == '1' then
          redis.call('LPUSH', P .. 'q:' .. site, entry)
        else
          redis.call('RPUSH', P .. 'q:' .. site, entry)
        end
        if not redis.call('ZSCORE', P .. 'ready', site) then wake(site, conc) end
        added = added + 1
      else
        capped = capped + 1
      end
    end
  end
  if added > 0 then redis.call('HINCRBY', P .. 'stats', 'queued', added) end
  if dup > 0 then redis.call('HINCRBY', P .. 'stats', 'duplicates', dup) end
  if capped > 0 then redis.call('HINCRBY', P .. 'stats', 'capped', capped) end
  redis.call('HINCRBY', P .. 'stats', 'enqueued', added)
  return added, dup, capped
end
"""

# ARGV: prefix, cap, conc, n, groups...
ENQUEUE = _PRELUDE + r"""
local cap, conc, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local added, dup, capped = enqueue(5, n, cap, conc)
return {added, dup, capped}
"""

# ARGV: prefix, node, max_n, default_delay_ms, conc, margin_ms, then the ids of
# this node's leases whose download is over (their site slots are freed).
# Returns {wait_ms, id1, site1, entry1, gap1_ms, id2, ...}; wait_ms: how long until the
# next site is ready (-1: no site will be ready by time alone).
LEASE = _PRELUDE + r"""
local node, max_n = ARGV[2], tonumber(ARGV[3])
local default_delay, conc, margin = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local leases = P .. 'leases:' .. node
for k = 7, #ARGV do
  local v = redis.call('HGET', leases, ARGV[k])
  if v and holds_slot(v) then
    redis.call('HSET', leases, ARGV[k], '~' .. v)
    local site = split_entry(v)
    release_active(site)
    wake(site, conc)
  end
end
-- Retries whose backoff has passed go to the tail of their site queue.
local due = redis.call('ZRANGEBYSCORE', P .. 'delayed', '-inf', now, 'LIMIT', 0, 200)
for _, v in ipairs(due) do
  redis.call('ZREM', P .. 'delayed', v)
  local site, entry = split_entry(v)
  redis.call('RPUSH', P .. 'q:' .. site, entry)
  redis.call('HINCRBY', P .. 'stats', 'delayed', -1)
  redis.call('HINCRBY', P .. 'stats', 'queued', 1)
  if not redis.call('ZSCORE', P .. 'ready', site) then wake(site, conc) end
end
local out = {0}
local taken = 0
local sites = redis.call('ZRANGEBYSCORE', P .. 'ready', '-inf', now, 'LIMIT', 0, max_n)
for _, site in ipairs(sites) do
  -- One request per site and call (Larbin: spread consecutive leases over
  -- sites); more only from a site with no delay and free concurrency.
  local more = true
  while more and taken < max_n do
    more = false
    local entry = redis.call('LPOP', P .. 'q:' .. site)
    if not entry then
      redis.call('ZREM', P .. 'ready', site)
    else
      local id = tostring(redis.call('HINCRBY', P .. 'stats', 'lease_seq', 1))
      redis.call('HSET', P .. 'leases:' .. node, id, site .. '\n' .. entry)
      local act = redis.call('HINCRBY', P .. 'active', site, 1)
      local d = tonumber(redis.call('HGET', P .. 'delay', site) or default_delay)
      local bo = tonumber(redis.call('HGET', P .. 'backoff', site) or '0')
      local gap = d + bo
      if gap > 0 then gap = gap + margin end  -- the margin covers jitter around a delay
      redis.call('HSET', P .. 'next', site, now + gap)
      wake(site, conc)
      redis.call('HINCRBY', P .. 'stats', 'queued', -1)
      redis.call('HINCRBY', P .. 'stats', 'leased', 1)
      out[#out + 1] = id
      out[#out + 1] = site
      out[#out + 1] = entry
      out[#out + 1] = gap
      taken = taken + 1
      more = gap == 0 and act < conc
    end
  end
  if taken >= max_n then break end
end
local first = redis.call('ZRANGE', P .. 'ready', 0, 0, 'WITHSCORES')
local wait = -1
if first[2] and tonumber(first[2]) < FAR then wait = math.max(tonumber(first[2]) - now, 0) end
local d1 = redis.call('ZRANGE', P .. 'delayed', 0, 0, 'WITHSCORES')
if d1[2] then
  local dw = math.max(tonumber(d1[2]) - now, 0)
  if wait < 0 or dw < wait then wait = dw end
end
out[1] = wait
return out
"""

# One call a page: enqueue its links, then settle leases.
# ARGV: prefix, node, cap, conc, n_links, link groups..., n_acks, ack groups
# (lease id, state C|E, reason)..., n_requeues, requeue groups (lease id, due
# delay ms, site, entry)...
# Returns {added, dup, capped, acked, stale}.
COMMIT = _PRELUDE + r"""
local node, cap, conc = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local added, dup, capped = enqueue(6, n, cap, conc)
local i = 6 + n * 5
local na = tonumber(ARGV[i])
i = i + 1
local acked, stale = 0, 0
local leases = P .. 'leases:' .. node
for k = 0, na - 1 do
  local id, state, reason = ARGV[i + k*3], ARGV[i + k*3 + 1], ARGV[i + k*3 + 2]
  local v = redis.call('HGET', leases, id)
  if v then
    redis.call('HDEL', leases, id)
    local site, entry = split_entry(v)
    if holds_slot(v) then release_active(site) end
    wake(site, conc)
    redis.call('HINCRBY', P .. 'stats', 'leased', -1)
    if state == 'E' then
      redis.call('HINCRBY', P .. 'stats', 'errors', 1)
      redis.call('HINCRBY', P .. 'node:' .. node, 'errors', 1)
      redis.call('LPUSH', P .. 'errors', cjson.encode({site = site, reason = reason, at = now, entry = string.sub(entry, 1, 2048)}))
      redis.call('LTRIM', P .. 'errors', 0, 999)
    else
      redis.call('HINCRBY', P .. 'stats', 'done', 1)
      redis.call('HINCRBY', P .. 'node:' .. node, 'pages', 1)
      -- A success halves any backoff the site had: it recovers step by step.
      local bo = tonumber(redis.call('HGET', P .. 'backoff', site) or '0')
      if bo > 0 then
        bo = math.floor(bo / 2)
        if bo < 50 then redis.call('HDEL', P .. 'backoff', site) else redis.call('HSET', P .. 'backoff', site, bo) end
      end
    end
    acked = acked + 1
  else
    stale = stale + 1
  end
end
i = i + na * 3
local nr = tonumber(ARGV[i])
i = i + 1
for k = 0, nr - 1 do
  local id, delay, site, entry = ARGV[i + k*4], tonumber(ARGV[i + k*4 + 1]), ARGV[i + k*4 + 2], ARGV[i + k*4 + 3]
  local v = redis.call('HGET', leases, id)
  if v then
    redis.call('HDEL', leases, id)
    local old_site = split_entry(v)
    if holds_slot(v) then release_active(old_site) end
    wake(old_site, conc)
    redis.call('HINCRBY', P .. 'stats', 'leased', -1)
    redis.call('ZADD', P .. 'delayed', now + delay, site .. '\n' .. entry)
    redis.call('HINCRBY', P .. 'stats', 'delayed', 1)
    redis.call('HINCRBY', P .. 'stats', 'retried', 1)
  else
    stale = stale + 1
  end
end
return {added, dup, capped, acked, stale}
"""

# Give leases back to the head of their queues (a worker closing with
# requests it had not started). ARGV: prefix, node, conc, ids...
RELEASE = _PRELUDE + r"""
local node, conc = ARGV[2], tonumber(ARGV[3])
local leases = P .. 'leases:' .. node
local released = 0
for k = #ARGV, 4, -1 do
  local v = redis.call('HGET', leases, ARGV[k])
  if v then
    redis.call('HDEL', leases, ARGV[k])
    local site, entry = split_entry(v)
    redis.call('LPUSH', P .. 'q:' .. site, entry)
    if holds_slot(v) then release_active(site) end
    wake(site, conc)
    redis.call('HINCRBY', P .. 'stats', 'leased', -1)
    redis.call('HINCRBY', P .. 'stats', 'queued', 1)
    released = released + 1
  end
end
return released
"""

# Heartbeat of one node, and the reaping of nodes whose heartbeat stopped:
# their leases go back to the head of their site queues.
# ARGV: prefix, node, record (JSON), timeout_ms, conc.
# Returns {reaped leases, reaped nodes, this node's lease ids}.
HEARTBEAT = _PRELUDE + r"""
local node, record, timeout, conc = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
if node ~= '' then
  redis.call('HSET', P .. 'nodes', node, record)
  redis.call('ZADD', P .. 'hb', now, node)
end
local dead = redis.call('ZRANGEBYSCORE', P .. 'hb', '-inf', now - timeout)
local reaped = 0
for _, d in ipairs(dead) do
  local all = redis.call('HGETALL', P .. 'leases:' .. d)
  for k = 1, #all, 2 do
    local site, entry = split_entry(all[k + 1])
    redis.call('LPUSH', P .. 'q:' .. site, entry)
    if holds_slot(all[k + 1]) then release_active(site) end
    wake(site, conc)
    redis.call('HINCRBY', P .. 'stats', 'leased', -1)
    redis.call('HINCRBY', P .. 'stats', 'queued', 1)
    reaped = reaped + 1
  end
  redis.call('DEL', P .. 'leases:' .. d)
  redis.call('ZREM', P .. 'hb', d)
  local rec = redis.call('HGET', P .. 'nodes', d)
  if rec then
    local ok, obj = pcall(cjson.decode, rec)
    if ok then obj['state'] = 'lost'; redis.call('HSET', P .. 'nodes', d, cjson.encode(obj)) end
  end
end
if reaped > 0 then redis.call('HINCRBY', P .. 'stats', 'reaped', reaped) end
local mine = {}
if node ~= '' then mine = redis.call('HKEYS', P .. 'leases:' .. node) end
return {reaped, #dead, mine}
"""

# A request went to the site outside the frontier (robots.txt): the next
# request may not start before now + delay_ms. ARGV: prefix, site, delay_ms.
TOUCH = _PRELUDE + r"""
local site, delay = ARGV[2], tonumber(ARGV[3])
local nxt = math.max(now + delay, tonumber(redis.call('HGET', P .. 'next', site) or '0'))
redis.call('HSET', P .. 'next', site, nxt)
local score = redis.call('ZSCORE', P .. 'ready', site)
if score and tonumber(score) < nxt then redis.call('ZADD', P .. 'ready', nxt, site) end
return nxt
"""

# A request to a site is about to go on the wire: reserve its send time, at
# least the site's gap after the last one reserved by any worker. The lease
# already spaced requests, but a busy worker may send one late and another
# worker's next one on time; this makes the gaps the server sees hold.
# ARGV: prefix, site, default_delay_ms, margin_ms. Returns ms to wait first.
SEND = _PRELUDE + r"""
local site, default_delay, margin = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local d = tonumber(redis.call('HGET', P .. 'delay', site) or default_delay)
local gap = d + tonumber(redis.call('HGET', P .. 'backoff', site) or '0')
if gap <= 0 then return 0 end
gap = gap + margin
local at = math.max(now, tonumber(redis.call('HGET', P .. 'sent', site) or '0') + gap)
redis.call('HSET', P .. 'sent', site, at)
return at - now
"""

# Back a site off after 429, 503 or a timeout: double its backoff (at least
# min_ms, at most max_ms) and push its next fetch time out.
# ARGV: prefix, site, min_ms, max_ms. Returns the new backoff (ms).
BACKOFF = _PRELUDE + r"""
local site, min_ms, max_ms = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local bo = tonumber(redis.call('HGET', P .. 'backoff', site) or '0')
bo = math.min(math.max(bo * 2, min_ms), max_ms)
redis.call('HSET', P .. 'backoff', site, bo)
local nxt = math.max(now + bo, tonumber(redis.call('HGET', P .. 'next', site) or '0'))
redis.call('HSET', P .. 'next', site, nxt)
local score = redis.call('ZSCORE', P .. 'ready', site)
if score and tonumber(score) < nxt then redis.call('ZADD', P .. 'ready', nxt, site) end
redis.call('HINCRBY', P .. 'stats', 'backoffs', 1)
return bo
"""

# How much work is left anywhere: queued + delayed + leased.
PENDING = _PRELUDE + r"""
local v = redis.call('HMGET', P .. 'stats', 'queued', 'delayed', 'leased')
return (tonumber(v[1]) or 0) + (tonumber(v[2]) or 0) + (tonumber(v[3]) or 0)
"""

# Exact and near duplicates across the cluster, checked and recorded in one
# step (Manku, Jain and Das Sarma 2007): a 64-bit SimHash is split into four
# 16-bit blocks; any fingerprint within Hamming distance 3 shares at least
# one block exactly, so the candidates are the members of four sets.
# ARGV: prefix, url, content hash ('' = skip), fingerprint (16 hex digits,
# '' = skip), max distance, max candidates per block.
# Returns {'new'} or {'exact'|'near', first url, distance}.
NEAR_DUPLICATE = _PRELUDE + r"""
local url, site, ch, fp = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local k, maxc = tonumber(ARGV[6]), tonumber(ARGV[7])
local mirror_min, mirror_share = tonumber(ARGV[8]), tonumber(ARGV[9])
local mkey = P .. 'mirror:' .. site
redis.call('HINCRBY', mkey, 'pages', 1)

-- Index values are "<site>\t<url>": the first page with that content
-- anywhere. A value without a tab (an index written before sites were kept)
-- counts as this site's.
local function split(v)
  local i = string.find(v, '\t', 1, true)
  if not i then return site, v end
  return string.sub(v, 1, i - 1), string.sub(v, i + 1)
end

-- A copy of a page of another site: count it towards the site being a
-- mirror of that site, and say whether it is one.
local function verdict(kind, first, fsite, d)
  redis.call('HINCRBY', P .. 'stats', kind .. '_duplicates', 1)
  if fsite == site then return {kind, first, d, 1, ''} end
  redis.call('HINCRBY', P .. 'stats', 'cross_site_copies', 1)
  local copies = redis.call('HINCRBY', mkey, 'copies\t' .. fsite, 1)
  local mirror = redis.call('HGET', P .. 'mirrors', site)
  if not mirror then
    local pages = tonumber(redis.call('HGET', mkey, 'pages'))
    if pages >= mirror_min and copies >= mirror_share * pages then
      redis.call('HSET', P .. 'mirrors', site, fsite)
      mirror = fsite
    end
  end
  return {kind, first, d, 0, mirror or ''}
end

-- A copy on this site wins over a copy on another: a site's own links must
-- not depend on what other sites published first.
local exact_other = nil
if ch ~= '' then
  local v = redis.call('HGET', P .. 'content', ch)
  if not v then
    redis.call('HSET', P .. 'content', ch, site .. '\t' .. url)
  else
    local fsite, first = split(v)
    if first ~= url then
      if fsite == site then return verdict('exact', first, site, 0) end
      local own = redis.call('HGET', P .. 'content', ch .. '\t' .. site)
      if own and own ~= url then return verdict('exact', own, site, 0) end
      if not own then redis.call('HSET', P .. 'content', ch .. '\t' .. site, url) end
      exact_other = {first, fsite}
    end
  end
end
if fp ~= '' then
  local function popcount(x)
    local c = 0
    while x ~= 0 do
      x = bit.band(x, x - 1)
      c = c + 1
    end
    return c
  end
  local near_other = nil
  local hi, lo = tonumber(string.sub(fp, 1, 8), 16), tonumber(string.sub(fp, 9, 16), 16)
  for i = 0, 3 do
    local key = P .. 'sh:' .. i .. ':' .. string.sub(fp, i * 4 + 1, i * 4 + 4)
    local members
    if redis.call('SCARD', key) > maxc then
      members = redis.call('SRANDMEMBER', key, maxc)
    else
      members = redis.call('SMEMBERS', key)
    end
    for _, m in ipairs(members) do
      local d = popcount(bit.bxor(hi, tonumber(string.sub(m, 1, 8), 16)))
              + popcount(bit.bxor(lo, tonumber(string.sub(m, 9, 16), 16)))
      if d <= k then
        local v = redis.call('HGET', P .. 'shurl', m)
        if v then
          local fsite, first = split(v)
          if first ~= url then
            if fsite == site then return verdict('near', first, site, d) end
            local own = redis.call('HGET', P .. 'shurl', m .. '\t' .. site)
            if own and own ~= url then return verdict('near', own, site, d) end
            if not near_other then near_other = {first, fsite, d} end
          end
        end
      end
    end
  end
  -- Not a copy of a page of this site: index it, so that its own copies on
  -- this site are found (globally too when its fingerprint is new).
  for i = 0, 3 do
    redis.call('SADD', P .. 'sh:' .. i .. ':' .. string.sub(fp, i * 4 + 1, i * 4 + 4), fp)
  end
  if redis.call('HSETNX', P .. 'shurl', fp, site .. '\t' .. url) == 0 then
    local fsite = split(redis.call('HGET', P .. 'shurl', fp))
    if fsite ~= site then redis.call('HSETNX', P .. 'shurl', fp .. '\t' .. site, url) end
  end
  if exact_other == nil and near_other ~= nil then
    return verdict('near', near_other[1], near_other[2], near_other[3])
  end
end
if exact_other ~= nil then return verdict('exact', exact_other[1], exact_other[2], 0) end
return {'new'}
"""
