#!/usr/bin/env bash
# The gateway benchmark: the same upstream behind a bare
# httputil.ReverseProxy, tollgate (memory store; Redis fixed window and
# token bucket on a loopback redis-server), nginx limit_req keyed by the
# tenant header and HAProxy with a stick table keyed by the tenant header,
# all started here with their own config, pid and log files in a temp
# directory (never the system services), driven by wrk in interleaved
# rounds. Shapes: -t2 -c64 and -t2 -c256 over 1000 tenants within budget
# (everything proxied), and a denied flood (-t2 -c64, one tenant over its
# budget: everything answered 429 by the gateway itself).
#
# Output: the raw rounds (docs/gateway-bench.tsv), the table of medians
# with ratios to the bare proxy and to nginx (docs/gateway-bench.md) and
# the plot (docs/gateway-bench.png, from bench/gateway/plot.gp).
#
# Settings (environment): ROUNDS (5), DURATION seconds per wrk run (10),
# PORT_BASE (20000; ports PORT_BASE..PORT_BASE+99 on 127.0.0.1),
# TARGETS (all; a space-separated subset of the names below), OUT (docs),
# BASELINE_REV (a git revision: adds the target tollgate-baseline, the
# memory store as built from that revision, to compare before and after
# in the same run).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
PORT_BASE=${PORT_BASE:-20000}
OUT=${OUT:-docs}
ALL_TARGETS="bare bare-tuned tollgate-memory tollgate-redis-fw tollgate-redis-tb nginx haproxy"
TARGETS=${TARGETS:-$ALL_TARGETS}
if [[ -n ${BASELINE_REV:-} && " $TARGETS " != *" tollgate-baseline "* ]]; then
  TARGETS="$TARGETS tollgate-baseline"
fi

BENCH_NAME=gateway-bench
source bench/lib.sh
need wrk wrk
need nginx nginx-light
need haproxy haproxy
need redis-server redis-server
need gnuplot gnuplot-nox
need curl curl
need ss iproute2

P_UP=$((PORT_BASE + 1))
P_STATUS=$((PORT_BASE + 2))
P_REDIS=$((PORT_BASE + 79))
declare -A PORT DENY
PORT[bare]=$((PORT_BASE + 10))
PORT[bare-tuned]=$((PORT_BASE + 11))
PORT[tollgate-memory]=$((PORT_BASE + 20)) DENY[tollgate-memory]=$((PORT_BASE + 22))
PORT[tollgate-baseline]=$((PORT_BASE + 24)) DENY[tollgate-baseline]=$((PORT_BASE + 26))
PORT[tollgate-redis-fw]=$((PORT_BASE + 30)) DENY[tollgate-redis-fw]=$((PORT_BASE + 32))
PORT[tollgate-redis-tb]=$((PORT_BASE + 40)) DENY[tollgate-redis-tb]=$((PORT_BASE + 42))
PORT[nginx]=$((PORT_BASE + 50)) DENY[nginx]=$((PORT_BASE + 51))
PORT[haproxy]=$((PORT_BASE + 60)) DENY[haproxy]=$((PORT_BASE + 61))
declare -A PID DPID # target → pid of the process that serves it, and its flood

