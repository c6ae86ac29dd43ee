#!/usr/bin/env bash
# Smoke test of docker-compose.yml: build both images (no registry), start
# Redis and two gateway replicas, and prove the replicas share one budget:
# with TOLLGATE_LIMIT=5, 3 requests on replica 1 and 2 on replica 2 pass,
# and the next one on either is denied. The stack is always brought down.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=compose-test COMPOSE_FILE=docker-compose.yml
PROJECT=${TOLLGATE_COMPOSE_PROJECT:-tollgate-ci}
export TOLLGATE_LIMIT=5 TOLLGATE_WINDOW=1m TOLLGATE_FAIL_MODE=closed
P1=${TOLLGATE_PORT_1:-8081} P2=${TOLLGATE_PORT_2:-8082}
A1=${TOLLGATE_ADMIN_PORT_1:-9091} A2=${TOLLGATE_ADMIN_PORT_2:-9092}
. scripts/compose-lib.sh

dc up -d >&2
# Ready = the gateway serves and its Redis answers.
wait_ready "$A1" "$A2"
log "both replicas ready"
shares_budget "$P1" "$P2"
log "PASS: replicas on :$P1 and :$P2 share one budget of $TOLLGATE_LIMIT"
