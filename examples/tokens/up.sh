#!/usr/bin/env bash
# Builds the example's images without any registry (tollgate and the
# fake upstream, static binaries on FROM scratch) and starts
# docker-compose.yml: tollgate on 127.0.0.1:8080 (admin :9090) in front
# of an OpenAI-compatible fake, token budgets on Redis. ./up.sh down
# stops it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
compose() { "$root/scripts/compose.sh" -p tollgate-tokens -f "$here/docker-compose.yml" "$@"; }
if [[ "${1:-}" == down ]]; then
  compose down -v --remove-orphans
  exit 0
fi
"$root/scripts/gateway-image.sh" >/dev/null
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$here/fakellm/fakellm" ./examples/tokens/fakellm)
DOCKER_BUILDKIT=0 docker build -q -t tollgate.local/fakellm:dev "$here/fakellm" >/dev/null
compose up -d --no-build
echo "tollgate: http://127.0.0.1:${TOLLGATE_PORT:-8080} (admin :${TOLLGATE_ADMIN_PORT:-9090})"
