#!/usr/bin/env bash
# The rate limit service benchmark: tollgate's Envoy RLS against
# envoyproxy/ratelimit, with a no-op gRPC stub as the ceiling, on one
# Debian redis-server on loopback, with one configuration of 1000
# descriptor values (each 10^9 per minute: nothing is denied) and the same
# Go gRPC load client (bench/rls/load: N callers over 4 connections), in
# interleaved rounds; then a denied flood (one value allowed once an
# hour: every call after the first denied) measuring Redis commands per
# denial. Every process is started here, with its files in a temporary
# directory, and stopped by pid.
#
#   ENVOY_RATELIMIT_BIN=/path/to/service_cmd bench/rls/run.sh
#
# ENVOY_RATELIMIT_BIN is an envoyproxy/ratelimit binary you built
# (github.com/envoyproxy/ratelimit, go build ./src/service_cmd); without
# it the envoyproxy/ratelimit target is left out.
#
# Output: the raw rounds (docs/rls-bench.jsonl), the table of medians
# (docs/rls-bench.md) and the plot (docs/rls-bench.png, from
# bench/rls/plot.gp).
#
# Settings (environment): ROUNDS (5), DURATION seconds per run (10),
# CALLERS ("1 64 512"), CONNS (4), PORT_BASE (21000; ports
# PORT_BASE..PORT_BASE+99 on 127.0.0.1), OUT (docs), TOLLGATE_ENV (more
# VAR=VALUE settings for tollgate, e.g. TOLLGATE_ALGORITHM=token_bucket),
# REDIS_ADDR (host:port of a Redis to use instead of starting one, such as
# a network lane's: eval "$(scripts/netlane.sh up 0.5)";
# REDIS_ADDR=$TOLLGATE_BENCH_REDIS) and REDIS_PID (its process, for its
# CPU), TLS (1: every server serves TLS, tollgate with TOLLGATE_RLS_TLS_*,
# envoyproxy/ratelimit with GRPC_SERVER_USE_TLS, from a certificate
# openssl makes here, and the load client calls over TLS).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
CALLERS=${CALLERS:-"1 64 512"}
CONNS=${CONNS:-4}
PORT_BASE=${PORT_BASE:-21000}
OUT=${OUT:-docs}

log() { echo "rls-bench: $*" >&2; }
command -v redis-server >/dev/null || { log "redis-server is needed (apt-get install -y redis-server)"; exit 2; }
command -v gnuplot >/dev/null || { log "gnuplot is needed (apt-get install -y gnuplot-nox)"; exit 2; }

P_REDIS=$((PORT_BASE + 79))
P_STUB=$((PORT_BASE + 10))
P_ENVOY_GRPC=$((PORT_BASE + 20)) P_ENVOY_HTTP=$((PORT_BASE + 21)) P_ENVOY_DEBUG=$((PORT_BASE + 22))
P_TOLLGATE=$((PORT_BASE + 30)) P_TOLLGATE_ADMIN=$((PORT_BASE + 31))

