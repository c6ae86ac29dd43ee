#!/usr/bin/env bash
# Smoke test of docker-compose.yml: build both images (no registry), start
# Redis and two gateway replicas, and prove the replicas share one budget:
# with the example files mounted (examples/policy.json and tenants.json,
# where initech's own "exports" limit on the /v1/export route is 2), one
# export with initech's API key passes on each replica and the next one on
# either is denied. The stack is always brought down.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=compose-test COMPOSE_FILE=docker-compose.yml
PROJECT=${TOLLGATE_COMPOSE_PROJECT:-tollgate-ci}
export TOLLGATE_LIMIT=100 TOLLGATE_WINDOW=1m TOLLGATE_FAIL_MODE=closed
export TOLLGATE_TENANTS_FILE=/etc/tollgate/tenants.json TOLLGATE_CONFIG_DIR=./examples
export TOLLGATE_POLICY_FILE=/etc/tollgate/policy.json
KEY=k-initech BUDGET=2 ROUTE_PATH=/v1/export/smoke # examples/: initech's exports
P1=${TOLLGATE_PORT_1:-8081} P2=${TOLLGATE_PORT_2:-8082}
A1=${TOLLGATE_ADMIN_PORT_1:-9091} A2=${TOLLGATE_ADMIN_PORT_2:-9092}
. scripts/compose-lib.sh

dc up -d >&2
# Ready = the gateway serves and its Redis answers.
wait_ready "$A1" "$A2"
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
