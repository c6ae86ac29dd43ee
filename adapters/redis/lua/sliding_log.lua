-- Sliding log: a sorted set per limit of its admitted units, scored by
-- their instant (µs since the epoch), member "<µs>:<n>" (n keeps units of
-- one µs apart). Exact: a request is admitted when fewer than
-- limit − cost + 1 units were admitted in the trailing window. A unit
-- leaves the window once window has passed since it. The key's TTL is
-- one window from its newest unit.
-- ARGV per limit: limit, window in µs, TTL in ms (the window, rounded up).
local now = clock() -- every decision of this algorithm reads the clock
local S = 3

local function read(i, key, c)
  local limit, window = arg(S, i, 1), arg(S, i, 2)
  local count
  if peek then
    -- Read only: the units still in the window, at most the newest limit.
    count = math.min(redis.call('ZCOUNT', key, '(' .. string.format('%d', now - window), '+inf'), limit)
    local st = {count = count, newest = 0, free = 0}
    if count > 0 then
      st.newest = now - tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    end
    return st
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - window))
  count = redis.call('ZCARD', key)
  if count > limit then
    -- The limit shrank: only the newest limit units count.
    redis.call('ZREMRANGEBYRANK', key, 0, count - limit - 1)
    count = limit
  end
  local st = {count = count, newest = 0, free = 0}
  if count > 0 then
    st.newest = now - tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    -- The unit whose leaving makes room for this request's cost.
    local k = math.min(math.max(count + c - limit, 1), count)
    st.free = now - tonumber(redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2])
  end
  return st
end

local function decide(i, st, c)
  local limit, window = arg(S, i, 1), arg(S, i, 2)
  local count = st.count
  local reset = 0
  if count > 0 then
    reset = window - math.min(math.max(st.newest, 0), window)
  end
  if count + c <= limit then
    if c > 0 then
      reset = window
    end
    return {1, limit - count - c, reset, 0}
  end
  if c > limit then
    return {0, limit - count, reset, window}
  end
  return {0, limit - count, reset, math.max(window - math.min(math.max(st.free, 0), window), 1)}
end

local function spend(i, key, st, c)
  local at = string.format('%d', now)
  local n = st.count
  -- At most up to the limit: a limit spent while it denies (counting an
  -- admitted request's every limit) is full, no more.
  for _ = 1, math.min(c, arg(S, i, 1) - n) do
    while redis.call('ZADD', key, 'NX', at, at .. ':' .. n) == 0 do
      n = n + 1
    end
    n = n + 1
  end
  redis.call('PEXPIRE', key, arg(S, i, 3))
end

return run(read, decide, spend)
