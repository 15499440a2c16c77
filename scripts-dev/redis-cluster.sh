#!/usr/bin/env bash
# Throw-away 3-primary Redis Cluster on loopback for tests (shared by the Makefile and .ci/run).
# Each node is a `redis-server --cluster-enabled yes` in its own temporary directory, keeping nothing
# on disk but its nodes.conf; the cluster is formed with `redis-cli --cluster create`.
#
#   scripts-dev/redis-cluster.sh run [--] CMD [ARGS...]
#       Runs CMD with DXREDIS_TEST_CLUSTER=host:port,host:port,host:port (and DXREDIS_TEST_ADDR
#       unset, so that only the cluster is targeted). If DXREDIS_TEST_CLUSTER is already set it is
#       used as it is. Otherwise a cluster is started and torn down when CMD ends, whatever its
#       outcome. Exits with CMD's status.
#   scripts-dev/redis-cluster.sh start
#       Starts a cluster and prints its state directory (seed addresses, comma-separated, in
#       DIR/addrs). Tear it down with: scripts-dev/redis-cluster.sh stop DIR
#   scripts-dev/redis-cluster.sh stop DIR
set -euo pipefail
# shellcheck source=scripts-dev/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# DXREDIS_CLUSTER_NODES=N sets the number of primaries (default 3; bench/scaleout.sh uses 1-3).
# DXREDIS_CLUSTER_NODES=1 makes a one-node cluster holding every slot: nothing can fail over,
# but every script runs with the cluster's checks, so one that touches a key of another slot
# (another partition) fails loudly ("Script attempted to access keys that do not hash to the
# same slot"): make test-partitions runs its suites there too.
NODES=${DXREDIS_CLUSTER_NODES:-3}
# DXREDIS_CLUSTER_REPLICAS=1 gives each primary that many replicas (NODES x (1 + REPLICAS) servers;
# the failover tests SIGKILL a primary and wait for its replica's promotion); DIR/addrs lists the
# primaries and replicas alike (the cluster client finds which is which).
REPLICAS=${DXREDIS_CLUSTER_REPLICAS:-0}
# DXREDIS_CLUSTER_NODE_TIMEOUT: cluster-node-timeout in ms (how long before a silent primary is
# failed over). Default 5000.
NODE_TIMEOUT=${DXREDIS_CLUSTER_NODE_TIMEOUT:-5000}

# wait_cluster_ok SECONDS PORT...: waits until every node reports cluster_state:ok and knows all nodes.
wait_cluster_ok() {
	local deadline=$((SECONDS + $1)) port info ok
	shift
	while ((SECONDS < deadline)); do
		ok=1
		for port in "$@"; do
			info=$(redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null | tr -d '\r') || info=
			if ! grep -qx 'cluster_state:ok' <<<"$info" || ! grep -qx "cluster_known_nodes:$#" <<<"$info"; then
				ok=0
				break
			fi
		done
		((ok)) && return 0
		sleep 0.2
	done
	return 1
}

# wait_replicas_synced SECONDS PORT...: waits until every replica among the nodes has its link to
# its primary up.
wait_replicas_synced() {
	local deadline=$((SECONDS + $1)) port info ok
	shift
	while ((SECONDS < deadline)); do
		ok=1
		for port in "$@"; do
			info=$(redis-cli -h 127.0.0.1 -p "$port" info replication 2>/dev/null | tr -d '\r') || info=
			if grep -qx 'role:slave' <<<"$info" && ! grep -qx 'master_link_status:up' <<<"$info"; then
				ok=0
				break
			fi
		done
		((ok)) && return 0
		sleep 0.2
	done
	return 1
}

start() {
	need_redis_server || exit 1
	local dir node port try ports=() addrs=()
	dir=$(mktemp -d "${TMPDIR:-/tmp}/dxredis-cluster.XXXXXX")
	# From here on, a failure tears down what was started.
	# shellcheck disable=SC2064 # expand dir now
	trap "stop '$dir' >&2; exit 1" ERR
	((NODES > 1 || REPLICAS == 0)) || die "replicas need at least 3 primaries"
	for ((node = 1; node <= NODES * (1 + REPLICAS); node++)); do
		mkdir "$dir/node$node"
		for ((try = 1; ; try++)); do
			port=$(free_port 10000)
			start_node "$dir/node$node" "$port" \
				--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$NODE_TIMEOUT" \
				--repl-diskless-sync yes --repl-diskless-sync-delay 0 &&
				break
			log "node $node did not come up on port $port (try $try)"
			((try < 5)) || false
		done
		ports+=("$port")
		addrs+=("127.0.0.1:$port")
	done
	log "creating cluster of ${addrs[*]}"
	if ((NODES < 3)); then
		# redis-cli --cluster create wants 3 primaries: give each node an even share of the slots
		# and introduce them to each other by hand.
		for ((node = 0; node < NODES; node++)); do
			redis-cli -h 127.0.0.1 -p "${ports[node]}" cluster addslotsrange \
				$((16384 * node / NODES)) $((16384 * (node + 1) / NODES - 1)) >>"$dir/create.log" 2>&1 &&
				redis-cli -h 127.0.0.1 -p "${ports[node]}" cluster meet 127.0.0.1 "${ports[0]}" >>"$dir/create.log" 2>&1 ||
				{ cat "$dir/create.log" >&2; false; }
		done
	else
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas "$REPLICAS" --cluster-yes >"$dir/create.log" 2>&1 ||
			{ cat "$dir/create.log" >&2; false; }
	fi
	if ! wait_cluster_ok 30 "${ports[@]}"; then
		log "cluster did not reach cluster_state:ok within 30 s"
		redis-cli -h 127.0.0.1 -p "${ports[0]}" cluster info >&2 || true
		false
	fi
	if ((REPLICAS > 0)) && ! wait_replicas_synced 30 "${ports[@]}"; then
		log "the replicas did not sync within 30 s"
		false
	fi
	(IFS=,; echo "${addrs[*]}") >"$dir/addrs"
	trap - ERR
	log "cluster ok: $(<"$dir/addrs") (dir $dir)"
	echo "$dir"
}

stop() {
	local dir=${1:?usage: redis-cluster.sh stop DIR} node
	[[ -d $dir ]] || return 0
	for node in "$dir"/node*; do
		[[ -d $node ]] && stop_node "$node"
	done
	log "stopped cluster ($(cat "$dir/addrs" 2>/dev/null || echo 'not formed'))"
	rm -rf "$dir"
}

run() {
	[[ ${1:-} == -- ]] && shift
	(($# > 0)) || die "usage: redis-cluster.sh run [--] CMD [ARGS...]"
	unset DXREDIS_TEST_ADDR
	if [[ -n ${DXREDIS_TEST_CLUSTER:-} ]]; then
		log "using DXREDIS_TEST_CLUSTER=$DXREDIS_TEST_CLUSTER"
		"$@"
		return
	fi
	run_started DXREDIS_TEST_CLUSTER addrs "$@"
}

case ${1:-} in
start) start ;;
stop) stop "${2:-}" ;;
run) shift; run "$@" ;;
*) die "usage: redis-cluster.sh run [--] CMD... | start | stop DIR" ;;
esac
