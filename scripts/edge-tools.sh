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
# The packages' maintainer scripts would start both as services, on
# port 80: deny that for this install, unless a policy is already there.
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
