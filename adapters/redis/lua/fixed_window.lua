-- Fixed window: a string counter per limit whose TTL is the window's
-- clock. A window starts with its first spend (the TTL it sets; later
-- spends leave it alone), or, aligned to the epoch, is the multiple of
-- the window that holds now, and the counter expires (PEXPIREAT) at its
-- end.
-- Arguments per limit: L_LIMIT, L_WINDOW_MS; the prelude's aligned: every
-- limit aligned to the epoch.
--
-- A key found without a TTL (written by something else) is given one, so
-- no key ever counts forever. A key outlives its PTTL by up to a
-- millisecond (Redis expires it once its clock in ms is past the expiry),
-- so the time left is PTTL + 1 ms: a client that waits that long finds
-- the window over, never a millisecond early. Aligned, a counter that
-- lingers past its window's end is the previous window's: it counts as
-- empty, and the next spend overwrites it.
-- layout: generated from adapters/redis/codec.go (TestLayout)
local L_WINDOW_MS = 3
-- end of layout

-- The shapes that spend first, for requests without a Reserve limit (a
-- reservation or a settlement takes the general path): their
-- functions are made only for those.
if not rsv_key then
  -- The spend-first shapes below write first. A refused first write (a
  -- full Redis under noeviction refuses a script's first write, not its
  -- later ones; a key of another type) is taken back if any was made, and
  -- the request left to run's path, which reads first: a full Redis still
  -- answers denials, and an error leaves nothing spent.
  local function refused(reply)
    return type(reply) == 'table' and reply.err ~= nil
  end

  -- spend_first spends c on limit i's key before deciding (INCRBY, PTTL)
  -- and gives a window's first request, or a key found without a TTL, the
  -- window's (PEXPIRE): the count after the spend, the PTTL it read and
  -- the time left in µs; nil when the write was refused.
  local function spend_first(i, c)
    local key = KEYS[i]
    local count = redis.pcall('INCRBY', key, c)
    if refused(count) then
      return nil
    end
    local pttl = redis.call('PTTL', key)
    if pttl < 0 then
      local w = arg(i, L_WINDOW_MS)
      redis.call('PEXPIRE', key, w)
      return count, pttl, w * 1000
    end
    return count, pttl, (pttl + 1) * 1000
  end

  -- take_back undoes a spend of c on key: a key the spend created is
  -- deleted, another one counts as it did.
  local function take_back(key, c, created)
    if created then
      redis.call('DEL', key)
    else
      redis.call('DECRBY', key, c)
    end
  end

  -- One enforced limit (the gateway's default, a policy's one limit):
  -- spend first and decide after (INCRBY, PTTL: 2 commands where reading,
  -- deciding, then spending takes 3), without the machinery of several
  -- limits, and take a denial's spend back unless denials count (a key the
  -- request created is deleted: a denial writes nothing). The same verdict
  -- as run's, in fewer commands.
  if n == 1 and not peek and cost > 0 and flags == '0' and kinds == 'r' and not aligned then
    local count, pttl, left = spend_first(1, cost)
    if count then
      local limit = arg(1, L_LIMIT)
      if count <= limit then
        return {1, 1, limit - count, left, 0, 0}
      end
      if count_denied then
        return {0, 0, 0, left, left, 0}
      end
      local created = pttl == -1 and count == cost
      take_back(KEYS[1], cost, created)
      if created then -- a cost above the limit, on a fresh window
        local w = arg(1, L_WINDOW_MS) * 1000
        return {0, 0, limit, w, w, 0}
      end
      return {0, 0, math.max(limit - count + cost, 0), left, left, 0}
    end
  end

  -- One enforced limit aligned to the epoch (an Envoy descriptor's): spend
  -- first too (INCRBY, PTTL), then set the TTL of a new window's counter,
  -- or start afresh a counter the previous window left (its expiry before
  -- this window's middle), and take a denial's spend back unless denials
  -- count. The same verdict as run's, in one command fewer.
  local function aligned_one()
    local key, w, limit = KEYS[1], arg(1, L_WINDOW_MS), arg(1, L_LIMIT)
    local now = clock()
    local wus = w * 1000
    local start = now - math.fmod(now, wus)
    local left, until_ms = start + wus - now, (start + wus) / 1000
    local count = redis.pcall('INCRBY', key, cost)
    if refused(count) then
      return nil
    end
    local pttl = redis.call('PTTL', key)
    local stale = pttl >= 0 and idiv(now, 1000) + pttl < start / 1000 + w / 2
    local spent = count
    if stale then
      spent = cost
    end
    if spent <= limit or count_denied then
      if stale then
        redis.call('SET', key, cost)
      end
      if stale or pttl == -1 then
        redis.call('PEXPIREAT', key, until_ms)
      end
      if spent <= limit then
        return {1, 1, limit - spent, left, 0, 0}
      end
      return {0, 0, 0, left, left, 0}
    end
    local created = count == cost and pttl == -1
    take_back(key, cost, created)
    if pttl == -1 and not created then
      redis.call('PEXPIREAT', key, until_ms) -- a key found without a TTL
    end
    return {0, 0, math.max(limit - spent + cost, 0), left, left, 0}
  end

  if n == 1 and not peek and cost > 0 and flags == '0' and kinds == 'r' and aligned then
    local r = aligned_one()
    if r then
      return r
    end
  end

  -- A policy's usual shape, several enforced limits, each on its own key
  -- (not aligned to the epoch): spend first (INCRBY, PTTL per
  -- limit: 2 commands where reading, deciding, then spending takes 3),
  -- and when one denies and denials do not count, take the spends back
  -- (a key the request created is deleted: a denial writes nothing). The
  -- same verdict as run's. Limits that share a key (Envoy's descriptors)
  -- take run's path: each is decided after the ones before it.
  local function fast_many()
    if n < 2 or n > 8 or peek or aligned then
      return false
    end
    for i = 1, n do
      if string.byte(flags, i) ~= 48 or string.byte(kinds, i) ~= 114 or cost_of(i) <= 0 then
        return false
      end
      for j = 1, i - 1 do
        if KEYS[j] == KEYS[i] then
          return false
        end
      end
    end
    return true
  end

  local function spend_many()
    local out, counts, created, admitted = {1}, {}, {}, 1
    for i = 1, n do
      local c = cost_of(i)
      local count, pttl, left = spend_first(i, c)
      if not count then
        for j = 1, i - 1 do
          take_back(KEYS[j], cost_of(j), created[j])
        end
        return nil
      end
      local limit = arg(i, L_LIMIT)
      -- (A TTL the key lacked is set: its undoing need not repair one.)
      counts[i], created[i] = count, pttl == -1 and count == c
      local o = 5 * i - 3
      if count <= limit then
        out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 1, limit - count, left, 0, 0
      else
        admitted = 0
        out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = 0, 0, left, left, 0
      end
    end
    out[1] = admitted
    if admitted == 0 and not count_denied then
      for i = 1, n do
        local limit, c, o = arg(i, L_LIMIT), cost_of(i), 5 * i - 3
        take_back(KEYS[i], c, created[i])
        if created[i] then
          out[o], out[o + 1], out[o + 2], out[o + 3] = 1, limit, 0, 0
          if c > limit then
            local w = arg(i, L_WINDOW_MS) * 1000
            out[o], out[o + 2], out[o + 3] = 0, w, w
          end
        else
          out[o + 1] = math.max(limit - counts[i] + c, 0) -- what it had
        end
      end
    end
    return out
  end

  if fast_many() then
    local out = spend_many()
    if out then
      return out
    end
  end
end

local function read(i, key)
  local w = arg(i, L_WINDOW_MS)
  local count = tonumber(redis.call('GET', key) or '0')
  local pttl = redis.call('PTTL', key)
  if aligned then
    local now = clock() -- aligned to the epoch: Redis's clock picks the window
    local wus = w * 1000
    local start = now - math.fmod(now, wus)
    local st = {count = count, left = start + wus - now, until_ms = (start + wus) / 1000}
    -- An expiry before the middle of this window is an earlier window's.
    if pttl == -2 or (pttl >= 0 and idiv(now, 1000) + pttl < start / 1000 + w / 2) then
      st.count, st.stale = 0, pttl >= 0
    elseif pttl == -1 and not peek then
      redis.call('PEXPIREAT', key, st.until_ms)
    end
    return st
  end
  if pttl == -1 then
    pttl = w
    if not peek then
      redis.call('PEXPIRE', key, pttl)
    end
  end
  if pttl < 0 then
    return {count = 0, left = -1}
  end
  return {count = count, left = (pttl + 1) * 1000}
end

local function decide(i, st, c)
  local limit = arg(i, L_LIMIT)
  local count, left = st.count, st.left
  if left < 0 then
    if c == 0 then
      return {1, limit, 0, 0}
    end
    count, left = 0, arg(i, L_WINDOW_MS) * 1000
  end
  if count + c <= limit then
    return {1, limit - count - c, left, 0}
  end
  return {0, math.max(limit - count, 0), left, left}
end

local function spend(i, key, st, c)
  if st.until_ms then
    if st.stale then
      redis.call('SET', key, c)
    else
      redis.call('INCRBY', key, c)
    end
    if st.count == 0 then
      redis.call('PEXPIREAT', key, st.until_ms)
    end
    return
  end
  redis.call('INCRBY', key, c)
  if st.left < 0 then
    redis.call('PEXPIRE', key, arg(i, L_WINDOW_MS))
  end
end

-- A Reserve limit's mark is its window's end (PEXPIRETIME, ms on Redis's
-- clock; run reads it after the spend): a settlement lands in the
-- window while the counter still expires then. rsv_until returns when
-- the window of mark ends (µs).
local rsv_until, rsv_adjust
if rsv_key then
  rsv_until = function(_, mark)
    return mark * 1000
  end
  if settling then
    rsv_adjust = function(i, key, mark, delta)
      if mark == 0 then
        if delta > 0 then
          spend(i, key, read(i, key), delta)
        end
        return
      end
      -- The key expires when its window ends: found with that expiry,
      -- the window runs.
      if delta == 0 or redis.call('PEXPIRETIME', key) ~= mark then
        return
      end
      local count = redis.call('INCRBY', key, delta)
      if count < 0 then
        redis.call('INCRBY', key, -count) -- never below zero
      end
    end
  end
end
