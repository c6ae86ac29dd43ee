#!/usr/bin/env bash
# rls-oracle.sh: compare a server under test with envoyproxy/ratelimit on
# every suite of bench/rlsoracle/suites (or the suites named as arguments).
#
#   ENVOY_RATELIMIT_BIN=/path/to/service_cmd TOLLGATE_BIN=/path/to/tollgate scripts/rls-oracle.sh [suite...]
#
# ENVOY_RATELIMIT_BIN (required) is an envoyproxy/ratelimit binary you built;
# this script never builds it. The server under test is one of:
#   TOLLGATE_BIN=path   tollgate, started for each suite twice: with
#                       TOLLGATE_RLS_COUNT_DENIED=true over every scenario,
#                       and with the default over the count_denied: false ones;
#   SUT_ADDR=host:port  a running server: SUT_CONFIG_DIR is the directory it
#                       watches (each suite's files are copied there, then
#                       RELOAD_WAIT, default 3 s, is waited), SUT_REDIS
#                       (host:port) the Redis it counts in (flushed before
#                       each suite), SUT_COUNT_DENIED=true|false how it runs;
#   SELF_CHECK=1        a second envoyproxy/ratelimit on its own Redis: every
#                       scenario must agree with itself (SELF_CHECK_ENV adds
#                       VAR=VALUE settings to that second one only).
# XDS=1 gives both servers each suite's configuration over xDS instead of
# files: bench/rlsoracle/xdsserve serves it (go-control-plane's snapshot
# cache, ADS) on 127.0.0.1:PORT_BASE+20, envoyproxy/ratelimit takes it
# with CONFIG_TYPE=GRPC_XDS_SOTW (node ref), and tollgate runs with
# -envoy-ratelimit in envoyproxy/ratelimit's environment (node sut), as
# Envoy Gateway runs it; each server is asked only once it has
# acknowledged the configuration.
# Other TOLLGATE_* variables in the environment reach tollgate unchanged.
# It starts redis-server (Debian's redis-server package) on loopback ports
# REF_REDIS_PORT (16379) and SUT_REDIS_PORT (16380), envoyproxy/ratelimit on
# 127.0.0.1:18081 (HTTP 18080, debug 16070), the server under test on
# 127.0.0.1:18082 (tollgate's admin listener on 19090; PORT_BASE, 18080,
# moves them all), and stops them all, by pid, when it ends. ORACLE_BIN is a
# prebuilt rlsoracle; by default it is built from bench/; ORACLE_FLAGS adds
# flags to it (e.g. "-v -run override"). Logs go to
# $WORK (a temporary directory, kept when something fails).
# Exit status: 0 when every scenario agrees, 1 otherwise, 2 on bad usage.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
suites_dir=$root/bench/rlsoracle/suites
: "${ENVOY_RATELIMIT_BIN:?set ENVOY_RATELIMIT_BIN to an envoyproxy/ratelimit binary (this script does not build it)}"
[[ -x $ENVOY_RATELIMIT_BIN ]] || { echo "rls-oracle: $ENVOY_RATELIMIT_BIN is not executable" >&2; exit 2; }
command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
	{ echo "rls-oracle: redis-server and redis-cli are needed (apt-get install -y redis-server)" >&2; exit 2; }

REF_REDIS_PORT=${REF_REDIS_PORT:-16379}
SUT_REDIS_PORT=${SUT_REDIS_PORT:-16380}
# PORT_BASE moves every other port: PORT_BASE+1 and +2 the two gRPC
# listeners, +0 and +10 envoyproxy/ratelimit's HTTP, +90 and +91 their
# debug listeners, +1010 tollgate's admin listener.
PORT_BASE=${PORT_BASE:-18080}
REF_GRPC=127.0.0.1:$((PORT_BASE + 1))
SUT_GRPC=127.0.0.1:$((PORT_BASE + 2))
REF_HTTP=$PORT_BASE SUT_HTTP=$((PORT_BASE + 10))
REF_DEBUG=$((PORT_BASE - 2010)) SUT_DEBUG=$((PORT_BASE - 2009))
SUT_ADMIN=127.0.0.1:$((PORT_BASE + 1010))
RELOAD_WAIT=${RELOAD_WAIT:-3}
XDS=${XDS:-}
XDS_ADDR=127.0.0.1:$((PORT_BASE + 20))

