-- Token bucket as GCRA: admit when TAT − now + interval ≤ limit × interval,
-- TAT being the theoretical arrival time at which the bucket is full.
-- Atomic; one key; time is the server's (TIME).
--
-- KEYS[1]  string: TAT in µs since the epoch
-- ARGV[1]  limit (the bucket's size)
-- ARGV[2]  emission interval in µs (window / limit, at least 1)
--
-- Returns {ahead, allowed}: max(TAT − now, 0) in µs before this request,
-- and 1 if admitted (then TAT moves one interval on, and the key lives
-- until the bucket is full again), else 0.
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
-- TIME before writes relies on effects replication: the default since
-- Redis 5, the only mode since 7 (no redis.replicate_commands needed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local tat = tonumber(redis.call('GET', key)) or now
local ahead = math.max(tat - now, 0)
local allowed = 0
if ahead + interval <= limit * interval then
  allowed = 1
  local next = ahead + interval
  redis.call('SET', key, string.format('%d', now + next), 'PX', math.ceil(next / 1000))
end
return {ahead, allowed}
