-- Sliding log over several limits, all or nothing: admit when every
-- enforced limit admitted fewer than limit − cost + 1 requests in its
-- trailing window, and only then log the cost in each limit that admits
-- it (a limit in shadow mode that would deny neither denies nor logs). Atomic; the keys share a
-- hash tag (one tenant); time is the server's (TIME).
--
-- KEYS[i]     sorted set of limit i's admitted units: score = instant in
--             µs since the epoch, member = "<µs>:<n>" (n keeps members
--             unique, so units of one µs never collapse into one)
-- ARGV[1]     cost
-- ARGV[3i-1]  limit i; ARGV[3i] its window in µs; ARGV[3i+1] its TTL in
--             ms (the window, rounded up)
-- ARGV[#ARGV] shadow flags: character i is '1' when limit i is in shadow
--             mode, '0' when enforced
--
-- Returns {allowed, count_1, free_1, newest_1, …}: 1 if admitted, then
-- per key the units in the window before this request (at most the
-- limit), the age in µs of the unit whose leaving makes room for the
-- cost (the (count+cost−limit)-th oldest, else the oldest) and the age of
-- the newest (0 when count is 0).
local cost = tonumber(ARGV[1])
-- TIME before writes relies on effects replication: the default since
-- Redis 5, the only mode since 7 (no redis.replicate_commands needed).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nowstr = string.format('%d', now)

local shadow = ARGV[#ARGV]
local out = {1}
local ok = {}
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[3 * i - 1])
  local window = tonumber(ARGV[3 * i])
  -- A unit leaves the window once window has passed since it. Keep at
  -- most limit (the newest), should the limit have shrunk.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', now - window))
  redis.call('ZREMRANGEBYRANK', key, 0, -(limit + 1))
  local count = redis.call('ZCARD', key)
  local free, newest = 0, 0
  if count > 0 then
    local k = math.min(math.max(count + cost - limit, 1), count)
    free = now - tonumber(redis.call('ZRANGE', key, k - 1, k - 1, 'WITHSCORES')[2])
    newest = now - tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
  end
  ok[i] = count + cost <= limit
  if not ok[i] and string.byte(shadow, i) ~= 49 then -- '1'
    out[1] = 0
  end
  out[3 * i - 1] = count
  out[3 * i] = free
  out[3 * i + 1] = newest
end
if out[1] == 1 then
  for i, key in ipairs(KEYS) do
    if ok[i] then
      local n = out[3 * i - 1]
      for _ = 1, cost do
        while redis.call('ZADD', key, 'NX', nowstr, nowstr .. ':' .. n) == 0 do
          n = n + 1
        end
        n = n + 1
      end
      redis.call('PEXPIRE', key, ARGV[3 * i + 1])
    end
  end
end
return out
