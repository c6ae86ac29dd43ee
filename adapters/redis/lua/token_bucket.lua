-- Token bucket as GCRA: a string per limit holding its TAT (theoretical
-- arrival time: when the bucket is full again), µs since the epoch, with
-- a TTL until then (at most one window). A request takes cost tokens
-- when TAT − now + cost × interval ≤ limit × interval.
-- ARGV per limit: limit (the bucket's size), emission interval in µs
-- (window / limit, at least 1), window in µs.
local now = clock() -- every decision of this algorithm reads the clock
local S = 3

local function read(i, key)
  local tat = tonumber(redis.call('GET', key) or '0')
  return {ahead = math.max(tat - now, 0)}
end

local function decide(i, st, c)
  local limit, interval, window = arg(S, i, 1), arg(S, i, 2), arg(S, i, 3)
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
  local next = math.min(st.ahead + c * arg(S, i, 2), arg(S, i, 1) * arg(S, i, 2))
  redis.call('SET', key, string.format('%d', now + next), 'PX', math.ceil(next / 1000))
end

-- One enforced limit (most requests): an admission decided and spent
-- in place, without run's tables (a denial takes decide's path); the
-- same verdict.
if n == 1 and not peek and not costs and not count_denied and cost > 0 and flags == '0' and kinds == 'r' then
  local key, limit, interval = KEYS[1], arg(S, 1, 1), arg(S, 1, 2)
  local st = read(1, key)
  local capacity, next = limit * interval, st.ahead + cost * interval
  if cost <= limit and next <= capacity then
    redis.call('SET', key, string.format('%d', now + next), 'PX', math.ceil(next / 1000))
    return {1, 1, idiv(capacity - next, interval), next, 0, 0}
  end
  local r = decide(1, st, cost)
  return {0, 0, r[2], r[3], r[4], 0}
end
