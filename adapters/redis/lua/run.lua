-- The reservations in flight of Reserve limit i: its companion hash, a
-- field per window its admissions counted in, named by when that window
-- ends (µs: rsv_until, cal_until), holding 1 + the units not yet settled
-- (a field at 1 has none in flight, and is kept: most admissions find
-- their window's field and write only HINCRBY). The hash lives until
-- its newest window ends, set when a field is made (never a key without
-- a TTL); a crashed replica's reservation shows until then. When a field
-- is made past four, the ones whose window ended are dropped.
local until_of, rsv_add, rsv_read -- only for a request with a Reserve limit
if rsv_key then
  until_of = function(i, mark)
    if string.byte(kinds, i) == 99 then
      return cal_until(i, mark)
    end
    return rsv_until(i, mark)
  end
end

-- A settlement (the request's limits are all Reserve limits): each
-- spends L_COST more where its mark counted (or now, with a mark of 0),
-- and what its admission spent is no longer in flight.
if settling then
  for i = 1, n do
    local mark, spent = tonumber(ARGV[A_LIMITS + n * stride + 2 * i - 1]), tonumber(ARGV[A_LIMITS + n * stride + 2 * i])
    if string.byte(kinds, i) == 99 then
      cal_adjust(i, KEYS[i], mark, arg(i, L_COST))
    else
      rsv_adjust(i, KEYS[i], mark, arg(i, L_COST))
    end
    local f = mark ~= 0 and spent > 0 and until_of(i, mark)
    if f then
      -- A field that was gone (its window ended and it was dropped, or
      -- the hash expired) is dropped again: it held nothing.
      local key, field = rsv_key[i], string.format('%d', f)
      if redis.call('HINCRBY', key, field, -spent) < 1 then
        redis.call('HDEL', key, field)
      end
    end
  end
  return {1}
end

-- rsv_add counts units reserved at mark in flight; rsv_read returns the
-- units in flight whose window still counts (a peek's).
if rsv_key then
  rsv_add = function(i, mark, units)
    local f = until_of(i, mark)
    if not f then
      return
    end
    local key, field = rsv_key[i], string.format('%d', f)
    if redis.call('HINCRBY', key, field, units) > units then
      return
    end
    redis.call('HINCRBY', key, field, 1)
    local till = math.ceil(f / 1000)
    if redis.call('PEXPIRETIME', key) < till then
      redis.call('PEXPIREAT', key, string.format('%d', till))
    end
    if redis.call('HLEN', key) > 4 then
      local all, t = redis.call('HGETALL', key), clock()
      for j = 1, #all, 2 do
        if tonumber(all[j]) <= t then
          redis.call('HDEL', key, all[j])
        end
      end
    end
  end

  rsv_read = function(i)
    local all, t, sum = redis.call('HGETALL', rsv_key[i]), clock(), 0
    for j = 1, #all, 2 do
      if tonumber(all[j]) > t then
        sum = sum + math.max(tonumber(all[j + 1]) - 1, 0)
      end
    end
    return sum
  end
end

-- The general path (after the prelude and the body): every limit read
-- and decided, then all spent or none. Its closure is made only by the
-- requests that get this far (lua/prelude.lua).
local function run(read, decide, spend)
  if n == 1 and kinds == 'r' and flags == '0' then
    -- One enforced limit (most requests): the loops below, without their
    -- tables; the same verdict.
    local key, c = KEYS[1], cost
    local st = read(1, key, c)
    local r = decide(1, st, c)
    local ok = r[1]
    if not peek and (count_denied or ok == 1) then
      if c > 0 then
        spend(1, key, st, c, r)
      end
      if ok == 0 then
        r[2] = 0 -- counted: nothing is left
      end
    end
    return {ok, ok, r[2], r[3], r[4], r[5] or 0}
  end
  local st, res = {}, {}
  -- Limits that share a key (Envoy's descriptors) are decided one after
  -- the other: taken is the cost the limits so far take from each key.
  local taken = n > 1 and {} or nil
  local admitted, quotas, quota_denied = 1, 0, 0
  -- A Reserve limit's cost: its own, or what remained (eff).
  local eff = rsv_key and {} or nil
  for i = 1, n do
    local key = KEYS[i]
    local kind = string.byte(kinds, i)
    local own = cost_of(i)
    local c = own
    if taken then
      c = (taken[key] or 0) + c
    end
    local d = decide
    if kind == 99 then -- 'c'
      st[i] = cal_read(i)
      if st[i].err then
        return st[i]
      end
      d = cal_decide
      res[i] = cal_decide(i, st[i], c)
    elseif kind == 110 then -- 'n'
      st[i] = slot_read(i)
      res[i] = slot_decide(i, st[i], c)
    else
      st[i] = read(i, key, c)
      res[i] = decide(i, st[i], c)
    end
    local f = string.byte(flags, i) - 48
    if f >= 4 then
      -- A Reserve limit its cost would deny while something remains
      -- (at least its least) is decided at what remains.
      f = f - 4
      local left = res[i][2] - (c - own)
      if res[i][1] == 0 and not peek and left >= least_of(i) and left < own then
        c, own = c - own + left, left
        res[i] = d(i, st[i], c)
      end
      eff[i] = own
    end
    if taken then
      taken[key] = c
    end
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
  local spent = n > 1 and {} or nil
  -- After every limit's values, each Reserve limit's: what it spent,
  -- its mark (-1: it spent nothing), and in a peek its reservations in
  -- flight.
  local extra = 5 * n + 1
  for i = 1, n do
    local key = KEYS[i]
    local kind = string.byte(kinds, i)
    local rd, d, sp = read, decide, spend
    if kind == 99 then
      rd, d = cal_read, cal_decide
      sp = function(j, _, s, c) cal_spend(j, s, c) end
    end
    local r = res[i]
    local c = cost_of(i)
    local rs = eff and eff[i] -- a Reserve limit's cost
    if rs then
      c = rs
    end
    local wrote = false
    if peek then
      -- cost is 0: nothing to spend, nothing written
    elseif kind == 110 then
      -- A slot is all or nothing, whatever the counting: taken when the
      -- request is admitted and the limit admits it.
      if admitted == 1 and r[1] == 1 and c > 0 then
        slot_spend(i, key, st[i])
      elseif admitted == 0 and r[1] == 1 then
        r = slot_decide(i, st[i], 0) -- denied elsewhere: what it has, untaken
      end
    elseif count_denied or (admitted == 1 and (r[1] == 1 or count_over)) then
      if c > 0 then
        local s = st[i]
        if spent then
          if spent[key] then
            s = rd(i, key, c) -- the state an earlier limit's spend left
          end
          spent[key] = true
        end
        sp(i, key, s, c, r)
        wrote = true
        if rs then
          -- The fixed window's mark is its counter's expiry; the
          -- others' spend records theirs.
          local mark = s.mark or redis.call('PEXPIRETIME', key)
          if mark ~= -1 then
            rsv_add(i, mark, c)
          end
          out[extra + 1], out[extra + 2] = c, mark
        end
      end
      if r[1] == 0 then
        r[2] = 0 -- counted: nothing is left
      end
    elseif admitted == 0 and r[1] == 1 then
      r = d(i, st[i], 0) -- denied elsewhere: what it has, unspent
    end
    if kind == 99 and not peek and not wrote and st[i].count > 0 then
      -- A calendar key read but not spent (a denial) still gets its
      -- period's end, as a spend does: a reload that moved the end later
      -- must not let the count expire at the old one.
      redis.call('PEXPIREAT', st[i].key, st[i].e + 60000)
    end
    local o = 5 * i - 3
    out[o], out[o + 1], out[o + 2], out[o + 3], out[o + 4] = r[1], r[2], r[3], r[4], r[5] or 0
    if rs then
      if not out[extra + 1] then
        out[extra + 1], out[extra + 2] = 0, -1
      end
      out[extra + 3] = 0
      if peek then
        out[extra + 3] = rsv_read(i)
      end
      extra = extra + 3
    end
  end
  return out
end

return run(read, decide, spend)
