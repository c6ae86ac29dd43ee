#!/usr/bin/env bash
# A network lane for the Redis benchmarks: Debian's redis-server in a
# network namespace behind a veth pair, with a fixed round trip added.
#
#   scripts/netlane.sh up <rtt_ms>   # e.g. up 0.6; replaces a lane already up
#   scripts/netlane.sh status        # the lane's settings, processes, proxy CPU
#   scripts/netlane.sh cost [n]      # the proxy's CPU per 1000 round trips at 64 connections
#   scripts/netlane.sh down          # stop everything, delete the namespace
#
# up and status print shell assignments on stdout (logs go to stderr):
#
#   eval "$(scripts/netlane.sh up 0.6)"
#   TOLLGATE_BENCH_REDIS=$TOLLGATE_BENCH_REDIS go test -bench Redis ./bench/
#
#   TOLLGATE_BENCH_REDIS   host:port clients use
#   NETLANE_RTT_MS         the round trip asked for
#   NETLANE_MECHANISM      netem (tc qdisc netem on both veth ends) or
#                          delayproxy (bench/delayproxy, a user-space
#                          delay line, on the host end of the veth)
#   NETLANE_MEASURED_RTT_MS, NETLANE_MEASURED_P50_MS
#                          redis-benchmark -c 1 -n 2000 PING_INLINE through
#                          the lane: mean and median round trip
#   NETLANE_BASE_RTT_MS, NETLANE_BASE_P50_MS
#                          the same straight to the namespace's Redis, no
#                          delay: what the lane adds is the difference
#   NETLANE_PROXY_CPU_S    (status) CPU seconds the proxy has used so far
#
# netem is used when the kernel has it (modprobe sch_netem, then tc qdisc
# add ... netem must succeed); NETLANE_MECHANISM=delayproxy forces the
# proxy. The namespace's Redis listens on 10.77.0.2:6379, the host end is
# 10.77.0.1; with the proxy, clients use 10.77.0.1:16380.
#
# Settings (environment): NETLANE_NS (tgnet), NETLANE_NET (10.77.0: the
# /24's first three octets), NETLANE_PORT (16380, the proxy's port),
# NETLANE_DIR (/run/tollgate-netlane: PID files, logs, the proxy binary).
# Needs root, iproute2, and Go for the proxy; installs redis-server and
# redis-tools from Debian when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

NS=${NETLANE_NS:-tgnet}
NET=${NETLANE_NET:-10.77.0}
HOST_IP=$NET.1 NS_IP=$NET.2 REDIS_PORT=6379
PORT=${NETLANE_PORT:-16380}
DIR=${NETLANE_DIR:-/run/tollgate-netlane}
VETH_HOST=$NS-h VETH_NS=$NS-n

log() { echo "netlane: $*" >&2; }
die() { log "$*"; exit 1; }

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

need() { # need COMMAND PACKAGE
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=600 update -qq
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$2" >/dev/null
}

# alive PIDFILE NAME: the process in PIDFILE is running and is NAME
# (so that a stale PID file never makes us signal someone else's process).
alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1 # the server may remove its own as it exits
  [ -n "$pid" ] || return 1
  [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$2" ]
}

# stop PIDFILE NAME: TERM the process, wait up to 5 s, then KILL it.
stop() {
  alive "$1" "$2" || { rm -f "$1"; return 0; }
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 50); do alive "$1" "$2" || break; sleep 0.1; done
  if alive "$1" "$2"; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -f "$1"
}

# cpu_s PIDFILE NAME: the process's user+system CPU seconds.
cpu_s() {
  alive "$1" "$2" || { echo 0; return; }
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / hz }' "/proc/$(cat "$1")/stat"
}

# measure HOST PORT NAME: redis-benchmark's mean and median of 2000
# sequential PINGs, as shell assignments NETLANE_<NAME>_RTT_MS and _P50_MS.
measure() {
  redis-benchmark -h "$1" -p "$2" -c 1 -n 2000 -t ping_inline --csv 2>/dev/null | awk -F'"' -v name="$3" '
    $2 == "PING_INLINE" { printf "NETLANE_%s_RTT_MS=%s\nNETLANE_%s_P50_MS=%s\n", name, $6, name, $10 }'
}

# netem_ok: whether the kernel takes a netem qdisc (tried on the host end).
netem_ok() {
  modprobe sch_netem 2>/dev/null || true
  tc qdisc add dev "$VETH_HOST" root netem delay 1us 2>/dev/null || return 1
  tc qdisc del dev "$VETH_HOST" root 2>/dev/null || true
}

down() {
  stop "$DIR/proxy.pid" delayproxy
  stop "$DIR/redis.pid" redis-server
  if ip netns list 2>/dev/null | grep -qw "^$NS"; then
    ip netns del "$NS"
  fi
  # Deleting the namespace takes its veth end, and with it the host end;
  # a half-made lane may have left the host end alone.
  ip link del "$VETH_HOST" 2>/dev/null || true
  rm -f "$DIR/lane.env" "$DIR/redis.log" "$DIR/proxy.log"
}

