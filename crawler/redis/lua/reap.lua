-- The leases of stopped nodes go back to the head of their site queues; and
-- this node's own lease ids. KEYS: fixed..., this node's lease hash, then
-- the lease hashes of the stopped nodes. ARGV: node, conc, then the stopped
-- nodes' names (as in KEYS). Returns {reaped leases, this node's lease ids}.
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
