#!/bin/bash
# Redis instructions per orchestration, dxredis (through its dx runtime, cmd/dxbench) and
# go-workflows v1.2.0 (bench/gwbench) side by side, for W1 (hello) and W2 (fan-out x10).
#
# For each (system, workload, run size) a fresh redis-server runs under
# `valgrind --tool=callgrind`; the client runs one workload of that size against it; the server is
# shut down (SHUTDOWN NOSAVE, so callgrind writes its totals) and its total instructions are read.
# Per orchestration = (total(big) - total(small)) / (n_big - n_small): start-up, script loading and
# each client's fixed per-run work cancel out. The server's periodic cron (serverCron) is left out:
# it costs wall time, not work, and valgrind makes the wall time long and variable. Counts are deterministic to within a fraction of a
# percent (idle polls and batching vary a little with timing), unlike time.
#
# Needs valgrind, redis-server and redis-cli on PATH (or REDIS_SERVER/REDIS_CLI), Go. Run from
# anywhere; it is CPU heavy (Redis runs ~50x slower under valgrind): `nice -n 10 bench/callgrind.sh`.
# Optional: W1_SMALL W1_BIG (300 900), W2_SMALL W2_BIG (60 180), FANOUT (10), SYSTEMS
# ("dxredis go-workflows"; "floor" is bench/floor, the hand-written minimal store, FLOOR_BATCH items
# per call, default 1; "floor2" the same in format 2's layout, today's commands with lean Lua, W1
# only), WORKLOADS ("W1 W2"), DXBENCH_FLAGS (more dxbench flags, e.g. "-worker-concurrency 64 -ack-batch 1"),
# INFLIGHT (dxbench and gwbench keep at most this many instances in flight, each completion
# starting the next; default 0: every instance started up front; not for the floor), GW_PARALLEL
# (gwbench -parallel: go-workflows' MaxParallel{Workflow,Activity}Tasks; default 0, its default, no
# limit, where dxbench runs 4 turns and 4 activities at once),
# KEEP=1 keeps the work directory (callgrind files,
# client outputs; callgrind_annotate FILE shows where the instructions go), GW_DONE=poll makes
# gwbench detect completion by reading each instance's state (default ack: in-process, no Redis cost).
set -euo pipefail
cd "$(dirname "$0")/.."
W1_SMALL=${W1_SMALL:-300} W1_BIG=${W1_BIG:-900}
W2_SMALL=${W2_SMALL:-60} W2_BIG=${W2_BIG:-180}
FANOUT=${FANOUT:-10} GW_DONE=${GW_DONE:-ack} FLOOR_BATCH=${FLOOR_BATCH:-1} INFLIGHT=${INFLIGHT:-0} GW_PARALLEL=${GW_PARALLEL:-0}
SYSTEMS=${SYSTEMS:-dxredis go-workflows}
WORKLOADS=${WORKLOADS:-W1 W2}
REDIS_SERVER=${REDIS_SERVER:-redis-server} REDIS_CLI=${REDIS_CLI:-redis-cli}
for t in valgrind "$REDIS_SERVER" "$REDIS_CLI" go; do
	command -v "$t" >/dev/null || { echo "callgrind.sh: $t not found" >&2; exit 1; }
done
WORK=$(mktemp -d /tmp/callgrind.XXXXXX)
if [ -n "${KEEP:-}" ]; then echo "callgrind.sh: keeping $WORK" >&2; else trap 'rm -rf "$WORK"' EXIT; fi

