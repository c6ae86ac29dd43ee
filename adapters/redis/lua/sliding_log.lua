-- Sliding log: a sorted set per limit of its admitted units, scored by
-- their instant (µs since the epoch), member "<µs>:<n>" (n keeps units of
-- one µs apart). Exact: a request is admitted when fewer than
-- limit − cost + 1 units were admitted in the trailing window. A unit
-- leaves the window once window has passed since it. The key's TTL is
-- one window from its newest unit.
-- Arguments per limit: L_LIMIT, L_WINDOW_US, L_TTL_MS (the window, rounded up).
local now = clock() -- every decision of this algorithm reads the clock
-- layout: generated from adapters/redis/codec.go (TestLayout)
local L_WINDOW_US = 3
local L_TTL_MS = 4
-- end of layout

-- age returns the age (µs) of the unit of rank k (1: the oldest) in
-- st's key, read once per state: decide needs it only to say when a
-- unit leaves (a denial's wait, a check's reset), never to admit.
local function age(st, k)
  st.ages = st.ages or {}
  if not st.ages[k] then
    st.ages[k] = now - tonumber(redis.call('ZRANGE', st.key, k - 1, k - 1, 'WITHSCORES')[2])
  end
  return st.ages[k]
end

local function read(i, key)
  local limit, window = arg(i, L_LIMIT), arg(i, L_WINDOW_US)
  if peek then
    -- Read only: the units still in the window, at most the newest limit.
    local count = math.min(redis.call('ZCOUNT', key, '(' .. string.format('%d', now - window), '+inf'), limit)
    local skip = 0
    if count > 0 then
      -- The units counted are the set's newest: rank past the others.
      skip = redis.call('ZCARD', key) - count
    end
    return {key = key, count = count, skip = skip}
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - window))
  local count = redis.call('ZCARD', key)
  if count > limit then
    -- The limit shrank: only the newest limit units count.
    redis.call('ZREMRANGEBYRANK', key, 0, count - limit - 1)
    count = limit
  end
  return {key = key, count = count, skip = 0}
end

local function decide(i, st, c)
  local limit, window = arg(i, L_LIMIT), arg(i, L_WINDOW_US)
  local count = st.count
  if c > 0 and count + c <= limit then
    return {1, limit - count - c, window, 0}
  end
  -- The window resets when its newest unit leaves.
  local reset = 0
  if count > 0 then
    reset = window - math.min(math.max(age(st, st.skip + count), 0), window)
  end
  if count + c <= limit then
    return {1, limit - count, reset, 0}
  end
  if c > limit then
    return {0, limit - count, reset, window}
  end
  -- The unit whose leaving makes room for this request's cost.
  local k = math.min(math.max(count + c - limit, 1), count)
  return {0, limit - count, reset, math.max(window - math.min(math.max(age(st, st.skip + k), 0), window), 1)}
end

local function spend(i, key, st, c)
  local at = string.format('%d', now)
  local n = st.count
  -- At most up to the limit: a limit spent while it denies (counting an
  -- admitted request's every limit) is full, no more.
  for _ = 1, math.min(c, arg(i, L_LIMIT) - n) do
    while redis.call('ZADD', key, 'NX', at, at .. ':' .. n) == 0 do
      n = n + 1
    end
    n = n + 1
  end
  redis.call('PEXPIRE', key, arg(i, L_TTL_MS))
end
