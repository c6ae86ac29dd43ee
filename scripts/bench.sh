#!/usr/bin/env bash
# The Redis benchmarks, in one run against one local redis-server from
# Debian on loopback (not Docker): bench/'s BenchmarkRedis (tollgate's
# Redis limiters next to ulule/limiter and go-redis/redis_rate at 1, 64
# and 512 goroutines over 1000 tenants), then the same rounds across a
# network lane at each round trip in LANES (scripts/netlane.sh: Redis in
# a network namespace, netem or bench/delayproxy), then wrk through the
# whole gateway on the memory store and on the Redis store, in
# interleaved rounds. It installs what it needs (apt-get, idempotent),
# starts redis-server and the gateways on loopback ports, stops them and
# the lanes at the end, and writes bench/out/: the raw outputs, table.md
# (medians and ratios), redis.dat, network.md (every lane: its measured
# round trip and CPU, then each limiter's decisions/s, p99 and ratio to
# the faster peer), network.dat, docs/bench-redis.png and
# docs/bench-network.png (scripts/bench-plot.sh).
#
#   scripts/bench.sh                      # what `make bench` runs
#   ROUNDS=3 BENCHTIME=500ms scripts/bench.sh
#   LANES="loopback 2" scripts/bench.sh   # lanes: loopback and round trips in ms
#
# The loopback lane is the first part's run (no second run); the
# others need root (network namespaces).
#
# Ports (loopback): TOLLGATE_BENCH_PORT (default 16379) for Redis, and
# the next ones for the gateway (+1 public, +2 admin).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

ROUNDS=${ROUNDS:-5}
BENCHTIME=${BENCHTIME:-1s}
WRK_ROUNDS=${WRK_ROUNDS:-3}
WRK_DURATION=${WRK_DURATION:-10s}
LANES=${LANES:-loopback 0.2 0.6 2}
PORT=${TOLLGATE_BENCH_PORT:-16379}
GW_PORT=$((PORT + 1)) ADMIN_PORT=$((PORT + 2))
OUT=bench/out

BENCH_NAME=bench
source bench/lib.sh # log, need
need redis-server redis-server
need wrk wrk
need curl curl

mkdir -p "$OUT"
RUN_DIR=$(mktemp -d)
REDIS_PID= GW_PID= LANE_UP=
stop_all() {
  [ -n "$GW_PID" ] && kill "$GW_PID" 2>/dev/null && wait "$GW_PID" 2>/dev/null || true
  [ -n "$LANE_UP" ] && scripts/netlane.sh down || true
  if [ -f "$RUN_DIR/redis.pid" ]; then kill "$(cat "$RUN_DIR/redis.pid")" 2>/dev/null || true; fi
  rm -rf "$RUN_DIR"
}
trap stop_all EXIT

# A Redis of our own on loopback: no persistence, Debian's binary. Not
# the system service (which apt may have started on 6379).
redis-server --bind 127.0.0.1 --port "$PORT" --save '' --appendonly no \
  --daemonize yes --pidfile "$RUN_DIR/redis.pid" --logfile "$RUN_DIR/redis.log" --dir "$RUN_DIR"
for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
log "redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$PORT"

# 1. Store work: BenchmarkRedis, ROUNDS interleaved rounds of every
# limiter (each round runs them all once, starting one further down the
# list each round, so load from elsewhere on the machine, and what one
# run leaves behind for the next, falls on every limiter alike).
(cd bench && go test -c -o "$RUN_DIR/bench.test" .)
rounds() { # rounds ADDR FILE: ROUNDS rounds of BenchmarkRedis on ADDR, appended to FILE
  : >"$2"
  for r in $(seq "$ROUNDS"); do
    log "BenchmarkRedis round $r/$ROUNDS on $1"
    redis-cli -h "${1%:*}" -p "${1##*:}" flushall >/dev/null
    (cd bench && TOLLGATE_BENCH_REDIS=$1 TOLLGATE_BENCH_ROUND=$r/$ROUNDS "$RUN_DIR/bench.test" \
      -test.run '^$' -test.bench '^BenchmarkRedis$' -test.benchtime "$BENCHTIME" -test.benchmem -test.count 1) \
      | tee -a "$2" | grep -E '^Benchmark' >&2 || true
  done
}
rounds "127.0.0.1:$PORT" "$OUT/redis.txt"

