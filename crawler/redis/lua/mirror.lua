-- A site's pages counted towards it being a mirror (fsite '': a page of it was
-- fingerprinted; else: one of its pages copies a page of fsite). KEYS: fixed...,
-- the site's mirror hash. ARGV: site, fsite, mirror_min_pages, mirror_share,
-- and the copy's kind (exact, near). Returns the site it mirrors, or ''.
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
