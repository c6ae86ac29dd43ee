-- prune removes from a tenant's set (and from all) its keys expired at
-- now (ms), or whose record is gone, and returns how many are left.
-- It heads the scripts that call it.
local function prune(all, set, now)
  local live = 0
  for _, id in ipairs(redis.call('SMEMBERS', set)) do
    local rec = redis.call('HGET', all, id)
    local exp = rec and tonumber(string.match(rec, '|(%d+)|%d$'))
    if not rec or (exp > 0 and exp <= now) then
      redis.call('SREM', set, id)
      if rec then
        redis.call('HDEL', all, id)
      end
    else
      live = live + 1
    end
  end
  return live
end

