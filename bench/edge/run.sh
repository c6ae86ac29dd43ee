#!/usr/bin/env bash
# The edge benchmark: what asking tollgate costs an nginx in front of an
# application. All on loopback, all started here with their own config,
# pid and log files in a temp directory (never the system services),
# driven by wrk in interleaved rounds; the table shows medians.
#
# Targets, each wrk -t2 -c64 over 1000 tenants (X-Tenant-ID), every
# request within budget:
#   auth-tollgate  nginx (examples/nginx.conf) → auth_request to tollgate's
#                  check listener → the upstream
#   auth-static    the same nginx config, its auth_request to a static 200
#                  responder (another nginx: `return 200`) → the upstream
#   limit-req      nginx limit_req keyed by the tenant header → the upstream
#   check          wrk → tollgate's check listener alone: decisions/s
#   proxy          wrk → tollgate's proxy listener → the upstream
# The upstream is nginx answering "ok" (one worker). The target:
# auth-tollgate ≥ 0.6 × auth-static.
#
# Output: the raw rounds (docs/edge-bench.tsv) and the table of medians,
# printed and put into docs/edge.md between its edge-bench markers.
#
# Settings (environment): ROUNDS (5), DURATION seconds per wrk run (10),
# PORT_BASE (21000; ports PORT_BASE..PORT_BASE+99 on 127.0.0.1), OUT
# (docs), PROFILE (1: after the rounds, a CPU profile of tollgate during
# one more auth-tollgate run, TOLLGATE_PPROF=true, written to
# $OUT/edge-check.pprof and its top printed).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
PORT_BASE=${PORT_BASE:-21000}
OUT=${OUT:-docs}
PROFILE=${PROFILE:-0}
TARGETS=(auth-tollgate auth-static limit-req check proxy)

BENCH_NAME=edge-bench
source bench/lib.sh
scripts/edge-tools.sh
need wrk wrk
need curl curl

P_UP=$((PORT_BASE + 1))
P_STATIC=$((PORT_BASE + 2))
P_CHECK=$((PORT_BASE + 10)) P_PROXY=$((PORT_BASE + 11)) P_ADMIN=$((PORT_BASE + 12))
declare -A PORT=(
  [auth-tollgate]=$((PORT_BASE + 20)) [auth-static]=$((PORT_BASE + 21)) [limit-req]=$((PORT_BASE + 22))
  [check]=$P_CHECK [proxy]=$P_PROXY
)

