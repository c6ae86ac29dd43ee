-- wrk script of the gateway benchmark: every request carries X-Tenant-ID,
-- rotating over N tenants (wrk ... -- N; default 1000), each thread from
-- its own offset. The requests are formatted once, in init, so that wrk's
-- own Lua work per request is an array index. done() prints one
-- machine-readable RESULT line for bench/gateway/run.sh.
local next_id = 0

function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end

function init(args)
  local n = tonumber(args[1]) or 1000
  reqs = {}
  for k = 1, n do
    reqs[k] = wrk.format(nil, nil, {["X-Tenant-ID"] = "tenant-" .. (k - 1)})
  end
  count = n
  i = (id * 7919) % n
end

function request()
  i = i + 1
  if i > count then i = 1 end
  return reqs[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d non2xx=%d errors=%d\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.status, e.connect + e.read + e.write + e.timeout))
end