up() {
  local rtt=$1
  awk -v r="$rtt" 'BEGIN { exit !(r ~ /^[0-9]+(\.[0-9]+)?$/) }' || die "rtt_ms must be a number of milliseconds, got '$rtt'"
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces)"
  command -v ip >/dev/null || die "needs iproute2 (ip, tc)"
  need redis-server redis-server
  need redis-benchmark redis-tools
  down
  if ip -4 addr show | grep -q "inet $NET\."; then
    die "$NET.0/24 is already on an interface here: set NETLANE_NET"
  fi
  mkdir -p "$DIR"
  made=  # global: the EXIT trap reads it after up returns
  trap '[ -n "$made" ] || { log "failed; tearing the lane down"; down; }' EXIT

  ip netns add "$NS"
  ip link add "$VETH_HOST" type veth peer name "$VETH_NS"
  ip link set "$VETH_NS" netns "$NS"
  ip addr add "$HOST_IP/24" dev "$VETH_HOST"
  ip link set "$VETH_HOST" up
  ip netns exec "$NS" ip link set lo up
  ip netns exec "$NS" ip addr add "$NS_IP/24" dev "$VETH_NS"
  ip netns exec "$NS" ip link set "$VETH_NS" up

  # No persistence; not the system service's config.
  ip netns exec "$NS" redis-server --bind "$NS_IP" --port "$REDIS_PORT" --save '' --appendonly no \
    --protected-mode no --daemonize yes --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log" --dir "$DIR"
  for _ in $(seq 50); do redis-cli -h "$NS_IP" -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -h "$NS_IP" -p "$REDIS_PORT" ping >/dev/null || die "redis-server in $NS did not answer on $NS_IP:$REDIS_PORT"

  local mech=${NETLANE_MECHANISM:-} addr
  if [ -z "$mech" ]; then
    if netem_ok; then mech=netem; else mech=delayproxy; fi
  fi
  case "$mech" in
    netem)
      local half_us
      half_us=$(awk -v r="$rtt" 'BEGIN { printf "%d", r * 500 }')
      if [ "$half_us" -gt 0 ]; then
        tc qdisc add dev "$VETH_HOST" root netem delay "${half_us}us"
        ip netns exec "$NS" tc qdisc add dev "$VETH_NS" root netem delay "${half_us}us"
      fi
      addr=$NS_IP:$REDIS_PORT
      ;;
    delayproxy)
      log "this kernel has no tc netem: building bench/delayproxy"
      (cd bench && go build -o "$DIR/delayproxy" ./delayproxy)
      "$DIR/delayproxy" -listen "$HOST_IP:$PORT" -target "$NS_IP:$REDIS_PORT" -rtt "${rtt}ms" \
        >"$DIR/proxy.log" 2>&1 &
      echo $! >"$DIR/proxy.pid"
      for _ in $(seq 50); do redis-cli -h "$HOST_IP" -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
      alive "$DIR/proxy.pid" delayproxy || { cat "$DIR/proxy.log" >&2; die "delayproxy did not start"; }
      addr=$HOST_IP:$PORT
      ;;
    *) die "NETLANE_MECHANISM must be netem or delayproxy, got '$mech'" ;;
  esac
  {
    echo "TOLLGATE_BENCH_REDIS=$addr"
    echo "NETLANE_RTT_MS=$rtt"
    echo "NETLANE_MECHANISM=$mech"
    measure "$NS_IP" "$REDIS_PORT" BASE
    measure "${addr%:*}" "${addr##*:}" MEASURED
  } >"$DIR/lane.env"
  made=1
  log "up: $mech, +${rtt} ms round trip, Redis at $addr (netns $NS)"
  cat "$DIR/lane.env"
}

status() {
  [ -s "$DIR/lane.env" ] || { log "no lane up"; exit 1; }
  cat "$DIR/lane.env"
  local ok=0
  if alive "$DIR/redis.pid" redis-server; then echo "NETLANE_REDIS_PID=$(cat "$DIR/redis.pid")"; else log "redis-server is not running"; ok=1; fi
  if grep -q '^NETLANE_MECHANISM=delayproxy$' "$DIR/lane.env"; then
    if alive "$DIR/proxy.pid" delayproxy; then
      echo "NETLANE_PROXY_PID=$(cat "$DIR/proxy.pid")"
      echo "NETLANE_PROXY_CPU_S=$(cpu_s "$DIR/proxy.pid" delayproxy)"
    else
      log "delayproxy is not running"; ok=1
    fi
  else
    echo "NETLANE_PROXY_CPU_S=0"
  fi
  return $ok
}

# cost [n]: n round trips (default 100000) at 64 connections, one at a
# time each (PING_INLINE, no pipelining), and the proxy's CPU for them.
cost() {
  local n=${1:-100000} addr c0 c1 out
  eval "$(status)"
  addr=$TOLLGATE_BENCH_REDIS
  c0=$(cpu_s "$DIR/proxy.pid" delayproxy)
  out=$(redis-benchmark -h "${addr%:*}" -p "${addr##*:}" -c 64 -n "$n" -t ping_inline --csv 2>/dev/null | grep '^"PING_INLINE"')
  c1=$(cpu_s "$DIR/proxy.pid" delayproxy)
  awk -F'"' -v n="$n" -v c0="$c0" -v c1="$c1" '{
    printf "NETLANE_COST_RTS_PER_S=%s\nNETLANE_COST_CPU_MS_PER_1000=%.2f\nNETLANE_COST_CPU_CORE_SHARE=%.3f\n", $4, (c1 - c0) * 1e6 / n, (c1 - c0) * $4 / n
  }' <<<"$out"
}

case "${1:-}" in
  up) [ $# -eq 2 ] || usage; up "$2" ;;
  down) down; log "down" ;;
  status) status ;;
  cost) cost "${2:-}" ;;
  *) usage ;;
esac
