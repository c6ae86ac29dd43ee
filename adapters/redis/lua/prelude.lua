-- The prelude every limiter script starts with (the Go side prepends it).
-- A script decides one request against every limit of it, all or
-- nothing, atomically; the keys share a hash tag (one tenant, or one
-- Envoy domain, so one Redis Cluster slot). Time is the server's (TIME):
-- never a replica's. Writes after TIME rely on effects replication, the
-- only mode since Redis 7 (and the default since 5).
--
-- KEYS and ARGV are laid out as adapters/redis/codec.go declares them;
-- the scripts read ARGV only through the names of the layout blocks (here
-- and in each body), which TestLayout holds equal to the Go declaration:
--
-- KEYS[i]        limit i's key, i = 1..n (n = #kinds); limits that
--                share a key share its state, decided one after the other
--                (each after the costs of the ones before it)
-- KEYS[n+2j-1], KEYS[n+2j]  the j-th calendar limit's previous and next
--                period's keys (KEYS[i] is its current one)
-- ARGV[A_MODE]   counting: '1' counts denied requests too (fixed window
--                only), '2' makes an admitted request spend from every
--                limit, also one that would deny, '3' both, '0' neither;
--                'p': peek: decide every limit at cost 0 and write
--                nothing (no key, no TTL): the admin API's usage read
-- ARGV[A_ALIGNED] '1': fixed windows aligned to the epoch
-- ARGV[A_KINDS]  character i is 'r' when limit i follows the algorithm's
--                rule (the body), 'c' when it is a calendar quota (a fixed
--                window over a calendar period, here), 'n' when it is a
--                concurrency limit (slots held as leases, here)
-- ARGV[A_FLAGS]  character i is '0' for an enforced limit, '1' in shadow
--                mode (never denies), '2' in quota mode (denies only when
--                every quota limit denies), '3' both
-- ARGV[A_STRIDE] how many arguments each limit has
-- arg(i, L_x)    limit i's argument L_x: L_COST, the units it spends (0
--                decides without spending: a check), and L_LIMIT, then
--                the body's for 'r'; for 'c' the previous, current and
--                next periods' starts and the next one's end, in ms; for
--                'n' the lease in ms, the holder ("<replica>:<request>"),
--                then the index in ARGV of the first holder to remove
--                first and how many there are (after every limit's
--                arguments: slots this replica released on the key, their
--                removal not yet confirmed)
--
-- A body (lua/<algorithm>.lua, after this) defines read(i, key, c),
-- decide(i, st, c) and spend(i, key, st, c, r), and lua/run.lua (after
-- the body) returns run(read, decide, spend). read reads limit i's state
-- for a decision at cost c; decide returns {ok (1 or 0), remaining,
-- reset_us, retry_us} for limit i at cost c without writing; spend
-- writes. run returns {admitted, then per limit ok, remaining, reset_us,
-- retry_us, window_us (0: the rule's; a concurrency limit's: the slots
-- held)}: the verdict, decided here once.
-- The commonest shapes (one limit, a policy's fixed windows, a calendar
-- quota or a concurrency limit alone) return earlier, from guarded
-- blocks here and in the bodies: the same verdict, without run's tables,
-- and before run is even defined (a closure over this many locals costs
-- Redis about 0.5 µs a call to make, 10% of a fixed-window decision).
-- now is Redis's clock in µs, read (TIME) by clock() on first use: a
-- fixed window of the gateway's default shape needs none (its PTTL is
-- its clock).
local now
local function clock()
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return now
end
-- layout: generated from adapters/redis/codec.go (TestLayout)
local A_MODE = 1
local A_ALIGNED = 2
local A_KINDS = 3
local A_FLAGS = 4
local A_STRIDE = 5
local A_LIMITS = 5
local L_COST = 1
local L_LIMIT = 2
local L_CAL_PREV = 3
local L_CAL_CUR = 4
local L_CAL_NEXT = 5
local L_CAL_END = 6
local L_SLOT_LEASE = 3
local L_SLOT_HOLDER = 4
local L_SLOT_FIRST = 5
local L_SLOT_COUNT = 6
-- end of layout
local peek = ARGV[A_MODE] == 'p'
local counting = tonumber(ARGV[A_MODE]) or 0
local count_denied = counting % 2 == 1
local count_over = counting >= 2
local aligned = ARGV[A_ALIGNED] == '1'
local kinds = ARGV[A_KINDS]
local flags = ARGV[A_FLAGS]
local n = #kinds
local stride = tonumber(ARGV[A_STRIDE])
-- A Reserve limit (a token limit: its flag has 4 added) admits while
-- anything remains, and spends its cost or what remains (run.lua); its
-- reservations in flight are counted in a hash of its own key, its
-- companion (KEYS after the calendar limits' neighbours, one per Reserve
-- limit in order), under a field per window its admissions counted in.
-- The shapes that return early take no Reserve limit (their flags are
-- '0'). ARGV[A_MODE] 's' settles the request's limits (every one a
-- Reserve limit): L_COST is what to spend more (negative: give back), and
-- after every limit's arguments come its mark and what its admission
-- spent (0 and 0: charge now).
local settling = ARGV[A_MODE] == 's'
-- rsv_key maps a Reserve limit's index to its companion's key, only
-- for a request with a Reserve limit.
local rsv_key
if flags ~= '0' and string.find(flags, '[4-7]') then
  rsv_key = {}
  local k = n
  for i = 1, n do
    if string.byte(kinds, i) == 99 then
      k = k + 2
    end
  end
  for i = 1, n do
    if string.byte(flags, i) >= 52 then
      k = k + 1
      rsv_key[i] = KEYS[k]
    end
  end
