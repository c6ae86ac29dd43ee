-- The prelude every limiter script starts with (the Go side prepends it).
-- A script decides one request against every limit of it, all or
-- nothing, atomically; the keys share a hash tag (one tenant, or one
-- Envoy domain, so one Redis Cluster slot). Time is the server's (TIME):
-- never a replica's. Writes after TIME rely on effects replication, the
-- only mode since Redis 7 (and the default since 5).
--
-- KEYS[i]        limit i's key; limits that share a key share its state,
--                decided one after the other (each after the costs of the
--                ones before it)
-- ARGV[1]        the request's cost (units), or each limit's cost in
--                order, comma-separated ("2,0,1"; 0 decides without
--                spending: a check)
-- ARGV[2]        limit flags: character i is '0' for an enforced limit,
--                '1' in shadow mode (never denies), '2' in quota mode
--                (denies only when every quota limit denies), '3' both
-- ARGV[3]        counting: '1' counts denied requests too (fixed window
--                only), '2' makes an admitted request spend from every
--                limit, also one that would deny, '3' both, '0' neither
-- ARGV[4 + (i-1)*stride ...]  limit i's own arguments (see the body)
--
-- A body defines read(i, key, c), decide(i, st, c) and spend(i, key, st,
-- c, r) and returns run(stride, read, decide, spend). read reads limit
-- i's state for a decision at cost c; decide returns {ok (1 or 0),
-- remaining, reset_us, retry_us} for limit i at cost c without writing;
-- spend writes. run returns {admitted, then per limit ok, remaining,
-- reset_us, retry_us}: the verdict, decided here once.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local costs
if cost == nil then
  costs = {}
  for c in string.gmatch(ARGV[1], '%d+') do
    costs[#costs + 1] = tonumber(c)
  end
end
local flags = ARGV[2]
local counting = tonumber(ARGV[3])
local count_denied = counting % 2 == 1
local count_over = counting >= 2

-- arg returns limit i's k-th own argument as a number.
local function arg(stride, i, k)
  return tonumber(ARGV[3 + (i - 1) * stride + k])
end

-- idiv is floor(a / b) for integers a >= 0, b > 0, exact in doubles.
local function idiv(a, b)
  return (a - math.fmod(a, b)) / b
end

-- cost_of returns what limit i spends.
local function cost_of(i)
  if costs then
    return costs[i]
  end
  return cost
end

local function run(stride, read, decide, spend)
  local st, res, want = {}, {}, {}
  local taken = {} -- key: the cost the limits so far take from it
  local admitted, quotas, quota_denied = 1, 0, 0
  for i, key in ipairs(KEYS) do
    want[i] = (taken[key] or 0) + cost_of(i)
    taken[key] = want[i]
    st[i] = read(i, key, want[i])
    res[i] = decide(i, st[i], want[i])
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
  for i, key in ipairs(KEYS) do
    local r = res[i]
    local c = cost_of(i)
    if count_denied or (admitted == 1 and (r[1] == 1 or count_over)) then
      if c > 0 then
        local s = st[i]
        if spent[key] then
          s = read(i, key, c) -- the state an earlier limit's spend left
        end
        spend(i, key, s, c, r)
        spent[key] = true
      end
      if r[1] == 0 then
        r[2] = 0 -- counted: nothing is left
      end
    elseif admitted == 0 and r[1] == 1 then
      r = decide(i, st[i], 0) -- denied elsewhere: what it has, unspent
    end
    local o = 4 * i - 2
    out[o], out[o + 1], out[o + 2], out[o + 3] = r[1], r[2], r[3], r[4]
  end
  return out
end
