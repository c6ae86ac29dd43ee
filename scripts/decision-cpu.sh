#!/usr/bin/env bash
# The CPU one Redis decision costs, per limiter of bench's BenchmarkRedis:
# Redis's (INFO cpu: used_cpu_user + used_cpu_sys) and the benchmark
# process's (user + system), each divided by the decisions, at G (64)
# goroutines over N (200000) decisions, one limiter after the other. On a
# machine whose cores the process and Redis share, 2 cores ÷ the total
# is the most decisions a second the limiter could reach.
#
#   scripts/decision-cpu.sh tollgate-fixed_window ulule-limiter redis_rate
#   G=512 N=100000 scripts/decision-cpu.sh tollgate-token_bucket
#
# It needs a redis-server on TOLLGATE_BENCH_REDIS (127.0.0.1:16379), as
# `make bench` starts one, and redis-cli. The process's share includes
# the harness's (BenchmarkHarness: about 0.9 µs a decision here).
set -euo pipefail
cd "$(dirname "$0")/.."
addr=${TOLLGATE_BENCH_REDIS:-127.0.0.1:16379}
G=${G:-64}
N=${N:-200000}
[[ $# -gt 0 ]] || { echo "usage: $0 limiter..." >&2; exit 2; }
bin=$(mktemp -d /tmp/decision-cpu.XXXXXX)
trap 'rm -rf "$bin"' EXIT
(cd bench && go test -c -o "$bin/bench.test" .)
redis_cpu() {
  redis-cli -h "${addr%:*}" -p "${addr##*:}" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(sys|user):/ {s += $2} END {printf "%.6f", s}'
}
printf '| limiter | Redis µs | process µs | total µs | 2 cores ÷ total | decisions/s |\n| --- | ---: | ---: | ---: | ---: | ---: |\n'
for impl in "$@"; do
  before=$(redis_cpu)
  TIMEFORMAT='%U %S'
  { time TOLLGATE_BENCH_REDIS=$addr "$bin/bench.test" -test.run '^$' \
      -test.bench "BenchmarkRedis/g=$G/impl=$impl\$" -test.benchtime "${N}x" >"$bin/out" ; } 2>"$bin/time"
  after=$(redis_cpu)
  rate=$(awk '/^Benchmark/ {for (i = 1; i < NF; i++) if ($(i + 1) == "decisions/s") print $i}' "$bin/out")
  [[ -n $rate ]] || { cat "$bin/out" >&2; exit 1; }
  # b.N = N after a first run of 1: N + 1 decisions, and the warm-up's.
  awk -v n="$N" -v b="$before" -v a="$after" -v r="$rate" -v name="$impl" '{
    redis = (a - b) * 1e6 / n; proc = ($1 + $2) * 1e6 / n; total = redis + proc
    printf "| %s | %.1f | %.1f | %.1f | %.0f k | %.0f k |\n", name, redis, proc, total, 2e6 / total / 1e3, r / 1e3
  }' "$bin/time"
done
