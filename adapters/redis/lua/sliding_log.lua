-- Sliding log: a sorted set per limit of its admitted requests, one
-- member per request whatever its cost, scored by its instant (µs since
-- the epoch), member "#<cum>:<w>": w units admitted by it, cum the units
-- admitted through it since the set started (zero-padded, so members of
-- one instant sort in the order they were added). The units that count
-- are the newest's cum less the oldest's cum − w, so a decision reads a
-- few members whatever its cost, and finds the member whose leaving makes
-- room by a binary search over ranks. Exact: a request is admitted when
-- fewer than limit − cost + 1 units were admitted in the trailing window.
-- A request leaves the window once window has passed since it. The key's
-- TTL is one window from its newest request. A set of the older form (a
-- member per unit) is started afresh.
-- Arguments per limit: L_LIMIT, L_WINDOW_US, L_TTL_MS (the window,
-- rounded up).
local now = clock() -- every decision of this algorithm reads the clock
-- layout: generated from adapters/redis/codec.go (TestLayout)
local L_WINDOW_US = 3
local L_TTL_MS = 4
-- end of layout

-- entry returns a member's cum and w (nil for a member of the older form).
local function entry(m)
  local c, w = string.match(m or '', '^#(%d+):(%d+)$')
  return tonumber(c), tonumber(w)
end

local function member(cum, w)
  return string.format('#%016d:%d', cum, w)
end

-- search returns the lowest rank in [lo, hi] whose cum is at least
-- target (hi's is).
local function search(key, lo, hi, target)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if entry(redis.call('ZRANGE', key, mid, mid)[1]) >= target then
      hi = mid
    else
      lo = mid + 1
    end
  end
  return lo
end

local empty = {count = 0, base = 0, top = 0}

-- last returns the rank of st's newest member (read once, when a search
-- needs it).
local function last(st)
  if not st.last then
    st.last = redis.call('ZCARD', st.key) - 1
  end
  return st.last
end

local function read(i, key)
  local limit, window = arg(i, L_LIMIT), arg(i, L_WINDOW_US)
  local cutoff = string.format('%d', now - window)
  local st = {key = key, first = 0}
  if peek then
    -- Read only: the members still in the window.
    local total = redis.call('ZCARD', key)
    local live = redis.call('ZCOUNT', key, '(' .. cutoff, '+inf')
    if live == 0 then
      return empty
    end
    st.first, st.last = total - live, total - 1
  else
    redis.call('ZREMRANGEBYSCORE', key, '-inf', cutoff)
  end
  local lo = redis.call('ZRANGE', key, st.first, st.first)[1]
  if not lo then
    return empty
  end
  local c0, w0 = entry(lo)
  local hi = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local top = entry(hi[1])
  if not c0 or not top then
    if not peek then
      redis.call('DEL', key)
    end
    return empty
  end
  st.base, st.top, st.newest = c0 - w0, top, tonumber(hi[2])
  if top - st.base > limit then
    -- The limit shrank: only the newest limit units count.
    st.base = top - limit
    if not peek then
      local r = search(key, 0, last(st), st.base + 1)
      if r > 0 then
        redis.call('ZREMRANGEBYRANK', key, 0, r - 1)
        st.last = st.last - r
      end
      -- The oldest kept counts only its part above base: rewritten,
      -- added before the old member goes (the set, and its TTL, stay).
      local m = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      local c, w = entry(m[1])
      if w ~= c - st.base then
        redis.call('ZADD', key, m[2], member(c, c - st.base))
        redis.call('ZREM', key, m[1])
      end
    end
  end
  st.count = top - st.base
  return st
end

local function decide(i, st, c)
  local limit, window = arg(i, L_LIMIT), arg(i, L_WINDOW_US)
  local count = st.count
  if c > 0 and count + c <= limit then
    return {1, limit - count - c, window, 0}
  end
  -- The window resets when its newest request leaves.
  local reset = 0
  if count > 0 then
    reset = window - math.min(math.max(now - st.newest, 0), window)
  end
  if count + c <= limit then
    return {1, limit - count, reset, 0}
  end
  if c > limit then
    return {0, limit - count, reset, window}
  end
  -- The request whose leaving makes room for this one's cost.
  local r = search(st.key, st.first, last(st), st.base + count + c - limit)
  local at = tonumber(redis.call('ZRANGE', st.key, r, r, 'WITHSCORES')[2])
  return {0, limit - count, reset, math.max(window - math.min(math.max(now - at, 0), window), 1)}
end

local function spend(i, key, st, c)
  -- At most up to the limit: a limit spent while it denies (counting an
  -- admitted request's every limit) is full, no more.
  local w = math.min(c, arg(i, L_LIMIT) - st.count)
  st.mark = -1
  if w > 0 then
    -- Never before the newest: ranks stay in the order of cum. A
    -- Reserve limit's entry is a µs after a newest at now or later, so
    -- that it is the first at its instant, which marks it.
    local at = math.max(now, st.newest or now)
    if rsv_key and rsv_key[i] then
      at = math.max(now, (st.newest or now - 1) + 1)
    end
    st.mark = at
    redis.call('ZADD', key, string.format('%d', at), member(st.top + w, w))
  end
  redis.call('PEXPIRE', key, arg(i, L_TTL_MS))
end

-- A Reserve limit's mark is its entry's instant (µs; the first member
-- at that score), which its spend records (-1: it logged nothing): a
-- settlement moves its units, and every later member's cum with them
-- (one ZREM and ZADD each: the units that count stay the sum of the
-- members), while the entry is in the window. rsv_until returns the end
-- of the window-long span after the one that holds the mark (µs), its
-- reservations' field.
local rsv_until, rsv_adjust
if rsv_key then
  rsv_until = function(i, mark)
    local w = arg(i, L_WINDOW_US)
    return (idiv(mark, w) + 2) * w
  end
  if settling then
    rsv_adjust = function(i, key, mark, delta)
      if mark == 0 then
        if delta > 0 then
          spend(i, key, read(i, key), delta)
        end
        return
      end
      if mark <= now - arg(i, L_WINDOW_US) then
        return -- the entry has left the window
      end
      local fm = string.format('%d', mark)
      local m = redis.call('ZRANGEBYSCORE', key, fm, fm, 'LIMIT', 0, 1)[1]
      local c0, w0 = entry(m)
      if not c0 then
        return
      end
      local d = math.max(w0 + delta, 0) - w0
      if d == 0 then
        return
      end
      local ms = redis.call('ZRANGE', key, redis.call('ZRANK', key, m), -1, 'WITHSCORES')
      -- Renamed newest first when the sums grow, oldest first when they
      -- shrink: a member's new name is then never one that a member not
      -- yet renamed still has (ZADD would update that one, and its
      -- ZREM after drop it).
      local from, to, step = 1, #ms - 1, 2
      if d > 0 then
        from, to, step = #ms - 1, 1, -2
      end
      for j = from, to, step do
        local c, w = entry(ms[j])
        if j == 1 then
          w = w0 + d
        end
        redis.call('ZREM', key, ms[j])
        if w > 0 then
          redis.call('ZADD', key, ms[j + 1], member(c + d, w))
        end
      end
    end
  end
end
