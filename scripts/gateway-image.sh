#!/usr/bin/env bash
# Build the gateway image tollgate.local/tollgate:dev without any registry:
# a static binary built here (CGO_ENABLED=0) on FROM scratch, plus the
# host's CA bundle. Build logs go to stderr; the image name to stdout.
#
#   IMG=$(scripts/gateway-image.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${TOLLGATE_IMAGE:-tollgate.local/tollgate:dev}"
CA=/etc/ssl/certs/ca-certificates.crt
log() { printf 'gateway-image: %s\n' "$*" >&2; }

command -v docker >/dev/null 2>&1 || { log "docker CLI not found"; exit 1; }
if [[ ! -s "$CA" ]]; then
  log "installing ca-certificates (provides $CA)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates >/dev/null
fi

mkdir -p bin
# -buildvcs: stamp the checkout's revision (tollgate -version), also where
# GOFLAGS turns it off; a tree without git builds unstamped.
vcs=false
git rev-parse --git-dir >/dev/null 2>&1 && vcs=true
CGO_ENABLED=0 go build -buildvcs=$vcs -trimpath -ldflags='-s -w' -o bin/tollgate ./cmd/tollgate
cp "$CA" bin/ca-certificates.crt
# /bin/ratelimit -> /tollgate in the image (see the Dockerfile).
rm -rf bin/links && mkdir -p bin/links/bin && ln -s /tollgate bin/links/bin/ratelimit

# Classic builder: no buildx plugin here, and it never fetches a frontend.
DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" . >&2
echo "$IMAGE"
