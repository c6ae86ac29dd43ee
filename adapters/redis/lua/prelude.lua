-- The prelude every limiter script starts with (the Go side prepends it).
-- A script decides one request against every limit of it, all or
-- nothing, atomically; the keys share a hash tag (one tenant, so one
-- Redis Cluster slot). Time is the server's (TIME): never a replica's.
-- Writes after TIME rely on effects replication, the only mode since
-- Redis 7 (and the default since 5).
--
-- KEYS[i]        limit i's key, i = 1..n (n = #ARGV[4])
-- KEYS[n+2j-1], KEYS[n+2j]  the j-th calendar limit's previous and next
--                period's keys (KEYS[i] is its current one)
-- ARGV[1]        the request's cost (units)
-- ARGV[2]        shadow flags: character i is '1' when limit i is in
--                shadow mode (it never denies), '0' when enforced
-- ARGV[3]        '1': count denied requests too (fixed window only);
--                'p': peek: decide every limit at cost 0 and write
--                nothing (no key, no TTL): the admin API's usage read
-- ARGV[4]        kinds: character i is 'r' when limit i follows the
--                algorithm's rule (the body), 'c' when it is a calendar
--                quota (a fixed window over a calendar period, here)
-- ARGV[5]        stride: how many arguments each limit has
-- ARGV[5 + (i-1)*stride + k]  limit i's k-th argument: the body's for
--                'r'; for 'c' the limit, then the previous, current and
--                next periods' starts and the next one's end, in ms
--
-- A body defines read(i, key), decide(i, st, cost) and spend(i, key, st,
-- cost, r) and returns run(read, decide, spend). decide returns {ok (1 or
-- 0), remaining, reset_us, retry_us} for limit i at cost without
-- writing; spend writes. run returns {admitted, then per limit ok,
-- remaining, reset_us, retry_us, window_us (0: the rule's)}: the verdict,
-- decided here once.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local shadow = ARGV[2]
local count_denied = ARGV[3] == '1'
local peek = ARGV[3] == 'p'
if peek then
  cost = 0
end
local kinds = ARGV[4]
local n = #kinds
local stride = tonumber(ARGV[5])

-- arg returns limit i's k-th own argument as a number (the first
-- parameter, the body's stride of old, is ignored).
local function arg(_, i, k)
  return tonumber(ARGV[5 + (i - 1) * stride + k])
end

-- idiv is floor(a / b) for integers a >= 0, b > 0, exact in doubles.
local function idiv(a, b)
  return (a - math.fmod(a, b)) / b
end

-- A calendar quota: a fixed window over the period that holds Redis's
-- time. The replica computed the period around its own clock and the
-- periods on either side; Redis's clock picks one, so every replica
-- counts in the same period at a boundary. The key carries the period's
-- start and expires a minute after its end: a finished period is never
-- read again. (PEXPIREAT … NX: Redis 7, Valkey 7.2.)
local cal_read, cal_decide, cal_spend
do
  local now_ms = math.floor(now / 1000)
  local calendars = 0
  cal_read = function(i)
    calendars = calendars + 1
    local b0, b1, b2, b3 = arg(nil, i, 2), arg(nil, i, 3), arg(nil, i, 4), arg(nil, i, 5)
    local key, s, e
    if now_ms >= b0 and now_ms < b1 then
      key, s, e = KEYS[n + 2 * calendars - 1], b0, b1
    elseif now_ms >= b1 and now_ms < b2 then
      key, s, e = KEYS[i], b1, b2
    elseif now_ms >= b2 and now_ms < b3 then
      key, s, e = KEYS[n + 2 * calendars], b2, b3
    else
      return redis.error_reply('tollgate: the replica clock is more than a period off Redis time')
    end
    return {key = key, count = tonumber(redis.call('GET', key) or '0'), s = s, e = e}
  end
  cal_decide = function(i, st, c)
    local limit = arg(nil, i, 1)
    local window = (st.e - st.s) * 1000
    if c == 0 and st.count == 0 then
      return {1, limit, 0, 0, window}
    end
    local left = st.e * 1000 - now
    if st.count + c <= limit then
      return {1, limit - st.count - c, left, 0, window}
    end
    return {0, math.max(limit - st.count, 0), left, left, window}
  end
  cal_spend = function(i, st, c)
    if peek then
      return
    end
    redis.call('INCRBY', st.key, c)
    -- NX: the period's first spend sets the TTL; a key found without one
    -- (written by something else) gets it too, so none counts forever.
    redis.call('PEXPIREAT', st.key, st.e + 60000, 'NX')
  end
end

local function run(read, decide, spend)
  local st, res = {}, {}
  local admitted = 1
  for i = 1, n do
    if string.byte(kinds, i) == 99 then -- 'c'
      st[i] = cal_read(i)
      if st[i].err then
        return st[i]
      end
      res[i] = cal_decide(i, st[i], cost)
    else
      st[i] = read(i, KEYS[i])
      res[i] = decide(i, st[i], cost)
    end
    if res[i][1] == 0 and string.byte(shadow, i) ~= 49 then -- '1'
      admitted = 0
    end
  end
  local out = {admitted}
  for i = 1, n do
    local key = KEYS[i]
    local cal = string.byte(kinds, i) == 99
    local d, sp = decide, spend
    if cal then
      d = cal_decide
      sp = function(j, _, s, c) cal_spend(j, s, c) end
    end
    local r = res[i]
    if peek then
      -- cost is 0: nothing to spend, nothing written
    elseif count_denied then
      sp(i, key, st[i], cost, r)
      if r[1] == 0 then
        r[2] = 0 -- counted: nothing is left
      end
    elseif admitted == 1 then
      if r[1] == 1 then
        sp(i, key, st[i], cost, r)
      end
    elseif r[1] == 1 then
      r = d(i, st[i], 0) -- denied elsewhere: what it has, unspent
    end
    local o = 5 * i - 3
    out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = r[1], r[2], r[3], r[4], r[5] or 0
  end
  return out
end
