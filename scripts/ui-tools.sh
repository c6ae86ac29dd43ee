#!/usr/bin/env bash
# Installs what the page's browser test and the dashboard and alert
# rules' checks run, from Debian's packages, when missing: chromium
# (driven by chromedp in faces/admin) and prometheus (for promtool, in
# deploy/). Prometheus is not started as a service. `make test` runs it
# (as root, as CI does) and then sets TOLLGATE_REQUIRE_BROWSER=1 and
# TOLLGATE_REQUIRE_PROMTOOL=1, so that a missing binary fails the tests
# instead of skipping them.
set -euo pipefail

missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
((${#missing[@]} == 0)) && exit 0

echo "ui-tools: installing ${missing[*]}" >&2
exec "$(dirname "$0")/apt-install.sh" "${missing[@]}"
