-- Returns the store's position and the changes after a position, and
-- renews the TTL of the store's keys: meta, all, log and tenants each
-- time, and the sets of a few tenants (a cursor over tenants walks them
-- all in turn), whose expired keys it removes.
-- KEYS: meta, all, log, tenants
-- ARGV: since (seq), max changes, ttl (ms), tenant sets to renew, what a tenant's set's key starts with, now (ms)
-- Returns {epoch ('' for an empty store), seq, change...}; a change is seq|record.
local meta, all, log, tenants = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local epoch = redis.call('HGET', meta, 'epoch')
if not epoch then
  return {'', 0}
end
local seq = tonumber(redis.call('HGET', meta, 'seq') or '0')
for i = 1, 4 do
  redis.call('PEXPIRE', KEYS[i], ARGV[3])
end
local scan = redis.call('SSCAN', tenants, redis.call('HGET', meta, 'rc') or '0', 'COUNT', ARGV[4])
redis.call('HSET', meta, 'rc', scan[1])
local now = tonumber(ARGV[6])
for _, t in ipairs(scan[2]) do
  local set = ARGV[5] .. t
  if prune(all, set, now) == 0 then
    redis.call('SREM', tenants, t)
  else
    redis.call('PEXPIRE', set, ARGV[3])
  end
end
local out = {epoch, seq}
local since = tonumber(ARGV[1])
if since < seq then
  for _, c in ipairs(redis.call('ZRANGEBYSCORE', log, since + 1, '+inf', 'LIMIT', 0, ARGV[2])) do
    out[#out + 1] = c
  end
end
return out