bench_dir
wait_port() { # wait_port PORT: until it accepts connections
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  log "nothing listens on port $1"
  tail -n 5 "$DIR"/*.log >&2
  return 1
}

# nginx_with NAME WORKERS BODY: start an nginx whose http block holds BODY.
nginx_with() {
  printf '%s\n%s\n}\n' "$(nginx_head "$1" "$2")" "$3" >"$DIR/$1.conf"
  nginx_start "$1"
}

# example AUTH PORT: examples/nginx.conf asking AUTH, listening on PORT.
example() {
  sed -e "s/127.0.0.1:8090/$1/; s/127.0.0.1:8000/127.0.0.1:$P_UP/; s/listen 8080;/listen 127.0.0.1:$2;/" examples/nginx.conf
}

log "building into $DIR"
go build -o "$DIR/tollgate" ./cmd/tollgate

nginx_with upstream 1 "  server { listen 127.0.0.1:$P_UP; location / { default_type text/plain; return 200 \"ok\n\"; } }"
nginx_with static 1 "  server { listen 127.0.0.1:$P_STATIC; location / { return 200; } }"
nginx_with auth-tollgate auto "$(example "127.0.0.1:$P_CHECK" "${PORT[auth-tollgate]}")"
nginx_with auth-static auto "$(example "127.0.0.1:$P_STATIC" "${PORT[auth-static]}")"
nginx_with limit-req auto "
  limit_req_zone \$http_x_tenant_id zone=tenants:16m rate=1000000r/s;
  limit_req_status 429;
  upstream app { server 127.0.0.1:$P_UP; keepalive 128; keepalive_requests 100000; }
  server {
    listen 127.0.0.1:${PORT[limit-req]};
    location / {
      limit_req zone=tenants burst=1000 nodelay;
      proxy_set_header Host \$host;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_pass http://app;
    }
  }"
# tollgate: the check listener and the proxy, one engine, memory store,
# 1e9 per 24 h per tenant (nothing is denied).
start tollgate env -i PATH="$PATH" TOLLGATE_CHECK_ADDR="127.0.0.1:$P_CHECK" TOLLGATE_CHECK_DENY_STATUS=403 \
  TOLLGATE_LISTEN_ADDR="127.0.0.1:$P_PROXY" TOLLGATE_ADMIN_ADDR="127.0.0.1:$P_ADMIN" \
  TOLLGATE_UPSTREAM_URL="http://127.0.0.1:$P_UP" TOLLGATE_TRUSTED_PROXIES=127.0.0.1 \
  TOLLGATE_LIMIT=1000000000 TOLLGATE_WINDOW=24h TOLLGATE_LOG_LEVEL=warn TOLLGATE_PPROF=true "$DIR/tollgate"
for p in "$P_UP" "$P_STATIC" "$P_CHECK" "$P_PROXY" "${PORT[@]}"; do wait_port "$p"; done

# run ROUND TARGET: one wrk run, one line of the raw table.
run() {
  local round=$1 t=$2
  wrk -t2 -c64 -d"${DURATION}s" --latency -s bench/gateway/tenants.lua "http://127.0.0.1:${PORT[$t]}/v1/items?q=1" -- 1000 \
    >"$DIR/wrk.out" 2>&1 || { log "wrk failed on $t"; cat "$DIR/wrk.out" >&2; return 1; }
  wrk_result "$DIR/wrk.out"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$t" "$RPS" "$P50_US" "$P99_US" "$REQS" "$NON2XX" "$ERRORS" >>"$RAW"
  log "round $round $t: $RPS req/s, p99 ${P99_US} µs, non-2xx $NON2XX, errors $ERRORS"
}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
RAW="$OUT/edge-bench.tsv"
printf 'round\ttarget\treq_per_s\tp50_us\tp99_us\trequests\tnon2xx\terrors\n' >"$RAW"
log "warm-up"
for t in "${TARGETS[@]}"; do
  wrk -t2 -c64 -d2s -s bench/gateway/tenants.lua "http://127.0.0.1:${PORT[$t]}/" >/dev/null 2>&1
done
# Interleaved: each round runs every target once, starting from a
# different one each round, so the machine's drift spreads over all.
n=${#TARGETS[@]}
for ((r = 1; r <= ROUNDS; r++)); do
  for ((k = 0; k < n; k++)); do
    run "$r" "${TARGETS[$(((k + r - 1) % n))]}"
  done
done

# The table: per target the medians of req/s, p50 and p99, the ratio
# of medians to auth-static, and the share of non-2xx answers.
TABLE="$DIR/table.md"
awk -F'\t' -v meta="$(date -u +%Y-%m-%d), $(nproc) cores, $ROUNDS interleaved rounds of ${DURATION} s per target, wrk -t2 -c64, 1000 tenants" '
  function median(list,   a, k, i, j, v) {
    k = split(list, a, " ")
    for (i = 2; i <= k; i++) { # insertion sort: a handful of rounds
      v = a[i] + 0
      for (j = i - 1; j >= 1 && a[j] + 0 > v; j--) a[j + 1] = a[j]
      a[j + 1] = v
    }
    return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  function ms(us) { return sprintf("%.2f ms", us / 1000) }
  NR > 1 { rps[$2] = rps[$2] " " $3; p50[$2] = p50[$2] " " $4; p99[$2] = p99[$2] " " $5; req[$2] += $6; bad[$2] += $7 + $8 }
  END {
    label["auth-tollgate"] = "nginx → **tollgate check** → upstream"
    label["auth-static"] = "nginx → static 200 auth (nginx `return 200`) → upstream"
    label["limit-req"] = "nginx `limit_req` → upstream (no subrequest)"
    label["check"] = "**tollgate check listener** alone (decisions/s)"
    label["proxy"] = "**tollgate proxy listener** → upstream (decisions/s)"
    split("auth-tollgate auth-static limit-req check proxy", order, " ")
    base = median(rps["auth-static"])
    print "Measured " meta "; medians of the rounds, ratios of medians in the same run."
    print ""
    print "| | req/s | vs static auth | p50 | p99 | non-2xx |"
    print "| --- | ---: | ---: | ---: | ---: | ---: |"
    for (i = 1; i <= 5; i++) {
      t = order[i]
      if (!(t in rps)) continue
      m = median(rps[t])
      printf "| %s | %d | %.2f× | %s | %s | %.1f%% |\n", label[t], m, m / base, ms(median(p50[t])), ms(median(p99[t])), 100 * bad[t] / req[t]
    }
  }' "$RAW" >"$TABLE"
cat "$TABLE"
if [[ $OUT == "$PWD/docs" ]] && grep -q '<!-- edge-bench:start -->' docs/edge.md; then
  awk -v table="$TABLE" '
    /<!-- edge-bench:end -->/ { skip = 0 }
    !skip { print }
    /<!-- edge-bench:start -->/ { while ((getline line < table) > 0) print line; skip = 1 }
  ' docs/edge.md >"$DIR/edge.md" && cp "$DIR/edge.md" docs/edge.md
fi

if [[ $PROFILE == 1 ]]; then
  log "profiling tollgate during one more auth-tollgate run"
  wrk -t2 -c64 -d"$((DURATION + 2))s" -s bench/gateway/tenants.lua "http://127.0.0.1:${PORT[auth-tollgate]}/v1/items" -- 1000 >/dev/null 2>&1 &
  wpid=$!
  sleep 1
  curl -s -o "$OUT/edge-check.pprof" "http://127.0.0.1:$P_ADMIN/debug/pprof/profile?seconds=$DURATION"
  wait "$wpid"
  go tool pprof -top -nodecount=30 "$DIR/tollgate" "$OUT/edge-check.pprof" 2>/dev/null | head -40
fi
