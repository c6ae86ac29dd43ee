# Shared by the docker-compose smoke tests (scripts/compose-test.sh,
# scripts/compose-cluster-test.sh); source it after setting COMPOSE_FILE,
# PROJECT and NAME. It installs what is missing (Debian packages), builds
# both images (no registry), and defines:
#   log MSG...   a line on stderr, prefixed with NAME
#   dc ARGS...   Docker Compose (scripts/compose.sh: the v2 plugin, else
#                docker-compose v1) on COMPOSE_FILE as project PROJECT
#   fail MSG...  log, print the stack's recent logs, exit 1
#   wait_ready PORT...  every admin listener's /readyz answers 200 within 60 s
# and brings the stack down now (docker-compose v1 can fail recreating
# containers, KeyError 'ContainerConfig', on newer engines: always start
# from nothing) and on exit.

log() { printf '%s: %s\n' "$NAME" "$*" >&2; }

# Install a missing tool from Debian's packages: need COMMAND PACKAGE.
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}
need curl curl

TOLLGATE_REDIS_IMAGE="$(scripts/redis-image.sh)"
TOLLGATE_IMAGE="$(scripts/gateway-image.sh)"
export TOLLGATE_REDIS_IMAGE TOLLGATE_IMAGE

dc() { scripts/compose.sh -p "$PROJECT" -f "$COMPOSE_FILE" "$@"; }
down() { dc down -v --remove-orphans >/dev/null 2>&1 || true; }
fail() {
  log "FAIL: $*"
  dc logs --no-color --tail=50 >&2 || true
  exit 1
}
trap down EXIT
down

# wait_ready PORT...: every admin listener's /readyz answers 200 within 60 s.
wait_ready() {
  local port i
  for port in "$@"; do
    for i in $(seq 1 300); do
      [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" == 200 ]] && break
      [[ $i == 300 ]] && fail "admin :$port /readyz not 200 after 60s"
      sleep 0.2
    done
  done
}
