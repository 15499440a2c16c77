# shellcheck shell=bash
# Shared helpers for the throw-away Redis servers started by redis-server.sh and redis-cluster.sh.
# Source it; it defines functions only.

log() { printf '[%s] %s\n' "${0##*/}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# port_in_use PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port [OFFSET]: prints a loopback port P in 20000-49999 with nothing listening on P nor on
# P+OFFSET (Redis Cluster also binds its bus on P+10000). Another process may still take it before we
# bind it, so callers check that the server really came up and retry on another port if not.
free_port() {
	local offset=${1:-0} p i
	for ((i = 0; i < 200; i++)); do
		p=$((20000 + (RANDOM * 32768 + RANDOM) % 30000))
		if ! port_in_use "$p" && { [[ $offset == 0 ]] || ! port_in_use $((p + offset)); }; then
			echo "$p"
			return 0
		fi
	done
	die "no free loopback port found"
}

# wait_ping PORT SECONDS: waits until redis-cli -p PORT ping answers PONG.
wait_ping() {
	local port=$1 deadline=$((SECONDS + $2))
	while ((SECONDS < deadline)); do
		[[ $(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]] && return 0
		sleep 0.1
	done
	return 1
}

# start_node DIR PORT [EXTRA-ARGS...]: starts a daemonized redis-server that keeps nothing on disk
# (the cluster's nodes.conf aside), with its pidfile, log and working files in DIR. Returns non-zero
# if it did not answer PONG within 10 s (e.g. the port was taken meanwhile); the caller retries.
start_node() {
	local dir=$1 port=$2
	shift 2
	rm -f "$dir/redis.pid"
	redis-server --bind 127.0.0.1 --port "$port" --dir "$dir" \
		--daemonize yes --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
		--save "" --appendonly no --maxmemory-policy noeviction "$@" >/dev/null ||
		return 1
	if ! wait_own_server "$dir" "$port" 10; then
		stop_node "$dir"
		return 1
	fi
	echo "$port" >"$dir/port"
}

# wait_own_server DIR PORT SECONDS: waits until the server answering on PORT is the one whose
# pidfile is in DIR (and not some other server that took the port first).
wait_own_server() {
	local dir=$1 port=$2 deadline=$((SECONDS + $3)) pid
	while ((SECONDS < deadline)); do
		if [[ -s $dir/redis.pid ]]; then
			pid=$(<"$dir/redis.pid")
			redis-cli -h 127.0.0.1 -p "$port" info server 2>/dev/null | tr -d '\r' |
				grep -qx "process_id:$pid" && return 0
		fi
		sleep 0.1
	done
	return 1
}

# alive PID: true while PID runs (a zombie waiting for a parent that does not reap counts as gone).
alive() {
	kill -0 "$1" 2>/dev/null || return 1
	local state
	state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || return 0
	[[ ${state:0:1} != Z ]]
}

# stop_node DIR: stops the server whose pidfile is in DIR (TERM, then KILL after 10 s). Never fails.
stop_node() {
	local dir=$1 pid i
	[[ -f $dir/redis.pid ]] || return 0
	pid=$(<"$dir/redis.pid") || return 0
	[[ $pid =~ ^[0-9]+$ ]] || return 0
	kill "$pid" 2>/dev/null || { rm -f "$dir/redis.pid"; return 0; }
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	alive "$pid" && kill -KILL "$pid" 2>/dev/null
	rm -f "$dir/redis.pid"
	return 0
}

need_redis_server() {
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return 0
	cat >&2 <<'MSG'
redis-server and redis-cli are needed to start a throw-away Redis, and were not found. Either:
  - install them:              sudo apt-get install -y redis-server      (Debian/Ubuntu)
  - or run Redis with Docker:  docker compose up -d redis
                               export DXREDIS_TEST_ADDR=127.0.0.1:6379
  - or point the tests at any Redis 7 you have: export DXREDIS_TEST_ADDR=host:port
MSG
	return 1
}

# run_started VAR FILE CMD...: calls the sourcing script's start (which prints its temp dir),
# exports VAR from that dir's FILE, runs CMD and exits with its status; the script's stop runs on
# every exit (also on failure and signals).
run_started() {
	local var=$1 file=$2 dir status=0
	shift 2
	dir=$(start)
	# shellcheck disable=SC2064 # expand dir now
	trap "stop '$dir'" EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	export "$var=$(<"$dir/$file")"
	"$@" || status=$?
	exit "$status"
}
