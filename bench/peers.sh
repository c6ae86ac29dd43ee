#!/usr/bin/env bash
# peers.sh [ROUNDS] [BASE]: the memory store against the in-process peers
# (peers_test.go), in ROUNDS interleaved rounds (default 5): each round
# runs every contender once, for BENCHTIME (default 1s), so that load
# from elsewhere falls on all of them alike. With BASE (a revision), the
# memory store at BASE runs in every round too, as impl=tollgate@BASE,
# under this work tree's peers_test.go.
# Prints benchstat's tables (medians) and, per benchmark, the fastest
# peer's time over the memory store's (above 1: the store is faster), in
# ns/op and in cpu-ns/op (the CPU time a decision took: on a machine
# that other work shares, the steadier of the two).
# BENCH picks the benchmarks (default 'Parallel|Serial'); the raw lines
# are kept in RAW when it is set. Needs benchstat
# (go install golang.org/x/perf/cmd/benchstat@latest).
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
base=${2:-}
bench=${BENCH:-Parallel|Serial}
benchtime=${BENCHTIME:-1s}
out=$(mktemp -d)
cleanup() {
  [ -z "$base" ] || git worktree remove --force "$out/base" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT
go test -c -o "$out/here.test" .
sides=(here)
if [ -n "$base" ]; then
  git worktree add -q --detach "$out/base" "$base"
  cp peers_test.go "$out/base/bench/" # the same harness; the store at BASE
  (cd "$out/base/bench" && go test -c -o "$out/base.test" .)
  sides+=(base)
fi
impls=(tollgate tollgate-stack x-time-rate go-limiter)
for r in $(seq "$rounds"); do
  for impl in "${impls[@]}"; do
    for side in "${sides[@]}"; do
      [ "$side" = base ] && [ "$impl" != tollgate ] && continue
      name=$impl
      [ "$side" = base ] && name="tollgate@$base"
      "$out/$side.test" -test.run '^$' -test.bench "^Benchmark($bench)\$/^impl=$impl\$" \
        -test.benchmem -test.benchtime "$benchtime" -test.count 1 |
        sed -n "/^Benchmark/s|/impl=$impl-|/impl=$name-|p" >>"$out/raw.txt"
    done
  done
done
[ -z "${RAW:-}" ] || cp "$out/raw.txt" "$RAW"
benchstat -col /impl "$out/raw.txt"
echo
awk '
  { split($1, p, "/impl="); name = p[1]; impl = p[2]; sub(/-[0-9]+$/, "", impl)
    for (i = 3; i < NF; i++) {
      if ($(i+1) == "ns/op") ns[name, impl] = ns[name, impl] " " $i
      if ($(i+1) == "cpu-ns/op") cpu[name, impl] = cpu[name, impl] " " $i
    }
    names[name] = 1 }
  function median(s,   a, n, i, j, t) { n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  function ratio(m, n, what,   x, g, t, best) {
    x = median(m[n, "x-time-rate"]); g = median(m[n, "go-limiter"]); t = median(m[n, "tollgate"])
    best = x < g ? x : g
    printf "%s, %s: tollgate %.0f, fastest peer %.0f: %.2fx\n", n, what, t, best, best / t }
  END { for (n in names) { ratio(ns, n, "ns/op"); ratio(cpu, n, "cpu-ns/op") } }
' "$out/raw.txt" | sort
