#!/usr/bin/env bash
# token-cost.sh [ROUNDS]: what a token decision (a reservation, then its
# settlement) costs against a plain decision of the same limits on Redis:
# the integration package's BenchmarkTokenDecision (64 goroutines over
# 1000 tenants, every algorithm; kind=plain, kind=reserve, kind=token) in
# ROUNDS rounds (default 5), each round running every kind of an
# algorithm back to back, against one redis-server on loopback that this
# script starts and stops. Prints each benchmark's median ns/op and
# redis-script-us/op, and token ÷ plain per algorithm. Needs Debian's
# redis-server (apt-get install redis-server).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
out=$(mktemp -d)
port=${PORT:-6398}
redis-server --port "$port" --save '' --appendonly no --daemonize yes --pidfile "$out/redis.pid" >/dev/null
trap 'kill "$(cat "$out/redis.pid")" 2>/dev/null || true; rm -rf "$out"' EXIT
export TOLLGATE_BENCH_REDIS_URL=redis://127.0.0.1:$port
for r in $(seq "$rounds"); do
  go test -run '^$' -bench 'TokenDecision' -benchmem -count 1 ./integration/ \
    | awk '/^Benchmark/ { u = ""; for (i = 1; i <= NF; i++) if ($(i+1) == "redis-script-us/op") u = $i; print $1, $3, u }' >>"$out/raw.txt"
done
awk '
  { k = $1; sub(/-[0-9]+$/, "", k); sub(/.*algorithm=/, "", k); ns[k] = ns[k] " " $2; us[k] = us[k] " " $3; ks[k] = 1 }
  function median(s,   a, n, i, j, t) { n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  END { printf "%-30s %10s %16s\n", "benchmark", "ns/op", "redis-script-us"
    for (k in ks) { split(k, p, "/"); printf "%-30s %10.0f %16.2f\n", k, median(ns[k]), median(us[k])
      if (p[2] == "kind=plain") { pn[p[1]] = median(ns[k]); pu[p[1]] = median(us[k]) }
      if (p[2] == "kind=token") { tn[p[1]] = median(ns[k]); tu[p[1]] = median(us[k]) } }
    for (a in pn) printf "%-30s token/plain %.2f (ns) %.2f (script)\n", a, tn[a] / pn[a], tu[a] / pu[a] }
' "$out/raw.txt" | sort
