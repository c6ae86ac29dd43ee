-- Sliding window over several limits, all or nothing: admit when, for
-- every enforced limit, previous × (window − elapsed)/window + current +
-- cost − 1 < limit, windows aligned to the epoch; only then count the
-- cost in each limit that admits it (a limit in shadow mode that would
-- deny neither denies nor counts). Atomic; the keys share a hash tag (one tenant); time is the
-- server's (TIME).
--
-- KEYS[i]     hash of limit i: s = start of the current window (µs since
--             the epoch), p = units admitted in the previous window, c =
--             in this one
-- ARGV[1]     cost
-- ARGV[2i]    limit i; ARGV[2i+1] its window in µs
-- ARGV[#ARGV] shadow flags: character i is '1' when limit i is in shadow
--             mode, '0' when enforced
--
-- Returns {allowed, prev_1, curr_1, elapsed_1, ok_1, …}: 1 if admitted,
-- then per key the counts before this request, the µs since its current
-- window began, and 1 if that limit alone admits. When admitted each key
-- lives until its next window ends. Products stay below 2^53 (exact in
-- Lua's doubles) while limit × window in µs does.
local cost = tonumber(ARGV[1])
-- TIME before writes relies on effects replication: the default since
-- Redis 5, the only mode since 7 (no redis.replicate_commands needed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local shadow = ARGV[#ARGV]
local out = {1}
local starts = {}
for i, key in ipairs(KEYS) do
  local lim = tonumber(ARGV[2 * i]) - cost + 1
  local w = tonumber(ARGV[2 * i + 1])
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
  local ok = 0
  if c < lim and p * (w - e) < (lim - c) * w then
    ok = 1
  elseif string.byte(shadow, i) ~= 49 then -- '1'
    out[1] = 0
  end
  starts[i] = start
  out[4 * i - 2] = p
  out[4 * i - 1] = c
  out[4 * i] = e
  out[4 * i + 1] = ok
end
if out[1] == 1 then
  for i, key in ipairs(KEYS) do
    if out[4 * i + 1] == 1 then
      local w = tonumber(ARGV[2 * i + 1])
      redis.call('HSET', key, 's', string.format('%d', starts[i]), 'p', out[4 * i - 2], 'c', out[4 * i - 1] + cost)
      redis.call('PEXPIRE', key, math.ceil((2 * w - out[4 * i]) / 1000))
    end
  end
end
return out
