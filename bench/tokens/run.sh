#!/usr/bin/env bash
# The token benchmark: is a token budget exact across replicas? Two
# tollgate replicas share one Debian redis-server on loopback, with one
# token limit (TOKENS a minute, "meter": "tokens") on an OpenAI-compatible
# route, in front of bench/tokens/llm (an upstream that streams its
# answers and keeps the books of what it served). bench/tokens/load runs
# WORKERS streaming callers, each asking for WANT tokens again and again,
# for a little under a minute (one window), in two modes:
#
#   proxy  tollgate's proxy: reserve at admission, cap max_tokens, settle
#          when the stream ends;
#   after  charge after the fact, as Envoy AI Gateway does: tollgate's
#          check listener (admitted while anything remains), the upstream
#          called directly, then the tokens reported on the spend call.
#
# For each run it reads, from the upstream's books, the tokens of the
# requests that started in the minute from the first one: what the
# tenant got in its window, against its budget. Rounds interleave the
# modes; the table gives each mode's median.
#
# Output: docs/tokens-bench.md (the table) and docs/tokens-bench.jsonl
# (every run). Settings (environment): ROUNDS (3), TOKENS (10000),
# WORKERS (200), WANT (290 completion tokens; the upstream adds a prompt
# of 10), PORT_BASE (22000), OUT (docs).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"

ROUNDS=${ROUNDS:-3}
TOKENS=${TOKENS:-10000}
WORKERS=${WORKERS:-200}
WANT=${WANT:-290}
PORT_BASE=${PORT_BASE:-22000}
OUT=${OUT:-docs}
TOKEN=bench-token-0123456789abcdef

BENCH_NAME=tokens-bench
source bench/lib.sh
need redis-server redis-server
need curl curl
need jq jq

P_REDIS=$((PORT_BASE + 79)) P_LLM=$((PORT_BASE + 1))
bench_dir
log "building into $DIR"
go build -o "$DIR/tollgate" ./cmd/tollgate
(cd bench && go build -o "$DIR/llm" ./tokens/llm && go build -o "$DIR/load" ./tokens/load)
cat >"$DIR/policy.json" <<JSON
{"limits": [{"name": "tpm", "limit": $TOKENS, "window": "1m", "meter": "tokens"}],
 "routes": [{"name": "chat", "method": "POST", "path": "/v1/chat/completions", "tokens": "openai", "reserve": 300}]}
JSON
start redis redis-server --port "$P_REDIS" --bind 127.0.0.1 --save '' --appendonly no
start llm "$DIR/llm" -addr "127.0.0.1:$P_LLM"
sleep 0.5

wait_ready() { # wait_ready PORT: until the admin listener is ready
  for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$1/readyz" && return 0
    sleep 0.1
  done
  log "tollgate on admin port $1 is not ready"; tail -n 5 "$DIR"/tollgate-*.log >&2; return 1
}

# replicas PREFIX: start two tollgate replicas on one Redis, under key
# prefix PREFIX; their pids in REPLICAS.
replicas() {
  REPLICAS=()
  local i
  for i in 0 1; do
    TOLLGATE_STORE=redis TOLLGATE_REDIS_URL="redis://127.0.0.1:$P_REDIS/0" TOLLGATE_KEY_PREFIX="$1" \
      TOLLGATE_POLICY_FILE="$DIR/policy.json" TOLLGATE_UPSTREAM_URL="http://127.0.0.1:$P_LLM" \
      TOLLGATE_LISTEN_ADDR="127.0.0.1:$((PORT_BASE + 10 + i))" TOLLGATE_CHECK_ADDR="127.0.0.1:$((PORT_BASE + 20 + i))" \
      TOLLGATE_ADMIN_ADDR="127.0.0.1:$((PORT_BASE + 30 + i))" TOLLGATE_ADMIN_TOKEN=$TOKEN \
      start "tollgate-$i" "$DIR/tollgate"
    REPLICAS+=("$LAST_PID")
  done
  wait_ready $((PORT_BASE + 30)) && wait_ready $((PORT_BASE + 31))
}

: >"$DIR/runs.jsonl"
for round in $(seq "$ROUNDS"); do
  for mode in proxy after; do
    replicas "rl:$mode$round:"
    curl -sf -X POST "http://127.0.0.1:$P_LLM/reset"
    if [[ $mode == proxy ]]; then
      targets="http://127.0.0.1:$((PORT_BASE + 10)),http://127.0.0.1:$((PORT_BASE + 11))"
    else
      targets="http://127.0.0.1:$((PORT_BASE + 20)),http://127.0.0.1:$((PORT_BASE + 21))"
    fi
    # 58 s of load: every request is admitted in the budget's first
    # window (it starts with the first request), so that a burst at the
    # next window's start cannot be read as this window's overshoot.
    result=$("$DIR/load" -mode "$mode" -targets "$targets" -workers "$WORKERS" -want "$WANT" -duration 58s \
      -admins "http://127.0.0.1:$((PORT_BASE + 30)),http://127.0.0.1:$((PORT_BASE + 31))" -token "$TOKEN" \
      -upstream "http://127.0.0.1:$P_LLM")
    stats=$(curl -sf "http://127.0.0.1:$P_LLM/stats?window=60s")
    line=$(jq -c -n --argjson r "$result" --argjson s "$stats" --argjson round "$round" --argjson budget "$TOKENS" \
      '$r + {round: $round, budget: $budget, tokens: $s.tokens, requests_in_window: $s.requests}')
    log "$line"
    echo "$line" >>"$DIR/runs.jsonl"
    kill "${REPLICAS[@]}"; wait "${REPLICAS[@]}" 2>/dev/null || true
  done
done

cp "$DIR/runs.jsonl" "$OUT/tokens-bench.jsonl"
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
{
  echo "<!-- written by bench/tokens/run.sh from docs/tokens-bench.jsonl: re-run it rather than edit -->"
  echo "# Token budgets across two replicas"
  echo
  echo "\`ROUNDS=$ROUNDS TOKENS=$TOKENS WORKERS=$WORKERS WANT=$WANT bench/tokens/run.sh\` on $(date -u +%F), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; $(redis-server --version | grep -o 'v=[^ ]*' | sed 's/^/Redis /')."
  echo "Rounds interleave the modes; each cell is the median over the rounds."
  echo
  echo "| mode | budget a minute | tokens served in the minute (median of $ROUNDS) | of the budget | streams completed (median) | answered 429 (median) |"
  echo "| --- | --- | --- | --- | --- | --- |"
  for mode in proxy after; do
    tokens=$(jq -r "select(.mode == \"$mode\") | .tokens" "$DIR/runs.jsonl" | median)
    streams=$(jq -r "select(.mode == \"$mode\") | .streams" "$DIR/runs.jsonl" | median)
    denied=$(jq -r "select(.mode == \"$mode\") | .denied" "$DIR/runs.jsonl" | median)
    name=$([[ $mode == proxy ]] && echo "reserve, then settle (tollgate's proxy)" || echo "charge after (check, then report)")
    echo "| $name | $TOKENS | $tokens | $(awk "BEGIN{printf \"%.1f%%\", 100*$tokens/$TOKENS}") | $streams | $denied |"
  done
} >"$OUT/tokens-bench.md"
cat "$OUT/tokens-bench.md"
