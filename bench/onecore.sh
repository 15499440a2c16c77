#!/bin/bash
# The highest sustained rate of W1 (hello) and W2 (fan-out x10) with Redis given one core, dxredis
# (cmd/dxbench through its runtime, 4 + 4 dispatchers) and go-workflows v1.2.0 (bench/gwbench, 4 + 4
# pollers, completions seen in-process) in the same run, each on a fresh redis-server pinned to one
# core (taskset) and the client on the others; then dxredis's W1 latency at a set rate (issue 30's
# table). Every instance is started up front, so the rate is the system's ceiling with Redis on that
# core. On a 2-core VM the client has one core: read its CPU beside the rate.
#
# Usage: bench/onecore.sh   (REDIS_CORE=1 CLIENT_CORES=0 W1_N=5000 W2_N=1000 RATE=500 RATE_N=5000 RUNS=1;
# DX_FLAGS: more dxbench flags, e.g. "-worker-concurrency 32")
set -euo pipefail
cd "$(dirname "$0")/.."
REDIS_SERVER=${REDIS_SERVER:-redis-server} REDIS_CLI=${REDIS_CLI:-redis-cli}
REDIS_CORE=${REDIS_CORE:-1} CLIENT_CORES=${CLIENT_CORES:-0}
W1_N=${W1_N:-5000} W2_N=${W2_N:-1000} RATE=${RATE:-500} RATE_N=${RATE_N:-5000} RUNS=${RUNS:-1}
WORK=$(mktemp -d /tmp/onecore.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
trap '"$REDIS_CLI" -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
go build -o "$WORK/dxbench" ./cmd/dxbench
(cd bench/gwbench && go build -o "$WORK/gwbench" .)

# fresh: a new pinned server on $port for one client run.
fresh() {
	"$REDIS_CLI" -p "$port" shutdown nosave >/dev/null 2>&1 || true
	sleep 0.3
	taskset -c "$REDIS_CORE" "$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes >/dev/null
	for _ in $(seq 50); do "$REDIS_CLI" -p "$port" ping 2>/dev/null | grep -q PONG && return; sleep 0.1; done
	echo "onecore.sh: redis-server did not start" >&2
	exit 1
}
# show LABEL JSON: the line's rate, Redis CPU and client CPU per orchestration.
show() {
	python3 -c 'import json,sys; r=json.loads(sys.argv[2]); print("%-34s %8.0f orch/s  redis %6.0f us/orch  client %6.0f us/orch  p50 %s p99 %s ms" % (sys.argv[1], r["orch_per_sec"], r["redis_cpu_usec_per_orch"], r["client_cpu_usec_per_orch"], r.get("p50_ms","-"), r.get("p99_ms","-")))' "$1" "$2"
}
echo "Redis on core $REDIS_CORE, clients on $CLIENT_CORES ($(nproc) cores), $("$REDIS_SERVER" --version | awk '{print $3}')"
for run in $(seq "$RUNS"); do
	fresh; show "dxredis W1 n=$W1_N" "$(taskset -c "$CLIENT_CORES" "$WORK/dxbench" -addr "127.0.0.1:$port" -mode runtime -baseline 0 -no-keybytes ${DX_FLAGS:-} -workload hello -n "$W1_N" 2>/dev/null | tail -1)"
	fresh; show "go-workflows W1 n=$W1_N" "$(taskset -c "$CLIENT_CORES" "$WORK/gwbench" -addr "127.0.0.1:$port" -done ack -n "$W1_N")"
	fresh; show "dxredis W2 n=$W2_N" "$(taskset -c "$CLIENT_CORES" "$WORK/dxbench" -addr "127.0.0.1:$port" -mode runtime -baseline 0 -no-keybytes ${DX_FLAGS:-} -workload fanout -n "$W2_N" 2>/dev/null | tail -1)"
	fresh; show "go-workflows W2 n=$W2_N" "$(taskset -c "$CLIENT_CORES" "$WORK/gwbench" -addr "127.0.0.1:$port" -done ack -n "$W2_N" -fanout 10)"
	fresh; show "dxredis W1 at $RATE/s n=$RATE_N" "$(taskset -c "$CLIENT_CORES" "$WORK/dxbench" -addr "127.0.0.1:$port" -mode runtime -baseline 0 -no-keybytes ${DX_FLAGS:-} -workload hello -n "$RATE_N" -rate "$RATE" 2>/dev/null | tail -1)"
done
