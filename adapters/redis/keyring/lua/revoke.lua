-- Makes a live key of a tenant expire at a time (removes it when that
-- time is not after now), and logs the change.
-- KEYS: meta, all, log, tenants, the tenant's set of key ids
-- ARGV: id, tenant, at (ms), now (ms), ttl (ms), log length, epoch
-- Returns {-1} for a key the tenant does not have live, else
-- {seq, epoch, record as it stands}.
local meta, all, log, tenants, set = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local rec = redis.call('HGET', all, ARGV[1])
if not rec then
  return {-1}
end
local f = {}
for part in string.gmatch(rec, '([^|]+)') do
  f[#f + 1] = part
end
local exp, at, now = tonumber(f[6]), tonumber(ARGV[3]), tonumber(ARGV[4])
if f[2] ~= ARGV[2] or (exp > 0 and exp <= now) then
  return {-1}
end
if exp == 0 or at < exp then
  exp = at
end
local removed = '0'
if at <= now then
  removed = '1'
  redis.call('HDEL', all, ARGV[1])
  redis.call('SREM', set, ARGV[1])
  if redis.call('SCARD', set) == 0 then
    redis.call('SREM', tenants, ARGV[2])
  end
end
local new = table.concat({f[1], f[2], f[3], f[4], f[5], tostring(exp), removed}, '|')
if removed == '0' then
  redis.call('HSET', all, ARGV[1], new)
end
redis.call('HSETNX', meta, 'epoch', ARGV[7])
local seq = redis.call('HINCRBY', meta, 'seq', 1)
redis.call('ZADD', log, seq, seq .. '|' .. new)
redis.call('ZREMRANGEBYRANK', log, 0, -(tonumber(ARGV[6]) + 1))
for i = 1, 5 do
  redis.call('PEXPIRE', KEYS[i], ARGV[5])
end
return {seq, redis.call('HGET', meta, 'epoch'), new}
