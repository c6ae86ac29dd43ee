-- Returns the records of a tenant's keys (live or not: the caller
-- decides), and renews the TTL of its set.
-- KEYS: all, the tenant's set of key ids
-- ARGV: ttl (ms)
local ids = redis.call('SMEMBERS', KEYS[2])
if #ids == 0 then
  return {}
end
redis.call('PEXPIRE', KEYS[2], ARGV[1])
local recs = redis.call('HMGET', KEYS[1], unpack(ids))
local out = {}
for _, r in ipairs(recs) do
  if r then
    out[#out + 1] = r
  end
end
return out
