-- Reads every post alive on the board of who is being limited.
-- KEYS[1] the board's index, <prefix>{top:board} (see board_post.lua).
-- Returns {id_1, post_1, id_2, post_2, …}. The posts' keys are
-- KEYS[1] .. ':' .. id, in the index's slot (its hash tag).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf')
local out = {}
for _, id in ipairs(ids) do
  local post = redis.call('GET', KEYS[1] .. ':' .. id)
  if post then
    out[#out + 1] = id
    out[#out + 1] = post
  end
end
return out
