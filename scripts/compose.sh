#!/usr/bin/env bash
# Runs Docker Compose, whichever is installed: the `docker compose` plugin
# (Compose v2) when the docker CLI has it, else the standalone
# `docker-compose` (v1, the one Debian bookworm packages), installing it
# from Debian's packages (apt-get, as root) when neither is there.
#
#   scripts/compose.sh -p tollgate -f docker-compose.yml up -d
set -euo pipefail
if docker compose version >/dev/null 2>&1; then
  exec docker compose "$@"
fi
if ! command -v docker-compose >/dev/null 2>&1; then
  echo "compose: installing docker-compose (Debian package)" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends docker-compose >/dev/null
fi
exec docker-compose "$@"
