#!/usr/bin/env bash
# Smoke test of docker-compose.yml: build both images (no registry), start
# Redis and two gateway replicas, and prove the replicas share one budget:
# with the example files mounted (examples/policy.json and tenants.json,
# where initech's own "exports" limit on the /v1/export route is 2), one
# export with initech's API key passes on each replica and the next one on
# either is denied. The stack is always brought down.
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
export TOLLGATE_LIMIT=100 TOLLGATE_WINDOW=1m TOLLGATE_FAIL_MODE=closed
export TOLLGATE_TENANTS_FILE=/etc/tollgate/tenants.json TOLLGATE_CONFIG_DIR=./examples
export TOLLGATE_POLICY_FILE=/etc/tollgate/policy.json
KEY=k-initech BUDGET=2 ROUTE_PATH=/v1/export/smoke # examples/: initech's exports
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
for port in "$A1" "$A2"; do
  for i in $(seq 1 150); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" == 200 ]] && break
    [[ $i == 150 ]] && fail "admin :$port /readyz not 200 after 30s"
    sleep 0.2
  done
done
log "both replicas ready"

status() { curl -s -o /dev/null -w '%{http_code}' -H "X-API-Key: $KEY" "http://127.0.0.1:$1$ROUTE_PATH"; }
expect() {
  local port=$1 want=$2 got
  got="$(status "$port")"
  [[ "$got" == "$want" ]] || fail "request on :$port: status $got, want $want"
  printf '%s ' "$got" >&2
}
expect "$P1" 200
expect "$P2" 200
expect "$P1" 429
expect "$P2" 429
echo >&2
curl -s -o /dev/null -D - -H "X-API-Key: $KEY" "http://127.0.0.1:$P2$ROUTE_PATH" | grep -i ratelimit >&2 \
  || fail "no rate-limit headers on a denial"
log "PASS: replicas on :$P1 and :$P2 share initech's export budget of $BUDGET from the mounted example files"
