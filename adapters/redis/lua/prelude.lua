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
--                quota (a fixed window over a calendar period, here), 'n'
--                when it is a concurrency limit (slots held as leases,
--                here)
-- ARGV[5]        stride: how many arguments each limit has
-- ARGV[5 + (i-1)*stride + k]  limit i's k-th argument: the body's for
--                'r'; for 'c' the limit, then the previous, current and
--                next periods' starts and the next one's end, in ms; for
--                'n' the limit, the lease in ms, the holder (a string:
--                "<replica>:<request>"), then the index in ARGV of the
--                first holder to remove first and how many there are
--                (after every limit's arguments: slots this replica
--                released on the key, their removal not yet confirmed)
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
-- read again.
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
    if st.count == 0 then
      redis.call('PEXPIREAT', st.key, st.e + 60000)
    end
  end
end

-- A concurrency limit: a sorted set of the slots held, each member a
-- holder ("<replica>:<request>") scored with its lease's expiry on
-- Redis's clock (ms). Expired leases do not count (a vanished replica's
-- slots come back by themselves), and the request that takes a slot drops
-- them (reading writes nothing but the removal of the replica's own
-- released slots that its releaser has not yet removed: a denial, or a
-- peek, writes no slot); a request
-- is admitted while fewer than the limit are live, and takes one slot
-- whatever its cost. Its
-- holder renews the lease while the request runs and removes it when it
-- ends (lua/lease_renew.lua, lua/lease_release.lua). The key lives two
-- leases past its last write (never less than it had: a replica with a
-- longer lease keeps its slots). Times as domain.DecideSlots: t=0 while
-- a slot is free, 1 s when none is; a denial waits 1 s.
local slot_read, slot_decide, slot_spend
do
  local now_ms = math.floor(now / 1000)
  local second = 1000000
  slot_read = function(i)
    local key = KEYS[i]
    local first, count = arg(nil, i, 4), arg(nil, i, 5)
    if count > 0 and not peek then
      redis.call('ZREM', key, unpack(ARGV, first, first + count - 1))
    end
    -- Most keys are empty (every request ended) or hold live slots
    -- only: ZCARD alone, or with ZCOUNT; the expired ones are dropped
    -- when a slot is taken.
    local all = redis.call('ZCARD', key)
    local held = all
    if all > 0 then
      held = redis.call('ZCOUNT', key, '(' .. now_ms, '+inf')
    end
    return {key = key, held = held, expired = all - held}
  end
  slot_decide = function(i, st, c)
    local free = math.max(arg(nil, i, 1) - st.held, 0)
    local ok, retry, reset = 1, 0, 0
    if c > 0 then
      if free > 0 then
        free = free - 1
      else
        ok, retry = 0, second
      end
    end
    if free == 0 then
      reset = second
    end
    return {ok, free, reset, retry}
  end
  slot_spend = function(i, _, st)
    local lease = arg(nil, i, 2)
    if st.expired > 0 then
      redis.call('ZREMRANGEBYSCORE', st.key, '-inf', now_ms)
    end
    redis.call('ZADD', st.key, now_ms + lease, ARGV[5 + (i - 1) * stride + 3])
    -- With no live slot but this one, nothing else needs the key: two
    -- leases. Else never less than it has (a replica with a longer
    -- lease keeps its slots).
    if st.held == 0 or redis.call('PTTL', st.key) < 2 * lease then
      redis.call('PEXPIRE', st.key, 2 * lease)
    end
  end
end

local function run(read, decide, spend)
  local st, res = {}, {}
  local admitted = 1
  for i = 1, n do
    local kind = string.byte(kinds, i)
    if kind == 99 then -- 'c'
      st[i] = cal_read(i)
      if st[i].err then
        return st[i]
      end
      res[i] = cal_decide(i, st[i], cost)
    elseif kind == 110 then -- 'n'
      st[i] = slot_read(i)
      res[i] = slot_decide(i, st[i], cost)
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
    local kind = string.byte(kinds, i)
    local d, sp = decide, spend
    if kind == 99 then
      d = cal_decide
      sp = function(j, _, s, c) cal_spend(j, s, c) end
    elseif kind == 110 then
      d, sp = slot_decide, slot_spend
    end
    local r = res[i]
    if peek then
      -- cost is 0: nothing to spend, nothing written
    elseif count_denied and kind ~= 110 then -- a denied request takes no slot
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
