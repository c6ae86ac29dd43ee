-- The prelude every limiter script starts with (the Go side prepends it).
-- A script decides one request against every limit of it, all or
-- nothing, atomically; the keys share a hash tag (one tenant, or one
-- Envoy domain, so one Redis Cluster slot). Time is the server's (TIME):
-- never a replica's. Writes after TIME rely on effects replication, the
-- only mode since Redis 7 (and the default since 5).
--
-- KEYS[i]        limit i's key, i = 1..n (n = #ARGV[4]); limits that
--                share a key share its state, decided one after the other
--                (each after the costs of the ones before it)
-- KEYS[n+2j-1], KEYS[n+2j]  the j-th calendar limit's previous and next
--                period's keys (KEYS[i] is its current one)
-- ARGV[1]        the request's cost (units), or each limit's cost in
--                order, comma-separated ("2,0,1"; 0 decides without
--                spending: a check)
-- ARGV[2]        limit flags: character i is '0' for an enforced limit,
--                '1' in shadow mode (never denies), '2' in quota mode
--                (denies only when every quota limit denies), '3' both
-- ARGV[3]        counting: '1' counts denied requests too (fixed window
--                only), '2' makes an admitted request spend from every
--                limit, also one that would deny, '3' both, '0' neither;
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
-- A body defines read(i, key, c), decide(i, st, c) and spend(i, key, st,
-- c, r) and returns run(read, decide, spend). read reads limit i's state
-- for a decision at cost c; decide returns {ok (1 or 0), remaining,
-- reset_us, retry_us} for limit i at cost c without writing; spend
-- writes. run returns {admitted, then per limit ok, remaining, reset_us,
-- retry_us, window_us (0: the rule's)}: the verdict, decided here once.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local peek = ARGV[3] == 'p'
local cost = tonumber(ARGV[1])
local costs
if cost == nil then
  costs = {}
  for c in string.gmatch(ARGV[1], '%d+') do
    costs[#costs + 1] = tonumber(c)
  end
end
local flags = ARGV[2]
local counting = tonumber(ARGV[3]) or 0
local count_denied = counting % 2 == 1
local count_over = counting >= 2
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

-- cost_of returns what limit i spends: 0 when peeking.
local function cost_of(i)
  if peek then
    return 0
  elseif costs then
    return costs[i]
  end
  return cost
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
  local calendar = {} -- limit index → its rank among the calendar limits
  local calendars = 0
  cal_read = function(i)
    if not calendar[i] then
      calendars = calendars + 1
      calendar[i] = calendars
    end
    local j = calendar[i]
    local b0, b1, b2, b3 = arg(nil, i, 2), arg(nil, i, 3), arg(nil, i, 4), arg(nil, i, 5)
    local key, s, e
    if now_ms >= b0 and now_ms < b1 then
      key, s, e = KEYS[n + 2 * j - 1], b0, b1
    elseif now_ms >= b1 and now_ms < b2 then
      key, s, e = KEYS[i], b1, b2
    elseif now_ms >= b2 and now_ms < b3 then
      key, s, e = KEYS[n + 2 * j], b2, b3
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
  local taken = {} -- key: the cost the limits so far take from it
  local admitted, quotas, quota_denied = 1, 0, 0
  for i = 1, n do
    local key = KEYS[i]
    local c = (taken[key] or 0) + cost_of(i)
    taken[key] = c
    if string.byte(kinds, i) == 99 then -- 'c'
      st[i] = cal_read(i)
      if st[i].err then
        return st[i]
      end
      res[i] = cal_decide(i, st[i], c)
    else
      st[i] = read(i, key, c)
      res[i] = decide(i, st[i], c)
    end
    local f = string.byte(flags, i) - 48
    if f >= 2 then
      quotas = quotas + 1
    end
    if res[i][1] == 0 then
      if f == 0 then
        admitted = 0
      elseif f == 2 then
        quota_denied = quota_denied + 1
      end
    end
  end
  if quotas > 0 and quota_denied == quotas then
    admitted = 0
  end
  local out = {admitted}
  local spent = {}
  for i = 1, n do
    local key = KEYS[i]
    local cal = string.byte(kinds, i) == 99
    local rd, d, sp = read, decide, spend
    if cal then
      rd, d = cal_read, cal_decide
      sp = function(j, _, s, c) cal_spend(j, s, c) end
    end
    local r = res[i]
    local c = cost_of(i)
    if peek then
      -- cost is 0: nothing to spend, nothing written
    elseif count_denied or (admitted == 1 and (r[1] == 1 or count_over)) then
      if c > 0 then
        local s = st[i]
        if spent[key] then
          s = rd(i, key, c) -- the state an earlier limit's spend left
        end
        sp(i, key, s, c, r)
        spent[key] = true
      end
      if r[1] == 0 then
        r[2] = 0 -- counted: nothing is left
      end
    elseif admitted == 0 and r[1] == 1 then
      r = d(i, st[i], 0) -- denied elsewhere: what it has, unspent
    end
    local o = 5 * i - 3
    out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = r[1], r[2], r[3], r[4], r[5] or 0
  end
  return out
end