bench_dir
wait_http() { # wait_http PORT: until it answers HTTP at all
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$1/" -H 'X-Tenant-ID: warmup' && return 0
    sleep 0.1
  done
  log "nothing answers on port $1"
  tail -n 5 "$DIR"/*.log >&2
  return 1
}

log "building into $DIR"
go build -o "$DIR/tollgate" ./cmd/tollgate
(cd bench && go build -o "$DIR/bareproxy" ./gateway/bareproxy)
if [[ -n ${BASELINE_REV:-} ]]; then
  mkdir -p "$DIR/baseline-src"
  git archive "$BASELINE_REV" | tar -x -C "$DIR/baseline-src"
  (cd "$DIR/baseline-src" && go build -o "$DIR/tollgate-baseline" ./cmd/tollgate)
fi

# The upstream: nginx answering a small body, one worker, so that the
# gateways under test keep most of the CPU.
cat >"$DIR/upstream.conf" <<CONF
$(nginx_head upstream 1)
  server {
    listen 127.0.0.1:$P_UP;
    location / { default_type text/plain; return 200 "ok\n"; }
  }
  server { # how many connections the upstream accepted: reuse, or churn
    listen 127.0.0.1:$P_STATUS;
    location / { stub_status; }
  }
}
CONF
nginx_start upstream
wait_http "$P_UP"

has() { [[ " $TARGETS " == *" $1 "* ]]; }

if has bare; then
  start bare "$DIR/bareproxy" -listen "127.0.0.1:${PORT[bare]}" -upstream "http://127.0.0.1:$P_UP"
  PID[bare]=$LAST_PID
fi
if has bare-tuned; then
  start bare-tuned "$DIR/bareproxy" -listen "127.0.0.1:${PORT[bare-tuned]}" -upstream "http://127.0.0.1:$P_UP" -idle 1024
  PID[bare-tuned]=$LAST_PID
fi

if has tollgate-redis-fw || has tollgate-redis-tb; then
  start redis redis-server --port "$P_REDIS" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR"
  for _ in $(seq 50); do redis-cli -p "$P_REDIS" ping >/dev/null 2>&1 && break; sleep 0.1; done
fi

# tollgate: one process within budget (1e9 per 24 h per tenant: nothing
# is denied) and one for the flood (1 per hour).
tollgate() { # tollgate NAME PORT LIMIT WINDOW [VAR=VALUE...]
  local name=$1 port=$2 limit=$3 window=$4 bin=$DIR/tollgate; shift 4
  [[ $name == tollgate-baseline* ]] && bin=$DIR/tollgate-baseline
  start "$name" env -i PATH="$PATH" TOLLGATE_LISTEN_ADDR="127.0.0.1:$port" TOLLGATE_ADMIN_ADDR="127.0.0.1:$((port + 1))" \
    TOLLGATE_UPSTREAM_URL="http://127.0.0.1:$P_UP" TOLLGATE_LIMIT="$limit" TOLLGATE_WINDOW="$window" \
    TOLLGATE_LOG_LEVEL=warn "$@" "$bin"
}
REDIS_URL="redis://127.0.0.1:$P_REDIS/0"
for t in tollgate-memory tollgate-baseline tollgate-redis-fw tollgate-redis-tb; do
  has "$t" || continue
  case $t in
    tollgate-memory | tollgate-baseline) extra=() ;;
    tollgate-redis-fw) extra=(TOLLGATE_STORE=redis TOLLGATE_REDIS_URL="$REDIS_URL" TOLLGATE_ALGORITHM=fixed_window) ;;
    tollgate-redis-tb) extra=(TOLLGATE_STORE=redis TOLLGATE_REDIS_URL="$REDIS_URL" TOLLGATE_ALGORITHM=token_bucket) ;;
  esac
  tollgate "$t" "${PORT[$t]}" 1000000000 24h TOLLGATE_KEY_PREFIX="$t:" "${extra[@]}"
  PID[$t]=$LAST_PID
  tollgate "$t-deny" "${DENY[$t]}" 1 1h TOLLGATE_KEY_PREFIX="$t-deny:" "${extra[@]}"
  DPID[$t]=$LAST_PID
done

# nginx limit_req keyed by the tenant header: a zone no tenant exhausts,
# and one of 1 request per minute for the flood. Upstream connections are
# kept alive, and the X-Forwarded-* and X-Tenant-ID headers set, as
# tollgate does.
if has nginx; then
  cat >"$DIR/nginx.conf" <<CONF
$(nginx_head nginx auto)
  limit_req_zone \$http_x_tenant_id zone=allowed:16m rate=1000000r/s;
  limit_req_zone \$http_x_tenant_id zone=denied:16m rate=1r/m;
  limit_req_status 429;
  limit_req_log_level warn;
  upstream up { server 127.0.0.1:$P_UP; keepalive 256; keepalive_requests 10000000; }
  proxy_http_version 1.1;
  proxy_set_header Connection "";
  proxy_set_header X-Forwarded-For \$remote_addr;
  proxy_set_header X-Forwarded-Host \$host;
  proxy_set_header X-Forwarded-Proto \$scheme;
  proxy_set_header X-Tenant-ID \$http_x_tenant_id;
  server {
    listen 127.0.0.1:${PORT[nginx]};
    location / { limit_req zone=allowed burst=1000 nodelay; proxy_pass http://up; }
  }
  server {
    listen 127.0.0.1:${DENY[nginx]};
    location / { limit_req zone=denied; proxy_pass http://up; }
  }
}
CONF
  nginx_start nginx
  PID[nginx]=$LAST_PID
fi

# HAProxy: a stick table per frontend keyed by the tenant header, counting
# each tenant's request rate; the flood's frontend denies past 1.
haproxy_frontend() { # haproxy_frontend NAME PORT MAX: deny past MAX requests per tenant per minute
  cat <<CONF
frontend $1
  bind 127.0.0.1:$2
  stick-table type string len 64 size 100k expire 60s store http_req_rate(60s)
  http-request track-sc0 req.hdr(X-Tenant-ID)
  http-request deny deny_status 429 if { sc_http_req_rate(0) gt $3 }
  option forwardfor
  http-request set-header X-Forwarded-Proto http
  http-request set-header X-Forwarded-Host %[req.hdr(host)]
  default_backend up
CONF
}
if has haproxy; then
  cat >"$DIR/haproxy.cfg" <<CONF
global
  nbthread 2
  maxconn 8000
  pidfile $DIR/haproxy.pid
defaults
  mode http
  timeout connect 5s
  timeout client 60s
  timeout server 60s
  option http-keep-alive
  http-reuse always
$(haproxy_frontend allowed "${PORT[haproxy]}" 1000000000)
$(haproxy_frontend denied "${DENY[haproxy]}" 1)
backend up
  server u1 127.0.0.1:$P_UP
CONF
  start haproxy haproxy -db -f "$DIR/haproxy.cfg"
  PID[haproxy]=$LAST_PID
fi

for t in $TARGETS; do
  wait_http "${PORT[$t]}"
  [[ -n ${DENY[$t]:-} ]] && wait_http "${DENY[$t]}"
done

# conns PID: the upstream connections the process PID (and its workers)
# holds open now.
conns() {
  local pat="pid=$1," p
  for p in $(pgrep -P "$1"); do pat="$pat|pid=$p,"; done
  ss -Htnp state established "( dport = :$P_UP )" 2>/dev/null | grep -cE "$pat" || true
}

# accepts: the connections the upstream has accepted so far, this query's
# own excluded.
accepts() { echo $(($(curl -s "http://127.0.0.1:$P_STATUS/" | awk 'NR == 3 {print $1}') - 1)); }

# run ROUND TARGET SHAPE: one wrk run, one line of the raw table.
run() {
  local round=$1 t=$2 shape=$3 port=${PORT[$2]} pid=${PID[$2]} c=64 tenants=1000
  case $shape in
    c256) c=256 ;;
    flood) port=${DENY[$t]} pid=${DPID[$t]:-${PID[$t]}} tenants=1 ;;
  esac
  local before; before=$(accepts)
  wrk -t2 -c"$c" -d"${DURATION}s" --latency -s bench/gateway/tenants.lua "http://127.0.0.1:$port/v1/items?q=1" -- "$tenants" \
    >"$DIR/wrk.out" 2>&1 &
  local wpid=$!
  sleep "$(awk "BEGIN{print $DURATION/2}")"
  local held; held=$(conns "$pid")
  wait "$wpid" || { log "wrk failed on $t $shape"; cat "$DIR/wrk.out" >&2; return 1; }
  local opened=$(($(accepts) - before))
  wrk_result "$DIR/wrk.out"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$t" "$shape" \
    "$RPS" "$P50_US" "$P99_US" "$REQS" "$NON2XX" "$ERRORS" "$held" "$opened" >>"$RAW"
  log "round $round $t $shape: $RPS req/s, p99 ${P99_US} µs, non-2xx $NON2XX, upstream conns held $held, opened $opened"
}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RAW="$OUT/gateway-bench.tsv"
printf 'round\ttarget\tshape\treq_per_s\tp50_us\tp99_us\trequests\tnon2xx\terrors\tupstream_conns_held\tupstream_conns_opened\n' >"$RAW"
read -ra T <<<"$TARGETS"
log "warm-up"
for t in "${T[@]}"; do wrk -t2 -c64 -d2s -s bench/gateway/tenants.lua "http://127.0.0.1:${PORT[$t]}/" >/dev/null 2>&1; done
# Interleaved: each round runs every target and shape once, starting from
# a different target each round, so the machine's drift spreads over all.
for ((r = 1; r <= ROUNDS; r++)); do
  n=${#T[@]}
  for ((k = 0; k < n; k++)); do
    t=${T[$(((k + r - 1) % n))]}
    for shape in c64 c256 flood; do
      [[ $shape == flood && -z ${DENY[$t]:-} ]] && continue
      run "$r" "$t" "$shape"
    done
  done
done

(cd bench && go run ./gateway/report -raw "$RAW" -md "$OUT/gateway-bench.md" -dat "$DIR/plot.dat" \
  -meta "$(date -u +%Y-%m-%d), $(nproc) cores, $ROUNDS interleaved rounds of ${DURATION} s per target and shape")
gnuplot -e "datafile='$DIR/plot.dat'; outfile='$OUT/gateway-bench.png'" bench/gateway/plot.gp
# docs/benchmarks.md shows the table between its gateway-bench markers.
if [[ $OUT == "$PWD/docs" ]] && grep -q '<!-- gateway-bench:start -->' docs/benchmarks.md; then
  awk -v table="$OUT/gateway-bench.md" '
    /<!-- gateway-bench:end -->/ { skip = 0 }
    !skip { print }
    /<!-- gateway-bench:start -->/ { while ((getline line < table) > 0) print line; skip = 1 }
  ' docs/benchmarks.md >"$DIR/benchmarks.md" && cp "$DIR/benchmarks.md" docs/benchmarks.md
fi
cat "$OUT/gateway-bench.md"
