#!/usr/bin/env bash
# Installs the edge proxies that the real-proxy tests (integration/edge)
# run, from Debian's packages, when they are missing: nginx-light (it has
# auth_request) and caddy (2.6, which has forward_auth). Neither is
# started as a service: the tests start their own, on loopback ports.
# `make test` runs it (as root, as CI does) and then sets
# TOLLGATE_REQUIRE_EDGE=1, so that a missing binary fails the tests
# instead of skipping them.
set -euo pipefail

missing=()
command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
command -v caddy >/dev/null 2>&1 || missing+=(caddy)
((${#missing[@]} == 0)) && exit 0

echo "edge-tools: installing ${missing[*]}" >&2
exec "$(dirname "$0")/apt-install.sh" "${missing[@]}"
