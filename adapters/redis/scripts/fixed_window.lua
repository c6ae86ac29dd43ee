-- Fixed window over several limits, all or nothing: admit when every
-- enforced key's count plus the cost is within its limit, and only then
-- spend the cost from each key that admits it (a key in shadow mode that
-- would deny neither denies nor spends). Atomic; the keys share a hash
-- tag (one tenant).
--
-- KEYS[i]     string counter of limit i; its TTL is the window's clock
-- ARGV[1]     cost
-- ARGV[2i]    limit i; ARGV[2i+1] its window in milliseconds
-- ARGV[#ARGV] shadow flags: character i is '1' when limit i is in shadow
--             mode, '0' when enforced
--
-- Returns {allowed, count_1, pttl_1, …}: 1 if admitted, then per key the
-- count before this request and the milliseconds left in its window
-- (-2: no window running). A key found without a TTL (written by
-- something else) is given one, so no key ever counts forever.
local cost = tonumber(ARGV[1])
local shadow = ARGV[#ARGV]
local out = {1}
local ok = {}
for i, key in ipairs(KEYS) do
  local count = tonumber(redis.call('GET', key) or '0')
  local left = redis.call('PTTL', key)
  if left == -1 then
    redis.call('PEXPIRE', key, ARGV[2 * i + 1])
    left = tonumber(ARGV[2 * i + 1])
  elseif left == -2 then
    count = 0
  end
  ok[i] = count + cost <= tonumber(ARGV[2 * i])
  if not ok[i] and string.byte(shadow, i) ~= 49 then -- '1'
    out[1] = 0
  end
  out[2 * i] = count
  out[2 * i + 1] = left
end
if out[1] == 1 then
  for i, key in ipairs(KEYS) do
    if ok[i] then
      redis.call('INCRBY', key, cost)
      if out[2 * i + 1] == -2 then
        redis.call('PEXPIRE', key, ARGV[2 * i + 1])
      end
    end
  end
end
return out
