#!/usr/bin/env bash
# apt-install.sh PACKAGE... installs Debian packages (as root) without
# recommends and without letting their maintainer scripts start a
# service (nginx and caddy would take port 80, prometheus 9090): the
# tests start their own, on loopback ports.
set -euo pipefail
(($# > 0)) || exit 0
if [[ ! -e /usr/sbin/policy-rc.d ]]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "$@" >/dev/null
