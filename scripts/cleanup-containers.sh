#!/usr/bin/env bash
# Remove the containers tollgate's integration tests started (label
# tollgate.test=true), and only those of this run when TOLLGATE_TEST_RUN is
# set (make test sets it): another project's testcontainers, or a
# concurrent run's, are left alone. Needed because the Ryuk reaper is
# disabled (TESTCONTAINERS_RYUK_DISABLED=true): nothing else removes the
# containers of a crashed or killed test binary.
# Quiet, and never fails (safe as a CI "always" step or without Docker).
command -v docker >/dev/null 2>&1 || exit 0
filters=(--filter label=tollgate.test=true)
if [ -n "${TOLLGATE_TEST_RUN:-}" ]; then
  filters+=(--filter "label=tollgate.test.run=${TOLLGATE_TEST_RUN}")
fi
docker ps -aq "${filters[@]}" 2>/dev/null | xargs -r docker rm -f -v >/dev/null 2>&1
exit 0
