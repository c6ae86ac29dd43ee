-- Fixed window: a string counter per limit whose TTL is the window's
-- clock. A window starts with its first spend (the TTL it sets; later
-- spends leave it alone), or, aligned to the epoch, is the multiple of
-- the window that holds now, and the counter expires (PEXPIREAT) at its
-- end.
-- ARGV per limit: limit, window in ms, 1 if aligned to the epoch else 0.
--
-- A key found without a TTL (written by something else) is given one, so
-- no key ever counts forever. A key outlives its PTTL by up to a
-- millisecond (Redis expires it once its clock in ms is past the expiry),
-- so the time left is PTTL + 1 ms: a client that waits that long finds
-- the window over, never a millisecond early. Aligned, a counter that
-- lingers past its window's end is the previous window's: it counts as
-- empty, and the next spend overwrites it.
local S = 3

-- The gateway's default shape, one enforced limit that counts every
-- request, spends first and decides after (INCRBY, PTTL: the seed's
-- INCR first), without the machinery of several limits: the same
-- verdict as run's, in fewer commands. (Before the functions below: a
-- closure costs Lua time on every call of the script.)
if n == 1 and count_denied and not peek and not costs and cost > 0 and flags == '0' and kinds == 'r' and arg(S, 1, 3) == 0 then
  local key, w, limit = KEYS[1], arg(S, 1, 2), arg(S, 1, 1)
  local count = redis.call('INCRBY', key, cost)
  local pttl = redis.call('PTTL', key)
  local left
  if pttl < 0 then
    redis.call('PEXPIRE', key, w) -- the window's first request, or a key found without a TTL
    left = w * 1000
  else
    left = (pttl + 1) * 1000
  end
  if count <= limit then
    return {1, 1, limit - count, left, 0, 0}
  end
  return {0, 0, 0, left, left, 0}
end

-- The spend-first shapes below write first. A refused first write (a
-- full Redis under noeviction refuses a script's first write, not its
-- later ones; a key of another type) is taken back if any was made, and
-- the request left to run's path, which reads first: a full Redis still
-- answers denials, and an error leaves nothing spent.
local function refused(reply)
  return type(reply) == 'table' and reply.err ~= nil
end

-- take_back undoes a spend of cost on key, which holds count after it
-- (a key the spend created is deleted); a key found without a TTL
-- (pttl -1) is given one, expiring at ms (PEXPIREAT) or in ttl ms.
local function take_back(key, count, pttl, at, ttl)
  if count == cost and pttl == -1 then
    redis.call('DEL', key) -- this request's own key
    return
  end
  redis.call('DECRBY', key, cost)
  if pttl == -1 and at then
    redis.call('PEXPIREAT', key, at)
  elseif pttl == -1 then
    redis.call('PEXPIRE', key, ttl)
  end
end

-- One enforced limit aligned to the epoch (an Envoy descriptor's): spend
-- first too (INCRBY, PTTL), then set the TTL of a new window's counter,
-- or start afresh a counter the previous window left (its expiry before
-- this window's middle), and take a denial's spend back unless denials
-- count. The same verdict as run's, in one command fewer.
local function aligned_one()
  local key, w, limit = KEYS[1], arg(S, 1, 2), arg(S, 1, 1)
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
  take_back(key, count, pttl, until_ms)
  return {0, 0, math.max(limit - spent + cost, 0), left, left, 0}
end

if n == 1 and not peek and not costs and cost > 0 and flags == '0' and kinds == 'r' and arg(S, 1, 3) == 1 then
  local r = aligned_one()
  if r then
    return r
  end
end

-- A policy's usual shape, one enforced limit or several, each on its own
-- key (not aligned to the epoch, one cost): spend first (INCRBY, PTTL per
-- limit: 2 commands where reading, deciding, then spending takes 3),
-- and when one denies and denials do not count, take the spends back
-- (a key the request created is deleted: a denial writes nothing). The
-- same verdict as run's. Limits that share a key (Envoy's descriptors)
-- take run's path: each is decided after the ones before it.
local function fast_many()
  if n > 8 or peek or costs or cost <= 0 then
    return false
  end
  for i = 1, n do
    if string.byte(flags, i) ~= 48 or string.byte(kinds, i) ~= 114 or arg(S, i, 3) ~= 0 then
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
  local out, counts, pttls, admitted = {1}, {}, {}, 1
  for i = 1, n do
    local key, w, limit = KEYS[i], arg(S, i, 2), arg(S, i, 1)
    local count = redis.pcall('INCRBY', key, cost)
    if refused(count) then
      for j = 1, i - 1 do
        take_back(KEYS[j], counts[j], pttls[j], nil, arg(S, j, 2))
      end
      return nil
    end
    local pttl = redis.call('PTTL', key)
    local left = (pttl + 1) * 1000
    if pttl < 0 then
      redis.call('PEXPIRE', key, w) -- the window's first request, or a key found without a TTL
      left = w * 1000
    end
    counts[i], pttls[i] = count, pttl
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
      local limit, o = arg(S, i, 1), 5 * i - 3
      local before = counts[i] - cost
      -- A key this request created goes (take_back, told pttl -1); a
      -- TTL another lacked was set above: nothing more to repair.
      local created = pttls[i] == -1 and before == 0
      local pttl = 0
      if created then
        pttl = -1
      end
      take_back(KEYS[i], counts[i], pttl)
      if created then
        out[o], out[o + 1], out[o + 2], out[o + 3] = 1, limit, 0, 0
        if cost > limit then
          local w = arg(S, i, 2) * 1000
          out[o], out[o + 2], out[o + 3] = 0, w, w
        end
      else
        out[o + 1] = math.max(limit - before, 0)
        if out[o] == 1 then
          out[o + 1], out[o + 3] = limit - before, 0
        end
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

local function read(i, key)
  local w = arg(S, i, 2)
  local count = tonumber(redis.call('GET', key) or '0')
  local pttl = redis.call('PTTL', key)
  if arg(S, i, 3) == 1 then
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
  local limit = arg(S, i, 1)
  local count, left = st.count, st.left
  if left < 0 then
    if c == 0 then
      return {1, limit, 0, 0}
    end
    count, left = 0, arg(S, i, 2) * 1000
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
    redis.call('PEXPIRE', key, arg(S, i, 2))
  end
end

return run(read, decide, spend)
