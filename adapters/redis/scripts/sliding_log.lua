-- Sliding log: admit when fewer than limit requests were admitted in the
-- trailing window. Atomic; one key; time is the server's (TIME).
--
-- KEYS[1]  sorted set of admitted requests: score = instant in µs since
--          the epoch, member = "<µs>:<n>" (n makes members unique, so two
--          requests in one µs never collapse into one)
-- ARGV[1]  limit (requests per window)
-- ARGV[2]  window in µs
-- ARGV[3]  TTL in ms: the window, rounded up
--
-- Returns {count, oldest, newest}: the admitted requests in the window
-- before this one (at most limit), and the ages in µs of the oldest and
-- newest of them (0 when count is 0). Admitted when count < limit; then
-- this request is logged and the key's TTL renewed (it is the newest).
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
-- TIME before writes relies on effects replication: the default since
-- Redis 5, the only mode since 7 (no redis.replicate_commands needed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nowstr = string.format('%d', now)

-- An instant leaves the window once window has passed since it. Keep at
-- most limit (the newest), should the limit have shrunk.
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - window))
redis.call('ZREMRANGEBYRANK', key, 0, -(limit + 1))
local count = redis.call('ZCARD', key)
local oldest, newest = 0, 0
if count > 0 then
  oldest = now - tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
  newest = now - tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
end
if count < limit then
  local n = count
  while redis.call('ZADD', key, 'NX', nowstr, nowstr .. ':' .. n) == 0 do
    n = n + 1
  end
  redis.call('PEXPIRE', key, ARGV[3])
end
return {count, oldest, newest}