end

-- raw returns limit i's argument k (an L_ name) as sent; arg, as a
-- number.
local function raw(i, k)
  return ARGV[A_LIMITS + (i - 1) * stride + k]
end
local function arg(i, k)
  return tonumber(raw(i, k))
end

-- least_of returns Reserve limit i's least: the smallest spend that
-- serves its request, its last argument whatever the stride.
local function least_of(i)
  return math.max(tonumber(ARGV[A_LIMITS + i * stride]), 1)
end

-- cost_of returns what the request spends from limit i: 0 in a peek.
local function cost_of(i)
  if peek then
    return 0
  end
  return arg(i, L_COST)
end
-- cost is the first limit's cost: the request's, in the one-limit shapes.
local cost = 0
if n > 0 then
  cost = cost_of(1)
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
-- read again. Every spend sets that expiry (PEXPIREAT, not NX), and so
-- does a denial that read the key (run.lua): a reload
-- that keeps a period's start but moves its end (an anchor day of 30 made
-- 31 in a 30-day month, a week made a month that starts the same day)
-- keeps the key and gives it the new end, so the count neither ends early
-- nor outlives its period.
--
-- One enforced calendar quota alone (a monthly plan): spend first, and
-- take the spend back when it denies and denials do not count (a key
-- the request created is deleted: a denial writes nothing); the same
-- verdict as run's, without its tables.
if n == 1 and kinds == 'c' and flags == '0' and not peek and cost > 0 then
  local function calendar_one()
    local now_ms = math.floor(clock() / 1000)
    local limit, s, e, key = arg(1, L_LIMIT), arg(1, L_CAL_CUR), arg(1, L_CAL_NEXT), KEYS[1]
    if now_ms < s then
      s, e, key = arg(1, L_CAL_PREV), s, KEYS[2]
    elseif now_ms >= e then
      s, e, key = e, arg(1, L_CAL_END), KEYS[3]
    end
    if now_ms < s or now_ms >= e then
      return redis.error_reply('tollgate: the replica clock is more than a period off Redis time')
    end
    local window, left = (e - s) * 1000, e * 1000 - now
    -- A refused first write (a full Redis under noeviction, a key of
    -- another type): run's path, which reads first, answers instead.
    local count = redis.pcall('INCRBY', key, cost)
    if type(count) == 'table' then
      return nil
    end
    if count <= limit or count_denied then
      redis.call('PEXPIREAT', key, e + 60000)
      if count <= limit then
        return {1, 1, limit - count, left, 0, window}
      end
      return {0, 0, 0, left, left, window}
    end
    if count == cost then
      redis.call('DEL', key) -- this request's own key
    else
      redis.call('DECRBY', key, cost)
      redis.call('PEXPIREAT', key, e + 60000) -- a key found without a TTL gets one
    end
    return {0, 0, math.max(limit - count + cost, 0), left, left, window}
  end
  local r = calendar_one()
  if r then
    return r
  end