if [[ -n ${TOLLGATE_BIN:-} ]]; then
	sut=tollgate
	[[ -x $TOLLGATE_BIN ]] || { echo "rls-oracle: $TOLLGATE_BIN is not executable" >&2; exit 2; }
elif [[ -n ${SUT_ADDR:-} ]]; then
	sut=address
	: "${SUT_CONFIG_DIR:?SUT_ADDR needs SUT_CONFIG_DIR, the directory the server watches}"
	: "${SUT_REDIS:?SUT_ADDR needs SUT_REDIS, host:port of the Redis it counts in}"
	: "${SUT_COUNT_DENIED:?SUT_ADDR needs SUT_COUNT_DENIED=true or false}"
elif [[ ${SELF_CHECK:-} == 1 ]]; then
	sut=self
else
	echo "rls-oracle: set TOLLGATE_BIN, SUT_ADDR or SELF_CHECK=1" >&2
	exit 2
fi

WORK=$(mktemp -d /tmp/rls-oracle.XXXXXX)
pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}
trap cleanup EXIT

# free HOST:PORT NAME: fails when something already listens there (a
# stale envoyproxy/ratelimit would share the port through SO_REUSEPORT and
# answer half the calls).
free() {
	if (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; then
		echo "rls-oracle: $1 (for $2) is already in use" >&2
		return 1
	fi
}

# start NAME CMD...: runs CMD in the background, logging to $WORK/NAME.log;
# sets $started to its pid.
start() {
	local name=$1
	shift
	"$@" >"$WORK/$name.log" 2>&1 &
	started=$!
	pids+=("$started")
}

# stop PID: ends one process this script started, and forgets it so that
# the cleanup never signals a pid the system may have reused.
stop() {
	local keep=() pid
	kill "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	for pid in "${pids[@]}"; do [[ $pid == "$1" ]] || keep+=("$pid"); done
	pids=("${keep[@]}")
}

# wait_port HOST:PORT NAME PID: waits up to 10 s for a listener.
wait_port() {
	local host=${1%:*} port=${1##*:} i
	for ((i = 0; i < 100; i++)); do
		if ! kill -0 "$3" 2>/dev/null; then
			echo "rls-oracle: $2 exited; its log:" >&2
			tail -20 "$WORK/$2.log" >&2
			stop "$3"
			return 1
		fi
		if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	echo "rls-oracle: $2 is not listening on $1 after 10 s" >&2
	stop "$3"
	return 1
}

oracle=${ORACLE_BIN:-}
if [[ -z $oracle ]]; then
	oracle=$WORK/rlsoracle
	(cd "$root/bench" && go build -o "$oracle" ./rlsoracle)
fi
if [[ $XDS == 1 ]]; then
	[[ $sut != address ]] || { echo "rls-oracle: XDS=1 needs TOLLGATE_BIN or SELF_CHECK=1" >&2; exit 2; }
	xdsserve=$WORK/xdsserve
	(cd "$root/bench" && go build -o "$xdsserve" ./rlsoracle/xdsserve)
fi

# xds_env NODE: the variables that point envoyproxy/ratelimit's
# environment at the suite's xDS server as NODE (none without XDS=1).
xds_env() {
	[[ $XDS == 1 ]] && echo "CONFIG_TYPE=GRPC_XDS_SOTW CONFIG_GRPC_XDS_SERVER_URL=$XDS_ADDR CONFIG_GRPC_XDS_NODE_ID=$1"
	return 0
}

# wait_ack NODE PID: waits up to 10 s for NODE's acknowledgement of the
# configuration in the xDS server's log.
wait_ack() {
	local i
	for ((i = 0; i < 100; i++)); do
		grep -q "^ack node=$1 version=1\$" "$WORK/xds.log" && return 0
		sleep 0.1
	done
	echo "rls-oracle: $1 did not acknowledge the configuration after 10 s; the xDS server's log:" >&2
	tail -5 "$WORK/xds.log" >&2
	stop "$2"
	return 1
}

free "127.0.0.1:$REF_REDIS_PORT" redis-ref
start redis-ref redis-server --bind 127.0.0.1 --port "$REF_REDIS_PORT" --save '' --appendonly no
wait_port "127.0.0.1:$REF_REDIS_PORT" redis-ref "$started"
if [[ $sut != address ]]; then
	free "127.0.0.1:$SUT_REDIS_PORT" redis-sut
	start redis-sut redis-server --bind 127.0.0.1 --port "$SUT_REDIS_PORT" --save '' --appendonly no
	wait_port "127.0.0.1:$SUT_REDIS_PORT" redis-sut "$started"
fi

# envoy_rl NAME SUITE REDIS_PORT GRPC HTTP_PORT DEBUG_PORT [VAR=VALUE...]:
# starts envoyproxy/ratelimit on a suite's config directory.
envoy_rl() {
	free "$4" "$1" && free "127.0.0.1:$5" "$1" && free "127.0.0.1:$6" "$1" || return 1
	start "$1" env -i PATH="$PATH" USE_STATSD=false LOG_LEVEL=warn "${@:7}" \
		REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$3" \
		RUNTIME_ROOT="$2" RUNTIME_SUBDIRECTORY= RUNTIME_APPDIRECTORY=config \
		RUNTIME_WATCH_ROOT=false RUNTIME_IGNOREDOTFILES=true MERGE_DOMAIN_CONFIG=true \
		HOST=127.0.0.1 PORT="$5" GRPC_HOST=127.0.0.1 GRPC_PORT="${4##*:}" DEBUG_HOST=127.0.0.1 DEBUG_PORT="$6" \
		$(xds_env "${1%%-*}") "$ENVOY_RATELIMIT_BIN"
	# Over xDS it listens once its configuration is loaded.
	wait_port "$4" "$1" "$started"
}

flush() { redis-cli -h "${1%:*}" -p "${1##*:}" FLUSHALL >/dev/null; }

# pass SUITE COUNT_DENIED MODE: one comparison of a suite with fresh stores.
pass() {
	local suite=$1 count_denied=$2 mode=$3 name ref sut_pid=
	name=$(basename "$suite")
	local xds_pid=
	if [[ $XDS == 1 ]]; then
		free "$XDS_ADDR" xds || return 1
		start xds "$xdsserve" -addr "$XDS_ADDR" -config "$suite/config" -nodes ref,sut
		xds_pid=$started
		wait_port "$XDS_ADDR" xds "$xds_pid" || return 1
	fi
	flush "127.0.0.1:$REF_REDIS_PORT"
	envoy_rl "ref-$name" "$suite" "$REF_REDIS_PORT" "$REF_GRPC" "$REF_HTTP" "$REF_DEBUG" || { [[ -n $xds_pid ]] && stop "$xds_pid"; return 1; }
	ref=$started
	case $sut in
	tollgate)
		flush "127.0.0.1:$SUT_REDIS_PORT"
		free "$SUT_GRPC" tollgate && free "$SUT_ADMIN" tollgate || { stop "$ref"; return 1; }
		if [[ $XDS == 1 ]]; then
			free "127.0.0.1:$SUT_HTTP" tollgate || { stop "$ref"; return 1; }
			start "tollgate-$name-$count_denied" env -i PATH="$PATH" $(env | grep '^TOLLGATE_' || true) \
				USE_STATSD=false REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$SUT_REDIS_PORT" \
				HOST=127.0.0.1 PORT="$SUT_HTTP" GRPC_HOST=127.0.0.1 GRPC_PORT="${SUT_GRPC##*:}" \
				FORCE_START_WITHOUT_INITIAL_CONFIG=true $(xds_env sut) \
				TOLLGATE_RLS_COUNT_DENIED="$count_denied" TOLLGATE_ALGORITHM=fixed_window \
				"$TOLLGATE_BIN" -envoy-ratelimit
			sut_pid=$started
			wait_port "$SUT_GRPC" "tollgate-$name-$count_denied" "$sut_pid" && wait_ack sut "$sut_pid" ||
				{ stop "$ref"; stop "$xds_pid"; return 1; }
		else
			start "tollgate-$name-$count_denied" env TOLLGATE_LISTEN_ADDR=off TOLLGATE_ADMIN_ADDR="$SUT_ADMIN" \
				TOLLGATE_RLS_ADDR="$SUT_GRPC" TOLLGATE_RLS_CONFIG="$suite/config" \
				TOLLGATE_RLS_COUNT_DENIED="$count_denied" TOLLGATE_ALGORITHM=fixed_window \
				TOLLGATE_STORE=redis TOLLGATE_REDIS_URL="redis://127.0.0.1:$SUT_REDIS_PORT/0" "$TOLLGATE_BIN"
			sut_pid=$started
			wait_port "$SUT_GRPC" "tollgate-$name-$count_denied" "$sut_pid" || { stop "$ref"; return 1; }
		fi
		;;
	self)
		flush "127.0.0.1:$SUT_REDIS_PORT"
		# shellcheck disable=SC2086 # SELF_CHECK_ENV is a list of VAR=VALUE
		envoy_rl "sut-$name" "$suite" "$SUT_REDIS_PORT" "$SUT_GRPC" "$SUT_HTTP" "$SUT_DEBUG" ${SELF_CHECK_ENV:-} ||
			{ stop "$ref"; return 1; }
		sut_pid=$started
		;;
	address)
		flush "$SUT_REDIS"
		find "$SUT_CONFIG_DIR" -mindepth 1 -maxdepth 1 \( -name '*.yaml' -o -name '*.yml' \) -delete
		cp -L "$suite"/config/* "$SUT_CONFIG_DIR"/
		sleep "$RELOAD_WAIT"
		;;
	esac
	local addr=$SUT_GRPC
	[[ $sut == address ]] && addr=$SUT_ADDR
	local rc=0
	# shellcheck disable=SC2086 # ORACLE_FLAGS is a list of flags
	local xds_flag=
	[[ $XDS == 1 ]] && xds_flag=-xds
	"$oracle" -a "$REF_GRPC" -b "$addr" -config "$suite/config" -scenarios "$suite/scenarios.yaml" -mode "$mode" \
		$xds_flag ${ORACLE_FLAGS:-} || rc=$?
	[[ -n $sut_pid ]] && stop "$sut_pid"
	stop "$ref"
	[[ -n $xds_pid ]] && stop "$xds_pid"
	return $rc
}

if (($# > 0)); then
	suites=()
	for s in "$@"; do suites+=("$suites_dir/$s"); done
else
	suites=("$suites_dir"/*/)
fi
failed=0
for suite in "${suites[@]}"; do
	suite=${suite%/}
	[[ -f $suite/scenarios.yaml ]] || { echo "rls-oracle: no $suite/scenarios.yaml" >&2; exit 2; }
	echo "== $(basename "$suite")"
	case $sut in
	tollgate)
		pass "$suite" true all || failed=1
		pass "$suite" false default || failed=1
		;;
	self) pass "$suite" false all || failed=1 ;;
	address)
		if [[ $SUT_COUNT_DENIED == true ]]; then pass "$suite" true all || failed=1
		else pass "$suite" false default || failed=1; fi
		;;
	esac
done
if ((failed)); then
	echo "rls-oracle: differences found; logs in $WORK"
	exit 1
fi
rm -rf "$WORK"
echo "rls-oracle: every suite agrees"
