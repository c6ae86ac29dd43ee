-- Fixed window: a string counter per limit whose TTL is the window's
-- clock, set by the window's first spend (later spends leave it alone).
-- ARGV per limit: limit, window in ms.
--
-- A key found without a TTL (written by something else) is given one, so
-- no key ever counts forever. A key outlives its PTTL by up to a
-- millisecond (Redis expires it once its clock in ms is past the expiry),
-- so the time left is PTTL + 1 ms: a client that waits that long finds
-- the window over, never a millisecond early.
local S = 2

local function read(i, key)
  local count = tonumber(redis.call('GET', key) or '0')
  local pttl = redis.call('PTTL', key)
  if pttl == -1 then
    pttl = arg(S, i, 2)
    if not peek then
      redis.call('PEXPIRE', key, pttl)
    end
  end
  if pttl < 0 then
    return {count = 0, left = -1}
  end
  return {count = count, left = (pttl + 1) * 1000}
end

local function decide(i, st, c)
  local limit = arg(S, i, 1)
  local count, left = st.count, st.left
  if left < 0 then
    if c == 0 then
      return {1, limit, 0, 0}
    end
    count, left = 0, arg(S, i, 2) * 1000
  end
  if count + c <= limit then
    return {1, limit - count - c, left, 0}
  end
  return {0, math.max(limit - count, 0), left, left}
end

local function spend(i, key, st, c)
  redis.call('INCRBY', key, c)
  if st.left < 0 then
    redis.call('PEXPIRE', key, arg(S, i, 2))
  end
end

return run(read, decide, spend)
