-- KEYS: fixed..., lease hash of the node, then (seen, queue) per link.
-- ARGV: node, cap, conc, default_delay_ms, margin_ms, n_links, link groups
-- (member, site, entry, head)..., n_acks, ack groups (id, C|E, reason)...,
-- n_requeues, requeue groups (id, delay ms, entry)..., then the ids of the
-- node's leases whose download is over.
-- Returns {added, dup, capped, acked, stale}.
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