DIR=$(mktemp -d /tmp/rls-bench.XXXXXX)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT
start() { # start NAME COMMAND...: run in the background, logs in $DIR
  local name=$1
  shift
  "$@" >"$DIR/$name.log" 2>&1 &
  PIDS+=($!)
  LAST_PID=$!
}
wait_port() { # wait_port PORT NAME
  local i
  for ((i = 0; i < 100; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  log "$2 is not listening on $1"
  tail -n 5 "$DIR/$2.log" >&2
  return 1
}
free() { # free PORT: fails when something listens there
  if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
    log "port $1 is in use (PORT_BASE=$PORT_BASE): choose another PORT_BASE"
    exit 2
  fi
}
for p in $P_REDIS $P_STUB $P_ENVOY_GRPC $P_ENVOY_HTTP $P_ENVOY_DEBUG $P_TOLLGATE $P_TOLLGATE_ADMIN; do free "$p"; done

log "building into $DIR"
go build -o "$DIR/tollgate" ./cmd/tollgate
(cd bench && go build -o "$DIR/load" ./rls/load && go build -o "$DIR/stub" ./rls/stub && go build -o "$DIR/report" ./rls/report)

# TLS=1: one CA and one certificate for localhost, every server's.
STUB_TLS=() ENVOY_TLS=() TOLLGATE_TLS=() LOAD_TLS=()
if [[ ${TLS:-} == 1 ]]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench-ca \
    -keyout "$DIR/ca.key" -out "$DIR/ca.crt" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
    -keyout "$DIR/tls.key" -out "$DIR/tls.csr" 2>/dev/null
  openssl x509 -req -in "$DIR/tls.csr" -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" -CAcreateserial -days 1 \
    -extfile <(printf 'subjectAltName=DNS:localhost,IP:127.0.0.1') -out "$DIR/tls.crt" 2>/dev/null
  STUB_TLS=(-cert "$DIR/tls.crt" -key "$DIR/tls.key")
  ENVOY_TLS=(GRPC_SERVER_USE_TLS=true GRPC_SERVER_TLS_CERT="$DIR/tls.crt" GRPC_SERVER_TLS_KEY="$DIR/tls.key")
  TOLLGATE_TLS=(TOLLGATE_RLS_TLS_CERT="$DIR/tls.crt" TOLLGATE_RLS_TLS_KEY="$DIR/tls.key")
  LOAD_TLS=(-ca "$DIR/ca.crt")
  log "TLS on every server"
fi

# One configuration for both: envoyproxy/ratelimit's runtime layout
# (<root>/ratelimit/config), which tollgate reads as a directory.
CONF=$DIR/runtime/ratelimit/config
mkdir -p "$CONF"
{
  echo "domain: bench"
  echo "descriptors:"
  for i in $(seq 0 999); do
    printf '  - key: user\n    value: u%d\n    rate_limit: {unit: minute, requests_per_unit: 1000000000}\n' "$i"
  done
  printf '  - key: user\n    value: flood\n    rate_limit: {unit: hour, requests_per_unit: 1}\n'
} >"$CONF/bench.yaml"

if [[ -n ${REDIS_ADDR:-} ]]; then
  # A Redis of the caller's, such as a network lane's (scripts/netlane.sh).
  REDIS_PID=${REDIS_PID:-}
  log "Redis at $REDIS_ADDR, not started here"
else
  start redis redis-server --port "$P_REDIS" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR"
  REDIS_PID=$LAST_PID REDIS_ADDR=127.0.0.1:$P_REDIS
  wait_port "$P_REDIS" redis
fi

declare -A ADDR PID
start stub "$DIR/stub" -addr "127.0.0.1:$P_STUB" "${STUB_TLS[@]}"
ADDR[stub]=127.0.0.1:$P_STUB PID[stub]=$LAST_PID
wait_port "$P_STUB" stub
TARGETS="stub"

if [[ -n ${ENVOY_RATELIMIT_BIN:-} ]]; then
  # As the issue measured it: defaults, statsd off (its stats then go to
  # stdout every 10 s; that log is discarded).
  start envoy-ratelimit env -i PATH="$PATH" USE_STATSD=false LOG_LEVEL=warn \
    REDIS_SOCKET_TYPE=tcp REDIS_URL="$REDIS_ADDR" \
    RUNTIME_ROOT="$DIR/runtime" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_APPDIRECTORY=config \
    RUNTIME_WATCH_ROOT=false RUNTIME_IGNOREDOTFILES=true \
    HOST=127.0.0.1 PORT="$P_ENVOY_HTTP" GRPC_HOST=127.0.0.1 GRPC_PORT="$P_ENVOY_GRPC" \
    DEBUG_HOST=127.0.0.1 DEBUG_PORT="$P_ENVOY_DEBUG" "${ENVOY_TLS[@]}" "$ENVOY_RATELIMIT_BIN"
  ADDR[envoy-ratelimit]=127.0.0.1:$P_ENVOY_GRPC PID[envoy-ratelimit]=$LAST_PID
  wait_port "$P_ENVOY_GRPC" envoy-ratelimit
  TARGETS="$TARGETS envoy-ratelimit"
else
  log "ENVOY_RATELIMIT_BIN is not set: envoyproxy/ratelimit is left out"
fi

# shellcheck disable=SC2086 # TOLLGATE_ENV is a list of VAR=VALUE
start tollgate env -i PATH="$PATH" TOLLGATE_LISTEN_ADDR=off TOLLGATE_ADMIN_ADDR="127.0.0.1:$P_TOLLGATE_ADMIN" \
  TOLLGATE_RLS_ADDR="127.0.0.1:$P_TOLLGATE" TOLLGATE_RLS_CONFIG="$CONF" TOLLGATE_STORE=redis \
  TOLLGATE_REDIS_URL="redis://$REDIS_ADDR/0" TOLLGATE_LOG_LEVEL=warn "${TOLLGATE_TLS[@]}" ${TOLLGATE_ENV:-} "$DIR/tollgate"
ADDR[tollgate]=127.0.0.1:$P_TOLLGATE PID[tollgate]=$LAST_PID
wait_port "$P_TOLLGATE" tollgate
TARGETS="$TARGETS tollgate"

RAW=$DIR/raw.jsonl
# measure ROUND TARGET CALLERS [-flood]: one run, one line of $RAW.
measure() {
  local round=$1 target=$2 callers=$3
  shift 3
  "$DIR/load" -addr "${ADDR[$target]}" -target "$target" -callers "$callers" -conns "$CONNS" \
    -duration "${DURATION}s" -pids "server=${PID[$target]}${REDIS_PID:+,redis=$REDIS_PID}" -redis "$REDIS_ADDR" "${LOAD_TLS[@]}" "$@" |
    sed "s/^{/{\"round\":$round,/" >>"$RAW"
  tail -n 1 "$RAW" >&2
}

# Interleaved rounds: each round runs every target at every level, the
# targets' order rotating from round to round.
read -ra targets <<<"$TARGETS"
for ((r = 1; r <= ROUNDS; r++)); do
  log "round $r of $ROUNDS"
  for c in $CALLERS; do
    for ((k = 0; k < ${#targets[@]}; k++)); do
      measure "$r" "${targets[$(((k + r) % ${#targets[@]}))]}" "$c"
    done
  done
  for t in "${targets[@]}"; do
    [[ $t == stub ]] && continue
    measure "$r" "$t" 64 -flood
  done
done

mkdir -p "$OUT"
cp "$RAW" "$OUT/rls-bench.jsonl"
"$DIR/report" -in "$OUT/rls-bench.jsonl" -md "$OUT/rls-bench.md" -plotdata "$DIR/plot.dat" \
  -machine "$(nproc) CPUs, $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg), Redis $(redis-server --version | grep -o 'v=[0-9.]*')"
gnuplot -e "datafile='$DIR/plot.dat'; outfile='$OUT/rls-bench.png'" bench/rls/plot.gp
log "wrote $OUT/rls-bench.md, $OUT/rls-bench.png and $OUT/rls-bench.jsonl"
