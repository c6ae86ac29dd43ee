#!/usr/bin/env bash
# Build the local Valkey 8 image that `make test` runs the integration
# suite against a second time, without any registry: FROM scratch +
# Debian's valkey binaries from bookworm-backports (8.0.1). The twin of
# scripts/redis-image.sh; the image has the same layout, so the tests and
# docker-compose use it unchanged (TOLLGATE_TEST_REDIS_IMAGE,
# TOLLGATE_REDIS_IMAGE).
#
#   scripts/valkey-image.sh            # build if missing or stale, print image name
#   FORCE=1 scripts/valkey-image.sh    # rebuild even if present
#   IMG=$(scripts/valkey-image.sh)     # build logs go to stderr, name to stdout
#
# Tags: tollgate.local/valkey:8 and tollgate.local/valkey:<full version>.
#
# Valkey picks its personality from argv[0], as Redis does, and answers
# to the Redis names: valkey-check-rdb (the real binary; valkey-server is
# a symlink to it) copied as /usr/bin/redis-server is the server, and
# valkey-cli copied as redis-cli is the client the cluster compose file's
# healthchecks call.
#
# The packages install beside redis-tools (no conflicts; the script
# refuses to go on if apt would remove anything). apt may start the
# packaged valkey-server service: it is stopped and disabled again, since
# only the containers are wanted.
set -euo pipefail
. "$(dirname "$0")/scratch-image-lib.sh"

REPO="${VALKEY_IMAGE_REPO:-tollgate.local/valkey}"
IMAGE="${REPO}:8"
SRC_BIN=/usr/bin/valkey-check-rdb
CLI_BIN=/usr/bin/valkey-cli
PKGS=(valkey-server valkey-tools)
BACKPORTS='deb http://deb.debian.org/debian bookworm-backports main'

log() { printf 'valkey-image: %s\n' "$*" >&2; }

command -v docker >/dev/null 2>&1 || { log "docker CLI not found"; exit 1; }

# What the image holds: its layout, and the package version its binaries
# came from, so that a changed layout or an upgraded valkey rebuilds it.
contents() { echo "server+cli/$(dpkg-query -W -f '${Version}' valkey-tools 2>/dev/null || true)"; }

have="$(docker image inspect -f '{{index .Config.Labels "tollgate.valkey.contents"}}' "$IMAGE" 2>/dev/null || true)"
if [[ "${FORCE:-0}" != 1 && -x "$SRC_BIN" && "$have" == "$(contents)" ]]; then
  log "$IMAGE already present (FORCE=1 to rebuild)"
  echo "$IMAGE"
  exit 0
fi

SUDO=()
if [[ $EUID -ne 0 ]]; then SUDO=(sudo); fi
APT=("${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600)

# stop_packaged_service stops the valkey-server service apt may have
# started and keeps it from starting at boot.
stop_packaged_service() {
  if [[ -d /run/systemd/system ]]; then
    "${SUDO[@]}" systemctl disable --now valkey-server.service >/dev/null 2>&1 || true
    return
  fi
  if [[ -x /etc/init.d/valkey-server ]]; then
    "${SUDO[@]}" /etc/init.d/valkey-server stop >/dev/null 2>&1 || true
    "${SUDO[@]}" update-rc.d valkey-server disable >/dev/null 2>&1 || true
  fi
  # The unit's boot symlink, for the day systemd runs here.
  "${SUDO[@]}" systemctl disable valkey-server.service >/dev/null 2>&1 || true
  local pidfile=/run/valkey/valkey-server.pid
  if [[ -s "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    "${SUDO[@]}" kill "$(cat "$pidfile")"
  fi
}

if [[ ! -x "$SRC_BIN" || ! -x "$CLI_BIN" ]]; then
  export DEBIAN_FRONTEND=noninteractive
  if ! grep -rqs '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    log "adding the bookworm-backports source"
    echo "$BACKPORTS" | "${SUDO[@]}" tee /etc/apt/sources.list.d/bookworm-backports.list >/dev/null
  fi
  "${APT[@]}" update -qq
  # Never trade redis-tools (or anything else) for valkey.
  removes="$("${APT[@]}" -s install --no-install-recommends -t bookworm-backports "${PKGS[@]}" | awk '$1 == "Remv" {print $2}')"
  if [[ -n "$removes" ]]; then
    log "installing ${PKGS[*]} would remove: $removes; not going on"
    exit 1
  fi
  log "installing ${PKGS[*]} from bookworm-backports"
  "${APT[@]}" install -y -qq --no-install-recommends -t bookworm-backports "${PKGS[@]}" >/dev/null
  stop_packaged_service
fi

ctx="$(scratch_rootfs "$SRC_BIN" "$CLI_BIN" valkey)"
trap 'rm -rf "$ctx"' EXIT
root="$ctx/rootfs"

# Version straight from the binary we ship, under the name it will run
# as ("Valkey server v=8.0.1 ..."): this also proves the server
# personality.
version="$("$root/usr/bin/redis-server" --version | sed -n 's/^Valkey server v=\([0-9][0-9.]*\).*/\1/p')"
[[ -n "$version" ]] || { log "could not determine the valkey version (is $SRC_BIN valkey?)"; exit 1; }
case "$version" in
  8.*) ;;
  *) log "expected Valkey 8.x, got $version"; exit 1 ;;
esac

log "building $IMAGE and $REPO:$version"
scratch_build "$ctx" "$IMAGE" "$REPO" "$version" tollgate.valkey.contents "$(contents)"

echo "$IMAGE"
