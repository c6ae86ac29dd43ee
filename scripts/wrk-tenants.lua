-- wrk request generator: GET / as one of 1000 tenants in turn, so that
-- the gateway's decisions spread over 1000 keys (scripts/bench.sh).
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/", { ["X-Tenant-ID"] = "tenant-" .. (n % 1000) })
end
