-- Token bucket as GCRA: a string per limit holding its TAT (theoretical
-- arrival time: when the bucket is full again), µs since the epoch, with
-- a TTL until then (at most one window). A request takes cost tokens
-- when TAT − now + cost × interval ≤ limit × interval.
-- Arguments per limit: L_LIMIT (the bucket's size), L_INTERVAL_US (the
-- emission interval: window / limit, at least 1), L_WINDOW_US.
local now = clock() -- every decision of this algorithm reads the clock
-- layout: generated from adapters/redis/codec.go (TestLayout)
local L_INTERVAL_US = 3
local L_WINDOW_US = 4
-- end of layout

local function read(i, key)
  local tat = tonumber(redis.call('GET', key) or '0')
  return {ahead = math.max(tat - now, 0)}
end

local function decide(i, st, c)
  local limit, interval, window = arg(i, L_LIMIT), arg(i, L_INTERVAL_US), arg(i, L_WINDOW_US)
  local capacity, ahead = limit * interval, st.ahead
  local remaining = 0
  if ahead < capacity then
    remaining = idiv(capacity - ahead, interval)
  end
  if c > limit then
    return {0, remaining, ahead, window}
  end
  local next = ahead + c * interval
  if next <= capacity then
    return {1, idiv(capacity - next, interval), next, 0}
  end
  return {0, remaining, ahead, next - capacity}
end

local function spend(i, key, st, c, r)
  -- At most an empty bucket: a limit spent while it denies (counting an
  -- admitted request's every limit) owes no more than its capacity.
  local next = math.min(st.ahead + c * arg(i, L_INTERVAL_US), arg(i, L_LIMIT) * arg(i, L_INTERVAL_US))
  redis.call('SET', key, string.format('%d', now + next), 'PX', math.ceil(next / 1000))
end

-- One enforced limit (most requests): an admission decided and spent
-- in place, without run's tables (a denial takes decide's path); the
-- same verdict.
if n == 1 and not peek and not count_denied and cost > 0 and flags == '0' and kinds == 'r' then
  local key, limit, interval = KEYS[1], arg(1, L_LIMIT), arg(1, L_INTERVAL_US)
  local st = read(1, key)
  local capacity, next = limit * interval, st.ahead + cost * interval
  if cost <= limit and next <= capacity then
    redis.call('SET', key, string.format('%d', now + next), 'PX', math.ceil(next / 1000))
    return {1, 1, idiv(capacity - next, interval), next, 0, 0}
  end
  local r = decide(1, st, cost)
  return {0, 0, r[2], r[3], r[4], 0}
end
