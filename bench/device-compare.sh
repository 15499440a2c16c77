#!/bin/bash
# dxredis against go-workflows' Redis backend on a many-core machine: Redis pinned to core 0, the
# load on cores 1-15, alternating runs, every result as one JSON line in $OUT/compare.jsonl.
#
# $D (default .devbench) holds what bench/device.sh's header lists (redis-server, redis-cli, their
# libraries, the loader, dxbench-after) and gwbench-bin, bench/gwbench built statically:
# (cd bench/gwbench && CGO_ENABLED=0 go build -ldflags="-s -w" -o ../../.devbench/gwbench-bin .)
# PORT, SCALE (divides every -n) and ROUNDS are optional.
D=$(cd "${D:-.devbench}" && pwd)
PORT=${PORT:-6379}; S=${SCALE:-1}
R="$D/ld-linux-x86-64.so.2 --library-path $D/lib"
nproc; grep -m1 "model name" /proc/cpuinfo
taskset -c 0 $R $D/redis-server --port $PORT --save '' --appendonly no --bind 127.0.0.1 --daemonize no > $OUT/redis.log 2>&1 &
for i in $(seq 50); do $R $D/redis-cli -p $PORT ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
run() { # label, binary, args...
  local label=$1 bin=$2; shift 2
  echo "== $label $*"
  local line
  line=$(timeout 120 taskset -c 1-15 $D/$bin -addr 127.0.0.1:$PORT "$@" 2>>$OUT/stderr.log | tail -1)
  echo "{\"label\":\"$label\",\"bin\":\"$bin\",\"args\":\"$*\",\"result\":${line:-null}}" >> $OUT/compare.jsonl
  echo "$line" | cut -c1-300
  $R $D/redis-cli -p $PORT flushall > /dev/null
}
for i in $(seq ${ROUNDS:-2}); do
  run W1-dxredis dxbench-after -mode runtime -workload hello -n $((20000/S))
  run W1-goworkflows-p4 gwbench-bin -n $((20000/S)) -pollers 4
  run W1-goworkflows-p16 gwbench-bin -n $((20000/S)) -pollers 16
  run W2-dxredis dxbench-after -mode runtime -workload fanout -n $((2000/S))
  run W2-goworkflows-p16 gwbench-bin -n $((2000/S)) -fanout 10 -pollers 16
done