# 1b. The same rounds across a network lane per round trip in LANES, with
# the lane's measured round trip and its own CPU: the delay proxy's
# during the rounds (share of one core), and its cost per 1000 round trips
# at 64 connections (scripts/netlane.sh cost). lanes.tsv has a line per
# lane: name, round trip asked (ms), measured mean and p50 (ms), p50
# straight to the namespace's Redis (ms), mechanism, proxy CPU s, wall s,
# cost (ms CPU per 1000 round trips), raw output file.
: >"$OUT/lanes.tsv"
for lane in $LANES; do
  if [ "$lane" = loopback ]; then
    m=$(redis-benchmark -h 127.0.0.1 -p "$PORT" -c 1 -n 2000 -t ping_inline --csv | awk -F'"' '$2 == "PING_INLINE" { print $6, $10 }')
    printf 'loopback\t0\t%s\t%s\t-\tloopback\t0\t0\t0\t%s\n' ${m} "$OUT/redis.txt" >>"$OUT/lanes.tsv"
    continue
  fi
  env=$(scripts/netlane.sh up "$lane")
  LANE_UP=1
  eval "$env"
  eval "$(scripts/netlane.sh cost 50000)"
  cpu0=$(scripts/netlane.sh status | sed -n 's/^NETLANE_PROXY_CPU_S=//p')
  t0=$(date +%s.%N)
  rounds "$TOLLGATE_BENCH_REDIS" "$OUT/network-$lane.txt"
  t1=$(date +%s.%N)
  cpu1=$(scripts/netlane.sh status | sed -n 's/^NETLANE_PROXY_CPU_S=//p')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$lane" "$NETLANE_RTT_MS" "$NETLANE_MEASURED_RTT_MS" "$NETLANE_MEASURED_P50_MS" \
    "$NETLANE_BASE_P50_MS" "$NETLANE_MECHANISM" "$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { print b - a }')" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
    "$NETLANE_COST_CPU_MS_PER_1000" "$OUT/network-$lane.txt" >>"$OUT/lanes.tsv"
  scripts/netlane.sh down
  LANE_UP=
done

# 2. The whole gateway: wrk against tollgate on memory, then on Redis,
# WRK_ROUNDS times, echo responder, 1000 tenants, a budget never spent.
go build -o "$RUN_DIR/tollgate" ./cmd/tollgate
: >"$OUT/wrk.txt"
gateway() { # gateway STORE: start tollgate on STORE and wait for /readyz
  TOLLGATE_STORE=$1 TOLLGATE_REDIS_URL="redis://127.0.0.1:$PORT/0" TOLLGATE_LIMIT=1000000000 TOLLGATE_WINDOW=1h \
  TOLLGATE_LISTEN_ADDR="127.0.0.1:$GW_PORT" TOLLGATE_ADMIN_ADDR="127.0.0.1:$ADMIN_PORT" TOLLGATE_LOG_LEVEL=warn \
    "$RUN_DIR/tollgate" 2>>"$RUN_DIR/gateway.log" &
  GW_PID=$!
  for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$ADMIN_PORT/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  log "gateway on $1 not ready"; cat "$RUN_DIR/gateway.log" >&2; exit 1
}
to_ms() { # wrk's 1.23ms / 850.00us / 1.02s -> ms
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /[0-9]s$/ && v !~ /ms$/) n *= 1000; print n }'
}
for r in $(seq "$WRK_ROUNDS"); do
  for store in memory redis; do
    gateway "$store"
    curl -fs -H 'X-Tenant-ID: warm' "http://127.0.0.1:$GW_PORT/" >/dev/null
    res=$(wrk -t2 -c64 -d"$WRK_DURATION" --latency -s scripts/wrk-tenants.lua "http://127.0.0.1:$GW_PORT/")
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$res")
    p99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$res")")
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$res")
    log "wrk round $r, $store: $rps requests/s, p99 ${p99} ms${non2xx:+, non-2xx $non2xx}"
    echo "$store $rps $p99" >>"$OUT/wrk.txt"
    kill "$GW_PID"; wait "$GW_PID" 2>/dev/null || true; GW_PID=
  done
done

