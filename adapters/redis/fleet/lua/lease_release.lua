-- A request's concurrency slots come back: its holder leaves every key
-- of its concurrency limits (one tenant's keys: one hash tag, one slot).
-- KEYS    the keys of the request's concurrency limits.
-- ARGV[1] the holder ("<replica>:<request>").
-- Returns how many slots it held.
local released = 0
for i = 1, #KEYS do
  released = released + redis.call('ZREM', KEYS[i], ARGV[1])
end
return released
