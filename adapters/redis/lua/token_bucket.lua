-- Token bucket as GCRA: a string per limit holding its TAT (theoretical
-- arrival time: when the bucket is full again) as "<µs>.<ns>" since the
-- epoch (the ns of the µs in three digits), with a TTL until then (at
-- most one window). A request takes cost tokens when TAT − now + cost ×
-- interval ≤ limit × interval. The arithmetic is in nanoseconds relative
-- to now, as the memory store's (domain.TokenBucket): the emission
-- interval is window / limit rounded down to the nanosecond, so both
-- stores admit the same rate (an interval in whole µs would round 1.67 µs
-- to 1 µs, 1.67× the rule). A TAT in whole µs, the older form, is read
-- too, and the older script reads this form as a number of µs, so
-- replicas of both versions share a bucket during a rolling upgrade.
-- Arguments per limit: L_LIMIT (the bucket's size), L_INTERVAL_NS (the
-- emission interval, domain.TokenInterval), L_WINDOW_US.
local now = clock() -- every decision of this algorithm reads the clock; whole µs
-- layout: generated from adapters/redis/codec.go (TestLayout)
local L_INTERVAL_NS = 3
local L_WINDOW_US = 4
-- end of layout

-- us is ns in µs, rounded up: a wait is never reported short.
local function us(ns)
  return math.ceil(ns / 1000)
end

local function read(i, key)
  local v = redis.call('GET', key)
  local ahead = 0
  if v then
    local tat, frac = string.match(v, '^(%d+)%.?(%d*)$')
    if tat then
      ahead = (tonumber(tat) - now) * 1000 + (tonumber(frac) or 0)
    end
  end
  return {ahead = math.max(ahead, 0)}
end

-- store sets key's TAT to now + ahead ns, expiring then.
local function store(key, ahead)
  local whole = idiv(ahead, 1000)
  redis.call('SET', key, string.format('%d.%03d', now + whole, ahead - whole * 1000), 'PX', math.max(math.ceil(ahead / 1000000), 1))
end

local function decide(i, st, c)
  local limit, interval, window = arg(i, L_LIMIT), arg(i, L_INTERVAL_NS), arg(i, L_WINDOW_US)
  local capacity, ahead = limit * interval, st.ahead
  local remaining = 0
  if ahead < capacity then
    remaining = idiv(capacity - ahead, interval)
  end
  if c > limit then
    return {0, remaining, us(ahead), window}
  end
  local next = ahead + c * interval
  if next <= capacity then
    return {1, idiv(capacity - next, interval), us(next), 0}
  end
  return {0, remaining, us(ahead), us(next - capacity)}
end

local function spend(i, key, st, c, r)
  -- At most an empty bucket: a limit spent while it denies (counting an
  -- admitted request's every limit) owes no more than its capacity.
  local ahead = math.min(st.ahead + c * arg(i, L_INTERVAL_NS), arg(i, L_LIMIT) * arg(i, L_INTERVAL_NS))
  store(key, ahead)
  st.mark = now + us(ahead)
end

-- A Reserve limit's mark is the TAT its admission left (µs), which its
-- spend records: a settlement moves TAT by its tokens' intervals until
-- then (never before now, never more than two capacities past it: an
-- empty bucket and a window's debt), and nothing after (the tokens are
-- back). rsv_until returns the end of the window-long span that holds
-- the mark (µs), its reservations' field.
local rsv_until, rsv_adjust
if rsv_key then
  rsv_until = function(i, mark)
    local w = arg(i, L_WINDOW_US)
    return (idiv(mark, w) + 1) * w
  end
  if settling then
    rsv_adjust = function(i, key, mark, delta)
      if mark ~= 0 and delta < 0 and now >= mark then
        return -- the admission's tokens refilled: nothing left to give back
      end
      if mark ~= 0 and delta > 0 and now >= mark + arg(i, L_WINDOW_US) then
        return -- a window after they refilled: the admission's time is over
      end
      if mark == 0 then
        delta = math.max(delta, 0)
      end
      local limit, interval = arg(i, L_LIMIT), arg(i, L_INTERVAL_NS)
      local st = read(i, key)
      local d = math.min(math.max(delta, -2 * limit), 2 * limit)
      local ahead = math.min(math.max(st.ahead + d * interval, 0), 2 * limit * interval)
      if ahead ~= st.ahead then
        store(key, ahead)
      end
    end
  end
end

-- One enforced limit (most requests): an admission decided and spent
-- in place, without run's tables (a denial takes decide's path); the
-- same verdict.
if n == 1 and not peek and not count_denied and cost > 0 and flags == '0' and kinds == 'r' then
  local key, limit, interval = KEYS[1], arg(1, L_LIMIT), arg(1, L_INTERVAL_NS)
  local st = read(1, key)
  local capacity, next = limit * interval, st.ahead + cost * interval
  if cost <= limit and next <= capacity then
    store(key, next)
    return {1, 1, idiv(capacity - next, interval), us(next), 0, 0}
  end
  local r = decide(1, st, cost)
  return {0, 0, r[2], r[3], r[4], 0}
end
