-- Fixed window for Redis < 7 (no EXPIRE NX): one atomic step.
-- KEYS[1] the tenant's key; ARGV[1] the window in milliseconds.
-- Returns {count after the increment, milliseconds left in the window}.
--
-- The first increment of a window sets the expiry; later ones leave it
-- alone. A key found without a TTL (written by something else, or left by
-- a client that died between INCR and EXPIRE on the pipeline path) is
-- given one here, so no key ever counts forever.
local count = redis.call('INCR', KEYS[1])
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {count, left}