# network_report writes network.md and network.dat from lanes.tsv and
# each lane's raw output; the medians and ratios are bench/report's.
network_report() {
  (cd bench && go build -o "$RUN_DIR/report" ./report)
  local lane asked mean p50 base mech cpu wall cost file tables=$RUN_DIR/lane-tables.md
  : >"$tables"
  echo "rtt_ms g=1 g=64 g=512" >"$OUT/network.dat"
  {
    echo "# BenchmarkRedis across network lanes"
    echo
    echo "\`ROUNDS=$ROUNDS BENCHTIME=$BENCHTIME LANES=\"$LANES\" scripts/bench.sh\` on $(date -u +%Y-%m-%d), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."
    echo "Medians over ROUNDS=$ROUNDS per lane; ratios are of medians within a lane."
    echo
    echo "| lane | round trip asked | measured (redis-benchmark -c 1 PING): mean / p50 | added: p50 − the bare veth's | mechanism | delay proxy CPU during the rounds | proxy CPU per 1000 round trips at 64 connections |"
    echo "| --- | ---: | ---: | ---: | --- | ---: | ---: |"
    while IFS=$'\t' read -r lane asked mean p50 base mech cpu wall cost file; do
      awk -v l="$lane" -v a="$asked" -v m="$mean" -v p="$p50" -v b="$base" -v mech="$mech" -v c="$cpu" -v w="$wall" -v k="$cost" 'BEGIN {
        added = (b == "-") ? "-" : sprintf("%.3f ms", p - b) (a > 0 ? sprintf(" (%+.0f%%)", 100 * (p - b - a) / a) : "")
        printf "| %s | %s | %.3f / %.3f ms | %s | %s | %s | %s |\n", l, (l == "loopback" ? "-" : a " ms"), m, p, added, mech,
          (w > 0 ? sprintf("%.0f%% of a core (%.0f s over %.0f s)", 100 * c / w, c, w) : "none"), (k > 0 ? sprintf("%.1f ms: at most ~%.0f k round trips/s on a core", k, 1000 / k) : "none") }'
      "$RUN_DIR/report" -bench "$file" -dat "$RUN_DIR/lane.dat" >"$RUN_DIR/lane.md"
      # The lane's rows, with the lane in front; the header once.
      awk -v l="$lane" -v first="$([ -s "$tables" ] || echo 1)" '
        /^\| goroutines/ { if (first) print "| lane " $0; next }
        /^\| ---:/       { if (first) print "| --- " $0; next }
        /^\| [0-9]/      { print "| " l " " $0; next }
        /^One goroutine/ { note = $0 }
        END { if (note != "") print "ONE " l ": " note > "/dev/stderr" }' "$RUN_DIR/lane.md" >>"$tables" 2>>"$RUN_DIR/notes"
      # tollgate fixed window / the faster peer per goroutine count, as
      # bench/report has it, and the errors behind it: a cell whose
      # limiters failed over 1% of their decisions (the 50 ms deadline) is
      # marked, and left out of the plot.
      awk -F'|' -v lane="$lane" -v x="$p50" -v row="$RUN_DIR/summary.md" -v dat="$OUT/network.dat" '
        function trim(v) { gsub(/^[ *]+|[ *×]+$/, "", v); return v }
        $2 ~ /^ *[0-9]+ *$/ {
          g = trim($2); impl = trim($3); e = trim($7) + 0
          if (impl == "tollgate-fixed_window") { ratio[g] = trim($9); own[g] = e; seen[g] = 1 }
          if (impl == "ulule-limiter" || impl == "redis_rate") peer[g] = (g in peer && peer[g] > e) ? peer[g] : e
        }
        END {
          line = sprintf("| %s (%.3f ms) |", lane, x); pts = x
          n = split("1 64 512", gs, " ")
          for (i = 1; i <= n; i++) {
            g = gs[i]
            if (!(g in seen)) { line = line " failed |"; pts = pts " NaN"; continue }
            if (ratio[g] == "") { line = line " no peer |"; pts = pts " NaN"; continue }
            bad = own[g] > 0.01 || peer[g] > 0.01
            line = line sprintf(" %.2f×%s |", ratio[g], bad ? sprintf(" (errors/op: %.2f, peers %.2f)", own[g], peer[g]) : "")
            pts = pts " " (bad ? "NaN" : ratio[g])
          }
          print line >>row; print pts >>dat
        }' "$RUN_DIR/lane.md"
    done <"$OUT/lanes.tsv"
    echo
    echo "The delay proxy pays that CPU on every round trip; past its ceiling the lane adds queueing"
    echo "of its own, and limiters that pay a round trip per decision (the peers) meet it first."
    echo
    echo "tollgate fixed window ÷ the faster peer (ulule-limiter or redis_rate), decisions/s:"
    echo
    echo "| round trip (measured p50) | 1 goroutine | 64 goroutines | 512 goroutines |"
    echo "| --- | ---: | ---: | ---: |"
    cat "$RUN_DIR/summary.md"
    echo
    echo "Every limiter, every lane:"
    echo
    cat "$tables"
    if [ -s "$RUN_DIR/notes" ]; then echo; sed 's/^ONE /- /' "$RUN_DIR/notes"; fi
  } >"$OUT/network.md"
  cat "$OUT/network.md"
}

# 3. Medians, ratios and the plots.
(cd bench && go run ./report -bench out/redis.txt -wrk out/wrk.txt -dat out/redis.dat) | tee "$OUT/table.md"
scripts/bench-plot.sh "$OUT/redis.dat" docs/bench-redis.png
log "wrote $OUT/table.md and docs/bench-redis.png"
if [ -s "$OUT/lanes.tsv" ]; then
  network_report
  scripts/bench-plot.sh "$OUT/network.dat" docs/bench-network.png
  log "wrote $OUT/network.md and docs/bench-network.png"
fi
