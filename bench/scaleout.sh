#!/usr/bin/env bash
# Capacity per shard (issue 34): for each shard count, starts a throw-away loopback Redis Cluster of
# that many primaries (scripts-dev/redis-cluster.sh), holds every redis-server to the same CPU quota
# (cgroup v1 cpu.cfs_quota_us, or cpu.max under cgroup v2, in periods of 20 ms so that throttling
# stalls a server for milliseconds, not tens; needs root), runs W1 (hello), W2 (fanout)
# and children at a fixed partition count with bench/partbench, and prints throughput, per-node
# Redis CPU and the efficiency throughput_N / (N x throughput_1).
#
#   bench/scaleout.sh                        # 1, 2 and 3 shards at 20% of a core each, P = 12
#   SHARDS="1 2 3" QUOTA=20 P=12 N=600 WORKLOADS="hello fanout children" bench/scaleout.sh
#   REPLICAS=1 SHARDS=3 WAITS="0 1" bench/scaleout.sh   # the cost of WaitReplicas (replicas capped too)
#   SHARDS=3 P=1 RATE_hello=120 RATE_fanout=40 RATE_children=14 bench/scaleout.sh   # latency at a set load
#
# The quota keeps each shard, not the load generator, the bottleneck: check that the nodes' CPU
# sits near QUOTA and that the machine has CPU left for partbench (on a busy machine the numbers
# say little). Results: one JSON line per run in $OUT (default bench/scaleout-<date>.jsonl).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SHARDS=${SHARDS:-"1 2 3"}
QUOTA=${QUOTA:-20}         # percent of one core per redis-server (5 at least)
P=${P:-12}
N=${N:-600}                # orchestrations per run
WORKLOADS=${WORKLOADS:-"hello fanout children"}
REPLICAS=${REPLICAS:-0}
WAITS=${WAITS:-0}          # WaitReplicas values to run (needs REPLICAS >= the value)
# RATE_<workload>: orchestrations started per second (default 0: all at once, for throughput).
NAMED=${NAMED:-0}          # 1: children named explicitly (placed by their own ids: starts and completions cross partitions)
CONC=${CONC:-8}             # dispatcher goroutines (orchestration and worker each) per shard: the load grows with N
OUT=${OUT:-bench/scaleout-$(date -u +%Y%m%dT%H%M%S).jsonl}

log() { printf '[scaleout] %s\n' "$*" >&2; }

CG_V1=/sys/fs/cgroup/cpu
cgroups=()
# cap DIR PID: puts the server PID in a new cgroup limited to QUOTA% of a core.
cap() {
	local name=dxscale-$$-$2 cg
	if [[ -w $CG_V1/cgroup.procs ]]; then
		cg=$CG_V1/$name
		mkdir "$cg"
		cgroups+=("$cg")
		echo 20000 >"$cg/cpu.cfs_period_us"
		echo $((QUOTA * 200)) >"$cg/cpu.cfs_quota_us"
	elif [[ -w /sys/fs/cgroup/cgroup.procs ]]; then
		cg=/sys/fs/cgroup/$name
		mkdir "$cg"
		cgroups+=("$cg")
		echo "$((QUOTA * 200)) 20000" >"$cg/cpu.max"
	else
		log "no writable cgroup (v1 $CG_V1 or v2 /sys/fs/cgroup): run as root"
		exit 1
	fi
	echo "$2" >"$cg/cgroup.procs"
}

uncap() {
	local cg pid
	for cg in "${cgroups[@]}"; do
		[[ -d $cg ]] || continue
		# Move what is left back to the root group, then remove the group.
		while read -r pid; do echo "$pid" >"${cg%/*}/cgroup.procs" 2>/dev/null || true; done <"$cg/cgroup.procs"
		rmdir "$cg" 2>/dev/null || true
	done
	cgroups=()
}

dir=
cleanup() {
	uncap
	[[ -n $dir ]] && scripts-dev/redis-cluster.sh stop "$dir" >/dev/null 2>&1
	dir=
}
trap cleanup EXIT

go build -o "${TMPDIR:-/tmp}/partbench.$$" ./bench/partbench
bin=${TMPDIR:-/tmp}/partbench.$$
trap 'cleanup; rm -f "$bin"' EXIT

log "redis $(redis-server --version | grep -o 'v=[0-9.]*'), P=$P, quota ${QUOTA}% per server, N=$N, replicas $REPLICAS, named children $NAMED, $CONC dispatchers per shard, load $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores; results in $OUT"
printf '%-9s %-7s %-5s %10s %12s %9s %9s %8s %8s %8s  %s\n' workload shards wait orch/s 'activities/s' 'ack p50' 'ack p99' 'lat p50' 'lat p99' 'app CPU%' 'CPU % of each primary'

declare -A base
for shards in $SHARDS; do
	dir=$(DXREDIS_CLUSTER_NODES=$shards DXREDIS_CLUSTER_REPLICAS=$REPLICAS scripts-dev/redis-cluster.sh start)
	for node in "$dir"/node*; do
		cap "$node" "$(<"$node/redis.pid")"
	done
	addrs=$(<"$dir/addrs")
	for wait in $WAITS; do
		for w in $WORKLOADS; do
			rate=RATE_$w
			line=$("$bin" -rate "${!rate:-0}" -addrs "$addrs" -partitions "$P" -workload "$w" -n "$N" -concurrency $((CONC * shards)) -wait-replicas "$wait" -named-children="$((NAMED == 1))" | tail -1)
			echo "{\"named\":$NAMED,\"shards\":$shards,\"quota_pct\":$QUOTA,\"replicas\":$REPLICAS,\"run\":$line}" >>"$OUT"
			read -r ops cpu app p50 p99 l50 l99 < <(python3 -c '
import json,sys
r=json.loads(sys.argv[1])
print("%.0f" % r["orch_per_s"], ",".join("%.0f" % c for c in r["node_cpu_pct"]), "%.0f" % r["app_cpu_pct"], "%.2fms" % r["ack_p50_ms"], "%.2fms" % r["ack_p99_ms"], "%.0fms" % r["latency_p50_ms"], "%.0fms" % r["latency_p99_ms"])' "$line")
			acts=$ops
			case $w in fanout) acts=$((ops * 10)) ;; children) acts=$((ops * 10)) ;; esac
			eff=
			key=$w-$wait
			if [[ -z ${base[$key]:-} ]]; then
				base[$key]=$ops:$shards
			else
				eff=$(python3 -c "b,s=map(float,'${base[$key]}'.split(':')); print('efficiency %.2f vs %d shard(s)' % ($ops*s/($shards*b), s))")
			fi
			printf '%-9s %-7s %-5s %10s %12s %9s %9s %8s %8s %8s  %s %s\n' "$w" "$shards" "$wait" "$ops" "$acts" "$p50" "$p99" "$l50" "$l99" "$app" "$cpu" "$eff"
		done
	done
	cleanup
done