end
-- The general path's functions: built only for a request that has such
-- a limit (a closure costs Lua time on every call of the script).
local cal_read, cal_decide, cal_spend
if kinds ~= 'r' and string.find(kinds, 'c', 1, true) then
  local now_ms = math.floor(clock() / 1000)
  local calendar = {} -- limit index → its rank among the calendar limits
  local calendars = 0
  cal_read = function(i)
    if not calendar[i] then
      calendars = calendars + 1
      calendar[i] = calendars
    end
    local j = calendar[i]
    local b0, b1, b2, b3 = arg(i, L_CAL_PREV), arg(i, L_CAL_CUR), arg(i, L_CAL_NEXT), arg(i, L_CAL_END)
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
    local limit = arg(i, L_LIMIT)
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
    -- Every spend sets the TTL: a key found without one (written by
    -- something else) gets it too, so none counts forever, and a period
    -- whose end a reload moved ends when it now does.
    redis.call('PEXPIREAT', st.key, st.e + 60000)
    st.mark = st.s -- a Reserve limit's
  end
end
-- A calendar Reserve limit: its mark is the period's start (ms), which
-- its spend records; a settlement lands in that period while it is
-- Redis's current one. cal_until returns when the period of mark ends
-- (µs), nil for one not around the replica's clock.
local cal_until, cal_adjust
if cal_read and rsv_key then
  cal_until = function(i, mark)
    local b0, b1, b2, b3 = arg(i, L_CAL_PREV), arg(i, L_CAL_CUR), arg(i, L_CAL_NEXT), arg(i, L_CAL_END)
    if mark == b0 then
      return b1 * 1000
    elseif mark == b1 then
      return b2 * 1000
    elseif mark == b2 then
      return b3 * 1000
    end
  end
  if settling then
    cal_adjust = function(i, _, mark, delta)
      local st = cal_read(i)
      if st.err then
        return
      end
      if mark == 0 then
        if delta > 0 then
          cal_spend(i, st, delta)
        end
        return
      end
      local d = math.max(st.count + delta, 0) - st.count
      if st.s == mark and d ~= 0 then
        redis.call('INCRBY', st.key, d)
        redis.call('PEXPIREAT', st.key, st.e + 60000)
      end
    end
  end
end

-- A concurrency limit: a sorted set of the slots held, each member a
-- holder ("<replica>:<request>") scored with its lease's expiry on
-- Redis's clock (ms). Expired leases do not count (a vanished replica's
-- slots come back by themselves), and the request that takes a slot drops
-- them (reading writes nothing but the removal of the replica's own
-- released slots that its releaser has not yet removed: a denial, or a
-- peek, writes no slot); a request is admitted while fewer than the
-- limit are live, and takes one slot whatever its cost. Its holder
-- renews the lease while the request runs and removes it when it ends
-- (lua/lease_renew.lua, lua/lease_release.lua). The key lives two
-- leases past its last write (never less than it had: a replica with a
-- longer lease keeps its slots). Times as domain.DecideSlots: t=0 while
-- a slot is free, 1 s when none is; a denial waits 1 s.
local slot_read, slot_decide, slot_spend
if kinds ~= 'r' and string.find(kinds, 'n', 1, true) then
  local now_ms = math.floor(clock() / 1000)
  local second = 1000000
  slot_read = function(i)
    local key = KEYS[i]
    local first, count = arg(i, L_SLOT_FIRST), arg(i, L_SLOT_COUNT)
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
    local free = math.max(arg(i, L_LIMIT) - st.held, 0)
    local ok, retry, reset, held = 1, 0, 0, st.held
    if c > 0 then
      if free > 0 then
        free, held = free - 1, held + 1
      else
        ok, retry = 0, second
      end
    end
    if free == 0 then
      reset = second
    end
    -- A slot's fifth value is the slots held (a window's is its length).
    return {ok, free, reset, retry, held}
  end
  slot_spend = function(i, _, st)
    local lease = arg(i, L_SLOT_LEASE)
    if st.expired > 0 then
      redis.call('ZREMRANGEBYSCORE', st.key, '-inf', now_ms)
    end
    redis.call('ZADD', st.key, now_ms + lease, raw(i, L_SLOT_HOLDER))
    -- With no live slot but this one, nothing else needs the key: two
    -- leases. Else never less than it has (a replica with a longer
    -- lease keeps its slots).
    if st.held == 0 or redis.call('PTTL', st.key) < 2 * lease then
      redis.call('PEXPIRE', st.key, 2 * lease)
    end
  end
end

-- One enforced concurrency limit alone (a route's in-flight cap): the
-- same verdict as run's, without its tables.
if n == 1 and kinds == 'n' and flags == '0' and not peek and cost > 0 then
  local st = slot_read(1)
  local r = slot_decide(1, st, cost)
  if r[1] == 1 then
    slot_spend(1, nil, st)
  end
  return {r[1], r[1], r[2], r[3], r[4], r[5]}
end
