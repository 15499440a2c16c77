#!/usr/bin/env bash
# Throw-away single Redis server for tests and benchmarks (shared by the Makefile and .ci/run).
#
#   scripts-dev/redis-server.sh run [--] CMD [ARGS...]
#       Runs CMD with DXREDIS_TEST_ADDR pointing at a real Redis. If DXREDIS_TEST_ADDR is already set
#       it is used as it is. Otherwise a server is started on a free loopback port (no persistence,
#       maxmemory-policy noeviction) and stopped when CMD ends, whatever its outcome or on Ctrl-C.
#       Exits with CMD's status.
#   scripts-dev/redis-server.sh start
#       Starts a server and prints its state directory (its address is in DIR/addr, its log in
#       DIR/redis.log). Stop it with: scripts-dev/redis-server.sh stop DIR
#   scripts-dev/redis-server.sh stop DIR
set -euo pipefail
# shellcheck source=scripts-dev/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start() {
	need_redis_server || exit 1
	local dir port try
	dir=$(mktemp -d "${TMPDIR:-/tmp}/dxredis-server.XXXXXX")
	for ((try = 1; try <= 5; try++)); do
		port=$(free_port 0)
		if start_node "$dir" "$port"; then
			echo "127.0.0.1:$port" >"$dir/addr"
			log "started redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port (pid $(<"$dir/redis.pid"), dir $dir)"
			echo "$dir"
			return 0
		fi
		log "redis-server did not come up on port $port (try $try); log:"
		tail -n 5 "$dir/redis.log" >&2 2>/dev/null || true
	done
	rm -rf "$dir"
	die "could not start redis-server"
}

stop() {
	local dir=${1:?usage: redis-server.sh stop DIR}
	[[ -d $dir ]] || return 0
	stop_node "$dir"
	log "stopped redis-server ($(cat "$dir/addr" 2>/dev/null || echo '?'))"
	rm -rf "$dir"
}

run() {
	[[ ${1:-} == -- ]] && shift
	(($# > 0)) || die "usage: redis-server.sh run [--] CMD [ARGS...]"
	if [[ -n ${DXREDIS_TEST_ADDR:-} ]]; then
		log "using DXREDIS_TEST_ADDR=$DXREDIS_TEST_ADDR"
		"$@"
		return
	fi
	run_started DXREDIS_TEST_ADDR addr "$@"
}

case ${1:-} in
start) start ;;
stop) stop "${2:-}" ;;
run) shift; run "$@" ;;
*) die "usage: redis-server.sh run [--] CMD... | start | stop DIR" ;;
esac
