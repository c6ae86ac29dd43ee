-- Stores a runtime API key's record, unless its tenant has as many live
-- keys as it may, and logs the change.
-- KEYS: meta, all, log, tenants, the tenant's set of key ids
-- ARGV: id, record, tenant, max, now (ms), ttl (ms), log length, epoch
-- Returns {-2} for an id taken, {-1} past the bound, else {seq, epoch}.
-- A record is id|tenant|sha256 hex|prefix|created ms|expires ms (0: never)|removed (0/1).
local meta, all, log, tenants, set = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
if redis.call('HEXISTS', all, ARGV[1]) == 1 then
  return {-2}
end
if prune(all, set, tonumber(ARGV[5])) >= tonumber(ARGV[4]) then
  return {-1}
end
redis.call('HSET', all, ARGV[1], ARGV[2])
redis.call('SADD', set, ARGV[1])
redis.call('SADD', tenants, ARGV[3])
redis.call('HSETNX', meta, 'epoch', ARGV[8])
local seq = redis.call('HINCRBY', meta, 'seq', 1)
redis.call('ZADD', log, seq, seq .. '|' .. ARGV[2])
redis.call('ZREMRANGEBYRANK', log, 0, -(tonumber(ARGV[7]) + 1))
for i = 1, 5 do
  redis.call('PEXPIRE', KEYS[i], ARGV[6])
end
return {seq, redis.call('HGET', meta, 'epoch')}
