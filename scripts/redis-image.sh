#!/usr/bin/env bash
# Build the local Redis 7 image used by tollgate's integration tests and
# docker-compose, without any registry: FROM scratch + Debian's redis
# binaries (redis-server, and redis-cli for docker-compose.cluster.yml's
# healthchecks and cluster creation).
#
#   scripts/redis-image.sh            # build if missing, print image name
#   FORCE=1 scripts/redis-image.sh    # rebuild even if present
#   IMG=$(scripts/redis-image.sh)     # build logs go to stderr, name to stdout
#
# Tags: tollgate.local/redis:7 and tollgate.local/redis:<full version>.
# The dotted registry part keeps TESTCONTAINERS_HUB_IMAGE_NAME_PREFIX from
# rewriting the name. No "# syntax=" line and no FROM of a real image, so
# nothing is ever pulled.
set -euo pipefail
. "$(dirname "$0")/scratch-image-lib.sh"

REPO="${REDIS_IMAGE_REPO:-tollgate.local/redis}"
IMAGE="${REPO}:7"
SRC_BIN=/usr/bin/redis-check-rdb   # the real binary; redis-server is a symlink to it
CLI_BIN=/usr/bin/redis-cli
# Bumped when the image's contents change, so that an older local image is
# rebuilt rather than reused.
CONTENTS=server+cli

log() { printf 'redis-image: %s\n' "$*" >&2; }

command -v docker >/dev/null 2>&1 || { log "docker CLI not found"; exit 1; }

have="$(docker image inspect -f '{{index .Config.Labels "tollgate.redis.contents"}}' "$IMAGE" 2>/dev/null || true)"
if [[ "${FORCE:-0}" != 1 && "$have" == "$CONTENTS" ]]; then
  log "$IMAGE already present (FORCE=1 to rebuild)"
  echo "$IMAGE"
  exit 0
fi

if [[ ! -x "$SRC_BIN" || ! -x "$CLI_BIN" ]]; then
  log "installing redis-tools (provides $SRC_BIN)"
  SUDO=()
  if [[ $EUID -ne 0 ]]; then SUDO=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" apt-get install -y -qq --no-install-recommends redis-tools >/dev/null
fi

ctx="$(scratch_rootfs "$SRC_BIN" "$CLI_BIN" redis)"
trap 'rm -rf "$ctx"' EXIT
root="$ctx/rootfs"

# Version straight from the binary we ship (e.g. 7.0.15).
version="$("$root/usr/bin/redis-server" --version | sed -n 's/.* v=\([0-9][0-9.]*\).*/\1/p')"
[[ -n "$version" ]] || { log "could not determine redis version"; exit 1; }
case "$version" in
  7.*) ;;
  *) log "expected Redis 7.x, got $version"; exit 1 ;;
esac

log "building $IMAGE and $REPO:$version"
scratch_build "$ctx" "$IMAGE" "$REPO" "$version" tollgate.redis.contents "$CONTENTS"

echo "$IMAGE"
