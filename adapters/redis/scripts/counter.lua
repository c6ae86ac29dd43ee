-- The seed's fixed-window counter: one atomic step on one key.
-- KEYS[1] the key; ARGV[1] the window in milliseconds.
-- Returns {count after the increment, milliseconds left in the window}.
--
-- The first increment of a window sets the expiry; later ones leave it
-- alone. A key found without a TTL (written by something else, or by an
-- older gateway) is given one here, so no key ever counts forever.
local count = redis.call('INCR', KEYS[1])
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  left = tonumber(ARGV[1])
end
return {count, left}
