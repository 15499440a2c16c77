#!/bin/bash
# Benchmark on a many-core machine without Redis or network: Redis pinned to core 0, dxbench on
# cores 1-15, every result as one JSON line in $OUT/results.jsonl.
#
# $D (default .devbench) holds what the run needs, carried there: redis-server and redis-cli with
# the shared libraries ldd lists in $D/lib and the loader ld-linux-x86-64.so.2, and two static
# builds of dxbench to compare, dxbench-before and dxbench-after
# (CGO_ENABLED=0 go build -ldflags="-s -w" -o $D/dxbench-after ./cmd/dxbench). PORT, SCALE (divides
# every -n, for a quick local try) and ROUNDS are optional.
D=$(cd "${D:-.devbench}" && pwd)
PORT=${PORT:-6379}; S=${SCALE:-1}
R="$D/ld-linux-x86-64.so.2 --library-path $D/lib"
nproc; cat /proc/cpuinfo | grep "model name" | head -1
taskset -c 0 $R $D/redis-server --port $PORT --save '' --appendonly no --bind 127.0.0.1 --daemonize no > $OUT/redis.log 2>&1 &
for i in $(seq 50); do $R $D/redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
$R $D/redis-cli -p $PORT info server | grep redis_version
run() { # label, binary, args...
  local label=$1 bin=$2; shift 2
  echo "== $label $*"
  local line
  line=$(timeout 120 taskset -c 1-15 $D/dxbench-$bin -addr 127.0.0.1:$PORT "$@" 2>>$OUT/stderr.log | tail -1)
  echo "{\"label\":\"$label\",\"bin\":\"$bin\",\"args\":\"$*\",\"result\":$line}" >> $OUT/results.jsonl
  echo "$line" | cut -c1-400
}
mode=${1:-all}
for i in $(seq ${ROUNDS:-2}); do
  run W1-provider before -mode provider -workload hello -n $((20000/S))
  run W1-provider after  -mode provider -workload hello -n $((20000/S))
  run W1-runtime  before -mode runtime  -workload hello -n $((20000/S))
  run W1-runtime  after  -mode runtime  -workload hello -n $((20000/S))
done
run W1-runtime-c16 after -mode runtime -workload hello -n $((20000/S)) -orch-concurrency 16 -worker-concurrency 16
run W1-runtime-c16 before -mode runtime -workload hello -n $((20000/S)) -orch-concurrency 16 -worker-concurrency 16
for i in $(seq ${ROUNDS:-2}); do
  run W2-runtime before -mode runtime -workload fanout -n $((2000/S))
  run W2-runtime after  -mode runtime -workload fanout -n $((2000/S))
done
run W2-provider after -mode provider -workload fanout -n $((2000/S))
run W1-rate after -mode runtime -workload hello -n $((5000/S)) -rate 500
run W3 after -mode runtime -workload timer -n $((2000/S))
run wake after -workload wake
run W4 after -mode runtime -workload longhistory -n $((20/S))
run W4-provider after -mode provider -workload longhistory -n $((20/S))
$R $D/redis-cli -p $PORT info commandstats > $OUT/commandstats.txt
$R $D/redis-cli -p $PORT info memory | grep used_memory_human
