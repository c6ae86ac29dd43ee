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
  for i = 1, n do
    local key = KEYS[i]
    local kind = string.byte(kinds, i)
    local c = cost_of(i)
    if taken then
      c = (taken[key] or 0) + c
      taken[key] = c
    end
    if kind == 99 then -- 'c'
      st[i] = cal_read(i)
      if st[i].err then
        return st[i]
      end
      res[i] = cal_decide(i, st[i], c)
    elseif kind == 110 then -- 'n'
      st[i] = slot_read(i)
      res[i] = slot_decide(i, st[i], c)
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
  local spent = n > 1 and {} or nil
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
  end
  return out
end

return run(read, decide, spend)
