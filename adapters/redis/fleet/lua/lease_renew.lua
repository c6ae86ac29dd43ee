-- A replica renews the leases of the concurrency slots it holds under one
-- key (prelude.lua's concurrency limits), in one step.
-- KEYS[1] the slots of one tenant's concurrency limit: a sorted set of
-- holders ("<replica>:<request>"), each scored with its lease's expiry
-- on Redis's clock (ms).
-- ARGV[1] the lease, ms; ARGV[2..] the holders to renew.
-- Returns how many of them were still there.
--
-- A lease that is gone (it expired and an acquisition dropped it, or its
-- request ended) is not written again (ZADD XX): its slot may be
-- another request's by now. The key lives two leases from now, never
-- less than it had.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local expiry = now + lease
local renewed = 0
local pairs_ = {}
for i = 2, #ARGV do
  pairs_[#pairs_ + 1] = expiry
  pairs_[#pairs_ + 1] = ARGV[i]
  if #pairs_ == 2000 or i == #ARGV then
    -- CH counts the scores changed: each one found (its expiry moves on).
    renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', unpack(pairs_))
    pairs_ = {}
  end
end
if renewed > 0 and redis.call('PTTL', KEYS[1]) < 2 * lease then
  redis.call('PEXPIRE', KEYS[1], 2 * lease)
end
return renewed
