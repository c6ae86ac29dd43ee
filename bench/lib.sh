# What the benchmark scripts share (bench/gateway/run.sh, bench/edge/run.sh):
# sourced, never run. The caller sets BENCH_NAME (the prefix of its log
# lines) and runs from the repository's root.

log() { echo "$BENCH_NAME: $*" >&2; }

# need COMMAND PACKAGE: install PACKAGE from Debian's packages when
# COMMAND is missing.
need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  log "installing $2"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "$2" >/dev/null
}

# bench_dir: a fresh temporary directory, $DIR, that nginx's workers
# (nobody) can read; at exit every process start started is stopped and
# the directory removed.
bench_dir() {
  DIR=$(mktemp -d "/tmp/$BENCH_NAME.XXXXXX")
  chmod 755 "$DIR"
  PIDS=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$DIR"
}

# start NAME COMMAND...: run COMMAND in the background, its output in
# $DIR/NAME.log; its pid is $LAST_PID.
start() {
  local name=$1; shift
  "$@" >"$DIR/$name.log" 2>&1 &
  PIDS+=($!)
  LAST_PID=$!
}

# nginx_head NAME WORKERS: what every nginx here starts with: its pid, log
# and temp paths under $DIR, no access log, long-lived keep-alive. The
# caller closes the http block.
nginx_head() {
  mkdir -p "$DIR/$1"
  cat <<CONF
worker_processes $2;
pid $DIR/$1.pid;
error_log $DIR/$1.err error;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 300s;
  client_body_temp_path $DIR/$1/body; proxy_temp_path $DIR/$1/proxy;
  fastcgi_temp_path $DIR/$1/fastcgi; uwsgi_temp_path $DIR/$1/uwsgi; scgi_temp_path $DIR/$1/scgi;
CONF
}

# nginx_start NAME: run the nginx of $DIR/NAME.conf in the foreground of
# a background job (start).
nginx_start() {
  start "$1" nginx -e "$DIR/$1.err" -p "$DIR" -c "$DIR/$1.conf" -g 'daemon off;'
}

# wrk_result FILE: read the RESULT line that bench/gateway/tenants.lua's
# done() printed into FILE: REQS, DUR_US, P50_US, P99_US, NON2XX, ERRORS,
# and RPS (requests per second).
wrk_result() {
  local line kv
  line=$(grep '^RESULT' "$1")
  for kv in ${line#RESULT }; do
    case ${kv%%=*} in
      requests) REQS=${kv#*=} ;; duration_us) DUR_US=${kv#*=} ;; p50_us) P50_US=${kv#*=} ;;
      p99_us) P99_US=${kv#*=} ;; non2xx) NON2XX=${kv#*=} ;; errors) ERRORS=${kv#*=} ;;
    esac
  done
  RPS=$(awk "BEGIN{printf \"%.0f\", $REQS/($DUR_US/1e6)}")
}
