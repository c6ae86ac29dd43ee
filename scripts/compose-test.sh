#!/usr/bin/env bash
# Smoke test of docker-compose.yml: build both images (no registry), start
# Redis and two gateway replicas, and prove the replicas share one budget:
# with TOLLGATE_LIMIT=5, 3 requests on replica 1 and 2 on replica 2 pass,
# and the next one on either is denied. Then the same stack on the
# mounted examples/ files: several limits at a route's cost, shared by
# both replicas. The stack is always brought down.
set -euo pipefail
cd "$(dirname "$0")/.."

PROJECT=${TOLLGATE_COMPOSE_PROJECT:-tollgate-ci}
log() { printf 'compose-test: %s\n' "$*" >&2; }

# Install a missing tool from Debian's packages: need COMMAND PACKAGE.
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}
need docker-compose docker-compose
need curl curl

TOLLGATE_REDIS_IMAGE="$(scripts/redis-image.sh)"
TOLLGATE_IMAGE="$(scripts/gateway-image.sh)"
export TOLLGATE_REDIS_IMAGE TOLLGATE_IMAGE
export TOLLGATE_LIMIT=5 TOLLGATE_WINDOW=1m TOLLGATE_FAIL_MODE=closed
export TOLLGATE_POLICY_FILE= TOLLGATE_TENANTS_FILE= TOLLGATE_SHADOW=false TOLLGATE_CONFIG_DIR=./examples
P1=${TOLLGATE_PORT_1:-8081} P2=${TOLLGATE_PORT_2:-8082}
A1=${TOLLGATE_ADMIN_PORT_1:-9091} A2=${TOLLGATE_ADMIN_PORT_2:-9092}

dc() { docker-compose -p "$PROJECT" -f docker-compose.yml "$@"; }
down() { dc down -v --remove-orphans >/dev/null 2>&1 || true; }
fail() {
  log "FAIL: $*"
  dc logs --no-color --tail=50 >&2 || true
  exit 1
}
trap down EXIT

# docker-compose v1 can fail recreating containers (KeyError
# 'ContainerConfig') on newer engines: always start from nothing.
down
dc up -d >&2

# Ready = the gateway serves and its Redis answers.
ready() {
  for port in "$A1" "$A2"; do
    for i in $(seq 1 150); do
      [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" == 200 ]] && break
      [[ $i == 150 ]] && fail "admin :$port /readyz not 200 after 30s"
      sleep 0.2
    done
  done
  log "both replicas ready"
}
ready

tenant="compose-$$-$RANDOM"
status() { curl -s -o /dev/null -w '%{http_code}' -H "X-Tenant-ID: $tenant" "http://127.0.0.1:$1/smoke"; }
expect() {
  local port=$1 want=$2 got
  got="$(status "$port")"
  [[ "$got" == "$want" ]] || fail "request on :$port: status $got, want $want"
  printf '%s ' "$got" >&2
}
for _ in 1 2 3; do expect "$P1" 200; done
for _ in 1 2; do expect "$P2" 200; done
expect "$P1" 429
expect "$P2" 429
echo >&2
log "PASS: replicas on :$P1 and :$P2 share one budget of $TOLLGATE_LIMIT"

# The examples, mounted at /etc/tollgate: a search costs 5 from each of
# acme's three limits, on either replica, from one shared budget.
down
TOLLGATE_POLICY_FILE=/etc/tollgate/policy.json TOLLGATE_TENANTS_FILE=/etc/tollgate/policy-tenants.json dc up -d >&2
ready
search() { curl -s -o /dev/null -D - -X POST -H 'X-API-Key: k-acme-1' "http://127.0.0.1:$1/v1/search" | tr -d '\r' | grep -i '^ratelimit:'; }
got="$(search "$P1")"
[[ "$got" == *'"per-minute";r=55;'* ]] || fail "first search on :$P1: $got, want per-minute at 55"
got="$(search "$P2")"
[[ "$got" == *'"per-minute";r=50;'*'"per-day";r=99990;'* ]] ||
  fail "second search on :$P2: $got, want per-minute at 50 and per-day at 99990 (one budget over both replicas)"
log "PASS: the mounted examples' limits are shared by both replicas ($got)"
