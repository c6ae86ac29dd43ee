#!/usr/bin/env bash
# What `make test` runs (and CI, through .ci/run): every step, even after
# one fails, so that one run reports every failure; then a summary, one
# line per step and a closing line of the totals, exactly
# `N passed, N failed, N skipped` (CI reads it); exit 1 when any step
# failed. The test containers of this run are removed whatever happened.
#
# A go test step counts the tests and subtests `go test -json` reports;
# any other step (images, vet, the compose smoke tests) counts as one
# test. The terminal gets each package's result line and the output of
# the failed tests only; the full output of every step is kept under
# $TOLLGATE_TEST_OUT (default /tmp/tollgate-test-$TOLLGATE_TEST_RUN):
# <step>.log (plain text) and, for go test, <step>.jsonl.
#
# STEPS (space-separated names, default all) runs only those, e.g.
# STEPS="valkey compose-rls" make test.
set -uo pipefail
cd "$(dirname "$0")/.."

: "${TOLLGATE_TEST_RUN:=$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')}"
export TOLLGATE_TEST_RUN
OUT=${TOLLGATE_TEST_OUT:-/tmp/tollgate-test-$TOLLGATE_TEST_RUN}
VALKEY_IMAGE=${VALKEY_IMAGE:-tollgate.local/valkey:8}
ALL="image vet edge-tools ui-tools go-test burst-hog valkey compose compose-cluster compose-rls"
STEPS=${STEPS:-$ALL}
MAKE=${MAKE:-make}

trap 'scripts/cleanup-containers.sh' EXIT
trap 'exit 130' INT TERM

mkdir -p "$OUT"

# Say first what the steps will install from Debian (apt-get, as root),
# so that nothing is added to the machine unannounced.
installs=()
have() { command -v "$1" >/dev/null 2>&1; }
has_image() { docker image inspect "$1" >/dev/null 2>&1; }
if ! has_image tollgate.local/redis:7 && ! have redis-server; then installs+=("redis-tools"); fi
if ! has_image "$VALKEY_IMAGE" && [[ ! -x /usr/bin/valkey-check-rdb ]]; then
  installs+=("valkey-server valkey-tools from bookworm-backports (added to /etc/apt/sources.list.d when missing)")
