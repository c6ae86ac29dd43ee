-- Sliding window: a hash per limit of its current window's start (s, µs
-- since the epoch, windows aligned to it), the units admitted in the
-- previous window (p) and in this one (c). A request is admitted when
-- p × (window − elapsed)/window (rounded down) + c + cost − 1 < limit.
-- The key lives until its next window ends (at most two windows).
-- Arguments per limit: L_LIMIT, L_WINDOW_US.
--
-- Products stay exact in Lua's doubles while limit × window in µs is
-- below 2^53; beyond, the estimate may be off by a unit.
local now = clock() -- every decision of this algorithm reads the clock
-- layout: generated from adapters/redis/codec.go (TestLayout)
local L_WINDOW_US = 3
-- end of layout

local function read(i, key)
  local w = arg(i, L_WINDOW_US)
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
  return {start = start, p = p, c = c, e = math.min(math.max(now - start, 0), w - 1)}
end

local function decide(i, st, c)
  local limit, w = arg(i, L_LIMIT), arg(i, L_WINDOW_US)
  local p, curr, e = st.p, st.c, st.e
  local lim = limit - c + 1
  local weighted = idiv(p * (w - e), w)
  local ok = curr < lim and weighted < lim - curr
  if ok then
    curr = curr + c
  end
  local r = {0, math.max(limit - curr - weighted, 0), 0, 0}
  if curr > 0 then
    r[3] = 2 * w - e
  elseif p > 0 then
    r[3] = w - e
  end
  if ok then
    r[1] = 1
  elseif lim <= 0 then
    r[4] = 2 * w - e
  elseif curr >= lim then
    -- Not in this window. In the next, curr becomes the previous count:
    -- admitted u into it once curr × (w − u) < lim × w.
    r[4] = w - e + idiv((curr - lim) * w, curr) + 1
  else
    -- Later in this window (p > 0): admitted at elapsed x once
    -- p × (w − x) < (lim − curr) × w.
    r[4] = idiv((p - (lim - curr)) * w, p) + 1 - e
  end
  return r
end

local function spend(i, key, st, c)
  local w = arg(i, L_WINDOW_US)
  -- At most the limit: a limit spent while it denies (counting an
  -- admitted request's every limit) is full, no more.
  redis.call('HSET', key, 's', string.format('%d', st.start), 'p', st.p, 'c', math.min(st.c + c, math.max(arg(i, L_LIMIT), st.c)))
  redis.call('PEXPIRE', key, math.ceil((2 * w - st.e) / 1000))
  st.mark = st.start -- a Reserve limit's
end

-- A Reserve limit's mark is its window's start (µs), which its spend
-- records: a settlement lands in that window's count while it is the
-- current or the previous one. rsv_until returns when the window of
-- mark stops weighing (µs).
local rsv_until, rsv_adjust
if rsv_key then
  rsv_until = function(i, mark)
    return mark + 2 * arg(i, L_WINDOW_US)
  end
  if settling then
    rsv_adjust = function(i, key, mark, delta)
      local st = read(i, key)
      local w = arg(i, L_WINDOW_US)
      if mark == 0 then
        if delta <= 0 then
          return
        end
        st.c = st.c + delta
      elseif mark == st.start then
        st.c = math.max(st.c + delta, 0)
      elseif mark == st.start - w then
        st.p = math.max(st.p + delta, 0)
      else
        return
      end
      redis.call('HSET', key, 's', string.format('%d', st.start), 'p', st.p, 'c', st.c)
      redis.call('PEXPIRE', key, math.ceil((2 * w - st.e) / 1000))
    end
  end
end

-- One enforced limit (most requests): read as run reads, and an
-- admission decided and spent in place, without run's tables (a denial
-- takes decide's path); the same verdict.
if n == 1 and not peek and not count_denied and cost > 0 and flags == '0' and kinds == 'r' then
  local key, limit, w = KEYS[1], arg(1, L_LIMIT), arg(1, L_WINDOW_US)
  local st = read(1, key)
  local lim = limit - cost + 1
  local weighted = idiv(st.p * (w - st.e), w)
  if st.c < lim and weighted < lim - st.c then
    local curr = st.c + cost
    redis.call('HSET', key, 's', string.format('%d', st.start), 'p', st.p, 'c', curr)
    redis.call('PEXPIRE', key, math.ceil((2 * w - st.e) / 1000))
    return {1, 1, math.max(limit - curr - weighted, 0), 2 * w - st.e, 0, 0}
  end
  local r = decide(1, st, cost)
  return {0, 0, r[2], r[3], r[4], 0}
end
