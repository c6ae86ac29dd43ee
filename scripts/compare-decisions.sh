#!/usr/bin/env bash
# compare-decisions.sh BASE [ROUNDS]: the cost of a decision on memory and
# on Redis, at BASE and at the work tree, measured in one run: the
# integration package's BenchmarkPolicyLimits (64 goroutines over 1000
# tenants, one limit, every algorithm, both stores) in ROUNDS interleaved
# rounds (default 5), against one redis-server on loopback that this
# script starts and stops. Prints each benchmark's median ns/op and
# allocs/op at BASE and here, and their ratio (here ÷ base; below 1 is
# faster). Needs Debian's redis-server (apt-get install redis-server).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: $0 BASE [ROUNDS]}
rounds=${2:-5}
bench=${BENCH:-'PolicyLimits/store=/algorithm=/mode=parallel/limits=1$'}
out=$(mktemp -d)
port=${PORT:-6399}
git worktree add -q --detach "$out/base" "$base"
redis-server --port "$port" --save '' --appendonly no --daemonize yes --pidfile "$out/redis.pid" >/dev/null
trap 'kill "$(cat "$out/redis.pid")" 2>/dev/null || true; git worktree remove --force "$out/base"; rm -rf "$out"' EXIT
export TOLLGATE_BENCH_REDIS_URL=redis://127.0.0.1:$port
for r in $(seq "$rounds"); do
  for side in base here; do
    dir=.; [ "$side" = base ] && dir="$out/base"
    (cd "$dir" && go test -run '^$' -bench "$bench" -benchmem -count 1 ./integration/) \
      | awk -v s="$side" '/^Benchmark/ {print s, $0}' >>"$out/raw.txt"
  done
done
awk '
  { name=$2; sub(/-[0-9]+$/, "", name); ns[$1, name] = ns[$1, name] " " $4
    for (i = 5; i <= NF; i++) if ($(i+1) == "allocs/op") al[$1, name] = $i
    names[name] = 1 }
  function median(s,   a, n, i, j, t) { n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  END { printf "%-70s %10s %10s %7s %7s %7s\n", "benchmark", "base ns", "here ns", "ratio", "allocs", "(base)"
    for (n in names) { b = median(ns["base", n]); h = median(ns["here", n])
      printf "%-70s %10.0f %10.0f %7.2f %7s %7s\n", n, b, h, h / b, al["here", n], al["base", n] } }
' "$out/raw.txt" | sort