fi
[[ -s /etc/ssl/certs/ca-certificates.crt ]] || installs+=("ca-certificates")
have nginx || installs+=("nginx-light")
have caddy || installs+=("caddy")
docker compose version >/dev/null 2>&1 || have docker-compose || installs+=("docker-compose")
have curl || installs+=("curl")
have jq || installs+=("jq")
have chromium || installs+=("chromium (the page's browser test)")
have promtool || installs+=("prometheus (promtool checks the alert rules and the dashboard's queries; not started)")
if ((${#installs[@]} > 0)); then
  echo "test: will install from Debian's packages (apt-get, as root):"
  printf '  %s\n' "${installs[@]}"
fi
# The summary reads go test's JSON with jq (Debian's package when missing).
if ! command -v jq >/dev/null 2>&1; then
  echo "test: installing jq (reads go test -json for the summary)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null; } ||
    { echo "test: jq is needed and could not be installed" >&2; exit 1; }
fi

summary=()
totals=(0 0 0)
failed=0

# record STEP PASSED FAILED SKIPPED adds a step's line to the summary.
record() {
  summary+=("$1: $2 passed, $3 failed, $4 skipped")
  totals=($((totals[0] + $2)) $((totals[1] + $3)) $((totals[2] + $4)))
  (($3 == 0)) || failed=1
}

banner() { printf '\n=== %s: %s\n' "$1" "$2"; }

# script STEP COMMAND... runs a command as one step of one test; its
# output goes to the terminal and to STEP.log.
script() {
  local step=$1 start=$SECONDS
  shift
  banner "$step" "$*"
  if "$@" 2>&1 | tee "$OUT/$step.log"; then
    record "$step" 1 0 0
  else
    echo "--- FAIL: $step ($((SECONDS - start))s): $*"
    record "$step" 0 1 0
  fi
}

# gotest STEP ARGS... runs go test -json ARGS. The terminal gets the
# packages' result lines (and anything printed outside a test); then
# the output of every failed test.
gotest() {
  local step=$1 json="$OUT/$1.jsonl" start=$SECONDS rc
  shift
  banner "$step" "go test $*"
  go test -json "$@" 2>&1 | tee "$json" |
    jq -R -j --unbuffered 'fromjson? // {Output: (. + "\n")} |
      select((.Action == "output" or .Action == "build-output") and .Test == null) | .Output' |
    grep -v --line-buffered -E '^(PASS|FAIL)$|^=== RUN|^--- (PASS|FAIL|SKIP)|^-test\.shuffle'
  rc=${PIPESTATUS[0]}
  jq -R -j 'fromjson? // {Output: (. + "\n")} | .Output // empty' "$json" >"$OUT/$step.log"
  # Every test that failed, with its own output, in the order it ran.
  jq -R -j -s '[split("\n")[] | fromjson? | select(.Test != null)] as $ev |
    ($ev | map(select(.Action == "fail") | .Package + " " + .Test)) as $failed |
    ($ev | map(select(.Action == "fail") | .Package) | unique)[] as $pkg |
    "--- failed in \($pkg):\n",
    ($ev[] | select(.Package == $pkg and .Action == "output") |
      select((.Package + " " + .Test) as $k | any($failed[]; . == $k)) | .Output)' \
    "$json" | grep -v -E '^=== (RUN|PAUSE|CONT|NAME)' || true
  local counts p f s
  counts=$(jq -R -r -s '[split("\n")[] | fromjson? | select(.Test != null)] as $ev |
    [($ev | map(select(.Action == "pass")) | length),
     ($ev | map(select(.Action == "fail")) | length),
     ($ev | map(select(.Action == "skip")) | length)] | @tsv' "$json")
  read -r p f s <<<"$counts"
  # A package that failed without a failed test (it did not build, its
  # TestMain or a timeout ended it) is one failure more.
  local broken
  broken=$(jq -R -r -s '[split("\n")[] | fromjson? | select(.Action == "fail")] |
    (map(select(.Test != null) | .Package) | unique) as $withtest |
    [.[] | select(.Test == null) | .Package | select(. as $p | any($withtest[]; . == $p) | not)] |
    unique | length' "$json")
  f=$((f + broken))
  if ((rc != 0 && f == 0)); then
    f=1 # go test failed and said nothing we can count (it did not start)
  fi
  echo "$step: go test exited $rc after $((SECONDS - start))s; full output: $OUT/$step.log"
  record "$step" "$p" "$f" "$s"
}

for step in $STEPS; do
  case $step in
  image) script image "$MAKE" --no-print-directory image ;;
  vet) script vet "$MAKE" --no-print-directory vet ;;
  edge-tools) script edge-tools scripts/edge-tools.sh ;;
  ui-tools) script ui-tools scripts/ui-tools.sh ;;
  # -timeout: the integration package took 8.5 min under -race beside a
  # CPU hog, near go test's default of 10.
  go-test) TOLLGATE_REQUIRE_EDGE=1 TOLLGATE_REQUIRE_BROWSER=1 TOLLGATE_REQUIRE_PROMTOOL=1 gotest go-test -race -shuffle=on -count=1 -timeout 30m ./... ;;
  # Without the race detector: its timing is the point.
  burst-hog) gotest burst-hog -count=1 -timeout 30m -run 'TestBurstUnderCPUHog' ./integration/ ;;
  valkey) TOLLGATE_TEST_REDIS_IMAGE=$VALKEY_IMAGE gotest valkey -race -shuffle=on -count=1 -timeout 30m ./integration/... ;;
  compose) script compose scripts/compose-test.sh ;;
  compose-cluster) script compose-cluster scripts/compose-cluster-test.sh ;;
  compose-rls) script compose-rls scripts/compose-rls-test.sh ;;
  *)
    echo "test: unknown step $step (steps: $ALL)"
    record "$step" 0 1 0
    ;;
  esac
done

printf '\n=== summary (full output: %s)\n' "$OUT"
printf '%s\n' "${summary[@]}"
echo "${totals[0]} passed, ${totals[1]} failed, ${totals[2]} skipped"
exit "$failed"
