-- A gateway replica announces itself and reads the announcements alive.
-- KEYS[1] the announcements, <prefix>replicas: a sorted set of replica
-- ids, each scored with the Redis time (ms) at which it expires. Each
-- replica also listens on the pub/sub channel of the same name, and on a
-- channel of its own, <prefix>replicas:<id>, on the server that holds
-- the key.
-- ARGV[1] the replica's id; ARGV[2] how long its announcement lasts, ms;
-- ARGV[3] the longest any announcement may last, ms.
-- Returns {listening, id_1, expiry_1, id_2, expiry_2, …}: how many
-- connections this server holds subscribed to the channel, or 0 when
-- this replica's own listener is not among them (so the count vouches
-- only where the replica listens), then every announcement alive, this
-- one included.
--
-- Time is Redis's (TIME), never a replica's. A claim that outlasts any
-- announcement was not written by a replica, and is dropped. The key's
-- TTL is the longest announcement's: it disappears when every replica
-- has stopped.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl, longest = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '(' .. (now + longest), '+inf')
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], longest)
local subs = redis.call('PUBSUB', 'NUMSUB', KEYS[1], KEYS[1] .. ':' .. ARGV[1])
local listening = 0
if subs[4] > 0 then
  listening = subs[2]
end
local out = {tostring(listening)}
for _, v in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')) do
  out[#out + 1] = v
end
return out
