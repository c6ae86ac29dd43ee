-- The prelude every limiter script starts with (the Go side prepends it).
-- A script decides one request against every limit of it, all or
-- nothing, atomically; the keys share a hash tag (one tenant, so one
-- Redis Cluster slot). Time is the server's (TIME): never a replica's.
-- Writes after TIME rely on effects replication, the only mode since
-- Redis 7 (and the default since 5).
--
-- KEYS[i]        limit i's key
-- ARGV[1]        the request's cost (units)
-- ARGV[2]        shadow flags: character i is '1' when limit i is in
--                shadow mode (it never denies), '0' when enforced
-- ARGV[3]        '1': count denied requests too (fixed window only)
-- ARGV[4 + (i-1)*stride ...]  limit i's own arguments (see the body)
--
-- A body defines read(i, key), decide(i, st, cost) and spend(i, key, st,
-- cost, r) and returns run(stride, read, decide, spend). decide returns
-- {ok (1 or 0), remaining, reset_us, retry_us} for limit i at cost
-- without writing; spend writes. run returns {admitted, then per limit
-- ok, remaining, reset_us, retry_us}: the verdict, decided here once.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local shadow = ARGV[2]
local count_denied = ARGV[3] == '1'

-- arg returns limit i's k-th own argument as a number.
local function arg(stride, i, k)
  return tonumber(ARGV[3 + (i - 1) * stride + k])
end

-- idiv is floor(a / b) for integers a >= 0, b > 0, exact in doubles.
local function idiv(a, b)
  return (a - math.fmod(a, b)) / b
end

local function run(stride, read, decide, spend)
  local st, res = {}, {}
  local admitted = 1
  for i, key in ipairs(KEYS) do
    st[i] = read(i, key)
    res[i] = decide(i, st[i], cost)
    if res[i][1] == 0 and string.byte(shadow, i) ~= 49 then -- '1'
      admitted = 0
    end
  end
  local out = {admitted}
  for i, key in ipairs(KEYS) do
    local r = res[i]
    if count_denied then
      spend(i, key, st[i], cost, r)
      if r[1] == 0 then
        r[2] = 0 -- counted: nothing is left
      end
    elseif admitted == 1 then
      if r[1] == 1 then
        spend(i, key, st[i], cost, r)
      end
    elseif r[1] == 1 then
      r = decide(i, st[i], 0) -- denied elsewhere: what it has, unspent
    end
    local o = 4 * i - 2
    out[o], out[o + 1], out[o + 2], out[o + 3] = r[1], r[2], r[3], r[4]
  end
  return out
end
