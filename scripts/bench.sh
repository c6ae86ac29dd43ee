#!/usr/bin/env bash
# The Redis benchmarks, in one run against one local redis-server from
# Debian on loopback (not Docker): bench/'s BenchmarkRedis (tollgate's
# Redis limiters next to ulule/limiter and go-redis/redis_rate at 1, 64
# and 512 goroutines over 1000 tenants), then wrk through the whole
# gateway on the memory store and on the Redis store, in interleaved
# rounds. It installs what it needs (apt-get, idempotent), starts
# redis-server and the gateways on loopback ports, stops them at the end,
# and writes bench/out/: the raw outputs, table.md (medians and ratios),
# redis.dat, and docs/bench-redis.png (scripts/bench-plot.sh).
#
#   scripts/bench.sh                      # what `make bench` runs
#   ROUNDS=3 BENCHTIME=500ms scripts/bench.sh
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
PORT=${TOLLGATE_BENCH_PORT:-16379}
GW_PORT=$((PORT + 1)) ADMIN_PORT=$((PORT + 2))
OUT=bench/out

log() { echo "bench: $*" >&2; }
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}
need redis-server redis-server
need wrk wrk
need curl curl

mkdir -p "$OUT"
RUN_DIR=$(mktemp -d)
REDIS_PID= GW_PID=
stop_all() {
  [ -n "$GW_PID" ] && kill "$GW_PID" 2>/dev/null && wait "$GW_PID" 2>/dev/null || true
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
# limiter (each round runs them all once, so load from elsewhere on the
# machine falls on every limiter alike).
: >"$OUT/redis.txt"
(cd bench && go test -c -o "$RUN_DIR/bench.test" .)
for r in $(seq "$ROUNDS"); do
  log "BenchmarkRedis round $r/$ROUNDS"
  redis-cli -p "$PORT" flushall >/dev/null
  (cd bench && TOLLGATE_BENCH_REDIS=127.0.0.1:$PORT "$RUN_DIR/bench.test" \
    -test.run '^$' -test.bench '^BenchmarkRedis$' -test.benchtime "$BENCHTIME" -test.benchmem -test.count 1) \
    | tee -a "$OUT/redis.txt" | grep -E '^Benchmark' >&2 || true
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

# 3. Medians, ratios and the plot.
(cd bench && go run ./report -bench out/redis.txt -wrk out/wrk.txt -dat out/redis.dat) | tee "$OUT/table.md"
scripts/bench-plot.sh "$OUT/redis.dat" docs/bench-redis.png
log "wrote $OUT/table.md and docs/bench-redis.png"
