-- A replica posts what it has seen on the board of who is being limited.
-- KEYS[1] the board's index, <prefix>{top:board}: a sorted set of replica ids,
-- each scored with the Redis time (ms) at which its post expires;
-- KEYS[2] the replica's post, <prefix>{top:board}:<id>, a string.
-- ARGV[1] the replica's id; ARGV[2] the post; ARGV[3] how long it lives,
-- ms; ARGV[4] the longest any post may live, ms.
-- Both keys share the hash tag {top:board}: one slot, on a Redis Cluster too.
-- Every write carries a TTL: the post its own, the index the longest
-- post's, so both disappear when every replica has stopped posting.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, longest = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ttl)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], longest)
return 1
