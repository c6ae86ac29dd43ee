#!/usr/bin/env bash
# Smoke test of docker-compose.rls.yml: build both images (no registry),
# start Redis and two tollgate replicas serving Envoy's rate limit
# service, and prove the replicas share one budget: with examples/rls
# mounted (descriptor smoke=..., 2 per hour), one call on each replica is
# OK and the next one on either is OVER_LIMIT. The stack is always
# brought down.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=compose-rls-test COMPOSE_FILE=docker-compose.rls.yml
PROJECT=${TOLLGATE_COMPOSE_PROJECT:-tollgate-rls-ci}
export TOLLGATE_FAIL_MODE=closed TOLLGATE_RLS_DIR=./examples/rls
P1=${TOLLGATE_RLS_PORT_1:-8091} P2=${TOLLGATE_RLS_PORT_2:-8092}
A1=${TOLLGATE_ADMIN_PORT_1:-9093} A2=${TOLLGATE_ADMIN_PORT_2:-9094}
. scripts/compose-lib.sh

ASK=$(mktemp /tmp/compose-rls-ask.XXXXXX)
(cd bench && go build -o "$ASK" ./rls/ask)
trap 'rm -f "$ASK"; down' EXIT

dc up -d >&2
wait_ready "$A1" "$A2"
log "both replicas ready"

VALUE="run-$$-$RANDOM" # a counter of this run's own
expect() {
  local port=$1 want=$2 out got
  out="$("$ASK" -addr "127.0.0.1:$port" -domain edge -d "smoke=$VALUE")" || fail "ShouldRateLimit on :$port failed"
  got=${out%%$'\n'*} # the first line: the overall code
  [[ "$got" == "$want" ]] || fail "call on :$port: $got, want $want"
  printf '%s ' "$got" >&2
}
expect "$P1" OK
expect "$P2" OK
expect "$P1" OVER_LIMIT
expect "$P2" OVER_LIMIT
echo >&2
log "PASS: replicas on :$P1 and :$P2 share descriptor smoke's budget of 2 from the mounted configuration"
