#!/usr/bin/env bash
# What each shape of decision costs Redis itself: the microseconds of
# Redis's time per call of tollgate's scripts (INFO commandstats,
# evalsha usec_per_call), beside scripts of the peers' shape and an
# empty one, in ROUNDS (5) interleaved rounds of N (200000) calls over
# 1000 keys by redis-benchmark (-c 8), medians. A Redis shared by every
# gateway replica spends this per decision, whatever the client.
#
#   scripts/script-cost.sh                 # prints a Markdown table
#   ROUNDS=3 N=100000 scripts/script-cost.sh
#
# It starts its own redis-server on 127.0.0.1:$PORT (16391), Debian's
# (redis-tools' redis-check-rdb run as redis-server when the server
# package is not installed; apt-get installs redis-tools if missing),
# and stops it at the end. The arguments are what the gateway sends
# (MONITOR shows them): one enforced limit of 10^9 a minute unless
# the label says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

PORT=${PORT:-16391}
ROUNDS=${ROUNDS:-5}
N=${N:-200000}
LUA=adapters/redis/lua

log() { echo "script-cost: $*" >&2; }

if ! command -v redis-benchmark >/dev/null || ! command -v redis-cli >/dev/null; then
  log "installing redis-tools"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends redis-tools >/dev/null
fi
dir=$(mktemp -d /tmp/script-cost.XXXXXX)
server=$(command -v redis-server || true)
if [[ -z "$server" ]]; then
  cp "$(command -v redis-check-rdb)" "$dir/redis-server" # the server's personality
  server=$dir/redis-server
fi
"$server" --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no >"$dir/redis.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
cli() { redis-cli -p "$PORT" "$@"; }
for _ in $(seq 50); do cli ping >/dev/null 2>&1 && break; sleep 0.1; done

# The period bounds of a calendar month around now (UTC months: the
# script only compares them with Redis's clock).
read -r p0 p1 p2 p3 < <(python3 -c '
import datetime as d
t = d.datetime.now(d.timezone.utc)
def month(y, m): return int(d.datetime(y + (m - 1) // 12, (m - 1) % 12 + 1, 1, tzinfo=d.timezone.utc).timestamp() * 1000)
print(month(t.year, t.month - 1), month(t.year, t.month), month(t.year, t.month + 1), month(t.year, t.month + 2))')

printf 'return 1\n' >"$dir/empty.lua"
printf 'local c = redis.call("INCR", KEYS[1])\nif c == 1 then redis.call("PEXPIRE", KEYS[1], ARGV[1]) end\nreturn {c, redis.call("PTTL", KEYS[1])}\n' >"$dir/incr.lua"
lim=1000000000
# label | script (a limiter body: between the prelude and lua/run.lua) | numkeys keys... args...
# The arguments follow adapters/redis/codec.go: mode, aligned, kinds,
# flags, stride, then per limit its cost, its limit and its own.
shapes=(
  "empty script|-$dir/empty.lua|1 k{__rand_int__}"
  "INCR, PEXPIRE, PTTL (the peers' fixed window)|-$dir/incr.lua|1 k{__rand_int__} 60000"
  "fixed window, the default limit (counts denials)|fixed_window|1 k{__rand_int__} 1 0 r 0 3 1 $lim 60000"
  "fixed window, a policy's limit|fixed_window|1 k{__rand_int__} 0 0 r 0 3 1 $lim 60000"
  "fixed window, three limits (1 s, 1 min, 1 h)|fixed_window|3 k{__rand_int__}a k{__rand_int__}b k{__rand_int__}c 0 0 rrr 000 3 1 $lim 1000 1 $lim 60000 1 $lim 3600000"
  "fixed window aligned to the epoch (Envoy)|fixed_window|1 k{__rand_int__} 0 1 r 0 3 1 $lim 60000"
  "calendar month|fixed_window|3 k{__rand_int__}c k{__rand_int__}p k{__rand_int__}n 0 0 c 0 6 1 $lim $p0 $p1 $p2 $p3"
  "token bucket|token_bucket|1 k{__rand_int__} 0 0 r 0 4 1 $lim 60 60000000"
  "sliding window|sliding_window|1 k{__rand_int__} 0 0 r 0 3 1 $lim 60000000"
  "sliding log|sliding_log|1 k{__rand_int__} 0 0 r 0 4 1 $lim 60000000 60000"
  "concurrency slot (acquire)|fixed_window|1 k{__rand_int__} 0 0 n 0 6 1 1000000 10000 bench:h 0 0"
)

# cost SCRIPT ARGS...: Redis's µs per call of SCRIPT over N calls.
cost() {
  local body=$1; shift
  local src
  if [[ $body == -* ]]; then src=$(cat "${body#-}"); else src=$(cat "$LUA/prelude.lua"; echo; cat "$LUA/$body.lua"; echo; cat "$LUA/run.lua"); fi
  local sha
  sha=$(cli script load "$src")
  cli flushall >/dev/null
  cli config resetstat >/dev/null
  # shellcheck disable=SC2068 # the shape's words are its arguments
  redis-benchmark -p "$PORT" -q -n "$N" -c 8 -r 1000 evalsha "$sha" $@ >/dev/null 2>&1
  local stats
  stats=$(cli info commandstats | grep '^cmdstat_evalsha:')
  if [[ $stats != *failed_calls=0* ]]; then log "failed calls: $stats"; exit 1; fi
  sed 's/.*usec_per_call=\([0-9.]*\).*/\1/' <<<"$stats"
}

declare -A got
for r in $(seq "$ROUNDS"); do
  log "round $r of $ROUNDS"
  for s in "${shapes[@]}"; do
    IFS='|' read -r label body argv <<<"$s"
    got[$label]+="$(cost "$body" $argv) "
  done
done

echo "| decision | Redis µs per call (median of $ROUNDS × $N) |"
echo "| --- | ---: |"
for s in "${shapes[@]}"; do
  IFS='|' read -r label _ _ <<<"$s"
  med=$(tr ' ' '\n' <<<"${got[$label]}" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  echo "| $label | $med |"
done
