-- Sliding window: admit when previous × (window − elapsed)/window + current
-- < limit, windows aligned to the epoch. Atomic; one key; time is the
-- server's (TIME).
--
-- KEYS[1]  hash: s = start of the current window (µs since the epoch),
--          p = requests admitted in the previous window, c = in this one
-- ARGV[1]  limit (requests per window)
-- ARGV[2]  window in µs
--
-- Returns {prev, curr, elapsed, allowed}: the counts before this request,
-- the µs since the current window began, and 1 if admitted (then curr is
-- incremented and the key lives until the next window ends), else 0.
-- Products stay below 2^53 (exact in Lua's doubles) while
-- limit × window in µs does.
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
-- TIME before writes relies on effects replication: the default since
-- Redis 5, the only mode since 7 (no redis.replicate_commands needed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local start = now - math.fmod(now, w)

local h = redis.call('HMGET', key, 's', 'p', 'c')
local s, p, c = tonumber(h[1]), tonumber(h[2]) or 0, tonumber(h[3]) or 0
if s == start then
  -- the current window
elseif s == start - w then
  p, c = c, 0
elseif s ~= nil and s > start then
  start = s -- the server's clock stepped back: stay in the stored window
else
  p, c = 0, 0
end
local e = math.max(now - start, 0)

local allowed = 0
if c < limit and p * (w - e) < (limit - c) * w then
  allowed = 1
  redis.call('HSET', key, 's', string.format('%d', start), 'p', p, 'c', c + 1)
  redis.call('PEXPIRE', key, math.ceil((2 * w - e) / 1000))
end
return {p, c, e, allowed}
