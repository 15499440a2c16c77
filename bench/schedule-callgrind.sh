#!/bin/bash
# Redis instructions per schedule firing (issue 31): dx's TestMeasureSchedules against a fresh
# redis-server under `valgrind --tool=callgrind`. The test dumps callgrind's counters around two
# windows of 20 s, one with the runtime idle and one with a one-second schedule (allow all), and
# reports (instructions with the schedule - instructions idle) / firings, serverCron left out, with
# commands per firing, memory per idle schedule and history events per firing.
#
# Needs valgrind (callgrind_control, callgrind_annotate), redis-server, redis-cli, Go.
# Usage: bench/schedule-callgrind.sh   (about two minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
REDIS_SERVER=${REDIS_SERVER:-redis-server} REDIS_CLI=${REDIS_CLI:-redis-cli}
for t in valgrind callgrind_control callgrind_annotate "$REDIS_SERVER" "$REDIS_CLI" go; do
	command -v "$t" >/dev/null || { echo "schedule-callgrind.sh: $t not found" >&2; exit 1; }
done
WORK=$(mktemp -d /tmp/schedcg.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$WORK/cg" \
	"$REDIS_SERVER" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --slowlog-log-slower-than -1 >"$WORK/server.log" 2>&1 &
pid=$!
trap '"$REDIS_CLI" -p "$port" shutdown nosave >/dev/null 2>&1 || true; wait "$pid" || true; rm -rf "$WORK"' EXIT
for _ in $(seq 300); do
	"$REDIS_CLI" -p "$port" ping 2>/dev/null | grep -q PONG && break
	sleep 0.2
done
DX_SCHED_MEASURE=1 DXREDIS_TEST_ADDR="127.0.0.1:$port" DX_SCHED_CALLGRIND="$pid $WORK/cg" \
	go test -count=1 -run TestMeasureSchedules -v -timeout 20m ./dx/ | grep -E 'per|schedule history|PASS|FAIL|ok'
