#!/usr/bin/env bash
# Remove every container testcontainers-go created (label org.testcontainers=true).
# Needed because the Ryuk reaper is disabled (TESTCONTAINERS_RYUK_DISABLED=true):
# nothing else removes the containers of a crashed or killed test binary.
# Quiet, and never fails (safe as a CI "always" step or without Docker).
command -v docker >/dev/null 2>&1 || exit 0
docker ps -aq --filter label=org.testcontainers=true 2>/dev/null \
  | xargs -r docker rm -f -v >/dev/null 2>&1
exit 0
