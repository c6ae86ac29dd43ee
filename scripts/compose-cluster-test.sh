#!/usr/bin/env bash
# Smoke test of docker-compose.cluster.yml: build both images (no
# registry), start a 3-master Redis Cluster and two gateway replicas in
# cluster mode, and prove that
#   - the cluster forms and both gateways are ready (/readyz: every master
#     answers, cluster_state:ok);
#   - the replicas share one budget: with TOLLGATE_LIMIT=5, 3 requests on
#     replica 1 and 2 on replica 2 pass, the next one on either is denied;
#   - tenants' keys spread over the masters (every master holds some of 30
#     tenants' keys), each with a TTL.
# The stack is always brought down. Project, ports and subnet are
# overridable (TOLLGATE_COMPOSE_CLUSTER_PROJECT, TOLLGATE_CLUSTER_PORT_1/2,
# TOLLGATE_CLUSTER_ADMIN_PORT_1/2, TOLLGATE_CLUSTER_NET) so that concurrent
# runs do not collide.
set -euo pipefail
cd "$(dirname "$0")/.."

NAME=compose-cluster-test COMPOSE_FILE=docker-compose.cluster.yml
PROJECT=${TOLLGATE_COMPOSE_CLUSTER_PROJECT:-tollgate-ci-cluster}
export TOLLGATE_LIMIT=5 TOLLGATE_WINDOW=1m TOLLGATE_FAIL_MODE=closed
P1=${TOLLGATE_CLUSTER_PORT_1:-8181} P2=${TOLLGATE_CLUSTER_PORT_2:-8182}
A1=${TOLLGATE_CLUSTER_ADMIN_PORT_1:-9191} A2=${TOLLGATE_CLUSTER_ADMIN_PORT_2:-9192}
. scripts/compose-lib.sh

# shares_budget P1 P2: with TOLLGATE_LIMIT=5, 3 requests of a fresh
# tenant on the replica at P1 and 2 on the one at P2 pass, and the next
# on either is denied.
shares_budget() {
  local p1=$1 p2=$2 tenant="compose-$$-$RANDOM"
  expect() {
    local got
    got="$(curl -s -o /dev/null -w '%{http_code}' -H "X-Tenant-ID: $tenant" "http://127.0.0.1:$1/smoke")"
    [[ "$got" == "$2" ]] || fail "request on :$1: status $got, want $2"
    printf '%s ' "$got" >&2
  }
  for _ in 1 2 3; do expect "$p1" 200; done
  for _ in 1 2; do expect "$p2" 200; done
  expect "$p1" 429
  expect "$p2" 429
  echo >&2
}

started=$SECONDS
dc up -d >&2
# Ready = the gateway serves and every master of the cluster answers.
wait_ready "$A1" "$A2"
log "cluster formed and both replicas ready in $((SECONDS - started))s"
shares_budget "$P1" "$P2"
log "replicas on :$P1 and :$P2 share one budget of $TOLLGATE_LIMIT"

spread="spread-$$-$RANDOM"
for i in $(seq 1 30); do
  got="$(curl -s -o /dev/null -w '%{http_code}' -H "X-Tenant-ID: $spread-$i" "http://127.0.0.1:$P1/smoke")"
  [[ "$got" == 200 ]] || fail "tenant $spread-$i: status $got, want 200"
done
masters=0
for n in 1 2 3 4 5 6; do
  # docker exec, not docker-compose exec: a second faster per call. Many
  # commands go through one redis-cli on stdin.
  id="$(dc ps -q "redis-$n")"
  cli() { docker exec -i "$id" redis-cli "$@"; }
  [[ "$(cli role </dev/null | head -1)" == master ]] || continue
  masters=$((masters + 1))
  keys="$(cli --scan --pattern "rl:{$spread-*" </dev/null)"
  count=$(grep -c . <<<"$keys" || true)
  [[ $count -gt 0 ]] || fail "master redis-$n holds none of 30 tenants' keys"
  ttls="$(sed 's/^/PTTL /' <<<"$keys" | cli)"
  bad="$(paste <(echo "$keys") <(echo "$ttls") | awk '$2 <= 0')"
  [[ -z "$bad" ]] || fail "keys on redis-$n without a TTL (key, PTTL): $bad"
  log "master redis-$n holds $count of 30 tenants' keys, each with a TTL"
done
[[ $masters == 3 ]] || fail "$masters masters, want 3"
log "PASS: a 3-master cluster behind two replicas (:$P1, :$P2)"
