-- Token bucket as GCRA over several limits, all or nothing: admit when,
-- for every enforced limit, TAT − now + cost × interval ≤ limit ×
-- interval, TAT being the theoretical arrival time at which its bucket is
-- full; only then move the TAT of each limit that admits it cost
-- intervals on (a limit in shadow mode that would deny neither denies
-- nor takes tokens). Atomic; the keys share a hash
-- tag (one tenant); time is the server's (TIME).
--
-- KEYS[i]     string: limit i's TAT in µs since the epoch
-- ARGV[1]     cost
-- ARGV[2i]    limit i (its bucket's size); ARGV[2i+1] its emission
--             interval in µs (window / limit, at least 1)
-- ARGV[#ARGV] shadow flags: character i is '1' when limit i is in shadow
--             mode, '0' when enforced
--
-- Returns {allowed, ahead_1, ok_1, …}: 1 if admitted, then per key
-- max(TAT − now, 0) in µs before this request, and 1 if that limit alone
-- admits. When admitted each key lives until its bucket is full again.
local cost = tonumber(ARGV[1])
-- TIME before writes relies on effects replication: the default since
-- Redis 5, the only mode since 7 (no redis.replicate_commands needed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local shadow = ARGV[#ARGV]
local out = {1}
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[2 * i])
  local interval = tonumber(ARGV[2 * i + 1])
  local tat = tonumber(redis.call('GET', key)) or now
  local ahead = math.max(tat - now, 0)
  local ok = 0
  if cost <= limit and ahead + cost * interval <= limit * interval then
    ok = 1
  elseif string.byte(shadow, i) ~= 49 then -- '1'
    out[1] = 0
  end
  out[2 * i] = ahead
  out[2 * i + 1] = ok
end
if out[1] == 1 then
  for i, key in ipairs(KEYS) do
    if out[2 * i + 1] == 1 then
      local next = out[2 * i] + cost * tonumber(ARGV[2 * i + 1])
      redis.call('SET', key, string.format('%d', now + next), 'PX', math.ceil(next / 1000))
    end
  end
end
return out
