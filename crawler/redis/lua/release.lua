-- Give leases back to the head of their queues (a worker closing with
-- requests it had not started). KEYS: fixed..., lease hash. ARGV: node, conc, ids...
local lkey, node, conc = KEYS[11], ARGV[1], tonumber(ARGV[2])
local released = 0
for k = #ARGV, 3, -1 do
  if settle(lkey, node, ARGV[k], 'H', conc) then released = released + 1 end
end
return released
