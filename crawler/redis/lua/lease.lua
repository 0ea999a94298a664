-- KEYS: fixed..., lease hash of the node. ARGV: node, max_n, default_delay_ms,
-- conc, margin_ms, shard index, share (most downloads of one site this node
-- may have at once: its share of the site's concurrency among the live
-- workers), the node's downloads in flight by site ("site\tcount" lines),
-- then the ids of this node's leases whose download is over.
-- Returns {wait_ms, id1, site1, entry1, gap1_ms, rank1, id2, ...} (rank: the
-- entry's in an ordered shard, -1 otherwise);
-- wait_ms: how long until the shard's next site is ready (-1: none will be by
-- time alone; -2: none, and a site with queued work waits for one of its
-- concurrency slots, which a download's end, here or in another worker, frees).
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
      local entry, rank = qpop(site)
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
        out[#out + 1] = rank
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
