-- A gateway replica announces itself and counts the replicas alive.
-- KEYS[1] the announcements, <prefix>replicas: a sorted set of replica
-- ids, each scored with the Redis time (ms) at which it expires.
-- ARGV[1] the replica's id; ARGV[2] how long its announcement lasts, ms.
-- Returns {the number of replicas alive, this one included}.
--
-- Time is Redis's (TIME), never a replica's. The key's TTL is one
-- announcement's: it disappears when every replica has stopped.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl)
return {redis.call('ZCARD', KEYS[1])}