go build -o "$WORK/dxbench" ./cmd/dxbench
go build -o "$WORK/floor" ./bench/floor
(cd bench/gwbench && go build -o "$WORK/gwbench" .)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# count SYSTEM WORKLOAD N: total Redis instructions of one run of size N on a fresh server.
count() {
	local sys=$1 wl=$2 n=$3 port out pid i
	port=$(free_port)
	out="$WORK/callgrind.$sys.$wl.$n"
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		"$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --slowlog-log-slower-than -1 >"$out.server.log" 2>&1 &
	pid=$!
	for i in $(seq 300); do
		"$REDIS_CLI" -p "$port" ping 2>/dev/null | grep -q PONG && break
		sleep 0.2
	done
	# -keep -no-keybytes: the server is thrown away, so the namespace is not deleted at the end, and the
	# kept-bytes measurement (SCAN, MEMORY USAGE and PTTL of every key) is not counted as dxredis's work
	# (gwbench does neither).
	local client=("$WORK/dxbench" -addr "127.0.0.1:$port" -mode runtime -baseline 0 -keep -no-keybytes -n "$n" -inflight "$INFLIGHT" ${DXBENCH_FLAGS:-})
	case $sys/$wl in
	dxredis/W1) client+=(-workload hello) ;;
	dxredis/W2) client+=(-workload fanout -fanout-width "$FANOUT") ;;
	floor/W1) client=("$WORK/floor" -addr "127.0.0.1:$port" -n "$n" -batch "$FLOOR_BATCH") ;;
	floor/W2) client=("$WORK/floor" -addr "127.0.0.1:$port" -n "$n" -fanout "$FANOUT" -batch "$FLOOR_BATCH") ;;
	floor2/W1) client=("$WORK/floor" -addr "127.0.0.1:$port" -n "$n" -layout 2) ;;
	floor2/W2) echo "callgrind.sh: floor2 plays W1 only" >&2; exit 1 ;;
	go-workflows/W1) client=("$WORK/gwbench" -addr "127.0.0.1:$port" -done "$GW_DONE" -n "$n" -inflight "$INFLIGHT" -parallel "$GW_PARALLEL") ;;
	go-workflows/W2) client=("$WORK/gwbench" -addr "127.0.0.1:$port" -done "$GW_DONE" -n "$n" -fanout "$FANOUT" -inflight "$INFLIGHT" -parallel "$GW_PARALLEL") ;;
	esac
	if ! "${client[@]}" >"$out.client.log" 2>&1; then
		echo "callgrind.sh: $sys $wl n=$n failed, see $out.client.log:" >&2
		tail -5 "$out.client.log" >&2
		"$REDIS_CLI" -p "$port" shutdown nosave >/dev/null 2>&1 || true
		wait "$pid" || true
		exit 1
	fi
	"$REDIS_CLI" -p "$port" shutdown nosave >/dev/null 2>&1 || true
	wait "$pid" || true
	# The total less serverCron's: the cron runs 10 times a second of wall time whatever the load, and
	# under valgrind on a busy machine its share per orchestration varied by +-3% between runs of the
	# same build (as did the slowlog, off above: every call over 10 ms copied its arguments there).
	local total cron
	total=$(awk '/^(summary|totals):/ {print $2; exit}' "$out")
	cron=$(callgrind_annotate --inclusive=yes --threshold=100 "$out" 2>/dev/null |
		awk '/ [^ ]*:serverCron \[/ && !/=>/ {gsub(",", "", $1); print $1; exit}')
	echo $((total - ${cron:-0}))
}

declare -A per
for wl in $WORKLOADS; do
	case $wl in
	W1) small=$W1_SMALL big=$W1_BIG ;;
	W2) small=$W2_SMALL big=$W2_BIG ;;
	*) echo "callgrind.sh: unknown workload $wl (W1, W2)" >&2; exit 1 ;;
	esac
	for sys in $SYSTEMS; do
		a=$(count "$sys" "$wl" "$small")
		b=$(count "$sys" "$wl" "$big")
		per[$sys/$wl]=$(( (b - a) / (big - small) ))
		printf '%s %s: n=%d %d instructions, n=%d %d instructions: %d per orchestration\n' \
			"$sys" "$wl" "$small" "$a" "$big" "$b" "${per[$sys/$wl]}" >&2
	done
done

fmt() { [ -n "${1:-}" ] && awk -v v="$1" 'BEGIN { printf "%.2f M", v / 1e6 }' || echo "-"; }
echo
echo "Redis instructions per orchestration ($("$REDIS_SERVER" --version | awk '{print $1, $2, $3}'), callgrind)"
echo
echo "| per orchestration | go-workflows | dxredis | floor (batch $FLOOR_BATCH) | floor2 |"
echo "|---|---|---|---|---|"
for wl in $WORKLOADS; do
	case $wl in
	W1) label="W1 hello (n=$W1_SMALL / $W1_BIG)" ;;
	W2) label="W2 fan-out x$FANOUT (n=$W2_SMALL / $W2_BIG)" ;;
	esac
	echo "| $label | $(fmt "${per[go-workflows/$wl]:-}") | $(fmt "${per[dxredis/$wl]:-}") | $(fmt "${per[floor/$wl]:-}") | $(fmt "${per[floor2/$wl]:-}") |"
done
